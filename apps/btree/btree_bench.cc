// btree_bench NR_THREAD NR_CORO: YCSB on SMART-BT.
//
// Reads datastructure.json (APP_CONFIG_PATH) and smart_config.json
// (SMART_CONFIG_PATH, SMART_OPTS). With no memory_servers it starts a memory
// blade inside the process on shm. Runs the YCSB driver (ycsb_driver.h):
// loads max_key keys (insert_before_execution), runs the dataset (ycsb-a..f,
// update-only, read-only; ycsb-e scans 1..100 keys) for `duration` seconds
// with NR_THREAD threads of NR_CORO coroutines, prints the upstream result
// line (name BPlusTree) with round trips per operation and the counts of
// what succeeded, missed and failed, and appends it to the CSV. Exit 2: a
// bad argument or config value; 1: the run failed (or some operation did).
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>

#include "btree.h"
#include "kv_adapter.h"
#include "page.h"
#include "smart/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/start_barrier.h"
#include "smart/ycsb.h"
#include "smart/ycsb_driver.h"
#include "smart/task.h"

namespace {

using namespace smart;
using btree::BTree;

// MiB an embedded memory blade needs for `keys` keys: leaves at least
// about a third full, value blocks twice over (retired ones wait out their
// grace period), and slack for lock tables and arenas (pages are only
// backed when touched).
uint64_t EmbeddedCapacityMib(uint64_t keys, int value_length) {
  const uint64_t pages = keys / 15 + 1;
  uint64_t blocks = 0;
  if (static_cast<size_t>(value_length) > btree::kInlineValueBytes) {
    blocks = 2 * keys * btree::BlockUnitsFor(static_cast<size_t>(value_length)) * btree::kBlockUnit;
  }
  return (pages * btree::kPageSize + blocks) / (1 << 20) + 512;
}

struct Flags {
  std::string config_path, dataset, dump;
  double duration = 0, zipf = 0;
  uint64_t max_key = 0;
  int key_length = 0, value_length = 0;
  bool no_load = false, quiet = false, verify = false, no_hocl = false, no_combine = false;
  size_t index_cache_pages = 4096;
  std::string sync;
  StartGroup group;
  double sync_timeout = 600;
  uint64_t idle_us = 0;
};

int Run(const YcsbOptions& o, const Flags& f, const DataStructureConfig& config, SmartConfig smart_config,
        bool verbose) {
  std::unique_ptr<EmbeddedMemoryBlade> blade;
  std::vector<ServerAddress> servers = config.memory_servers;
  if (servers.empty()) {
    smart_config.transport = TransportChoice::kShm;
    const uint64_t mib = EmbeddedCapacityMib(o.max_key, o.value_length);
    blade = std::make_unique<EmbeddedMemoryBlade>(smart_config, mib);
    servers.push_back(ServerAddress{blade->host(), blade->port()});
    if (verbose) SMART_INFO("btree_bench: no memory_servers configured; memory blade inside this process (shm, %" PRIu64 " MiB)", mib);
  }
  Initiator initiator(smart_config);
  for (size_t i = 0; i < servers.size(); ++i) {
    initiator.connect(static_cast<node_t>(i), servers[i].hostname, servers[i].port, o.threads + 1, servers[i].pool_id);
  }
  btree::TreeOptions options;
  options.speculative_lookup = smart_config.use_speculative_lookup;
  options.hocl = !f.no_hocl;
  options.combine_commands = !f.no_combine;
  options.index_cache_pages = f.index_cache_pages;
  BTree tree(initiator, smart_config, static_cast<int>(servers.size()), options);
  btree::BTreeStore store(tree);
  if (verbose) {
    SMART_INFO("btree_bench: %s, HOCL %s, command combination %s, index cache %zu pages", smart_config.Summary().c_str(),
               options.hocl ? "on" : "off", options.combine_commands ? "on" : "off", options.index_cache_pages);
  }

  if (o.load) {
    const double seconds = YcsbLoad(store, o);
    if (verbose) {
      int height = 0;
      Status s = tree.height(&height);
      SMART_INFO("btree_bench: loaded %" PRIu64 " keys in %.2f s (%s M inserts/s), tree height %d", o.max_key, seconds,
                 FormatSignificant(static_cast<double>(o.max_key) / seconds / 1e6).c_str(), s.ok() ? height : -1);
      if (blade) {
        SMART_INFO("btree_bench: memory blade holds %.1f MiB (resident)",
                   static_cast<double>(blade->target().resident_bytes()) / (1 << 20));
      }
    }
  }
  JoinStartGroup(initiator, f.group, f.sync_timeout, "btree_bench", verbose);
  const btree::TreeStats before = tree.stats();
  const YcsbResult r = YcsbRun(store, o);
  const btree::TreeStats st = tree.stats();
  const double p50 = static_cast<double>(r.latency.percentile(0.50)) / 1000.0;
  const double p99 = static_cast<double>(r.latency.percentile(0.99)) / 1000.0;
  const uint64_t attempted = r.succeeded + r.not_found + r.failed;
  const double retries = attempted ? static_cast<double>(r.retries) / static_cast<double>(attempted) : 0;
  const uint64_t ops = st.operations - before.operations;
  const double round_trips = ops ? static_cast<double>(st.round_trips - before.round_trips) / static_cast<double>(ops) : 0;
  printf("%s: workload = %s, #thread = %d, #coro_per_thread = %d, key length = %d, value length = %d, max key = %" PRIu64
         ", throughput = %s M, P50 latency = %.3f us, P99 latency = %.3f us, retries per op = %.4f"
         ", round trips per op = %.3f, succeeded = %" PRIu64 ", not found = %" PRIu64 ", failed = %" PRIu64 "\n",
         store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length, o.value_length, o.max_key,
         FormatSignificant(r.mops()).c_str(), p50, p99, retries, round_trips, r.succeeded, r.not_found, r.failed);
  if (ycsb::GetWorkload(o.dataset).scan > 0 && r.seconds > 0) {
    // The throughput above counts a scan as one operation, as it does an insert.
    printf("%s: scans = %" PRIu64 ", scans per second = %s M, keys scanned = %" PRIu64 ", keys scanned per second = %s M\n",
           store.name().c_str(), r.scans, FormatSignificant(static_cast<double>(r.scans) / r.seconds / 1e6).c_str(),
           r.scanned_keys, FormatSignificant(static_cast<double>(r.scanned_keys) / r.seconds / 1e6).c_str());
  }
  fflush(stdout);
  if (verbose) {
    SMART_INFO("btree_bench: during the run: torn reads %" PRIu64 ", lock retries %" PRIu64 ", hand-overs %" PRIu64
               ", leaf splits %" PRIu64 ", index-cache hits %" PRIu64 " invalidations %" PRIu64
               ", speculative hits %" PRIu64 " misses %" PRIu64 ", moved right %" PRIu64,
               st.torn_reads - before.torn_reads, st.lock_retries - before.lock_retries, st.handovers - before.handovers,
               st.leaf_splits - before.leaf_splits, st.cache_hits - before.cache_hits,
               st.cache_invalidations - before.cache_invalidations, st.speculative_hits - before.speculative_hits,
               st.speculative_misses - before.speculative_misses, st.moved_right - before.moved_right);
  }
  char line[512];
  snprintf(line, sizeof(line), "%s, %s, %d, %d, %d, %d, %" PRIu64 ", %s, %.3f, %.3f, %.4f, %" PRIu64 ", %" PRIu64
           ", %" PRIu64 ", %.3f", store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length,
           o.value_length, o.max_key, FormatSignificant(r.mops()).c_str(), p50, p99, retries, r.succeeded, r.not_found,
           r.failed, round_trips);
  AppendCsvLine(config.dump_file_path, line,
                "name, workload, threads, coroutines, key_length, value_length, max_key, mops, p50_us, p99_us, "
                "retries_per_op, succeeded, not_found, failed, round_trips_per_op");
  if (o.load && ycsb::GetWorkload(o.dataset).insert == 0 && r.not_found * 1000 > attempted) {
    fprintf(stderr, "btree_bench: %" PRIu64 " of %" PRIu64 " operations did not find their key after all %" PRIu64
            " keys were loaded: the tree lost keys\n", r.not_found, attempted, o.max_key);
    return 1;
  }
  if (r.failed > 0) {
    fprintf(stderr, "btree_bench: %" PRIu64 " operation(s) failed%s; the first: %s\n", r.failed,
            r.wrong_values ? (" (" + std::to_string(r.wrong_values) + " read a wrong value)").c_str() : "",
            r.first_failure.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  smart::EnableStackOverflowReports();
  CLI::App app{"btree_bench: YCSB on SMART-BT (a Sherman-style B+tree on disaggregated memory)"};
  int threads = 0, coros = 0;
  Flags f;
  app.add_option("NR_THREAD", threads, "client threads")->required();
  app.add_option("NR_CORO", coros, "coroutines per thread")->required();
  app.add_option("--config", f.config_path, "datastructure.json to use (default: APP_CONFIG_PATH or config/datastructure.json)");
  app.add_option("--dataset", f.dataset, "ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f, update-only or read-only");
  app.add_option("--duration", f.duration, "seconds to measure (above 0)");
  app.add_option("--max-key", f.max_key, "keys to load (and key range), at least 1");
  app.add_option("--key-length", f.key_length, "key length in bytes (decimal digits: enough for max_key, at most 20)");
  app.add_option("--value-length", f.value_length, "value length in bytes (1..3072; above 8 in a block)");
  app.add_option("--zipf", f.zipf, "zipfian constant in [0, 1)");
  app.add_option("--dump-file", f.dump, "CSV file to append to (\"\" for none)");
  app.add_option("--index-cache-pages", f.index_cache_pages, "level-1 pages each thread caches (0: no index cache)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 24));
  app.add_flag("--no-hocl", f.no_hocl, "no local lock in front of the remote page locks");
  app.add_flag("--no-combine", f.no_combine,
               "no command combination: a write-back's release CAS waits for the write (one more round trip)");
  app.add_flag("--no-load", f.no_load, "skip loading (the keys are already in the tree)");
  app.add_option("--idle-us", f.idle_us,
                 "microseconds each coroutine idles after each operation, to lower the load (default: IDLE_USEC, else 0)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{10000000}));
  app.add_option("--sync", f.sync,
                 "GROUP:N: start the run together with the other N-1 compute blades of GROUP, after this one's load "
                 "(one group name per run; give the others --no-load)");
  app.add_option("--sync-timeout", f.sync_timeout, "seconds to wait for the start group (default 600)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_flag("--verify", f.verify, "values carry their key; every value read is checked, and a wrong one is a failure");
  app.add_flag("--quiet", f.quiet, "print only the result line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  YcsbOptions o;
  DataStructureConfig config;
  SmartConfig smart_config;
  try {
    smart_config = SmartConfig::Load();
    smart::ExportProviderEnvironment(smart_config);
    config = DataStructureConfig::Load(f.config_path);
    o.dataset = app.count("--dataset") ? f.dataset : config.dataset;
    o.max_key = app.count("--max-key") ? f.max_key : config.max_key;
    o.key_length = app.count("--key-length") ? f.key_length : config.key_length;
    o.value_length = app.count("--value-length") ? f.value_length : config.value_length;
    o.zipf = app.count("--zipf") ? f.zipf : config.zipfian_const;
    o.duration = app.count("--duration") ? f.duration : config.duration;
    o.rehash_key = config.rehash_key;
    o.idle_ns = (app.count("--idle-us") ? f.idle_us : config.idle_us) * 1000;
    o.load = config.insert_before_execution && !f.no_load;
    o.verify = f.verify;
    o.threads = threads;
    o.coros = coros;
    o.progress = !f.quiet;
    if (app.count("--dump-file")) config.dump_file_path = f.dump;
    if (!f.sync.empty()) f.group = ParseStartGroup(f.sync);
    if (o.key_length > 20) {
      throw Error("key_length must be at most 20 for the B+tree (its keys are 64-bit numbers), got " +
                  std::to_string(o.key_length));
    }
    struct Shape : KvStore {
      std::string name() const override { return "the B+tree"; }
      Status search(std::string_view, std::string*) override { return Status::OK(); }
      Status insert(std::string_view, std::string_view) override { return Status::OK(); }
      Status update(std::string_view, std::string_view) override { return Status::OK(); }
      Status read_modify_write(std::string_view, const std::function<void(std::string*)>&) override { return Status::OK(); }
      Status remove(std::string_view) override { return Status::OK(); }
      bool supports_scan() const override { return true; }
    } shape;
    CheckYcsbOptions(o, shape);
  } catch (const std::exception& e) {
    fprintf(stderr, "btree_bench: %s\n", e.what());
    return 2;
  }
  try {
    if (f.quiet) SetVerbose(false);
    return Run(o, f, config, smart_config, !f.quiet);
  } catch (const std::exception& e) {
    fprintf(stderr, "btree_bench: %s\n", e.what());
    return 1;
  }
}
