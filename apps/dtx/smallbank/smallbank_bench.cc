// smallbank_bench NR_THREAD NR_CORO: SmallBank on SMART-DTX.
//
// Reads transaction.json (APP_CONFIG_PATH) and smart_config.json. With no
// memory_servers it runs --blades memory blades (2 by default) inside the
// process on shm. The first client builds the two tables (num_accounts
// accounts each, every table with backup_degree backups); the others attach.
// Runs the SmallBank mix for `duration` seconds (or nr_transactions
// attempts) on NR_THREAD threads of NR_CORO coroutines and prints the
// upstream line with the prefix dtx-smallbank, then appends the CSV line.
// --verify checks after the run that the money adds up, that every backup
// equals its primary and that no lock is left. Exit 2: a bad argument or
// config value; 1: the run failed or a check did.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "database.h"
#include "smallbank.h"
#include "smart/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "recovery.h"
#include "txn_driver.h"
#include "verify.h"

namespace {

using namespace smart;
using namespace smart::dtx;

struct Flags {
  std::string config_path, dump, history, delta_file;
  double duration = -1;
  uint64_t transactions = 0, accounts = 0, hot = 0, expect_delta = 0;
  int blades = 2, backup_degree = -1;
  bool verify = false, quiet = false, check_only = false, expect_delta_set = false, transfers_only = false;
};

int Run(int threads, int coros, const Flags& f, TransactionConfig config, SmartConfig smart_config) {
  const bool verbose = !f.quiet;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> embedded;
  std::vector<ServerAddress> servers = config.memory_servers;
  if (servers.empty()) {
    smart_config.transport = TransportChoice::kShm;
    const uint64_t mib = 64 + config.smallbank_accounts * 2 * 48 * 2 / (1 << 20) +
                         static_cast<uint64_t>(threads + 2) * static_cast<uint64_t>(coros + 1) * 4096 * 4 / (1 << 20);
    for (int b = 0; b < f.blades; ++b) {
      embedded.push_back(std::make_unique<EmbeddedMemoryBlade>(smart_config, mib));
      servers.push_back(ServerAddress{embedded.back()->host(), embedded.back()->port()});
    }
    if (verbose) {
      SMART_INFO("smallbank_bench: no memory_servers configured; %d memory blades inside this process (shm, %" PRIu64
                 " MiB each)", f.blades, mib);
    }
  }
  Initiator initiator(smart_config);
  for (size_t i = 0; i < servers.size(); ++i) {
    initiator.connect(static_cast<node_t>(i), servers[i].hostname, servers[i].port, threads + 1);
  }
  smallbank::Params params;
  params.accounts = config.smallbank_accounts;
  params.hot_accounts = config.smallbank_hot_accounts;
  DatabaseOptions options;
  options.name = "smallbank";
  options.tables = smallbank::Tables(params.accounts);
  options.backup_degree = config.backup_degree;
  options.threads = threads;
  options.tasks = coros;
  options.populate = [&](const RowSink& sink) { smallbank::Populate(params.accounts, sink); };
  const uint64_t open_start = NowNs();
  Database db(initiator, static_cast<int>(servers.size()), options);
  if (verbose) {
    SMART_INFO("smallbank_bench: %s; %" PRIu64 " accounts (%" PRIu64 " hot), %d memory blade(s), backup degree %d, "
               "opened in %.2f s", smart_config.Summary().c_str(), params.accounts, params.hot_accounts,
               static_cast<int>(servers.size()), config.backup_degree, static_cast<double>(NowNs() - open_start) / 1e9);
  }
  TxRunResult r;
  TxDriverOptions o;
  o.threads = threads;
  o.coros = coros;
  o.duration = config.duration;
  o.transactions = config.nr_transactions;
  o.progress = verbose;
  o.history_path = f.history;
  if (!f.check_only) {
    r = RunTransactions(db, o, [&](Transaction& tx, uint64_t* rng, int64_t* delta, Status* error) {
      smallbank::TxType type = smallbank::PickType(rng);
      if (f.transfers_only) {
        // Money only moves: a client killed mid-run leaves an exact total.
        type = smallbank::NextRandom(rng) % 8 < 5 ? smallbank::TxType::kSendPayment : smallbank::TxType::kAmalgamate;
      }
      return smallbank::Run(tx, type, params, rng, delta, error);
    });
    printf("%s\n", ResultLine("dtx-smallbank", o, r).c_str());
    fflush(stdout);
    if (verbose) {
      const double rt = r.attempted ? static_cast<double>(r.stats.round_trips) / static_cast<double>(r.attempted) : 0;
      SMART_INFO("smallbank_bench: during the run: round trips per txn %.3f, torn reads %" PRIu64
                 ", waits for committing records %" PRIu64 ", address-cache misses %" PRIu64
                 ", dead clients' transactions recovered %" PRIu64 ", money added by committed transactions %" PRId64
                 " cents", rt, r.stats.torn_reads, r.stats.invisible_waits, r.stats.cache_misses, r.stats.recoveries,
                 r.delta);
    }
    AppendCsvLine(config.dump_file_path, CsvLine("dtx-smallbank", o, r));
    if (!f.delta_file.empty()) {
      std::ofstream out(f.delta_file, std::ios::app);
      out << r.delta << "\n";
      if (!out) throw Error("writing " + f.delta_file + " failed");
    }
  }
  int rc = 0;
  if (r.failed > 0) {
    fprintf(stderr, "smallbank_bench: %" PRIu64 " transaction(s) failed; the first: %s\n", r.failed,
            r.first_failure.c_str());
    rc = 1;
  }
  if (f.check_only) {
    // Locks of clients that died where no one has met them since.
    int swept = 0;
    Status s = SweepDeadLocks(db, &swept);
    if (!s.ok()) throw Error("recovering dead clients' locks: " + s.ToString());
    if (verbose || swept > 0) {
      SMART_INFO("smallbank_bench: check: %d lock(s) of dead clients recovered before checking", swept);
    }
  }
  if (f.verify || f.check_only) {
    // The money: every balance starts at kInitialBalance in both tables.
    __int128 total = 0;
    uint64_t rows = 0;
    std::string problem;
    for (uint16_t table : {smallbank::kSavings, smallbank::kChecking}) {
      if (problem.empty()) {
        problem = ForEachRecord(db, table, [&](const Record& rec) {
          int64_t v;
          memcpy(&v, rec.value, 8);
          total += v;
          ++rows;
        });
      }
    }
    const __int128 expected = static_cast<__int128>(params.accounts) * 2 * smallbank::kInitialBalance +
                              (f.expect_delta_set ? static_cast<int64_t>(f.expect_delta) : r.delta);
    if (problem.empty() && rows != params.accounts * 2) {
      problem = std::to_string(rows) + " account rows; " + std::to_string(params.accounts * 2) + " were loaded";
    }
    if (problem.empty() && total != expected) {
      problem = "the balances add up to " + std::to_string(static_cast<long long>(total)) + " cents; " +
                std::to_string(static_cast<long long>(expected)) +
                " were expected from the load and the committed transactions";
    }
    if (problem.empty()) problem = CompareReplicas(db);
    if (problem.empty()) problem = FindLeftLocks(db);
    if (!problem.empty()) {
      fprintf(stderr, "smallbank_bench: verify: %s\n", problem.c_str());
      rc = 1;
    } else if (verbose) {
      SMART_INFO("smallbank_bench: verify: %" PRIu64 " accounts add up to the expected total, replicas equal, no lock left",
                 params.accounts);
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"smallbank_bench: SmallBank on SMART-DTX (FORD-style transactions on disaggregated memory)"};
  int threads = 0, coros = 0;
  Flags f;
  app.add_option("NR_THREAD", threads, "client threads")->required()->check(CLI::Range(1, kMaxThreads - 2));
  app.add_option("NR_CORO", coros, "coroutines per thread")->required()->check(CLI::Range(1, kMaxTasksPerThread - 1));
  app.add_option("--config", f.config_path, "transaction.json to use (default: APP_CONFIG_PATH or config/transaction.json)");
  app.add_option("--duration", f.duration, "seconds to run (0: run --transactions attempts)")->check(CLI::Range(0.0, 86400.0));
  app.add_option("--transactions", f.transactions, "attempts in all when the duration is 0 (nr_transactions)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  app.add_option("--accounts", f.accounts, "accounts (num_accounts)")->check(CLI::Range(uint64_t{2}, uint64_t{1} << 32));
  app.add_option("--hot-accounts", f.hot, "hot accounts that get 90% of the picks (num_hot_accounts)")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 32));
  app.add_option("--blades", f.blades, "embedded memory blades when none is configured")->check(CLI::Range(1, 16));
  app.add_option("--backup-degree", f.backup_degree, "backups of every table (below the number of blades)")
      ->check(CLI::Range(0, 15));
  app.add_option("--dump-file", f.dump, "CSV file to append to (\"\" for none)");
  app.add_option("--history", f.history, "append every committed transaction's reads and writes to this file");
  app.add_option("--delta-file", f.delta_file, "append the cents the committed transactions added to this file");
  app.add_option("--expect-delta", f.expect_delta, "with --check-only: the cents all clients' transactions added");
  app.add_flag("--verify", f.verify, "after the run: the money adds up, backups equal primaries, no lock is left");
  app.add_flag("--check-only", f.check_only,
               "run nothing; recover the locks of dead clients, then check the database as --verify does");
  app.add_flag("--transfers-only", f.transfers_only,
               "run only SendPayment and Amalgamate (money moves, the total stays), for clients killed mid-run");
  app.add_flag("--quiet", f.quiet, "print only the result line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  f.expect_delta_set = app.count("--expect-delta") > 0;
  TransactionConfig config;
  SmartConfig smart_config;
  try {
    smart_config = SmartConfig::Load();
    config = TransactionConfig::Load(f.config_path);
    if (app.count("--duration")) config.duration = f.duration;
    if (app.count("--transactions")) config.nr_transactions = f.transactions;
    if (app.count("--accounts")) config.smallbank_accounts = f.accounts;
    if (app.count("--hot-accounts")) config.smallbank_hot_accounts = f.hot;
    if (app.count("--backup-degree")) config.backup_degree = f.backup_degree;
    if (app.count("--dump-file")) config.dump_file_path = f.dump;
    if (config.smallbank_hot_accounts > config.smallbank_accounts) {
      throw Error("--hot-accounts " + std::to_string(config.smallbank_hot_accounts) + " is more than the " +
                  std::to_string(config.smallbank_accounts) + " accounts");
    }
    const int blades = config.memory_servers.empty() ? f.blades : static_cast<int>(config.memory_servers.size());
    if (config.backup_degree >= blades) {
      throw Error("backup degree " + std::to_string(config.backup_degree) + " needs more than " +
                  std::to_string(config.backup_degree) + " memory blades; there are " + std::to_string(blades));
    }
  } catch (const Error& e) {
    fprintf(stderr, "smallbank_bench: %s\n", e.what());
    return 2;
  }
  try {
    return Run(threads, coros, f, config, smart_config);
  } catch (const Error& e) {
    fprintf(stderr, "smallbank_bench: %s\n", e.what());
    return 1;
  }
}
