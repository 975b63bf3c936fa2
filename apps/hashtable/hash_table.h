// SMART-HT: a RACE-style hash table on disaggregated memory, reached only
// through one-sided verbs of an Initiator. One shard per memory blade.
//
// Semantics (each operation is linearizable per key):
//   search  returns the value, or kNotFound.
//   insert  is an upsert: when the key exists its value is replaced (as by
//           update), otherwise the key is added. Concurrent inserts of one key
//           all succeed and leave exactly one copy, holding one of their
//           values. Deterministic: after insert(k, v) returns, with no
//           concurrent writer of k, search(k) returns v.
//   update  replaces the value of an existing key, or returns kNotFound.
//   read_modify_write  update with a value computed from the current one.
//   remove  deletes the key, or returns kNotFound.
//
// Threads and tasks: any number of threads (each with its own queue pairs
// on the Initiator) and tasks per thread may call in at once. Data-path calls
// return Status and never throw.
//
// Outcomes: OK means the operation took effect; kOutOfMemory, kTimedOut and
// the other errors mean it did not; kOutcomeUnknown means its slot CAS was
// posted and its completion failed (the memory blade stopped answering, the
// session was ended), so it may or may not have (read the key to learn
// which). An insert whose slot was claimed returns OK even when removing a
// concurrent insert's duplicate copy failed afterwards (DESIGN.md).
//
// Memory: replaced and deleted blocks are retired with a grace period and
// reused by the thread that retired them (see operations.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "smart/config.h"
#include "smart/initiator.h"
#include "smart/per_thread.h"
#include "smart/remote_lock.h"
#include "smart/status.h"
#include "smart/store_options.h"

namespace smart::hashtable {

// The options of every store (smart/store_options.h: speculative lookup,
// reclaim grace, lease, retry bound) and SMART-HT's own. Its retry bound
// is longer than the lease, so that a dead splitter is taken over first.
struct TableOptions : StoreOptions {
  // Keys the table is sized for when this client builds it (split evenly
  // over the shards). A table grows past it by splitting subtables.
  uint64_t expected_keys = 1000000;
  // Entries of each thread's speculative-lookup cache (power of two).
  size_t speculative_cache_entries = size_t{1} << 18;
  // A block whose 4-bit tag wraps back to 0 waits this long before it is
  // reused (BlockPoolOptions::wrap_guard_ns), and an operation acts on a
  // slot word it read (CASes it, or trusts the block it names) only within
  // half of this after it read it, else it reads again. So a slot word that
  // merely looks unchanged after 16 reuses of its block is never taken for
  // the one read (DESIGN.md, "Reclamation and tags"). 0 turns both off.
  uint64_t tag_wrap_guard_ns = 2000000000;
  // Tests only: inserts pick a candidate bucket and an empty slot at random
  // instead of the first slot of the emptiest bucket, so that racing
  // inserts of one key mostly land in different buckets and slots and
  // leave duplicates for the inserters to remove.
  bool spread_inserts_for_tests = false;
  // Room in the directory built with the table, as a depth (2^depth
  // entries of 8 bytes, at least the table's initial depth). A table that
  // outgrows it moves its directory to one 16 times larger, up to depth 32.
  int directory_capacity_depth = 20;
};

// Counters of one thread, summed by HashTable::stats().
struct TableStats {
  uint64_t torn_reads = 0;         // blocks that failed their checksum and were re-read
  uint64_t stale_directory = 0;    // directory refreshes after a stale bucket header
  uint64_t torn_buckets = 0;       // buckets read half rewritten by a split, and re-read
  uint64_t cas_failures = 0;       // slot CASes that lost a race
  uint64_t writes_superseded = 0;  // of those, writes done because another write of the key replaced what they read
  uint64_t duplicates_removed = 0; // copies of a key cleared after racing inserts
  uint64_t lowest_pinned = 0;      // lowest copies published again before the copies above them went
  uint64_t splits = 0;             // subtables this client split
  uint64_t loads_batched = 0;      // keys load_batch settled with shared round trips
  uint64_t splits_recovered = 0;   // half-done splits of dead clients finished
  uint64_t splits_abandoned = 0;   // own splits taken over by another client (this one was too slow)
  uint64_t directory_moves = 0;    // directories this client moved to a larger array
  uint64_t speculative_hits = 0;   // lookups answered by the cached slot
  uint64_t speculative_misses = 0; // cached slots that had changed
  uint64_t speculative_looks_below = 0;  // speculative reads that read the slots below their cached one too
  uint64_t slow_slot_reads = 0;    // slot words read again: too long since they were read (tag_wrap_guard_ns)
  // The framework services' counters (smart/store_thread.h, SumStoreStats).
  uint64_t retries = 0;            // operations retried after backoff
  uint64_t blocks_retired = 0;
  uint64_t blocks_reused = 0;
  uint64_t blocks_released = 0;    // blocks never published, reusable at once
  uint64_t remote_bytes_allocated = 0;  // block memory taken from the blades
};

enum class WriteKind : uint8_t;  // table_internal.h

class HashTable {
 public:
  // Defined in table_internal.h.
  struct Shard;
  struct ThreadContext;
  // Where a key lies (locate()).
  struct Location {
    GlobalAddress slot;
    uint64_t slot_value = 0;
    GlobalAddress block;
    size_t block_length = 0;
  };

  // Opens the table on memory nodes 0 .. shards-1 of `initiator` (already
  // connected) under the named root "hashtable", building it on any shard
  // where nobody built it yet, and taking over a build whose builder died.
  // Call outside a task. Throws smart::Error.
  HashTable(Initiator& initiator, const SmartConfig& config, int shards, const TableOptions& options);
  ~HashTable();
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  Status search(std::string_view key, std::string* value);
  Status insert(std::string_view key, std::string_view value);
  // insert() for loading: the caller promises that no other task or client
  // inserts this key at the same time, so the key cannot get a second copy
  // and the search for one after the slot is claimed (a round trip) is
  // skipped, and speculative reads of the copy need not look for another
  // below it (layout.h, kBlockLoaded). Breaking the promise can leave a key
  // with two copies and let such a read return the value of the wrong one.
  Status load(std::string_view key, std::string_view value);
  // load() of `count` keys, sharing round trips: their blocks go out in one
  // write, their bucket reads and slot CASes each behind one doorbell (per
  // shard, kLoadBatchKeys at a time). Same promise as load(); a key given
  // twice gets the later value. On an error some keys may be loaded and
  // others not (kOutcomeUnknown once slot CASes were posted); loading them
  // again is harmless.
  Status load_batch(const std::string_view* keys, const std::string_view* values, size_t count);
  // Keys load_batch settles together: the block write and two bucket reads
  // per key fill one task's batch of requests (kMaxBatchSize), so that they
  // leave behind one doorbell.
  static constexpr int kLoadBatchKeys = (kMaxBatchSize - 1) / 2;
  Status update(std::string_view key, std::string_view value);
  Status read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify);
  Status remove(std::string_view key);

  int shards() const { return static_cast<int>(shards_.size()); }
  // "HashTable" or "HashTableMultiShard", as in the bench output.
  const char* name() const { return shards_.size() > 1 ? "HashTableMultiShard" : "HashTable"; }
  // Counters of all threads, the framework services' included.
  TableStats stats() const;

  // --- Inspection, for tests and tools (not on the data path). ---
  // Copies of `key` in its candidate buckets (each read and checked).
  Status count_copies(std::string_view key, int* copies);
  Status locate(std::string_view key, Location* location);
  // Slots in all subtables of `shard` and the directory's global depth.
  Status capacity(int shard, uint64_t* slots, int* global_depth);

 private:
  // The calling thread's context, through the PerThread fast path (one
  // thread-local compare, no ThreadId()).
  ThreadContext& context();
  // insert, load and update: the write of `key` as `kind` says.
  Status write(std::string_view key, std::string_view value, WriteKind kind);
  // Builds the calling thread's context (PerThread's factory).
  std::unique_ptr<ThreadContext> make_context();

  Initiator& initiator_;
  SmartConfig config_;
  TableOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  PerThread<ThreadContext> contexts_;
};

}  // namespace smart::hashtable
