// SMART-BT internals shared by the tree's files (not installed):
//
//   page.cc        page images: lines, headers, entries, split halves
//   btree.cc       the public façade: per-thread contexts, BTree calls
//   build.cc       building and opening the tree under the named root
//   lock_table.cc  page locks: the remote lock table and HOCL
//   index_cache.cc each thread's cache of level-1 pages
//   lookup.cc      page reads, descent, search, speculative lookup, scan
//   operations.cc  insert / update / upsert / read-modify-write / delete
//   split.cc       leaf and internal splits, new roots
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "btree.h"
#include "page.h"
#include "smart/block_pool.h"
#include "smart/remote_lock.h"
#include "smart/store_thread.h"
#include "smart/task.h"
#include "smart/throttle.h"

namespace smart::btree {

constexpr char kRootName[] = "btree";
constexpr uint64_t kMetaMagic = 0x534d4152542d4254ull;  // "SMART-BT"
constexpr int kLockCount = 32768;
constexpr int kMaxHandovers = 8;
constexpr uint64_t kBlockArenaBytes = 256 * 1024;

const Status& NotFoundStatus();

// build.cc: opens (building where needed) the tree on blades 0..nodes-1;
// fills each blade's lock table address and the root pointer word. Throws.
void OpenTree(Initiator& in, int nodes, const LeaseOptions& lease, std::vector<GlobalAddress>* lock_tables,
              GlobalAddress* root_word);

// The per-blade meta block the named root "btree" points at.
struct BTree::Meta {
  uint64_t magic;
  uint64_t lock_table;  // offset on this blade
  uint64_t lock_count;
  uint64_t root;        // blade 0: the root page (GlobalAddress raw); the root pointer word
  uint64_t page_size;
  uint64_t reserved[3];
};
static_assert(sizeof(BTree::Meta) == 64);
constexpr size_t kRootWordOffset = 24;

// HOCL: one local lock per remote lock word, shared by the client's
// threads: a FIFO queue of the tasks that want the word. The holder passes
// its turn, and with it the remote word, to the first waiter. Waiters park;
// a waiter of another thread is woken through that thread's mailbox, which
// its scheduler drains (LockWaker). The fields after `guard` belong to the
// task whose turn it is, except the queue, which `guard` protects, and
// `word`, which other tasks of the client read to tell a word of their own
// session that a hand-over chain holds from one a failed release left.
struct LocalLock {
  std::atomic<bool> guard{false};
  std::atomic<bool> held{false};  // some task has the turn (set under the guard; read outside as a hint)
  uint8_t handovers = 0;    // hand-overs in a row without a remote release
  int32_t head = -1;        // waiting tasks (thread * kMaxTasksPerThread + task)
  int32_t tail = -1;
  std::atomic<uint64_t> word{0};  // the remote word while held remotely, else 0
  uint64_t renewed_ns = 0;  // when the remote word was taken or renewed
};

// Tasks of one thread woken from other threads: one bit per task.
struct alignas(64) LockMailbox {
  std::atomic<uint64_t> bits[kMaxTasksPerThread / 64];
};

// The page-lock state a client keeps in its own memory: the HOCL local
// locks and, per task, the remote word it holds. One per client (initiator)
// and tree, shared by every BTree object of that client on that tree
// (OpenLocalLocks, btree.cc): a take-over by lease fences the old holder's
// session, and a holder of the taker's own session cannot be fenced, so the
// tasks of one session must learn from each other, here, whether one of them
// still holds a word (lock_table.cc).
struct BTree::LocalLocks {
  explicit LocalLocks(int nodes)
      : nodes(nodes),
        locks(new LocalLock[static_cast<size_t>(nodes) * kLockCount]),
        next(new int32_t[kMaxThreads * kMaxTasksPerThread]),
        granted(new std::atomic<uint8_t>[kMaxThreads * kMaxTasksPerThread]),
        held(new std::atomic<uint64_t>[kMaxThreads * kMaxTasksPerThread]),
        mailboxes(new LockMailbox[kMaxThreads]) {
    for (int i = 0; i < kMaxThreads * kMaxTasksPerThread; ++i) {
      granted[i].store(0, std::memory_order_relaxed);
      held[i].store(0, std::memory_order_relaxed);
    }
    for (int i = 0; i < kMaxThreads; ++i) {
      for (auto& b : mailboxes[i].bits) b.store(0, std::memory_order_relaxed);
    }
  }
  LocalLock& at(node_t node, uint32_t index) { return locks[static_cast<size_t>(node) * kLockCount + index]; }
  const int nodes;                                // memory nodes the tree spans
  std::unique_ptr<LocalLock[]> locks;
  std::unique_ptr<int32_t[]> next;                // queue links, per waiter
  std::unique_ptr<std::atomic<uint8_t>[]> granted;  // per waiter: what it is told (lock_table.cc)
  // Per task (thread * kMaxTasksPerThread + task): the lock word it put in
  // a remote lock (or is about to put there by CAS, or to renew it to),
  // else 0. Words name their task and carry a lease counter that no other
  // acquisition repeats, so a word equal to its task's entry is held.
  std::unique_ptr<std::atomic<uint64_t>[]> held;
  std::unique_ptr<LockMailbox[]> mailboxes;       // per thread
};

// Drains the calling thread's mailbox between scheduler rounds, and tells
// the scheduler that parked lock waiters can still be woken.
class LockWaker : public CompletionPoller {
 public:
  int poll() override;
  bool pending() const override { return !parked_tasks.empty(); }
  // Task `task` of this thread parks waiting for the turn on `local`, or
  // stops waiting.
  void park(int task, LocalLock* local);
  void unpark(int task);
  LockMailbox* mailbox = nullptr;
  uint64_t pool_serial = 0;  // the pool it is attached to

 private:
  std::vector<int> parked_tasks;                       // this thread's parked waiters
  LocalLock* waiting_on[kMaxTasksPerThread] = {};      // per task: the lock it waits for
};

// Index of the lock of `page` in its blade's lock table.
inline uint32_t LockIndex(GlobalAddress page) {
  uint64_t h = page.raw * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return static_cast<uint32_t>(h % kLockCount);
}

// Each thread's cache of level-1 pages (the parents of leaves), keyed by
// their lower fence; least recently used pages go first (index_cache.cc).
class IndexCache {
 public:
  // At most `capacity` pages, and no new page while `*used` (the pages of
  // every thread's cache together) is at `budget` or more: then this
  // cache makes room by evicting its own.
  IndexCache(size_t capacity, std::atomic<size_t>* used, size_t budget)
      : capacity_(capacity), used_(used), budget_(budget) {}
  ~IndexCache();
  IndexCache(const IndexCache&) = delete;
  IndexCache& operator=(const IndexCache&) = delete;
  // The leaf for `key` from a cached page covering it; *min_key names the
  // page (for invalidate). False on a miss.
  bool lookup(uint64_t key, GlobalAddress* leaf, uint64_t* min_key);
  // Caches a copy of a consistent level-1 page image.
  void insert(const char* page);
  void invalidate(uint64_t min_key);
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  // A cached page: its decoded header beside its image, so that a lookup
  // touches one place after the index.
  struct Slot {
    PageHeader header;
    alignas(64) char image[kPageSize];
  };
  // Slots come in chunks of one 2 MiB page each (huge where the host allows).
  static constexpr uint32_t kChunkSlots = static_cast<uint32_t>(kHugePageSize / sizeof(Slot));
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  struct Link {  // the recency list, by slot number
    uint32_t newer = kNoSlot;
    uint32_t older = kNoSlot;
  };
  // Keys of the sorted array per entry of its summary.
  static constexpr size_t kGroup = 64;

  Slot& slot(uint32_t s) { return chunks_[s / kChunkSlots][s % kChunkSlots]; }
  uint32_t take_slot();
  void unlink(uint32_t s);
  void make_newest(uint32_t s);
  void touch(uint32_t s);  // makes a linked slot the newest
  // The position in sorted_ of the last key at or below `key`, or -1.
  ptrdiff_t sorted_floor(uint64_t key) const;
  // The slot caching the page with lower fence `min`, or kNoSlot.
  uint32_t find(uint64_t min);
  void remove(uint64_t min);
  // Merges recent_ into the sorted array and drops the gone keys.
  void merge();

  size_t capacity_;
  std::atomic<size_t>* used_;
  size_t budget_;
  // The pages by lower fence: a sorted array searched through a summary
  // of every kGroup-th key (a lookup reads a few cache lines, where a
  // tree of 100,000 nodes costs a cache miss a level), and the pages
  // added since its last merge in a small map. A merge, once the map
  // holds a thirty-second of the array, moves each key a few times over
  // the cache's life, not half the array on every insertion.
  std::vector<uint64_t> sorted_;
  std::vector<uint32_t> sorted_slots_;  // kNoSlot: the page went since
  std::vector<uint64_t> summary_;       // sorted_[0], sorted_[kGroup], ...
  size_t gone_ = 0;                     // kNoSlot entries in sorted_
  std::map<uint64_t, uint32_t> recent_;
  size_t size_ = 0;
  std::vector<Slot*> chunks_;
  std::vector<Link> links_;        // one a slot ever taken
  std::vector<uint32_t> free_;     // slots given back
  uint32_t newest_ = kNoSlot;
  uint32_t oldest_ = kNoSlot;
};

// A speculative-lookup entry in one word (0: empty): the line (1..15), the
// page (its 1 KiB index and its node; pages lie in the main region) and 14
// bits of the key's hash above the ones that pick the entry. Two keys that
// share an entry and a tag cost one wasted line read, never a wrong value:
// the read finds the key in the line or counts a miss. Eight bytes, not
// sixteen, so that each thread's cache takes half the memory and cache.
struct SpeculativeEntry {
  static constexpr int kLineBits = 4;
  static constexpr int kPageBits = 38;  // offsets below 2^48, in 1 KiB pages
  static constexpr int kTagShift = 50;  // 8 bits of node below
  static_assert(kLinesPerPage <= (1 << kLineBits) && kPageSize == 1024);
  uint64_t word = 0;

  static uint64_t Tag(uint64_t mixed_key) { return mixed_key >> kTagShift; }
  bool holds(uint64_t mixed_key) const { return word != 0 && (word >> kTagShift) == Tag(mixed_key); }
  // False (nothing stored) for a page outside the main region.
  bool store(uint64_t mixed_key, GlobalAddress page, int line) {
    if (page.mr_id != kMainMemoryRegion) return false;
    word = (Tag(mixed_key) << kTagShift) | (uint64_t{page.node} << (kLineBits + kPageBits)) |
           ((uint64_t{page.offset} / kPageSize) << kLineBits) | static_cast<uint64_t>(line);
    return true;
  }
  GlobalAddress page() const {
    return GlobalAddress(static_cast<node_t>((word >> (kLineBits + kPageBits)) & 0xff),
                         ((word >> kLineBits) & ((uint64_t{1} << kPageBits) - 1)) * kPageSize);
  }
  int line() const { return static_cast<int>(word & ((1u << kLineBits) - 1)); }
};

struct TaskBuffers {
  char* page = nullptr;       // kPageSize
  char* right = nullptr;      // kPageSize: a split's new page, a new root
  char* line = nullptr;       // kLineSize
  char* block = nullptr;      // a value block read
  char* new_block = nullptr;  // a value block to write
  uint64_t* words = nullptr;  // 16 words: CAS results, lock scratch
};

// The framework's backoff and block pool come from StoreThread.
struct BTree::ThreadContext : StoreThread {
  ThreadContext(const SmartConfig& config, size_t cache_pages, std::atomic<size_t>* cache_used, size_t cache_budget)
      : StoreThread(config), cache(cache_pages, cache_used, cache_budget) {}
  std::vector<TaskBuffers> tasks = std::vector<TaskBuffers>(kMaxTasksPerThread);
  IndexCache cache;
  std::vector<SpeculativeEntry> speculative;
  size_t speculative_mask = 0;
  std::vector<SessionId> sessions;  // this client's session per blade
  GlobalAddress root;               // the root page as last read
  uint32_t next_node = 0;           // round robin of new pages
  TreeStats stats;
  LockWaker waker;  // HOCL wake-ups from other threads (lock_table.cc)
  // The lease counter of this thread's next page-lock word (lock_table.cc):
  // each acquisition takes a new value, so a waiter never mistakes a later
  // acquisition for a holder whose word stood still.
  uint32_t next_lock_lease = 0;
};

// A page whose fence sent a descent or a writer right: (left.max ->
// right) is a separator the level above should hold.
struct MissingLink {
  GlobalAddress left;
  uint64_t key = 0;
  GlobalAddress right;
  int level = 0;  // of left and right
};

// The pages visited by a descent, per level (null: not visited).
struct Path {
  GlobalAddress at[kMaxLevel + 1];
  GlobalAddress root;  // the root the descent started from
  int root_level = -1;
  MissingLink leaf_link;      // the leaf the descent moved right from
  MissingLink internal_link;  // the first internal page the descent moved right from
};

// A page lock as its holder sees it.
struct PageLock {
  GlobalAddress page;
  GlobalAddress word;
  LocalLock* local = nullptr;  // HOCL entry, or nullptr
  uint64_t value = 0;          // the held remote word
  uint64_t renewed_ns = 0;     // when the word was taken or last renewed
  // This task's entry in LocalLocks::held while it announces the word (it
  // took the word by CAS, not by a hand-over), else nullptr.
  std::atomic<uint64_t>* announced = nullptr;
  bool held = false;
};

// The fault points of one kind of page write (SMART_FAULTS, and hooks in
// the unit tests), at the two windows a take-over by lease can fall into:
// `checked` after the holder's lease check (renewed if due) and before the
// write is posted; `posted` after it was posted (with the release CAS) and
// before its completion was seen.
struct WritePoints {
  const char* checked;
  const char* posted;
};
inline constexpr WritePoints kLeafWrite{"bt.leaf.write_checked", "bt.leaf.write_posted"};
inline constexpr WritePoints kLeafSplitWrite{"bt.split.leaf.write_checked", "bt.split.leaf.write_posted"};
inline constexpr WritePoints kInternalWrite{"bt.internal.write_checked", "bt.internal.write_posted"};

class Ops;

// Bounds an operation's retries: after retry_timeout_ns of retrying it ends
// with kTimedOut, naming the last obstacle (why). Only time spent retrying
// counts: a gap between two attempts counts for at most kCountedGapNs, so a
// process that was stopped or descheduled for seconds looks at the tree
// again when it runs instead of giving up at once.
class RetryBound {
 public:
  static constexpr uint64_t kCountedGapNs = 100000000;  // 0.1 s
  explicit RetryBound(const TreeOptions& options) : options_(options) {}
  // False once the bound is exceeded.
  bool next() {
    if (++attempts_ < 64) return true;
    return next_slow();
  }
  Status status() const;
  const char* why = "the operation kept retrying";

 private:
  bool next_slow();
  const TreeOptions& options_;
  uint64_t attempts_ = 0;
  uint64_t last_ns_ = 0;      // clock at the last slow attempt
  uint64_t retrying_ns_ = 0;  // time counted against retry_timeout_ns
};

enum class WriteMode { kUpsert, kUpdate, kReadModifyWrite };


class Ops {
 public:
  Ops(BTree& tree, BTree::ThreadContext& tc) : tree_(tree), in_(tree.initiator_), options_(tree.options_), tc_(tc) {}

  Status task_buffers(TaskBuffers** out) {
    TaskBuffers& tb = tc_.tasks[this_task::id()];
    if (__builtin_expect(tb.page == nullptr, 0)) return alloc_task_buffers(tb, out);
    *out = &tb;
    return Status::OK();
  }
  BTree::ThreadContext& tc() { return tc_; }
  const TreeOptions& options() const { return options_; }
  // Posts what the task queued and waits (one round trip).
  Status sync() {
    ++tc_.stats.round_trips;
    return in_.sync();
  }

  // ---- lookup.cc ----
  // Reads a page and checks it, reading again while it is torn.
  Status read_page(GlobalAddress page, char* buf);
  // The root page (read from the root word when unknown or `refresh`).
  Status root(bool refresh, GlobalAddress* out);
  // Descends from the root to the page at `level` covering `key`; `buf`
  // holds it (consistent). Records the path. kNotFound: the tree is lower
  // than `level`.
  Status descend(uint64_t key, int level, char* buf, Path* path, GlobalAddress* page);
  // The leaf for `key`: from the index cache (then *cached is its page's
  // min key and `buf` is not read) or by a descent (buf holds the leaf).
  Status find_leaf(uint64_t key, char* buf, Path* path, GlobalAddress* leaf, bool* read, bool* from_cache,
                   uint64_t* cached);
  Status search(uint64_t key, std::string* value);
  Status scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, std::string>>* out);
  // The value of a leaf entry (reads its block); *torn when the block did
  // not hold it (the leaf must be read again).
  Status entry_value(const LeafEntry& e, TaskBuffers& tb, std::string* value, bool* torn);

  // ---- operations.cc ----
  Status write(uint64_t key, WriteMode mode, std::string_view value, const std::function<void(std::string*)>* modify);
  Status remove(uint64_t key);

  // ---- lock_table.cc ----
  // Takes the page's lock and reads the page into `buf` (one doorbell with
  // whatever the task queued; a hand-over costs the READ alone).
  Status lock_and_read(GlobalAddress page, char* buf, BackoffGuard& guard, RetryBound& bound, PageLock* lock);
  // Writes `length` bytes of `src` to `dst` (if length > 0) and releases the
  // lock, in one doorbell (or hands it to a local waiter after the write).
  // The outcome is the write's: OK when it completed (it landed while this
  // task held the lock, even if the release then finds the lock taken
  // over); kOutcomeUnknown when its completion failed (it may have landed);
  // a plain error (kLockLost, or the renewal's own) when the lease check
  // found the lock lost and nothing was written.
  Status write_and_unlock(PageLock* lock, const void* src, GlobalAddress dst, size_t length, const WritePoints& points);
  // Releases the lock without writing; kLockLost when it was taken over.
  Status unlock(PageLock* lock) { return write_and_unlock(lock, nullptr, GlobalAddress(), 0, kLeafWrite); }

  // ---- split.cc ----
  // Splits the locked, full leaf `page` (image in tb.page) to make room for
  // `entry`; unlocks it and inserts the separator into the parent. The
  // outcome is that of the write of the split page, which makes `entry`
  // visible: OK once it landed, whatever the parent insert then meets.
  Status split_leaf(PageLock* lock, TaskBuffers& tb, const LeafEntry& entry, Path* path, BackoffGuard& guard);
  // Inserts (key -> child) into the page at `level` covering `key`, the
  // parent of `left` (which just split).
  Status insert_parent(int level, uint64_t key, GlobalAddress child, GlobalAddress left, Path* path,
                       BackoffGuard& guard);
  Status alloc_page(GlobalAddress* out);

  // ---- value blocks (operations.cc) ----
  Status alloc_block(node_t node, uint32_t units, Block* out);
  void retire_block(const LeafEntry& e);

  void speculative_put(uint64_t key, GlobalAddress page, int entry);
  void speculative_erase(uint64_t key);

 private:
  Status alloc_task_buffers(TaskBuffers& tb, TaskBuffers** out);
  Status internal_insert(GlobalAddress page, int level, uint64_t key, GlobalAddress child, Path* path,
                         BackoffGuard& guard);
  // After lock_and_read: the leaf for `key` is locked and its image in
  // tb.page is consistent, else the lock is released and *leaf says where
  // to try next (*again).
  Status check_locked_leaf(uint64_t key, TaskBuffers& tb, PageLock* lock, Path* path, GlobalAddress* leaf,
                           bool* from_cache, uint64_t cached, RetryBound& bound, bool* again, MissingLink* link);
  // The remote word `word`, seen in the lock of `page` on `node`, belongs to
  // this client's own session: true when one of its tasks holds it (a
  // HOCL hand-over chain, or a task that took it by CAS), false when a
  // release that failed left it behind.
  bool held_by_this_client(uint64_t word, node_t node, GlobalAddress page) const;
  // The end of a lock's life for the calling task: it no longer announces
  // the word (lock_table.cc).
  void forget_held(PageLock* lock);
  // What the caller does with a new value's block, and the old entry's,
  // once the write that would name it ended with `s` (operations.cc).
  void settle_blocks(const Status& s, Block* fresh, bool* have_fresh, const LeafEntry& old);
  // After a write whose way moved right past `link`, or whose descent moved
  // right past path->leaf_link or path->internal_link: makes sure the level
  // above holds the separator (a splitter may have died before adding it).
  void repair_links(const MissingLink& link, Path* path, BackoffGuard& guard);

  BTree& tree_;
  Initiator& in_;
  const TreeOptions& options_;
  BTree::ThreadContext& tc_;
};

inline uint64_t MixKey(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return key;
}

}  // namespace smart::btree
