// tatp_bench NR_THREAD NR_CORO: TATP on SMART-DTX.
//
// Reads transaction.json (APP_CONFIG_PATH) and smart_config.json. With no
// memory_servers it runs --blades memory blades (2 by default) inside the
// process on shm. The first client builds the five tables for
// tatp.num_subscriber subscribers (every table with backup_degree backups);
// the others attach. Runs the TATP mix for `duration` seconds (or
// nr_transactions attempts) on NR_THREAD threads of NR_CORO coroutines and
// prints the upstream line with the prefix dtx-tatp, then appends the CSV
// line. Aborts include the mix's "record not found" outcomes (logical).
// --verify checks after the run every table's rows against the population
// and the committed call forwarding inserts and deletes, that every backup
// equals its primary and that no lock is left. Exit 2: a bad argument or
// config value; 1: the run failed or a check did.
#include "bench_main.h"
#include "tatp.h"

int main(int argc, char** argv) {
  using namespace smart;
  using namespace smart::dtx;
  BenchMain bench("tatp", "TATP on SMART-DTX (FORD-style transactions on disaggregated memory)");
  uint64_t subscribers = 0;
  bench.app()
      .add_option("--subscribers", subscribers, "subscribers (num_subscriber)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  tatp::Params params;
  return bench.run(argc, argv, [&](TransactionConfig& config) {
    if (bench.app().count("--subscribers")) config.tatp_subscribers = subscribers;
    params.subscribers = config.tatp_subscribers;
    Workload w;
    w.summary = std::to_string(params.subscribers) + " subscribers";
    w.tables = tatp::Tables(params.subscribers);
    w.populate = [&params](const RowSink& sink) { tatp::Populate(params.subscribers, sink); };
    w.body = [&params](Transaction& tx, uint64_t* rng, int64_t* delta, Status* error) {
      return tatp::Run(tx, tatp::PickType(rng), params, rng, delta, error);
    };
    w.check = [&params](Database& db, int64_t delta) { return tatp::Check(db, params.subscribers, delta); };
    w.delta_meaning = "call forwarding rows added";
    return w;
  });
}
