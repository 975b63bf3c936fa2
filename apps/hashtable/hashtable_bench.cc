// hashtable_bench NR_THREAD NR_CORO: YCSB on SMART-HT.
//
// Reads datastructure.json (APP_CONFIG_PATH) and smart_config.json
// (SMART_CONFIG_PATH, SMART_OPTS). With no memory_servers it starts a memory
// blade inside the process on shm. Runs the YCSB driver (ycsb_driver.h):
// loads max_key keys (insert_before_execution), runs the dataset for
// `duration` seconds with NR_THREAD threads of NR_CORO coroutines, prints
// the upstream result line with the counts of what succeeded, missed and
// failed, and appends it to the CSV. Exit 2: a bad argument or config
// value; 1: the run failed (or some operation did).
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/start_barrier.h"
#include "smart/task.h"
#include "smart/ycsb.h"
#include "smart/ycsb_driver.h"
#include "kv_adapter.h"

namespace {

using namespace smart;
using hashtable::HashTable;

// MiB an embedded memory blade needs for `keys` keys: buckets, blocks with
// room to grow, and slack for retired blocks and splits (pages are only
// backed when touched).
uint64_t EmbeddedCapacityMib(uint64_t keys, int key_length, int value_length) {
  const hashtable::Geometry g = hashtable::GeometryFor(keys);
  const uint64_t buckets = (uint64_t{1} << g.depth) * g.subtable_bytes();
  const uint64_t blocks = keys * hashtable::BlockUnits(key_length, value_length) * hashtable::kBlockUnit;
  return (2 * buckets + 2 * blocks) / (1 << 20) + 1024;
}

int Run(const YcsbOptions& o, const DataStructureConfig& config, SmartConfig smart_config, bool verbose,
        const StartGroup& group, double sync_timeout) {
  if (hashtable::BlockUnits(o.key_length, o.value_length) > static_cast<size_t>(hashtable::kMaxBlockUnits)) {
    throw Error("key_length + value_length must fit in a 4032-byte block");
  }
  std::unique_ptr<EmbeddedMemoryBlade> blade;
  std::vector<ServerAddress> servers = config.memory_servers;
  if (servers.empty()) {
    smart_config.transport = TransportChoice::kShm;
    const uint64_t mib = EmbeddedCapacityMib(o.max_key, o.key_length, o.value_length);
    blade = std::make_unique<EmbeddedMemoryBlade>(smart_config, mib);
    servers.push_back(ServerAddress{blade->host(), blade->port()});
    if (verbose) SMART_INFO("hashtable_bench: no memory_servers configured; memory blade inside this process (shm, %" PRIu64 " MiB)", mib);
  }
  Initiator initiator(smart_config);
  for (size_t i = 0; i < servers.size(); ++i) {
    initiator.connect(static_cast<node_t>(i), servers[i].hostname, servers[i].port, o.threads + 1, servers[i].pool_id);
  }
  hashtable::TableOptions options;
  options.expected_keys = o.max_key;
  options.speculative_lookup = smart_config.use_speculative_lookup;
  HashTable table(initiator, smart_config, static_cast<int>(servers.size()), options);
  hashtable::HashTableStore store(table);
  if (verbose) SMART_INFO("hashtable_bench: %s", smart_config.Summary().c_str());

  if (o.load) {
    YcsbOptions load_options = o;
    // An embedded memory blade has no other client.
    load_options.sole_loader = o.sole_loader || blade != nullptr;
    const double seconds = YcsbLoad(store, load_options);
    if (verbose) {
      SMART_INFO("hashtable_bench: loaded %" PRIu64 " keys in %.2f s (%s M inserts/s; %" PRIu64
                 " settled in shared round trips)",
                 o.max_key, seconds, FormatSignificant(static_cast<double>(o.max_key) / seconds / 1e6).c_str(),
                 table.stats().loads_batched);
      if (blade) {
        SMART_INFO("hashtable_bench: memory blade holds %.1f MiB (resident)",
                   static_cast<double>(blade->target().resident_bytes()) / (1 << 20));
      }
    }
  }
  JoinStartGroup(initiator, group, sync_timeout, "hashtable_bench", verbose);
  // The table's counters from here on describe the run alone.
  const hashtable::TableStats before = table.stats();
  const YcsbResult r = YcsbRun(store, o);
  const double p50 = static_cast<double>(r.latency.percentile(0.50)) / 1000.0;
  const double p99 = static_cast<double>(r.latency.percentile(0.99)) / 1000.0;
  const uint64_t attempted = r.succeeded + r.not_found + r.failed;
  const double retries = attempted ? static_cast<double>(r.retries) / static_cast<double>(attempted) : 0;
  printf("%s: workload = %s, #thread = %d, #coro_per_thread = %d, key length = %d, value length = %d, max key = %" PRIu64
         ", throughput = %s M, P50 latency = %.3f us, P99 latency = %.3f us, retries per op = %.4f"
         ", succeeded = %" PRIu64 ", not found = %" PRIu64 ", failed = %" PRIu64 "\n",
         store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length, o.value_length, o.max_key,
         FormatSignificant(r.mops()).c_str(), p50, p99, retries, r.succeeded, r.not_found, r.failed);
  fflush(stdout);
  if (verbose) {
    const hashtable::TableStats st = table.stats();
    SMART_INFO("hashtable_bench: during the run: torn reads %" PRIu64 ", CAS failures %" PRIu64
               " (writes superseded %" PRIu64 "), splits %" PRIu64
               ", speculative hits %" PRIu64 " misses %" PRIu64 " (%" PRIu64 " looked below their slot)"
               ", blocks retired %" PRIu64 " reused %" PRIu64,
               st.torn_reads - before.torn_reads, st.cas_failures - before.cas_failures,
               st.writes_superseded - before.writes_superseded, st.splits - before.splits,
               st.speculative_hits - before.speculative_hits, st.speculative_misses - before.speculative_misses,
               st.speculative_looks_below - before.speculative_looks_below,
               st.blocks_retired - before.blocks_retired, st.blocks_reused - before.blocks_reused);
    if (blade) {
      SMART_INFO("hashtable_bench: memory blade holds %.1f MiB (resident)",
                 static_cast<double>(blade->target().resident_bytes()) / (1 << 20));
    }
  }
  char line[512];
  snprintf(line, sizeof(line), "%s, %s, %d, %d, %d, %d, %" PRIu64 ", %s, %.3f, %.3f, %.4f, %" PRIu64 ", %" PRIu64
           ", %" PRIu64, store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length, o.value_length,
           o.max_key, FormatSignificant(r.mops()).c_str(), p50, p99, retries, r.succeeded, r.not_found, r.failed);
  AppendCsvLine(config.dump_file_path, line,
                "name, workload, threads, coroutines, key_length, value_length, max_key, mops, p50_us, p99_us, "
                "retries_per_op, succeeded, not_found, failed");
  // After a full load, a workload without inserts must find every key.
  if (o.load && ycsb::GetWorkload(o.dataset).insert == 0 && r.not_found * 1000 > attempted) {
    fprintf(stderr, "hashtable_bench: %" PRIu64 " of %" PRIu64 " operations did not find their key after all %" PRIu64
            " keys were loaded: the table lost keys\n", r.not_found, attempted, o.max_key);
    return 1;
  }
  if (r.failed > 0) {
    fprintf(stderr, "hashtable_bench: %" PRIu64 " operation(s) failed%s; the first: %s\n", r.failed,
            r.wrong_values ? (" (" + std::to_string(r.wrong_values) + " read a wrong value)").c_str() : "",
            r.first_failure.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  smart::EnableStackOverflowReports();
  CLI::App app{"hashtable_bench: YCSB on SMART-HT (a RACE-style hash table on disaggregated memory)"};
  int threads = 0, coros = 0;
  std::string config_path, dataset, dump;
  double duration = 0, zipf = 0;
  uint64_t max_key = 0;
  int key_length = 0, value_length = 0;
  bool no_load = false, quiet = false, verify = false, sole_loader = false;
  int load_batch = 0;
  std::string sync;
  double sync_timeout = 600;
  uint64_t idle_us = 0;
  app.add_option("NR_THREAD", threads, "client threads")->required();
  app.add_option("NR_CORO", coros, "coroutines per thread")->required();
  app.add_option("--config", config_path, "datastructure.json to use (default: APP_CONFIG_PATH or config/datastructure.json)");
  app.add_option("--dataset", dataset, "ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-f, update-only or read-only (ycsb-e needs scan)");
  app.add_option("--duration", duration, "seconds to measure (above 0)");
  app.add_option("--max-key", max_key, "keys to load (and key range), at least 1");
  app.add_option("--key-length", key_length, "key length in bytes (decimal digits; enough for max_key)");
  app.add_option("--value-length", value_length, "value length in bytes (1..3072)");
  app.add_option("--zipf", zipf, "zipfian constant in [0, 1)");
  app.add_option("--dump-file", dump, "CSV file to append to (\"\" for none)");
  app.add_flag("--no-load", no_load, "skip loading (the keys are already in the table)");
  app.add_flag("--sole-loader", sole_loader,
               "no other client loads keys at the same time: each insert of the load skips the search for a copy "
               "left by a racing insert of the same key (a round trip); on with the embedded memory blade");
  app.add_option("--load-batch", load_batch,
                 "keys a sole loader's coroutine loads together, sharing round trips (1.." +
                     std::to_string(kMaxLoadBatch) + "; 1: one by one; default: the table's batch, " +
                     std::to_string(HashTable::kLoadBatchKeys) + ")")
      ->check(CLI::Range(1, kMaxLoadBatch));
  app.add_option("--idle-us", idle_us,
                 "microseconds each coroutine idles after each operation, to lower the load (default: IDLE_USEC, else 0)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{10000000}));
  app.add_option("--sync", sync,
                 "GROUP:N: start the run together with the other N-1 compute blades of GROUP, after this one's load "
                 "(one group name per run; give the others --no-load)");
  app.add_option("--sync-timeout", sync_timeout, "seconds to wait for the start group (default 600)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_flag("--verify", verify, "values carry their key; every value read is checked, and a wrong one is a failure");
  app.add_flag("--quiet", quiet, "print only the result line");
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  YcsbOptions o;
  DataStructureConfig config;
  SmartConfig smart_config;
  StartGroup group;
  try {
    smart_config = SmartConfig::Load();
    smart::ExportProviderEnvironment(smart_config);
    config = DataStructureConfig::Load(config_path);
    o.dataset = app.count("--dataset") ? dataset : config.dataset;
    o.max_key = app.count("--max-key") ? max_key : config.max_key;
    o.key_length = app.count("--key-length") ? key_length : config.key_length;
    o.value_length = app.count("--value-length") ? value_length : config.value_length;
    o.zipf = app.count("--zipf") ? zipf : config.zipfian_const;
    o.duration = app.count("--duration") ? duration : config.duration;
    o.rehash_key = config.rehash_key;
    o.idle_ns = (app.count("--idle-us") ? idle_us : config.idle_us) * 1000;
    o.load = config.insert_before_execution && !no_load;
    o.verify = verify;
    o.sole_loader = sole_loader;
    o.load_batch = load_batch;
    o.threads = threads;
    o.coros = coros;
    o.progress = !quiet;
    if (app.count("--dump-file")) config.dump_file_path = dump;
    if (!sync.empty()) group = ParseStartGroup(sync);
    // Checked against a store of the hash table's kind: no scan.
    struct NoScan : KvStore {
      std::string name() const override { return "the hash table"; }
      Status search(std::string_view, std::string*) override { return Status::OK(); }
      Status insert(std::string_view, std::string_view) override { return Status::OK(); }
      Status update(std::string_view, std::string_view) override { return Status::OK(); }
      Status read_modify_write(std::string_view, const std::function<void(std::string*)>&) override { return Status::OK(); }
      Status remove(std::string_view) override { return Status::OK(); }
    } no_scan;
    CheckYcsbOptions(o, no_scan);
  } catch (const std::exception& e) {
    fprintf(stderr, "hashtable_bench: %s\n", e.what());
    return 2;
  }
  try {
    if (quiet) SetVerbose(false);
    return Run(o, config, smart_config, !quiet, group, sync_timeout);
  } catch (const std::exception& e) {
    fprintf(stderr, "hashtable_bench: %s\n", e.what());
    return 1;
  }
}
