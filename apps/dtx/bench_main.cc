// The SMART-DTX benches' shared main (bench_main.h).
#include "bench_main.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>
#include <memory>

#include "recovery.h"
#include "smart/bench/bench.h"
#include "smart/bench/blades.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "verify.h"

namespace smart::dtx {

BenchMain::BenchMain(std::string name, const std::string& about)
    : name_(std::move(name)), bench_(name_ + "_bench"), app_(bench_ + ": " + about) {
  app_.add_option("NR_THREAD", threads_, "client threads")->required()->check(CLI::Range(1, kMaxThreads - 2));
  app_.add_option("NR_CORO", coros_, "coroutines per thread")->required()->check(CLI::Range(1, kMaxTasksPerThread - 1));
  app_.add_option("--config", config_path_,
                  "transaction.json to use (default: " + ConfigFileSearch("transaction.json", "APP_CONFIG_PATH") +
                      ")");
  app_.add_option("--duration", duration_, "seconds to run (0: run --transactions attempts)")
      ->check(CLI::Range(0.0, 86400.0));
  app_.add_option("--transactions", transactions_, "attempts in all when the duration is 0 (nr_transactions)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  app_.add_option("--blades", blades_, "embedded memory blades when none is configured")->check(CLI::Range(1, 16));
  app_.add_option("--backup-degree", backup_degree_, "backups of every table (below the number of blades)")
      ->check(CLI::Range(0, 15));
  app_.add_option("--dump-file", dump_, "CSV file to append to (\"\" for none)");
  app_.add_option("--history", history_, "append every committed transaction's reads and writes to this file");
  app_.add_option("--delta-file", delta_file_,
                  "append what the committed transactions added to the checked sum to this file, and a line "
                  "?DELTA for each transaction whose outcome is unknown");
  app_.add_option("--expect-delta", expect_delta_,
                  "with --check-only: what all clients' committed transactions added to the checked sum");
  app_.add_option("--maybe-delta", maybe_deltas_,
                  "with --check-only: what a transaction of unknown outcome adds if it took effect; the check "
                  "accepts the sum with or without it (repeatable)");
  app_.add_flag("--verify", verify_,
                "after the run: the database matches the load and the committed transactions, backups equal "
                "primaries, no lock is left");
  app_.add_flag("--check-only", check_only_,
                "run nothing; recover the locks of dead clients, then check the database as --verify does");
  app_.add_option("--list-keys", list_keys_,
                  "TABLE:FILE: at the end, write the key of every live record of table id TABLE to FILE, one per "
                  "line, in no order");
  app_.add_flag("--quiet", quiet_, "print only the result line");
  run_flags_.add_to(app_, "the first to open the database populates it, the others attach",
                    "committed transaction");
}

namespace {

// Writes the key of every live record of `table` to `path`, one per line.
void ListKeys(Database& db, uint16_t table, const std::string& path) {
  std::ofstream out(path);
  std::string problem = ForEachRecord(db, table, [&](const Record& r) { out << r.key << "\n"; });
  if (!problem.empty()) throw Error("--list-keys: " + problem);
  out.close();
  if (!out) throw Error("--list-keys: writing " + path + " failed");
}

}  // namespace

int BenchMain::run(int argc, char** argv, const std::function<Workload(TransactionConfig&)>& make) {
  EnableStackOverflowReports();
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app_.exit(e);
    return code == 0 ? 0 : 2;
  }
  TransactionConfig config;
  SmartConfig smart_config;
  Workload workload;
  try {
    smart_config = SmartConfig::Load();
    smart::ExportProviderEnvironment(smart_config);
    config = TransactionConfig::Load(config_path_);
    if (app_.count("--duration")) config.duration = duration_;
    if (app_.count("--transactions")) config.nr_transactions = transactions_;
    if (app_.count("--backup-degree")) config.backup_degree = backup_degree_;
    if (app_.count("--dump-file")) config.dump_file_path = dump_;
    group_ = run_flags_.group();
    config.idle_us = run_flags_.idle_us(config.idle_us);
    const int blades = config.memory_servers.empty() ? blades_ : static_cast<int>(config.memory_servers.size());
    if (config.backup_degree >= blades) {
      throw Error("backup degree " + std::to_string(config.backup_degree) + " needs more than " +
                  std::to_string(config.backup_degree) + " memory blades; there are " + std::to_string(blades));
    }
    workload = make(config);
    if (!list_keys_.empty()) {
      const size_t colon = list_keys_.find(':');
      const std::string id = list_keys_.substr(0, colon);
      bool known = false;
      for (const TableSpec& t : workload.tables) {
        if (std::to_string(t.id) == id) {
          known = true;
          list_table_ = t.id;
        }
      }
      if (colon == std::string::npos || colon + 1 == list_keys_.size() || !known) {
        std::string ids;
        for (const TableSpec& t : workload.tables) ids += " " + std::to_string(t.id) + " (" + t.name + ")";
        throw Error("--list-keys " + list_keys_ + ": expected TABLE:FILE, TABLE one of" + ids);
      }
      list_path_ = list_keys_.substr(colon + 1);
    }
  } catch (const Error& e) {
    fprintf(stderr, "%s: %s\n", bench_.c_str(), e.what());
    return 2;
  }
  try {
    return run_workload(workload, config, smart_config);
  } catch (const Error& e) {
    fprintf(stderr, "%s: %s\n", bench_.c_str(), e.what());
    return 1;
  }
}

namespace {

// The workload's check against `delta` plus what some of the transactions
// of unknown outcome added: each took effect or did not, so the database
// must match one of the sums. "" or what is wrong.
std::string CheckWithUnknowns(const Workload& w, Database& db, int64_t delta, const std::vector<int64_t>& maybe) {
  constexpr size_t kMaxSums = 64;
  std::set<int64_t> sums = {delta};
  for (int64_t d : maybe) {
    std::set<int64_t> more = sums;
    for (int64_t s : sums) more.insert(s + d);
    sums.swap(more);
    if (sums.size() > kMaxSums) {
      return std::to_string(maybe.size()) + " transactions of unknown outcome make more than " +
             std::to_string(kMaxSums) + " possible sums to check";
    }
  }
  std::string first;
  for (int64_t s : sums) {
    std::string problem = w.check(db, s);
    if (problem.empty()) return "";
    if (first.empty()) first = problem;
  }
  if (maybe.empty()) return first;
  return first + " (nor with any of the " + std::to_string(maybe.size()) +
         " transactions of unknown outcome taking effect)";
}

}  // namespace

int BenchMain::run_workload(const Workload& w, const TransactionConfig& config, SmartConfig smart_config) {
  const bool verbose = !quiet_;
  const char* bench = bench_.c_str();
  // Room on each embedded blade for every table (a blade may hold a replica
  // of each) and every thread's log slots.
  uint64_t bytes = 0;
  for (const TableSpec& t : w.tables) bytes += (t.buckets + t.overflow_nodes) * NodeBytes(t.value_bytes);
  bytes += static_cast<uint64_t>(threads_ + 2) * static_cast<uint64_t>(coros_ + 1) * 4096 * 4;
  const uint64_t mib = 64 + w.blade_mib + bytes / (1 << 20);
  const BenchBlades blades(config.memory_servers, &smart_config, blades_, mib, bench_, verbose);
  Initiator initiator(smart_config);
  blades.connect(initiator, threads_ + 1);
  DatabaseOptions options;
  options.name = name_;
  options.tables = w.tables;
  options.backup_degree = config.backup_degree;
  options.threads = threads_;
  options.tasks = coros_;
  options.populate = w.populate;
  options.progress = verbose;
  run_flags_.apply_lease(&options.lease);
  const uint64_t open_start = NowNs();
  Database db(initiator, blades.count(), options);
  if (verbose) {
    SMART_INFO("%s: %s; %s, %d memory blade(s), backup degree %d, opened in %.2f s", bench,
               smart_config.Summary(TransportKindName(initiator.transport())).c_str(), w.summary.c_str(), blades.count(),
               config.backup_degree, static_cast<double>(NowNs() - open_start) / 1e9);
  }
  const std::string prefix = "dtx-" + name_;
  TxRunResult r;
  TxDriverOptions o;
  o.threads = threads_;
  o.coros = coros_;
  o.duration = config.duration;
  o.transactions = config.nr_transactions;
  o.progress = verbose;
  o.history_path = history_;
  o.idle_ns = config.idle_us * 1000;
  if (!check_only_) {
    run_flags_.wait_to_start(initiator, group_, bench, verbose);
    r = RunTransactions(db, o, w.body);
    printf("%s\n", ResultLine(prefix, o, r).c_str());
    fflush(stdout);
    if (verbose) {
      const double rt = r.attempted ? static_cast<double>(r.stats.round_trips) / static_cast<double>(r.attempted) : 0;
      SMART_INFO("%s: during the run: round trips per txn %.3f, torn reads %" PRIu64
                 ", waits for committing records %" PRIu64 ", address-cache misses %" PRIu64
                 ", dead clients' transactions recovered %" PRIu64 ", longest wait of a task for a commit %.3f ms"
                 ", %s by committed transactions %" PRId64,
                 bench, rt, r.stats.torn_reads, r.stats.invisible_waits, r.stats.cache_misses, r.stats.recoveries,
                 static_cast<double>(r.longest_commit_gap_ns) / 1e6, w.delta_meaning.c_str(), r.delta);
    }
    AppendCsvLine(config.dump_file_path, CsvLine(prefix, o, r), kCsvHeader);
    if (!delta_file_.empty()) {
      std::ofstream out(delta_file_, std::ios::app);
      out << r.delta << "\n";
      for (int64_t d : r.unknown_deltas) out << "?" << d << "\n";
      if (!out) throw Error("writing " + delta_file_ + " failed");
    }
  }
  int rc = 0;
  if (r.failed > 0 || r.unknown > 0) {
    fprintf(stderr, "%s: %" PRIu64 " transaction(s) failed, %" PRIu64 " of unknown outcome; the first: %s\n", bench,
            r.failed, r.unknown, r.first_failure.c_str());
    rc = 1;
  }
  if (check_only_) {
    // Locks of clients that died where no one has met them since.
    int swept = 0;
    Status s = SweepDeadLocks(db, &swept);
    if (!s.ok()) throw Error("recovering dead clients' locks: " + s.ToString());
    if (verbose || swept > 0) SMART_INFO("%s: check: %d lock(s) of dead clients recovered before checking", bench, swept);
    int repaired = 0;
    s = RepairChainLinks(db, &repaired);
    if (!s.ok()) throw Error("repairing overflow links on the backups: " + s.ToString());
    if (repaired > 0) SMART_INFO("%s: check: %d overflow link(s) a dead client left off its backups repaired", bench, repaired);
  }
  if (verify_ || check_only_) {
    const int64_t delta = app_.count("--expect-delta") ? expect_delta_ : r.delta;
    std::vector<int64_t> maybe = maybe_deltas_;
    maybe.insert(maybe.end(), r.unknown_deltas.begin(), r.unknown_deltas.end());
    std::string problem = CheckWithUnknowns(w, db, delta, maybe);
    if (problem.empty()) problem = CompareReplicas(db);
    if (problem.empty()) problem = FindLeftLocks(db);
    if (!problem.empty()) {
      fprintf(stderr, "%s: verify: %s\n", bench, problem.c_str());
      rc = 1;
    } else if (verbose) {
      SMART_INFO("%s: verify: the database matches the load and %" PRId64 " %s, replicas equal, no lock left", bench,
                 delta, w.delta_meaning.c_str());
    }
  }
  if (!list_path_.empty()) ListKeys(db, list_table_, list_path_);
  return rc;
}

}  // namespace smart::dtx
