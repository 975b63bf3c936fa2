// SMART-DTX database: the tables of one application (SmallBank, TATP) on the
// memory blades, opened (or built, by the first client) under the named
// root "dtx/<name>", and this client's log areas.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "catalog.h"
#include "smart/initiator.h"
#include "smart/named_root.h"
#include "smart/per_thread.h"
#include "smart/remote_lock.h"

namespace smart::dtx {

/// Called once per row when a blade's tables are built: `value` holds the
/// table's value_bytes.
using RowSink = std::function<void(uint16_t table, uint64_t key, const void* value)>;

struct DatabaseOptions {
  std::string name;                ///< "smallbank": named root "dtx/smallbank"
  std::vector<TableSpec> tables;   ///< at most kMaxTables
  int backup_degree = 1;           ///< backups per table, below the blade count
  int threads = 1;                 ///< client threads: log slots for thread ids below threads + 2
  int tasks = 1;                   ///< tasks per thread (log slots), task ids 1..tasks
  LeaseOptions lease;              ///< record locks and the build claim
  /// Emits every row of every table, the same rows in the same order on
  /// every call (a builder calls it once; replicas must come out identical).
  std::function<void(const RowSink&)> populate;
  bool progress = false;           ///< show the build's progress on a terminal
};

/// Counters of one thread's transactions (Database::stats sums them).
struct DtxStats {
  uint64_t committed = 0;
  uint64_t aborted_conflict = 0;   ///< a lock held, a version moved, an insert raced
  uint64_t aborted_logical = 0;    ///< the application aborted, or a key was missing
  uint64_t failed = 0;             ///< an error other than an abort (nothing took effect)
  uint64_t unknown = 0;            ///< commits whose outcome was not known when they returned
  uint64_t rdma_ops = 0;           ///< work requests posted
  uint64_t round_trips = 0;        ///< waits for completions
  uint64_t torn_reads = 0;         ///< slots re-read after a CRC mismatch
  uint64_t invisible_waits = 0;    ///< re-reads of a record being committed
  uint64_t cache_misses = 0;       ///< address-cache misses (bucket reads)
  uint64_t recoveries = 0;         ///< dead owners' transactions recovered
  void add(const DtxStats& o);
};

class Transaction;
class AddressCache;

/// One database, shared by every thread of the client.
class Database {
 public:
  /// Opens `options.name` on memory blades 0..blades-1 (building what is not
  /// built yet) and registers this client's log areas. Call outside a task.
  /// Throws smart::Error with what went wrong.
  Database(Initiator& initiator, int blades, DatabaseOptions options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Initiator& initiator() const { return initiator_; }
  const DatabaseOptions& options() const { return options_; }
  int blades() const { return blades_; }
  /// The table with this id; nullptr when there is none.
  const TableInfo* table(uint16_t id) const;
  const std::vector<TableInfo>& tables() const { return tables_; }
  /// Where (thread, task)'s undo log slot is on `blade`.
  GlobalAddress log_slot(node_t blade, int thread, int task) const;
  /// The log directory of `blade`.
  GlobalAddress log_directory(node_t blade) const;
  /// Sum of every thread's counters.
  DtxStats stats() const;

  struct ThreadState;
  /// The calling thread's state (address cache, counters, buffers).
  ThreadState& thread_state_for_recovery() { return thread_state(); }

 private:
  friend class Transaction;
  friend void BuildImages(Database& db);
  ThreadState& thread_state();
  void open_blade(node_t blade, std::vector<CatalogBlock>* blocks);
  uint64_t build_blade(node_t blade, RootClaim& claim);
  void attach_logs();

  Initiator& initiator_;
  int blades_;
  DatabaseOptions options_;
  std::vector<TableInfo> tables_;
  std::vector<int> table_index_;  // by table id: index into tables_, -1 none
  std::vector<uint64_t> log_directory_;  // per blade
  std::vector<uint64_t> log_area_;       // per blade: this client's area
  PerThread<ThreadState> thread_states_;
  std::unique_ptr<AddressCache> cache_;  // shared by the threads
  // Built images of the tables (filled once, when this client builds).
  std::unordered_map<uint16_t, std::vector<char>> images_;
};

}  // namespace smart::dtx
