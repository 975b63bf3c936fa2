// SMART-BT: a Sherman-style B+tree on disaggregated memory, reached only
// through one-sided verbs of an Initiator (design: apps/btree/DESIGN.md).
//
// Semantics (each operation is linearizable per key):
//   search  the value of a key, or kNotFound.
//   insert  adds the key or replaces its value (upsert).
//   update  replaces the value of an existing key, or kNotFound.
//   read_modify_write  update with a value computed from the current one.
//   remove  deletes the key (never found again; its entry is reused), or
//           kNotFound.
//   scan    up to `count` pairs from the first key >= start, in key order,
//           each key once. Not a snapshot: a key written during the scan may
//           or may not be seen, a key present throughout always is.
// Keys are any uint64_t. Values of up to 8 bytes live in the leaf; longer
// ones (up to kMaxValueBytes) in a block with a checksum.
//
// Outcomes: OK only if the operation took effect; kOutcomeUnknown when it
// may or may not have (a page write whose completion failed); any other
// error only if it did not (DESIGN.md, "Outcomes").
//
// Threads and tasks: any number of threads (each with its own queue pairs on
// the Initiator) and tasks per thread may call in at once, and several BTree
// objects of one Initiator on one tree (they share their lock state). Data-path
// calls return Status and never throw.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smart/config.h"
#include "smart/initiator.h"
#include "smart/per_thread.h"
#include "smart/remote_lock.h"
#include "smart/status.h"
#include "smart/store_options.h"

namespace smart::btree {

// The options of every store (smart/store_options.h: speculative lookup,
// reclaim grace, lease, retry bound) and SMART-BT's own.
struct TreeOptions : StoreOptions {
  // Hierarchical lock (HOCL): a local lock of this client in front of every
  // remote lock; the remote lock passes to a local waiter up to 8 times in
  // a row without a release and a CAS.
  bool hocl = true;
  // Command combination: a write-back and the release CAS that follows it go
  // in one doorbell (one round trip); off, the release waits for the write.
  bool combine_commands = true;
  // Entries of each thread's speculative-lookup cache (power of two; 8
  // bytes each). 2^18 (2 MiB a thread) holds the hot keys of a zipfian
  // load; 2^20 ran slower here (the cache's own misses) and would take 768
  // MiB in a client of 96 threads (docs/performance_notes_techniques.md).
  size_t speculative_cache_entries = size_t{1} << 18;
  // Level-1 pages (1 KiB each) each thread's index cache holds at most (0:
  // no cache), and the most all threads of this client's BTree hold
  // together (the memory budget). A cache holds only pages its thread
  // descended through, so a small tree costs little; the defaults cover
  // about 100 M keys (a level-1 page covers about 30 leaves of about 30
  // keys) for up to 8 threads, and fewer pages a thread beyond that.
  size_t index_cache_pages = 131072;
  size_t index_cache_budget_pages = 1048576;
};

// Counters of one thread, summed by BTree::stats().
struct TreeStats {
  uint64_t operations = 0;        // public calls
  uint64_t round_trips = 0;       // doorbells the calls waited for
  uint64_t torn_reads = 0;        // pages or lines that failed their check, read again
  uint64_t lock_retries = 0;      // lock CASes that found the word held
  uint64_t lock_takeovers = 0;    // locks taken from a dead or stopped holder
  uint64_t handovers = 0;         // locks passed to a local waiter without a CAS
  uint64_t leaf_splits = 0;
  uint64_t internal_splits = 0;
  uint64_t root_changes = 0;      // new roots this client installed
  uint64_t moved_right = 0;       // sibling hops after a page's fence
  uint64_t links_checked = 0;     // separators of moved-right leaves a writer made sure of
  uint64_t cache_hits = 0;        // index-cache hits
  uint64_t cache_invalidations = 0;
  uint64_t speculative_hits = 0;
  uint64_t speculative_misses = 0;
  // The framework services' counters (smart/store_thread.h, SumStoreStats).
  uint64_t retries = 0;           // operations retried after backoff
  uint64_t blocks_retired = 0;
  uint64_t blocks_reused = 0;
  uint64_t blocks_released = 0;   // value blocks never named by a page, reusable at once
  uint64_t remote_bytes_allocated = 0;  // block memory taken from the blades
  // Stopped and failed holders (last: off the counters every operation moves).
  uint64_t holders_fenced = 0;    // take-overs by lease whose old holder's session the blade ended first
  uint64_t writes_unknown = 0;    // page writes whose completion failed (they may have landed)
  uint64_t blocks_leaked = 0;     // value blocks a page may name after an unknown outcome: never reused
};

class BTree {
 public:
  // Defined in tree_internal.h.
  struct Meta;
  struct ThreadContext;
  struct LocalLocks;

  // Opens the tree on memory nodes 0 .. nodes-1 of `initiator` (connected)
  // under the named root "btree", building what nobody built yet. Pages are
  // spread over all of them. Call outside a task. Throws smart::Error.
  BTree(Initiator& initiator, const SmartConfig& config, int nodes, const TreeOptions& options);
  ~BTree();
  BTree(const BTree&) = delete;
  BTree& operator=(const BTree&) = delete;

  Status search(uint64_t key, std::string* value);
  Status insert(uint64_t key, std::string_view value);
  Status update(uint64_t key, std::string_view value);
  Status read_modify_write(uint64_t key, const std::function<void(std::string*)>& modify);
  Status remove(uint64_t key);
  Status scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, std::string>>* out);

  int nodes() const { return nodes_; }
  // Counters of all threads, the framework services' included.
  TreeStats stats() const;

  // --- Inspection, for tests and tools (not on the data path). ---
  // Height of the tree (1: the root is a leaf), read from the root.
  Status height(int* levels);
  // Walks every leaf from the leftmost: keys in order, fences chained, each
  // key once. Returns the number of keys; an error names what is wrong.
  Status check_leaves(uint64_t* keys);
  // The leaf page holding `key` (or where it would go).
  Status leaf_of(uint64_t key, GlobalAddress* page);

 private:
  friend class Ops;
  // The calling thread's context, through the PerThread fast path (one
  // thread-local compare, no ThreadId()).
  ThreadContext& context();
  // Builds the calling thread's context (PerThread's factory).
  std::unique_ptr<ThreadContext> make_context();

  Initiator& initiator_;
  SmartConfig config_;
  TreeOptions options_;
  const int nodes_;
  std::vector<GlobalAddress> lock_tables_;  // per node
  GlobalAddress root_word_;                 // the root pointer, on node 0
  std::shared_ptr<LocalLocks> local_locks_; // HOCL and held words, per client and tree
  // Index cache pages all threads hold (TreeOptions::index_cache_budget_pages);
  // declared before the contexts, whose caches count down as they go.
  std::atomic<size_t> index_cache_used_{0};
  PerThread<ThreadContext> contexts_;
};

}  // namespace smart::btree
