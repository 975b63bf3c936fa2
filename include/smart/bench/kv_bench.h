/// @file
/// The key-value bench: one main for every store the YCSB driver runs
/// (hashtable_bench, btree_bench). It owns the command line (one set of
/// flags for every store), datastructure.json, the memory blades
/// (configured, or one inside the process), the load, the start group, the
/// timed run, the result line and the CSV; a store adds only what differs
/// through KvBenchApp:
///
///   class TableRun : public smart::KvBenchRun { ... };   // the open store
///   class TableBench : public smart::KvBenchAppOf<TableRun> { ... };
///   int main(int argc, char** argv) { return smart::RunKvBench<TableBench>(argc, argv); }
///
/// Exit status: 0 when every operation succeeded, 1 when the run failed (or
/// some operation did, or a loaded key went missing), 2 for a bad argument
/// or config value (named).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smart/bench/bench_config.h"
#include "smart/bench/kv_store.h"
#include "smart/bench/ycsb_driver.h"
#include "smart/config.h"
#include "smart/initiator.h"
#include "smart/store_options.h"

namespace smart {

/// What the command line and datastructure.json chose for one run.
struct KvBenchSettings {
  YcsbOptions ycsb;            ///< the workload, threads and coroutines
  DataStructureConfig config;  ///< datastructure.json with the flags applied
  SmartConfig smart;           ///< smart_config.json (shm with embedded blades)
  bool verbose = true;         ///< false with --quiet
  bool hocl = true;            ///< false with --no-hocl: no local lock in front of remote locks
  bool combine_commands = true;  ///< false with --no-combine: a lock's release waits for its write
  size_t index_cache_pages = 131072;  ///< --index-cache-pages: index pages each thread caches at most
  /// What every store takes: speculative lookup (smart_config.json) and the
  /// lease of its locks (--lease-ms).
  StoreOptions store;
};

/// A field of the result line (after "retries per op") and of the CSV
/// (after "failed") that one store adds.
struct KvBenchField {
  std::string label;   ///< in the result line, e.g. "round trips per op"
  std::string column;  ///< the CSV column, e.g. "round_trips_per_op"
  std::string value;   ///< the value, formatted
};

/// A counter of what one store did during the run, for the log.
struct KvBenchCounter {
  const char* label;  ///< e.g. "torn reads"
  uint64_t value;     ///< how many during the run
};

/// A store's counter by name: a field of its statistics struct `Stats`.
template <typename Stats>
using KvBenchCounterField = std::pair<const char*, uint64_t Stats::*>;

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
  /// The store's counters during the run (since run_starts()), for the log.
  virtual std::vector<KvBenchCounter> run_counters() const { return {}; }
};

/// A KvBenchRun over a store that keeps its statistics in a struct `Stats`
/// of uint64_t counters: it takes a snapshot when the run starts, and its
/// run_counters() are the fields it was built with, each less its value in
/// that snapshot.
template <typename Stats>
class KvBenchRunWithStats : public KvBenchRun {
 public:
  void run_starts() override { before_ = stats(); }
  std::vector<KvBenchCounter> run_counters() const override {
    const Stats now = stats();
    std::vector<KvBenchCounter> out;
    for (const auto& [label, field] : fields_) out.push_back({label, now.*field - before_.*field});
    return out;
  }

 protected:
  /// `fields`: the counters the log shows after the run, in order.
  explicit KvBenchRunWithStats(std::vector<KvBenchCounterField<Stats>> fields) : fields_(std::move(fields)) {}
  /// The store's statistics now.
  virtual Stats stats() const = 0;
  /// Its statistics when the run started.
  const Stats& before() const { return before_; }

 private:
  std::vector<KvBenchCounterField<Stats>> fields_;
  Stats before_{};
};

/// What one store brings to the key-value bench.
class KvBenchApp {
 public:
  /// `program` heads every message ("hashtable_bench"); `about` says what
  /// it runs, for --help; `noun` names the store in a sentence ("the hash
  /// table"); `scans`: the store scans (YCSB-E).
  KvBenchApp(std::string program, std::string about, std::string noun, bool scans)
      : program_(std::move(program)), about_(std::move(about)), noun_(std::move(noun)), scans_(scans) {}
  virtual ~KvBenchApp() = default;
  /// The program's name.
  const std::string& program() const { return program_; }
  /// What the program runs.
  const std::string& about() const { return about_; }
  /// The store in a sentence.
  const std::string& noun() const { return noun_; }
  /// True when the store scans.
  bool scans() const { return scans_; }
  /// "" when the store honours the technique flag `flag` (--no-hocl,
  /// --no-combine, --index-cache-pages); otherwise why it does not.
  virtual std::string refuses(const std::string& flag) const = 0;
  /// Throws smart::Error for settings the store cannot run (a bad value).
  virtual void check(const KvBenchSettings& settings) const { (void)settings; }
  /// MiB an embedded memory blade needs for the settings' keys.
  virtual uint64_t embedded_mib(const KvBenchSettings& settings) const = 0;
  /// Opens the store on memory nodes 0..blades-1 of `initiator`.
  virtual std::unique_ptr<KvBenchRun> open(Initiator& initiator, int blades, const KvBenchSettings& settings) = 0;

 private:
  std::string program_, about_, noun_;
  bool scans_;
};

/// A KvBenchApp whose open() builds a `Run` (a KvBenchRun constructed from
/// the initiator, the blade count and the settings).
template <typename Run>
class KvBenchAppOf : public KvBenchApp {
 public:
  using KvBenchApp::KvBenchApp;
  /// A new `Run` on the blades.
  std::unique_ptr<KvBenchRun> open(Initiator& initiator, int blades, const KvBenchSettings& settings) override {
    return std::make_unique<Run>(initiator, blades, settings);
  }
};

/// The key-value bench's main (see the file's description); returns the
/// exit status.
int RunKvBench(int argc, char** argv, KvBenchApp& app);

/// RunKvBench() on a default-built `App`: a bench's whole main().
template <typename App>
int RunKvBench(int argc, char** argv) {
  App app;
  return RunKvBench(argc, argv, app);
}

}  // namespace smart
