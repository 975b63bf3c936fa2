// test_rdma: the one-sided micro benchmark, compatible with upstream SMART's.
//
//   test_rdma                      serve as a memory blade (test_rdma.json: port, memory_size)
//   test_rdma NR_THREAD DEPTH      client: NR_THREAD threads, DEPTH requests in flight each
//   test_rdma_dyn NR_THREAD DEPTH [INTERVAL_MS]
//                                  the same client under a fluctuating load
//                                  (upstream's test_rdma_dyn, the paper's
//                                  Table 1): every INTERVAL_MS (default 1000)
//                                  the active thread count is drawn again
//                                  (also test_rdma --fluctuate MS)
//
// With no server in test_rdma.json (or --local) the client starts a memory
// blade inside the process on the shm transport.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/bench/bench_config.h"
#include "smart/bench/blades.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/status.h"
#include "smart/target.h"
#include "smart/task.h"

namespace {

using namespace smart;

constexpr int kLatencySampleMask = 7;  // time one operation in eight

int ServeMemoryBlade(const SmartConfig& smart_config, const TestRdmaConfig& config, const std::string& bind) {
  InstallTerminationHandlers();
  BackendConfig backend;
  backend.source = config.source;
  backend.capacity = config.memory_size;
  backend.tcp_port = config.port;
  if (!bind.empty()) backend.bind = bind;  // the key, if any: smart_config.json's auth.key_file
  Target target(smart_config, backend);
  target.start();
  printf("test_rdma memory blade: %" PRIu64 " MiB on %s, listening on port %d at %s, %s\n", config.memory_size,
         target.transport_description().c_str(), target.port(), target.listen_address().c_str(),
         target.authenticates() ? "clients must prove the key" : "no key");
  fflush(stdout);
  const int sig = WaitForTerminationSignal();
  SMART_INFO("test_rdma memory blade: %s, shutting down", strsignal(sig));
  target.stop();
  return 0;
}

// The fluctuating load of test_rdma_dyn: every interval, x is drawn from
// U[lo, hi] and only threads with index < x issue requests. Upstream draws
// x in [36, 95] for 96 threads from mt19937(0); the range scales with the
// thread count, and the sequence is the same in every thread.
class Fluctuation {
 public:
  Fluctuation(int threads, double interval_ms) : interval_ns_(static_cast<uint64_t>(interval_ms * 1e6)) {
    const int lo = std::max(1, static_cast<int>(std::lround(threads * 36.0 / 96.0)));
    const int hi = std::max(lo, static_cast<int>(std::lround(threads * 95.0 / 96.0)));
    std::mt19937 rng(0);
    std::uniform_int_distribution<int> pick(lo, hi);
    for (int& x : active_) x = pick(rng);
  }
  bool enabled() const { return interval_ns_ > 0; }
  // Whether thread `index` issues requests `elapsed_ns` into the run.
  bool active(int index, uint64_t elapsed_ns) const {
    return index < active_[(elapsed_ns / interval_ns_) % active_.size()];
  }

 private:
  uint64_t interval_ns_;
  std::array<int, 4096> active_{};
};

struct ThreadResult {
  uint64_t ops = 0;
  Histogram latency;
  std::string error;
};

// Throws smart::Error for a client run the arguments and config rule out
// (a usage or config error, exit 2).
void CheckClient(const TestRdmaConfig& config, int threads, int depth) {
  if (threads < 1 || threads > kMaxThreads - 2) {
    throw Error("NR_THREAD must be within 1.." + std::to_string(kMaxThreads - 2) + ", got " + std::to_string(threads));
  }
  if (depth < 1 || depth > kMaxTasksPerThread - 1) {
    throw Error("DEPTH must be within 1.." + std::to_string(kMaxTasksPerThread - 1) + ", got " + std::to_string(depth));
  }
  const bool atomic = config.type == "cas" || config.type == "faa";
  if (atomic && config.block_size != 8) {
    throw Error(config.source + ": block_size must be 8 for type " + config.type + ", got " +
                std::to_string(config.block_size));
  }
  const uint64_t segment = (config.memory_size << 20) / static_cast<uint64_t>(threads) / 4096 * 4096;
  if (segment < config.block_size + kChunkSize) {
    throw Error("memory_size of " + std::to_string(config.memory_size) + " MiB is too small for " +
                std::to_string(threads) + " threads of " + std::to_string(config.block_size) + "-byte blocks");
  }
}

int RunClient(SmartConfig smart_config, const TestRdmaConfig& config, int threads, int depth, bool local,
              double interval_ms) {
  const bool atomic = config.type == "cas" || config.type == "faa";
  const uint64_t memory_bytes = config.memory_size << 20;
  const uint64_t segment = memory_bytes / static_cast<uint64_t>(threads) / 4096 * 4096;

  // The first configured blade (servers without a port take the port key's),
  // or one inside the process.
  std::vector<ServerAddress> configured;
  if (!local && !config.servers.empty()) {
    configured.push_back(config.servers[0]);
    if (configured[0].port == 0) configured[0].port = config.port;
  }
  const BenchBlades blades(configured, &smart_config, 1, config.memory_size, "test_rdma", true);
  const std::string host = blades.servers()[0].hostname;
  const int port = blades.servers()[0].port;

  int qp_count = threads;
  if (config.qp_num < 0) qp_count = (threads + (-config.qp_num) - 1) / (-config.qp_num);
  if (config.qp_num > 0) qp_count = config.qp_num;
  if (qp_count < threads) smart_config.experimental.qp_sharing = true;

  Initiator initiator(smart_config);
  const uint64_t connect_start = NowNs();
  blades.connect(initiator, qp_count);
  const double connect_ms = static_cast<double>(NowNs() - connect_start) / 1e6;
  const uint64_t remote_bytes = initiator.remote_capacity(0);
  if (remote_bytes < memory_bytes) {
    throw Error("the memory blade at " + host + ":" + std::to_string(port) + " has " +
                std::to_string(remote_bytes >> 20) + " MiB, less than memory_size (" +
                std::to_string(config.memory_size) + " MiB)");
  }

  std::vector<ThreadResult> results(threads);
  RunControl control(threads);
  std::atomic<bool> failed{false};
  const uint64_t block = config.block_size;
  const std::string type = config.type;
  const double cycles_per_ns = CyclesPerNanosecond();
  const Fluctuation fluctuation(threads, interval_ms);
  std::atomic<uint64_t> start_ns{0};

  std::thread runner([&] {
    RunThreads(threads, true, [&](int index) {
      ThreadResult& result = results[index];
      // Chunk 0 (the super chunk) stays untouched: segments start after it.
      const uint64_t base = static_cast<uint64_t>(index) * segment + kChunkSize;
      const uint64_t slots = (segment - kChunkSize) / block;
      TaskPool pool(TaskPoolOptions{64 * 1024, depth});
      int parked = 0;  // this thread's tasks idle under a fluctuating load
      if (initiator.transport() == TransportKind::kShm) {
        // On shm the first access to each page of the pool is a page fault,
        // which a NIC never takes: touch every page of the segment once
        // before measuring.
        const uint64_t pages = (segment - kChunkSize) / 4096;
        for (int task = 0; task < depth; ++task) {
          char* probe = static_cast<char*>(initiator.alloc_cache(64));
          if (probe == nullptr) throw Error("initiator cache exhausted; raise initiator_cache_size");
          pool.spawn([&, probe, task] {
            for (uint64_t page = static_cast<uint64_t>(task); page < pages; page += static_cast<uint64_t>(depth)) {
              Status s = initiator.read(probe, GlobalAddress(0, base + page * 4096), 8);
              if (!s.ok()) throw Error("warm-up read failed: " + s.ToString());
            }
          });
        }
        pool.run();
      }
      for (int task = 0; task < depth; ++task) {
        char* buffer = static_cast<char*>(initiator.alloc_cache(std::max<uint64_t>(block, 64)));
        if (buffer == nullptr) throw Error("initiator cache exhausted; raise initiator_cache_size");
        memset(buffer, 'a' + task % 26, block);
        pool.spawn([&, buffer, task] {
          std::mt19937_64 rng(static_cast<uint64_t>(index) * 1000003 + static_cast<uint64_t>(task));
          std::uniform_int_distribution<uint64_t> pick(0, slots - 1);
          uint64_t local_ops = 0;
          control.ready_and_wait();
          uint64_t expected = 0;
          start_ns.compare_exchange_strong(expected, NowNs());
          bool is_parked = false;
          while (!control.stopped()) {
            if (fluctuation.enabled() && !fluctuation.active(index, NowNs() - start_ns.load())) {
              // Inactive: park, and let the thread's other tasks finish
              // the requests they have in flight. Once all are parked the
              // thread sleeps (rather than upstream's pause loop), leaving
              // the cores to the active threads.
              if (!is_parked) {
                is_parked = true;
                ++parked;
              }
              if (parked == depth) {
                std::this_thread::sleep_for(std::chrono::microseconds(100));
              } else {
                this_task::yield();
              }
              continue;
            }
            if (is_parked) {
              is_parked = false;
              --parked;
            }
            const GlobalAddress addr(0, base + pick(rng) * block);
            const bool timed = (local_ops & kLatencySampleMask) == 0;
            const uint64_t start = timed ? Cycles() : 0;
            Status s;
            if (type == "read") {
              s = initiator.read(buffer, addr, block);
            } else if (type == "write") {
              s = initiator.write(buffer, addr, block);
            } else if (type == "cas") {
              s = initiator.compare_and_swap(reinterpret_cast<uint64_t*>(buffer), addr, 0, 0);
            } else {
              s = initiator.fetch_and_add(reinterpret_cast<uint64_t*>(buffer), addr, 1);
            }
            if (!s.ok()) {
              if (!failed.exchange(true)) result.error = s.ToString();
              control.stop();
              break;
            }
            if (timed) result.latency.record(static_cast<uint64_t>(static_cast<double>(Cycles() - start) / cycles_per_ns));
            ++local_ops;
          }
          result.ops += local_ops;
        });
      }
      pool.run();
    });
  });
  const double elapsed = control.run_for(config.duration, &failed);
  runner.join();

  uint64_t ops = 0;
  Histogram latency;
  for (ThreadResult& r : results) {
    ops += r.ops;
    latency.merge(r.latency);
    if (!r.error.empty()) {
      fprintf(stderr, "test_rdma: %s failed: %s\n", type.c_str(), r.error.c_str());
      return 1;
    }
  }
  const double iops = static_cast<double>(ops) / elapsed / 1e6;
  // Upstream's line says MB/s for what it computes in MiB/s (2^20 bytes);
  // BW= here is MB/s (10^6 bytes), and MiB/s follows it.
  const double bandwidth = static_cast<double>(ops) * static_cast<double>(block) / elapsed / 1e6;
  const double bandwidth_mib = static_cast<double>(ops) * static_cast<double>(block) / elapsed / (1 << 20);
  const double p50 = static_cast<double>(latency.percentile(0.50)) / 1000.0;
  const double p99 = static_cast<double>(latency.percentile(0.99)) / 1000.0;
  const std::string prefix = config.dump_prefix.empty() ? "rdma-" + type : config.dump_prefix;
  const std::string interval = fluctuation.enabled() ? ", #interval=" + std::to_string(std::lround(interval_ms)) + " ms" : "";
  printf("%s: #threads=%d, #depth=%d, #block_size=%" PRIu64
         "%s, BW=%.3f MB/s (%.3f MiB/s), IOPS=%.3f M/s, conn establish time=%.3f ms, P50 latency=%.3f us, P99 latency=%.3f us\n",
         prefix.c_str(), threads, depth, block, interval.c_str(), bandwidth, bandwidth_mib, iops, connect_ms, p50, p99);
  fflush(stdout);
  char line[512];
  snprintf(line, sizeof(line), "%s, %d, %d, %" PRIu64 ", %.3f, %.3f, %.3f, %.3f, %.3f", prefix.c_str(), threads,
           depth, block, bandwidth, iops, connect_ms, p50, p99);
  AppendCsvLine(config.dump_file_path, line, "prefix, threads, depth, block_size, bw_mb_s, iops_m, conn_ms, p50_us, p99_us");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  smart::EnableStackOverflowReports();
#ifdef SMART_TEST_RDMA_DYN
  constexpr bool kDynamic = true;
  CLI::App app{"test_rdma_dyn: test_rdma's READs under a fluctuating number of active threads (no arguments: serve "
               "as a memory blade)"};
#else
  constexpr bool kDynamic = false;
  CLI::App app{"test_rdma: one-sided RDMA micro benchmark (no arguments: serve as a memory blade)"};
#endif
  int threads = 0, depth = 0, interval_arg = 0;
  std::string config_path;
  bool local = false;
  int port = -1;
  double duration = -1;
  std::string type;
  uint64_t block_size = 0;
  std::string bind;
  double interval_ms = 0;
  app.add_option("NR_THREAD", threads, "client threads (with DEPTH; neither: serve as a memory blade)");
  app.add_option("DEPTH", depth, "requests in flight per thread");
  if (kDynamic) {
    app.add_option("INTERVAL_MS", interval_arg,
                   "milliseconds between redraws of the active thread count (default 1000)")
        ->check(CLI::Range(1, 3600000));
  }
  app.add_option("--fluctuate", interval_ms,
                 "every MS milliseconds draw again how many threads are active (test_rdma_dyn's load; 0: all, always)")
      ->check(CLI::Range(0.0, 3600000.0));
  app.add_option("--config", config_path,
                 "test_rdma.json to use (default: " + ConfigFileSearch("test_rdma.json", "TEST_RDMA_CONF") + ")");
  app.add_flag("--local", local, "run against a memory blade inside this process (shm)");
  app.add_option("--port", port, "TCP port to serve on or connect to (0: any free port when serving)");
  app.add_option("--bind", bind,
                 "when serving: address to listen on (default 127.0.0.1; beyond loopback needs auth.key_file in "
                 "smart_config.json or \"auth\": \"none\")");
  app.add_option("--duration", duration, "seconds to measure (default: the config's duration, else 15)");
  app.add_option("--type", type, "read, write, cas or faa")->check(CLI::IsMember({"read", "write", "cas", "faa"}));
  app.add_option("--block-size", block_size, "bytes per operation");
  std::string dump;
  app.add_option("--dump-file", dump, "CSV file to append to (\"\" for none; default: the config's dump_file_path)");
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  const char* program = kDynamic ? "test_rdma_dyn" : "test_rdma";
  const bool serve = app.count("NR_THREAD") == 0;
  SmartConfig smart_config;
  TestRdmaConfig config;
  try {
    if (!serve && app.count("DEPTH") == 0) throw Error("give both NR_THREAD and DEPTH (or neither, to serve)");
    smart_config = SmartConfig::Load();
    smart::ExportProviderEnvironment(smart_config);
    config = TestRdmaConfig::Load(config_path);
    if (port >= 0) config.port = port;
    if (duration > 0) config.duration = duration;
    if (!type.empty()) config.type = type;
    if (block_size > 0) config.block_size = block_size;
    if (app.count("--dump-file")) config.dump_file_path = dump;
    if (!serve) CheckClient(config, threads, depth);
    if (kDynamic && interval_ms == 0) interval_ms = interval_arg > 0 ? interval_arg : 1000;
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  try {
    if (serve) return ServeMemoryBlade(smart_config, config, bind);
    return RunClient(smart_config, config, threads, depth, local, interval_ms);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}
