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
#include <cinttypes>
#include <cstring>

#include "bench_main.h"
#include "smallbank.h"
#include "verify.h"

namespace {

using namespace smart;
using namespace smart::dtx;

// "" when both tables hold every account once and the balances add up to
// the load plus `delta` cents.
std::string CheckMoney(Database& db, uint64_t accounts, int64_t delta) {
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
  if (!problem.empty()) return problem;
  if (rows != accounts * 2) {
    return std::to_string(rows) + " account rows; " + std::to_string(accounts * 2) + " were loaded";
  }
  const __int128 expected = static_cast<__int128>(accounts) * 2 * smallbank::kInitialBalance + delta;
  if (total != expected) {
    return "the balances add up to " + std::to_string(static_cast<long long>(total)) + " cents; " +
           std::to_string(static_cast<long long>(expected)) +
           " were expected from the load and the committed transactions";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  BenchMain bench("smallbank", "SmallBank on SMART-DTX (FORD-style transactions on disaggregated memory)");
  uint64_t accounts = 0, hot = 0;
  bool transfers_only = false;
  CLI::App& app = bench.app();
  app.add_option("--accounts", accounts, "accounts (num_accounts)")->check(CLI::Range(uint64_t{2}, uint64_t{1} << 32));
  app.add_option("--hot-accounts", hot, "hot accounts that get 90% of the picks (num_hot_accounts)")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 32));
  app.add_flag("--transfers-only", transfers_only,
               "run only SendPayment and Amalgamate (money moves, the total stays), for clients killed mid-run");
  smallbank::Params params;
  return bench.run(argc, argv, [&](TransactionConfig& config) {
    if (app.count("--accounts")) config.smallbank_accounts = accounts;
    if (app.count("--hot-accounts")) config.smallbank_hot_accounts = hot;
    if (config.smallbank_hot_accounts > config.smallbank_accounts) {
      throw Error("--hot-accounts " + std::to_string(config.smallbank_hot_accounts) + " is more than the " +
                  std::to_string(config.smallbank_accounts) + " accounts");
    }
    params.accounts = config.smallbank_accounts;
    params.hot_accounts = config.smallbank_hot_accounts;
    Workload w;
    w.summary = std::to_string(params.accounts) + " accounts (" + std::to_string(params.hot_accounts) + " hot)";
    w.tables = smallbank::Tables(params.accounts);
    w.populate = [&params](const RowSink& sink) { smallbank::Populate(params.accounts, sink); };
    w.body = [&params, transfers_only](Transaction& tx, uint64_t* rng, int64_t* delta, Status* error) {
      smallbank::TxType type = smallbank::PickType(rng);
      if (transfers_only) {
        // Money only moves: a client killed mid-run leaves an exact total.
        type = NextRandom(rng) % 8 < 5 ? smallbank::TxType::kSendPayment : smallbank::TxType::kAmalgamate;
      }
      return smallbank::Run(tx, type, params, rng, delta, error);
    };
    w.check = [&params](Database& db, int64_t delta) { return CheckMoney(db, params.accounts, delta); };
    w.delta_meaning = "cents added";
    return w;
  });
}
