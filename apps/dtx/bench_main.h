// What the SMART-DTX benches (smallbank_bench, tatp_bench) share: their
// command line, transaction.json, memory blades inside the process when
// none is configured, the run, the result line and CSV, and the checks
// after a run or of a database left by others (--check-only).
//
// A bench declares its own flags and its workload:
//
//   BenchMain bench("tatp", "TATP on SMART-DTX");
//   bench.app().add_option("--subscribers", ...);        // its own flags
//   return bench.run(argc, argv, [&](TransactionConfig& c) { ...apply them...; return workload; });
//
// Exit 2: a bad argument or config value (named); 1: the run failed or a
// check did; 0 otherwise.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "database.h"
#include "smart/bench/bench_config.h"
#include "smart/config.h"
#include "smart/bench/run_flags.h"
#include "smart/bench/start_barrier.h"
#include "txn_driver.h"

namespace smart::dtx {

/// What a bench runs and how its result is checked.
struct Workload {
  std::string summary;                 ///< for the log: "100000 accounts (4000 hot)"
  std::vector<TableSpec> tables;
  std::function<void(const RowSink&)> populate;
  TxBody body;
  /// Checks the database against the load plus `delta` (the sum of the
  /// committed transactions' deltas); "" or what is wrong.
  std::function<std::string(Database&, int64_t delta)> check;
  /// What a delta counts, for messages: "cents added", "call forwarding rows added".
  std::string delta_meaning;
  uint64_t blade_mib = 0;              ///< extra MiB per embedded blade beyond the tables and logs
};

class BenchMain {
 public:
  /// `name`: "smallbank" for smallbank_bench, prefix dtx-smallbank and the
  /// named root dtx/smallbank.
  BenchMain(std::string name, const std::string& about);
  /// Add the bench's own flags here before run().
  CLI::App& app() { return app_; }
  /// Parses, loads the configs, lets `make` apply the bench's flags to the
  /// config and build the workload (a smart::Error it throws is a bad
  /// argument), runs and checks. Returns the exit code.
  int run(int argc, char** argv, const std::function<Workload(TransactionConfig&)>& make);

 private:
  int run_workload(const Workload& w, const TransactionConfig& config, SmartConfig smart_config);

  std::string name_, bench_;
  CLI::App app_;
  int threads_ = 0, coros_ = 0, blades_ = 2, backup_degree_ = -1;
  std::string config_path_, dump_, history_, delta_file_, list_keys_;
  uint16_t list_table_ = 0;   // --list-keys, parsed
  std::string list_path_;
  double duration_ = -1;
  uint64_t transactions_ = 0;
  int64_t expect_delta_ = 0;
  std::vector<int64_t> maybe_deltas_;  // --maybe-delta
  bool verify_ = false, quiet_ = false, check_only_ = false;
  RunFlags run_flags_;          // --sync, --sync-timeout, --idle-us
  StartGroup group_;            // --sync, parsed
};

}  // namespace smart::dtx
