// hashtable_bench NR_THREAD NR_CORO: YCSB on SMART-HT.
//
// Reads datastructure.json (APP_CONFIG_PATH) and smart_config.json
// (SMART_CONFIG_PATH, SMART_OPTS). With no memory_servers it starts a memory
// blade inside the process on shm. Loads max_key keys (insert_before_execution),
// runs the dataset for `duration` seconds with NR_THREAD threads of NR_CORO
// coroutines, prints the upstream result line and appends it to the CSV.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "smart/ycsb.h"

namespace {

using namespace smart;
using hashtable::HashTable;

struct WorkerResult {
  uint64_t ops = 0;
  uint64_t not_found = 0;
  Histogram latency;
  std::string error;
};

// MiB an embedded memory blade needs for `keys` keys: buckets, blocks with
// room to grow, and slack for retired blocks and splits (pages are only
// backed when touched).
uint64_t EmbeddedCapacityMib(uint64_t keys, int key_length, int value_length) {
  const hashtable::Geometry g = hashtable::GeometryFor(keys);
  const uint64_t buckets = (uint64_t{1} << g.depth) * g.subtable_bytes();
  const uint64_t blocks = keys * hashtable::BlockUnits(key_length, value_length) * hashtable::kBlockUnit;
  return (2 * buckets + 2 * blocks) / (1 << 20) + 1024;
}

int Run(int threads, int coros, DataStructureConfig config, SmartConfig smart_config, bool verbose) {
  if (threads < 1 || threads > kMaxThreads - 2) {
    throw Error("NR_THREAD must be within 1.." + std::to_string(kMaxThreads - 2) + ", got " + std::to_string(threads));
  }
  if (coros < 1 || coros > kMaxTasksPerThread - 1) {
    throw Error("NR_CORO must be within 1.." + std::to_string(kMaxTasksPerThread - 1) + ", got " + std::to_string(coros));
  }
  const ycsb::Workload workload = ycsb::GetWorkload(config.dataset);
  if (workload.scan > 0) throw Error("dataset " + config.dataset + " needs SCAN, which the hash table does not support");
  if (hashtable::BlockUnits(config.key_length, config.value_length) > static_cast<size_t>(hashtable::kMaxBlockUnits)) {
    throw Error(config.source + ": key_length + value_length must fit in a 4032-byte block");
  }

  std::unique_ptr<EmbeddedMemoryBlade> blade;
  std::vector<ServerAddress> servers = config.memory_servers;
  if (servers.empty()) {
    smart_config.transport = TransportChoice::kShm;
    const uint64_t mib = EmbeddedCapacityMib(config.max_key, config.key_length, config.value_length);
    blade = std::make_unique<EmbeddedMemoryBlade>(smart_config, mib);
    servers.push_back(ServerAddress{blade->host(), blade->port()});
    if (verbose) SMART_INFO("hashtable_bench: no memory_servers configured; memory blade inside this process (shm, %" PRIu64 " MiB)", mib);
  }
  Initiator initiator(smart_config);
  for (size_t i = 0; i < servers.size(); ++i) {
    initiator.connect(static_cast<node_t>(i), servers[i].hostname, servers[i].port, threads + 1);
  }
  hashtable::TableOptions options;
  options.expected_keys = config.max_key;
  options.speculative_lookup = smart_config.use_speculative_lookup;
  HashTable table(initiator, smart_config, static_cast<int>(servers.size()), options);
  if (verbose) SMART_INFO("hashtable_bench: %s", smart_config.Summary().c_str());

  const int width = config.key_length;
  const int value_length = config.value_length;
  auto key_id = [&](uint64_t id) { return config.rehash_key ? ycsb::PermuteKey(id, config.max_key) : id; };

  if (config.insert_before_execution) {
    std::atomic<uint64_t> loaded{0};
    std::atomic<bool> failed{false};
    std::string error;
    std::mutex error_mutex;
    const uint64_t start = NowNs();
    std::thread loader([&] {
      RunThreads(threads, true, [&](int t) {
        TaskPool pool(TaskPoolOptions{64 * 1024, coros});
        for (int k = 0; k < coros; ++k) {
          pool.spawn([&, t, k] {
            char key[256], value[4096];
            ycsb::Random random(static_cast<uint64_t>(t) * 7919 + static_cast<uint64_t>(k) + 1);
            const uint64_t step = static_cast<uint64_t>(threads) * static_cast<uint64_t>(coros);
            uint64_t local = 0;
            for (uint64_t id = static_cast<uint64_t>(t) * static_cast<uint64_t>(coros) + static_cast<uint64_t>(k);
                 id < config.max_key && !failed.load(std::memory_order_relaxed); id += step) {
              ycsb::FormatKey(key_id(id), width, key);
              ycsb::FormatValue(random, value_length, value);
              Status s = table.insert(std::string_view(key, width), std::string_view(value, value_length));
              if (!s.ok()) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!failed.exchange(true)) error = s.ToString();
                return;
              }
              if (++local == 256) {
                loaded.fetch_add(local, std::memory_order_relaxed);
                local = 0;
              }
            }
            loaded.fetch_add(local, std::memory_order_relaxed);
          });
        }
        pool.run();
      });
    });
    Progress progress("loading " + std::to_string(config.max_key) + " keys", config.max_key);
    while (loaded.load() < config.max_key && !failed.load() && !TerminationRequested()) {
      progress.update(loaded.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    loader.join();
    progress.update(loaded.load());
    progress.finish();
    if (failed) throw Error("loading keys failed: " + error);
    const double seconds = static_cast<double>(NowNs() - start) / 1e9;
    if (verbose) {
      SMART_INFO("hashtable_bench: loaded %" PRIu64 " keys in %.2f s (%.3f M inserts/s)", config.max_key, seconds,
                 static_cast<double>(config.max_key) / seconds / 1e6);
      if (blade) {
        SMART_INFO("hashtable_bench: memory blade holds %.1f MiB (resident)",
                   static_cast<double>(blade->target().resident_bytes()) / (1 << 20));
      }
    }
  }

  const ycsb::ZipfianParams zipf(config.max_key, config.zipfian_const);
  std::atomic<uint64_t> insert_counter{config.max_key};
  std::vector<WorkerResult> results(static_cast<size_t>(threads) * static_cast<size_t>(coros));
  RunControl control(threads);
  std::atomic<bool> failed{false};
  const double cycles_per_ns = CyclesPerNanosecond();
  const uint64_t retries_before = table.total_retries();
  std::thread runner([&] {
    RunThreads(threads, true, [&](int t) {
      TaskPool pool(TaskPoolOptions{64 * 1024, coros});
      for (int k = 0; k < coros; ++k) {
        pool.spawn([&, t, k] {
          WorkerResult& result = results[static_cast<size_t>(t) * static_cast<size_t>(coros) + static_cast<size_t>(k)];
          ycsb::OperationGenerator generator(workload, zipf, &insert_counter,
                                             (Cycles() << 8) ^ (static_cast<uint64_t>(t) << 16) ^ static_cast<uint64_t>(k));
          ycsb::Random random(static_cast<uint64_t>(t) * 131 + static_cast<uint64_t>(k) + 17);
          char key[256], value[4096];
          std::string out;
          const auto modify = [](std::string* v) {
            if (!v->empty()) (*v)[0] = static_cast<char>(33 + ((*v)[0] - 33 + 1) % 94);
          };
          // The first task of a thread holds the thread at the start gate.
          control.ready_and_wait();
          while (!control.stopped()) {
            const ycsb::Operation op = generator.next();
            ycsb::FormatKey(key_id(op.key), width, key);
            const std::string_view k_view(key, width);
            const uint64_t begin = Cycles();
            Status s;
            switch (op.type) {
              case ycsb::OpType::kRead:
                s = table.search(k_view, &out);
                break;
              case ycsb::OpType::kUpdate:
                ycsb::FormatValue(random, value_length, value);
                s = table.update(k_view, std::string_view(value, value_length));
                break;
              case ycsb::OpType::kInsert:
                ycsb::FormatValue(random, value_length, value);
                s = table.insert(k_view, std::string_view(value, value_length));
                break;
              case ycsb::OpType::kReadModifyWrite:
                s = table.read_modify_write(k_view, modify);
                break;
              case ycsb::OpType::kScan:
                break;
            }
            result.latency.record(static_cast<uint64_t>(static_cast<double>(Cycles() - begin) / cycles_per_ns));
            if (!s.ok()) {
              if (s.code() == Status::Code::kNotFound) {
                ++result.not_found;
              } else {
                if (!failed.exchange(true)) result.error = s.ToString();
                control.stop();
                break;
              }
            }
            ++result.ops;
          }
        });
      }
      pool.run();
    });
  });
  const double elapsed = control.run_for(config.duration, &failed);
  runner.join();

  uint64_t ops = 0, not_found = 0;
  Histogram latency;
  for (WorkerResult& r : results) {
    if (!r.error.empty()) throw Error(config.dataset + " failed: " + r.error);
    ops += r.ops;
    not_found += r.not_found;
    latency.merge(r.latency);
  }
  const double mops = static_cast<double>(ops) / elapsed / 1e6;
  const double p50 = static_cast<double>(latency.percentile(0.50)) / 1000.0;
  const double p99 = static_cast<double>(latency.percentile(0.99)) / 1000.0;
  const double retries = ops ? static_cast<double>(table.total_retries() - retries_before) / static_cast<double>(ops) : 0;
  printf("%s: workload = %s, #thread = %d, #coro_per_thread = %d, key length = %d, value length = %d, max key = %" PRIu64
         ", throughput = %.3f M, P50 latency = %.3f us, P99 latency = %.3f us, retries per op = %.4f\n",
         table.name(), config.dataset.c_str(), threads, coros, config.key_length, config.value_length, config.max_key,
         mops, p50, p99, retries);
  fflush(stdout);
  if (verbose) {
    const hashtable::TableStats st = table.stats();
    SMART_INFO("hashtable_bench: not found %" PRIu64 ", torn reads %" PRIu64 ", CAS failures %" PRIu64
               ", splits %" PRIu64 ", speculative hits %" PRIu64 " misses %" PRIu64 ", blocks retired %" PRIu64
               " reused %" PRIu64,
               not_found, st.torn_reads, st.cas_failures, st.splits, st.speculative_hits, st.speculative_misses,
               st.blocks_retired, st.blocks_reused);
    if (blade) {
      SMART_INFO("hashtable_bench: memory blade holds %.1f MiB (resident)",
                 static_cast<double>(blade->target().resident_bytes()) / (1 << 20));
    }
  }
  char line[512];
  snprintf(line, sizeof(line), "%s, %s, %d, %d, %d, %d, %" PRIu64 ", %.3f, %.3f, %.3f, %.4f", table.name(),
           config.dataset.c_str(), threads, coros, config.key_length, config.value_length, config.max_key, mops, p50,
           p99, retries);
  AppendCsvLine(config.dump_file_path, line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hashtable_bench: YCSB on SMART-HT (a RACE-style hash table on disaggregated memory)"};
  int threads = 0, coros = 0;
  std::string config_path, dataset, dump;
  double duration = -1, zipf = -1;
  uint64_t max_key = 0;
  bool no_load = false, quiet = false;
  app.add_option("NR_THREAD", threads, "client threads")->required();
  app.add_option("NR_CORO", coros, "coroutines per thread")->required();
  app.add_option("--config", config_path, "datastructure.json to use (default: APP_CONFIG_PATH or config/datastructure.json)");
  app.add_option("--dataset", dataset, "ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-f, update-only or read-only");
  app.add_option("--duration", duration, "seconds to measure");
  app.add_option("--max-key", max_key, "keys to load (and key range)");
  app.add_option("--zipf", zipf, "zipfian constant in [0, 1)");
  app.add_option("--dump-file", dump, "CSV file to append to (\"\" for none)");
  app.add_flag("--no-load", no_load, "skip loading (the keys are already in the table)");
  app.add_flag("--quiet", quiet, "print only the result line");
  CLI11_PARSE(app, argc, argv);
  try {
    SmartConfig smart_config = SmartConfig::Load();
    DataStructureConfig config = DataStructureConfig::Load(config_path);
    if (!dataset.empty()) {
      ycsb::GetWorkload(dataset);
      config.dataset = dataset;
    }
    if (duration > 0) config.duration = duration;
    if (max_key > 0) config.max_key = max_key;
    if (zipf >= 0) {
      if (zipf >= 1) throw Error("--zipf must be in [0, 1), got " + std::to_string(zipf));
      config.zipfian_const = zipf;
    }
    if (app.count("--dump-file")) config.dump_file_path = dump;
    if (no_load) config.insert_before_execution = false;
    if (quiet) SetVerbose(false);
    return Run(threads, coros, config, smart_config, !quiet);
  } catch (const std::exception& e) {
    fprintf(stderr, "hashtable_bench: %s\n", e.what());
    return 1;
  }
}
