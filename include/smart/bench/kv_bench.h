/// @file
/// The key-value bench: one main for every store the YCSB driver runs
/// (hashtable_bench, btree_bench). It owns the command line (one set of
/// flags for every store), datastructure.json, the memory blades
/// (configured, or one inside the process), the load, the start group, the
/// timed run, the result line and the CSV; a store adds only what differs
/// through KvBenchApp:
///
///   class TableBench : public smart::KvBenchApp { ... };
///   int main(int argc, char** argv) {
///     TableBench app;
///     return smart::RunKvBench(argc, argv, app);
///   }
///
/// Exit status: 0 when every operation succeeded, 1 when the run failed (or
/// some operation did, or a loaded key went missing), 2 for a bad argument
/// or config value (named).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smart/bench/bench_config.h"
#include "smart/bench/kv_store.h"
#include "smart/bench/ycsb_driver.h"
#include "smart/config.h"
#include "smart/initiator.h"

namespace smart {

/// What the command line and datastructure.json chose for one run.
struct KvBenchSettings {
  YcsbOptions ycsb;            ///< the workload, threads and coroutines
  DataStructureConfig config;  ///< datastructure.json with the flags applied
  SmartConfig smart;           ///< smart_config.json (shm with embedded blades)
  bool verbose = true;         ///< false with --quiet
  bool hocl = true;            ///< false with --no-hocl: no local lock in front of remote locks
  bool combine_commands = true;  ///< false with --no-combine: a lock's release waits for its write
  size_t index_cache_pages = 4096;  ///< --index-cache-pages: index pages each thread caches
};

/// A field of the result line (after "retries per op") and of the CSV
/// (after "failed") that one store adds.
struct KvBenchField {
  std::string label;   ///< in the result line, e.g. "round trips per op"
  std::string column;  ///< the CSV column, e.g. "round_trips_per_op"
  std::string value;   ///< the value, formatted
};

/// An open store and its counters, for one run; destroyed before the
/// initiator it was opened on.
class KvBenchRun {
 public:
  virtual ~KvBenchRun() = default;
  /// The store the YCSB driver loads and runs.
  virtual KvStore& store() = 0;
  /// The store's setup, appended to the configuration line ("" for none).
  virtual std::string setup() const { return ""; }
  /// What the load left, appended to its line ("" for none).
  virtual std::string after_load() { return ""; }
  /// Called just before the timed run, so that counters describe it alone.
  virtual void run_starts() {}
  /// The store's fields of the result line and CSV (the same every run).
  virtual std::vector<KvBenchField> result_fields() const { return {}; }
  /// The store's counters during the run, for the log ("" for none).
  virtual std::string run_counters() const { return ""; }
};

/// What one store brings to the key-value bench.
class KvBenchApp {
 public:
  virtual ~KvBenchApp() = default;
  /// The program's name, heading every message: "hashtable_bench".
  virtual std::string program() const = 0;
  /// What it runs, for --help: "YCSB on SMART-HT (...)".
  virtual std::string about() const = 0;
  /// The store in a sentence: "the table" ("the table lost keys").
  virtual std::string noun() const = 0;
  /// True when the store scans (YCSB-E).
  virtual bool scans() const { return false; }
  /// "" when the store honours the technique flag `flag` (--no-hocl,
  /// --no-combine, --index-cache-pages); otherwise why it does not.
  virtual std::string refuses(const std::string& flag) const = 0;
  /// Throws smart::Error for settings the store cannot run (a bad value).
  virtual void check(const KvBenchSettings& settings) const { (void)settings; }
  /// MiB an embedded memory blade needs for the settings' keys.
  virtual uint64_t embedded_mib(const KvBenchSettings& settings) const = 0;
  /// Opens the store on memory nodes 0..blades-1 of `initiator`.
  virtual std::unique_ptr<KvBenchRun> open(Initiator& initiator, int blades, const KvBenchSettings& settings) = 0;
};

/// The key-value bench's main (see the file's description); returns the
/// exit status.
int RunKvBench(int argc, char** argv, KvBenchApp& app);

}  // namespace smart
