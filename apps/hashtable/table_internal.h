// SMART-HT internals shared by the table's files (not installed):
//
//   hash_table.cc  the public façade: per-thread contexts, HashTable calls
//   build.cc       building an empty table and opening an existing one
//   directory.cc   each thread's cached copy of a shard's directory
//   lookup.cc      candidate bucket reads, finding a key's copies,
//                  the speculative-lookup cache
//   operations.cc  search, insert/update, remove, read-modify-write
//   duplicates.cc  an insert's removal of duplicate copies; pinning the
//                  lowest copy before copies above it go
//   load_batch.cc  loading several keys with shared round trips
//   split.cc       growth: splitting a full subtable, finishing a split a
//                  dead client left half done
//   stalls.cc      bounding the retries of an operation that cannot progress
//
// Ops is one operation's view of a thread: the initiator, the table options
// and the calling thread's context. Its members are defined in the file
// named above each group.
#pragma once

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hash_table.h"
#include "layout.h"
#include "smart/block_pool.h"
#include "smart/remote_lock.h"
#include "smart/store_thread.h"
#include "smart/task.h"
#include "smart/throttle.h"

namespace smart::hashtable {

constexpr size_t kMaxBlockBytes = kMaxBlockUnits * kBlockUnit;
constexpr int kCandidateBuckets = 4;
// Room for every candidate's block, so one doorbell reads them all.
constexpr size_t kBlockAreaSize = kCandidateBuckets * kSlotsPerBucket * kMaxBlockBytes;
constexpr int kSplitWindowGroups = 64;
// The split buffer (split.cc): two windows of groups, then 16 CAS results.
constexpr size_t kWindowBytes = kSplitWindowGroups * kGroupSize;
constexpr size_t kResultsOffset = 2 * kWindowBytes;
constexpr size_t kBuildBufferSize = size_t{1} << 20;
constexpr uint64_t kArenaBytes = 256 * 1024;

const Status& NotFoundStatus();
// What an operation whose slot CAS failed (status `s`) reports. A request
// the memory blade refused (a remote access error: the request itself or an
// earlier one on its queue pair, which flushes the rest) or one never posted
// (invalid argument) was not carried out, and `s` says so. Any other failure
// (the blade does not answer, the queue pair broke, the session was ended)
// may have come after the blade carried the CAS out: kOutcomeUnknown,
// naming `what` ("an update") and the failure.
Status SlotCasFailed(const Status& s, const std::string& what);

// value = v, without std::string's general replace when the length is
// unchanged (the common case: a caller reusing its string for one table).
inline void AssignValue(std::string* value, std::string_view v) {
  if (value->size() == v.size()) {
    if (!v.empty()) memcpy(value->data(), v.data(), v.size());
  } else {
    value->assign(v.data(), v.size());
  }
}

struct HashTable::Shard {
  node_t node = 0;
  GlobalAddress directory;
  uint64_t groups = 0;
};

struct DirectoryCache {
  int global_depth = -1;
  int capacity_depth = 0;
  GlobalAddress entries_at;  // where the entry array is
  uint64_t depth_word = 0;   // the header word these were read with
  std::vector<uint64_t> entries;
  bool refreshing = false;
};

struct TaskBuffers {
  char* buckets = nullptr;    // two bucket pairs
  char* blocks = nullptr;     // kBlockAreaSize
  char* new_block = nullptr;  // kMaxBlockBytes
  uint64_t* words = nullptr;  // 16 words for CAS results and slot reads
  char* load_area = nullptr;  // kLoadAreaSize, on the task's first load_batch
};

// Keys one Ops::load_batch round handles, and the task's area for them:
// their blocks (kLoadBlockBytes), their candidate buckets, CAS results.
constexpr int kLoadBatchKeys = HashTable::kLoadBatchKeys;
constexpr size_t kLoadBlockBytes = 8192;
constexpr size_t kLoadAreaSize = kLoadBlockBytes + kLoadBatchKeys * (2 * kBucketPairSize + 8);

// A cached slot for speculative lookup (Ops::speculative_read).
struct CacheEntry {
  uint64_t hash = 0;
  // GlobalAddress raw, | kLoadedCopy when the copy was claimed by a load, so
  // that a read need not look below it; 0: empty.
  uint64_t slot = 0;
  uint64_t value = 0;  // the slot word, unfrozen
};
constexpr uint64_t kLoadedCopy = 1;  // slot words are 8-byte aligned: bit 0 is free

// The candidate buckets of a key as read: two pairs of two buckets.
struct View {
  uint64_t pair_offset[2];
  const uint64_t* words;  // 32 words: pair 0 then pair 1
  uint64_t first_index, second_index;
  uint64_t dir_entry;
  // No later than the post of the reads of the buckets (Ops::clock()): a
  // slot word of this view is acted on only while Ops::fresh(read_at).
  uint64_t read_at = 0;
  // Unique buckets in search order (main 0, main 1, overflow 0, overflow 1).
  int count = 0;
  int word_base[kCandidateBuckets];  // header word index into `words`
  uint64_t bucket_offset[kCandidateBuckets];

  uint64_t header(int b) const { return words[word_base[b]]; }
  uint64_t slot(int b, int j) const { return words[word_base[b] + 1 + j]; }
  uint64_t slot_offset(int b, int j) const { return bucket_offset[b] + 8 + 8 * static_cast<uint64_t>(j); }
  // A bucket's slots disagree with its header (SlotAgreesWithHeader): it was
  // read while a split rewrote it.
  bool torn() const {
    for (int b = 0; b < count; ++b) {
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        if (!SlotAgreesWithHeader(slot(b, j), header(b))) return true;
      }
    }
    return false;
  }
};

// Lists the candidate buckets of a view whose pairs were read (by
// Ops::queue_candidates); true when a bucket header rejects the key.
bool IndexCandidates(const KeyHash& h, View* v);

// Where an insert claims a slot in a view: the first empty slot of the
// emptier main bucket, else of the emptier overflow bucket.
struct SlotChoice {
  bool frozen = false;         // a split is moving these buckets: no choice
  int bucket = -1, slot = -1;  // -1: every candidate bucket is full
  int empties[kCandidateBuckets] = {};
};
SlotChoice ChooseEmptySlot(const View& v);

// A key and value fit in one block (else a write of them is refused).
inline bool BlockFits(size_t key_length, size_t units) {
  return units <= static_cast<size_t>(kMaxBlockUnits) && key_length <= kMaxKeyLength;
}

// The slot word that publishes the key's new block of `units` at `offset`.
inline uint64_t NewSlot(const KeyHash& h, size_t units, uint8_t tag, uint64_t offset) {
  SlotFields f;
  f.fingerprint = h.fingerprint();
  f.units = static_cast<uint8_t>(units);
  f.tag = tag;
  f.dir_bits = static_cast<uint16_t>(h.dir_bits() & kSlotDirMask);
  f.block_offset = offset;
  return EncodeSlot(f);
}

// A slot that may name a block of the key: only reading the block tells.
inline bool SlotMayName(uint64_t slot, const KeyHash& h) {
  return !SlotEmpty(slot) && SlotFingerprint(slot) == h.fingerprint() &&
         SlotDirBits(slot) == (h.dir_bits() & kSlotDirMask);
}

// What the caller of Ops::locate does with the view, and so which part of it
// must agree with its bucket headers (SlotAgreesWithHeader).
// What Ops::write does when the key is absent (kUpdate: NotFound) and
// after it claims a slot (kUpsert: removes the copies a racing insert of
// the key left; kLoad: none can exist).
enum class WriteKind : uint8_t { kUpdate, kUpsert, kLoad };

enum class ViewUse {
  // Reads the value: a copy found is valid however the bucket was read, but
  // a miss may be a key the split just moved: torn and empty, read again.
  kRead,
  // CASes the lowest copy's slot from full to full, keeping its parity:
  // that slot must agree; a miss as for kRead.
  kUpdate,
  // May claim an empty slot, empty a full one, or must see every copy (an
  // insert, a delete, removing duplicates): the whole view must agree.
  kWrite,
};

struct Copy {
  uint64_t slot_offset;
  uint64_t slot_value;
  int bucket;
  std::string_view value;
  bool loaded;  // its block carries kBlockLoaded
};

struct FindResult {
  bool retry = false;  // a block was torn or recycled: read again
  int copies = 0;
  Copy first;           // the copy at the lowest slot address
  Copy all[kCandidateBuckets * kSlotsPerBucket];
};

// A read that found no copy of the key is confirmed by the next one: a
// miss is reported only when that read finds no copy either and saw the
// same candidate buckets with the same headers. A client that removes a
// copy of a key that stays present first moves the change count of the
// header of the bucket where the copy it keeps lies (Ops::pin_lowest); a
// read fooled by a copy claimed below after it passed there and a copy
// removed above before it got there read that header before the claim, so
// its next read finds the header moved (DESIGN.md, "Duplicates").
class MissCheck {
 public:
  // True when `v` (a read that found no copy) confirms the miss before it;
  // else `v` is the miss the next read must confirm.
  bool confirms(const View& v) {
    bool same = count_ == v.count;
    for (int b = 0; same && b < v.count; ++b) {
      same = offset_[b] == v.bucket_offset[b] && header_[b] == v.header(b);
    }
    if (same) return true;
    count_ = v.count;
    for (int b = 0; b < v.count; ++b) {
      offset_[b] = v.bucket_offset[b];
      header_[b] = v.header(b);
    }
    return false;
  }

 private:
  int count_ = -1;
  uint64_t offset_[kCandidateBuckets] = {};
  uint64_t header_[kCandidateBuckets] = {};
};

// The framework's backoff and block pool (key-value blocks on every
// shard's memory blade) come from StoreThread.
struct HashTable::ThreadContext : StoreThread {
  ThreadContext(const SmartConfig& config, size_t shards)
      : StoreThread(config), dirs(shards), resize_locks(shards) {}
  std::vector<DirectoryCache> dirs;
  char* dir_buffer = nullptr;
  bool dir_buffer_busy = false;
  std::vector<TaskBuffers> tasks = std::vector<TaskBuffers>(kMaxTasksPerThread);
  char* split_buffer = nullptr;  // kSplitBufferSize (split.cc)
  bool split_busy = false;       // a task of this thread splits or helps
  // Per shard: this thread's handle on the shard's resize lock (it keeps
  // watching a holder across attempts, to see its lease expire).
  std::vector<std::unique_ptr<RemoteLock>> resize_locks;
  uint64_t last_help_ns = 0;
  std::vector<CacheEntry> cache;
  size_t cache_mask = 0;
  // Cycles() as this thread last read it: a time no later than now, which
  // costs no read of the time-stamp counter (Ops::clock).
  uint64_t clock = 0;
  // Half of TableOptions::tag_wrap_guard_ns in TSC cycles (all ones: off).
  uint64_t fresh_cycles = ~uint64_t{0};
  TableStats stats;
};

// build.cc. Both throw smart::Error.
// Builds an empty table on `node` for `geometry` and returns its directory.
// `still_mine`, when set, is called after each subtable (it renews the
// build claim, and throws when the claim was lost).
GlobalAddress BuildTable(Initiator& in, node_t node, const Geometry& geometry, int capacity_depth,
                         const std::function<void()>& still_mine = {});
// Opens the table on `node` under the named root "hashtable", building it
// (for `expected_keys` keys) when nobody has, waiting while another live
// client builds it, building again when that client died. Call outside a
// task.
void OpenShard(Initiator& in, node_t node, uint64_t expected_keys, const TableOptions& options,
               HashTable::Shard* shard);

class Ops {
 public:
  using Shard = HashTable::Shard;

  Ops(Initiator& initiator, const TableOptions& options, HashTable::ThreadContext& tc)
      : in_(initiator), options_(options), tc_(tc) {}

  HashTable::ThreadContext& tc() { return tc_; }

  // A time no later than now: Cycles() as this thread last read it. Taken
  // before a post, it bounds the request's execution from below for free.
  uint64_t clock() const { return tc_.clock; }
  // Cycles() now (a time no earlier than anything already completed).
  uint64_t now() { return tc_.clock = Cycles(); }
  // True while a slot word whose read was posted after `read_at` may still
  // be acted on: its block cannot have been reused under the same tag since
  // (TableOptions::tag_wrap_guard_ns).
  bool fresh(uint64_t read_at) { return now() - read_at < tc_.fresh_cycles; }

  // The calling task's registered buffers, allocated on first use.
  Status task_buffers(TaskBuffers** out) {
    TaskBuffers& tb = tc_.tasks[this_task::id()];
    if (__builtin_expect(tb.buckets == nullptr, 0)) return alloc_task_buffers(tb, out);
    *out = &tb;
    return Status::OK();
  }

  // ---- directory (directory.cc) ----

  Status refresh_directory(int si, const Shard& sh);
  // The cached directory entry for `dir_bits` (read on first use).
  Status dir_entry(int si, const Shard& sh, uint64_t dir_bits, uint64_t* entry) {
    DirectoryCache& dc = tc_.dirs[si];
    while (dc.global_depth < 0) {
      Status s = refresh_directory(si, sh);
      if (!s.ok()) return s;
    }
    *entry = dc.entries[dir_bits & DepthMask(dc.global_depth)];
    return Status::OK();
  }

  // ---- lookup (lookup.cc) ----

  // Queues the reads of the key's two candidate bucket pairs into `buckets`
  // (2 * kBucketPairSize), the second with `option`, and sets the view's
  // directory entry and pair offsets; IndexCandidates does the rest once
  // they are read.
  Status queue_candidates(int si, const Shard& sh, const KeyHash& h, char* buckets, View* v, Option option);
  // Reads the key's candidate buckets (with whatever the task queued before,
  // in the same doorbell). *stale: a bucket header rejects the key.
  Status read_candidates(int si, const Shard& sh, const KeyHash& h, TaskBuffers& tb, View* v, bool* stale);
  // After a stale header: refresh the directory; wait a little if a split
  // is between rewriting the old subtable and publishing the new one.
  Status handle_stale(int si, const Shard& sh, const KeyHash& h, uint64_t used_entry, BackoffGuard* g);
  // Reads the blocks of every slot that may hold the key and collects the
  // copies of it. Frozen slots count (their blocks are valid).
  Status find_key(const Shard& sh, std::string_view key, const KeyHash& h, const View& v, TaskBuffers& tb,
                  FindResult* r);
  // read_candidates through a current directory entry, then find_key. A
  // torn view (View::torn, a bucket read while a split rewrote it) is read
  // again when what the caller does with it could go wrong (ViewUse).
  Status locate(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb, BackoffGuard* g,
                ViewUse use, View* v, FindResult* r);
  // locate until no block was torn (inspection, off the data path).
  Status inspect(int si, const Shard& sh, std::string_view key, FindResult* r, View* view);

  CacheEntry* cache_find(uint64_t hash) {
    if (tc_.cache.empty()) return nullptr;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    return e.hash == hash && e.slot != 0 ? &e : nullptr;
  }
  // Caches `slot` as the key's lowest copy, holding `value`; `loaded`: its
  // block carries kBlockLoaded (no copy of the key can lie below it).
  void cache_put(uint64_t hash, GlobalAddress slot, uint64_t value, bool loaded) {
    if (tc_.cache.empty()) return;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    e.hash = hash;
    e.slot = slot.raw | (loaded ? kLoadedCopy : 0);
    e.value = SlotUnfrozen(value);
  }
  // After this task's CAS swung the cached `slot` from the word it read in
  // a speculative hit to `value` (a block with the same kBlockLoaded flag).
  void cache_swung(uint64_t hash, GlobalAddress slot, uint64_t value) {
    CacheEntry* e = cache_find(hash);
    if (e != nullptr && (e->slot & ~kLoadedCopy) == slot.raw) e->value = SlotUnfrozen(value);
  }
  void cache_erase(uint64_t hash) {
    if (tc_.cache.empty()) return;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    if (e.hash == hash) e.slot = 0;
  }
  // Reads the cached slot word and its block in one doorbell (after
  // anything queued), and, unless the cached copy was claimed by a load,
  // the key's candidate slots below it (lookup.cc says why). *hit when the
  // slot still holds the cached value, no slot below it may hold the key
  // and the block holds the key: then *value points into the block area,
  // tb.words[0] holds the slot word, *read_at is a time before the read
  // (View::read_at) and *loaded says whether the block carries
  // kBlockLoaded.
  Status speculative_read(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                          CacheEntry* e, bool* hit, std::string_view* value, uint64_t* read_at, bool* loaded);

  // ---- operations (operations.cc) ----

  Status search(int si, const Shard& sh, std::string_view key, const KeyHash& h, std::string* value);
  // Update, upsert or load (an upsert that no other insert of the key
  // races: HashTable::load) of `key`.
  Status write(int si, const Shard& sh, std::string_view key, const KeyHash& h, std::string_view value,
               WriteKind kind);
  // ---- loading (load_batch.cc) ----

  // Loads up to kLoadBatchKeys distinct keys (HashTable::load for each)
  // with one write for their blocks, one doorbell for their bucket reads and
  // one for their slot CASes; a key the shared round trips cannot settle
  // (a fingerprint match, a split, a lost CAS, a block too big for the
  // area) goes through write() on its own.
  struct LoadItem {
    std::string_view key, value;
    KeyHash h;
  };
  Status load_batch(int si, const Shard& sh, const LoadItem* items, int count);

  // After a write's slot CAS lost (found: the slot's value now; read_at:
  // a time before the write read the slot): *done when another client's
  // write of the key superseded this one; then *found_loaded says whether
  // its block carries kBlockLoaded.
  Status superseded(const Shard& sh, std::string_view key, uint64_t expected, uint64_t found, uint64_t read_at,
                    TaskBuffers& tb, bool* done, bool* found_loaded);
  // After an insert: keep only the lowest-address copy of the key.
  // After an insert claimed own_slot (now holding own_value): clears every
  // other copy of the key but the lowest.
  Status remove_duplicates(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                           BackoffGuard& g, GlobalAddress own_slot, uint64_t own_value);
  // Before this client removes copies of the key above `lowest` (the
  // lowest copy of `v`): moves the change count of the header of lowest's
  // bucket (MissCheck; a CAS that lost is as good, the header having moved
  // since `v` was read), then publishes lowest's value again in a new block
  // (kBlockDerived, so a write that loses its CAS to it tries again). From
  // then on no client whose read came before can remove the lowest copy,
  // which would make a copy above it the key's value just before this
  // client removes it (DESIGN.md, "Duplicates"). *pinned: the lowest copy
  // was published again; else the caller reads again.
  Status pin_lowest(const Shard& sh, std::string_view key, const KeyHash& h, const View& v, const Copy& lowest,
                    TaskBuffers& tb, bool* pinned);
  Status remove(int si, const Shard& sh, std::string_view key, const KeyHash& h);
  Status read_modify_write(int si, const Shard& sh, std::string_view key, const KeyHash& h,
                           const std::function<void(std::string*)>& modify);

  Status alloc_block(const Shard& sh, size_t units, uint64_t* offset, uint8_t* tag);
  // A block unlinked by our CAS: reusable after the grace period.
  void retire_block(const Shard& sh, uint64_t slot);
  // A block that was never published: reusable at once.
  void release_block(const Shard& sh, uint64_t offset, size_t units, uint8_t tag);

  // ---- growth (split.cc) ----

  // Splits the subtable at `subtable` (which held full candidate buckets
  // for `h`), first finishing a split that a dead client left half done.
  // *busy: another live client holds the resize lock, or this client was
  // slower than the lease and another took its split over (it stopped
  // before writing again; the new holder finishes the split).
  Status split(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy);
  // For an operation that cannot make progress: when the resize lock's
  // holder is dead (or the lock is free with a split left half done),
  // takes the lock and finishes that split. Rate-limited per thread.
  Status help_stalled_split(int si, const Shard& sh);
  const TableOptions& options() const { return options_; }

 private:
  struct SplitPlan;
  Status alloc_task_buffers(TaskBuffers& tb, TaskBuffers** out);
  // split.cc
  Status split_buffer_ready();
  RemoteLock& resize_lock(int si, const Shard& sh);
  // Takes the resize lock (unless this thread or a live client holds it:
  // *busy), finishes any split a dead client left, runs `work` (if any) and
  // releases the lock.
  Status with_resize_lock(int si, const Shard& sh, bool* busy, const std::function<Status(RemoteLock&)>& work);
  // With the lock held: finishes the split the header's intent describes.
  Status finish_abandoned_split(int si, const Shard& sh, RemoteLock& lock);
  Status split_under_lock(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, RemoteLock& lock);
  Status set_split_intent(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, int phase);
  // Phase 1: freeze the old subtable and write the new one; `image` gets
  // the old subtable's frozen words.
  Status split_copy(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, std::vector<uint64_t>* image,
                    std::vector<char>* moves);
  // Phase 2 from the image: rewrite the old subtable window by window.
  Status split_rewrite(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, const std::vector<uint64_t>& image,
                       const std::vector<char>& moves);
  // moves[i]: the key of slot word w[i] goes to the new subtable (from the
  // slot's directory bits, or deeper than those from its block's key).
  Status moving_slots(const Shard& sh, const SplitPlan& plan, const uint64_t* w, size_t words, char* moves);
  // Phase 2 without an image (after a take-over): bucket headers, then a
  // CAS for each slot still frozen.
  Status split_rewrite_in_place(const Shard& sh, RemoteLock& lock, const SplitPlan& plan);
  // Phase 3: point the directory entries of the old subtable at the two.
  Status split_publish(int si, const Shard& sh, RemoteLock& lock, const SplitPlan& plan);
  Status write_entries(GlobalAddress at, RemoteLock& lock, const std::vector<uint64_t>& entries, size_t from,
                       size_t count);
  // A splitter's own copy of the directory while it doubles it.
  struct DirectoryCopy {
    std::vector<uint64_t> entries;
    GlobalAddress at;
    int capacity_depth;
    uint64_t word;  // the header's depth word as this splitter last saw it
  };
  // Moves the directory's entries to an array 2^kDirectoryGrowthBits times
  // larger (the global depth has reached the array's capacity).
  Status move_directory(const Shard& sh, RemoteLock& lock, DirectoryCopy* copy);
  // Sets the header's depth word for `copy` at `depth` by CAS from the word
  // the splitter last saw: a late write from a splitter whose lock was taken
  // over cannot turn the directory back (kLockLost instead).
  Status swap_depth_word(const Shard& sh, RemoteLock& lock, DirectoryCopy* copy, int depth);
  // Freezes every slot of `groups` groups read into `w` (at `offset`); on
  // return `w` holds the frozen values.
  Status freeze(const Shard& sh, RemoteLock& lock, uint64_t offset, uint64_t* w, uint64_t groups);

  Initiator& in_;
  const TableOptions& options_;
  HashTable::ThreadContext& tc_;
};

// Bounds an operation's retries:
//   RetryBound bound(*this, si, sh);
//   for (; bound.more(); bound.next()) {...}
//   return bound.status();
// The first kQuietRetries attempts cost a counter. After that the bound
// reads the clock on each attempt, lets the stalled operation help a split
// whose client died (at most every lease.session_check_ns per thread), and
// ends the loop with kTimedOut after options.retry_timeout_ns of retrying
// (time the process did not run, e.g. stopped, does not count), naming the
// last obstacle the operation reported (why).
class RetryBound {
 public:
  static constexpr uint64_t kQuietRetries = 64;
  // The most one gap between attempts counts towards the timeout.
  static constexpr uint64_t kCountedGapNs = 100000000;  // 0.1 s
  RetryBound(Ops& ops, int si, const HashTable::Shard& sh) : ops_(ops), si_(si), sh_(sh) {}
  bool more() const { return status_.ok(); }
  void next() {
    if (__builtin_expect(++attempts_ >= kQuietRetries, 0)) next_slow();
  }
  const Status& status() const { return status_; }
  // What the operation is waiting for, for the error message.
  const char* why = "the operation kept retrying";

 private:
  void next_slow();  // stalls.cc

  Ops& ops_;
  int si_;
  const HashTable::Shard& sh_;
  uint64_t attempts_ = 0;
  uint64_t last_ns_ = 0;      // clock at the last attempt past kQuietRetries
  uint64_t retrying_ns_ = 0;  // time counted against retry_timeout_ns
  Status status_;
};

}  // namespace smart::hashtable
