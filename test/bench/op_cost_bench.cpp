// op_cost_bench: the per-operation cost of an 8-byte READ on the shm
// transport, next to its floors, all measured in one run:
//   - transport floor: the same provider calls (post one signaled READ, poll
//     its completion) with no initiator and no coroutines;
//   - coroutine switch: one switch from a task to another (two tasks
//     yielding to each other);
//   - initiator READ from tasks at depth 1, 8 and 16 with latency 0;
//   - the same at depth 1 and 16 with a modelled 2000 ns completion latency,
//     where coroutines hide the latency.
// Each case runs --repetitions times; the median is reported.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "smart/transport.h"

namespace {

using namespace smart;

// A hot region: the cost measured is the path, not cache or TLB misses.
constexpr uint64_t kRegionBytes = 4096;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

SmartConfig BaseConfig(uint64_t latency_ns) {
  SmartConfig c = SmartConfig::Parse(R"({
    "transport": "shm",
    "infiniband": {"name": "", "port": 1},
    "qp_param": {"max_cqe_size": 256, "max_wqe_size": 256, "max_sge_size": 1, "max_inline_data": 64},
    "max_nodes": 4, "initiator_cache_size": 16,
    "use_thread_aware_alloc": true,
    "thread_aware_alloc": {"total_uuar": 100, "shared_uuar": 96, "shared_cq": true},
    "use_work_req_throt": false,
    "work_req_throt": {"initial_credit": 4, "max_credit": 12, "credit_step": 2, "execution_epochs": 60,
                       "sample_cycles": 19200000, "inf_credit_weight": 1.05, "auto_tuning": false},
    "use_conflict_avoidance": false, "use_speculative_lookup": false})",
                                     "op_cost_bench");
  c.shm.latency_ns = latency_ns;
  return c;
}

// ns per operation of post + poll straight on the provider.
double TransportFloor(uint64_t ops) {
  SmartConfig config = BaseConfig(0);
  auto device = OpenShmDevice(config);
  auto pool = device->allocate_shared_region(1 << 20);
  std::vector<char> local_buffer(4096);
  auto local = device->register_memory(local_buffer.data(), local_buffer.size());
  auto peer = device->import_regions({pool->remote()}, device->export_regions({pool.get()}));
  auto cq = device->create_cq(256, nullptr, false);
  QueuePairOptions options;
  options.cq = cq.get();
  auto qp = device->create_qp(options);
  qp->connect(QueuePairEndpoint{}, peer);
  ibv_sge sge{reinterpret_cast<uint64_t>(local_buffer.data()), 8, local->lkey()};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.rkey = pool->rkey();
  ibv_wc wc[16];
  const uint64_t base = reinterpret_cast<uint64_t>(pool->addr());
  const uint64_t start = NowNs();
  for (uint64_t i = 0; i < ops; ++i) {
    wr.wr.rdma.remote_addr = base + ((i * 8) & (kRegionBytes - 1));
    ibv_send_wr* bad;
    if (qp->post_send(&wr, &bad) != 0) throw Error("post failed");
    int n;
    while ((n = cq->poll(16, wc)) == 0) {
    }
    if (n < 0) throw Error("polling the completion queue failed: " + std::to_string(n));
    for (int k = 0; k < n; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) {
        throw Error(std::string("a READ completed with ") + ibv_wc_status_str(wc[k].status) + " (status " +
                    std::to_string(wc[k].status) + ")");
      }
    }
  }
  return static_cast<double>(NowNs() - start) / static_cast<double>(ops);
}

// ns per context switch: two tasks yield to each other, so every yield is
// one switch from one task's stack to the other's.
double CoroutineSwitch(uint64_t ops) {
  TaskPool pool;
  uint64_t start = 0;
  for (int task = 0; task < 2; ++task) {
    pool.spawn([&] {
      if (start == 0) start = NowNs();
      for (uint64_t i = 0; i < ops / 2; ++i) this_task::yield();
    });
  }
  pool.run();
  return static_cast<double>(NowNs() - start) / static_cast<double>(ops / 2 * 2);
}

struct InitiatorCase {
  int depth;
  uint64_t latency_ns;
};

// ns per operation of 8-byte READs with Option::kSync from `depth` tasks.
double InitiatorRead(const InitiatorCase& c, uint64_t ops, EmbeddedMemoryBlade& blade) {
  SmartConfig config = BaseConfig(c.latency_ns);
  Initiator initiator(config);
  initiator.connect(0, blade.host(), blade.port(), 1);
  TaskPool pool(TaskPoolOptions{64 * 1024, c.depth});
  const uint64_t per_task = ops / static_cast<uint64_t>(c.depth);
  uint64_t start = 0;
  Status failure;
  for (int task = 0; task < c.depth; ++task) {
    auto* buffer = static_cast<char*>(initiator.alloc_cache(64));
    pool.spawn([&, buffer, task] {
      if (start == 0) start = NowNs();
      uint64_t offset = kChunkSize + static_cast<uint64_t>(task) * 64;
      for (uint64_t i = 0; i < per_task; ++i) {
        Status s = initiator.read(buffer, GlobalAddress(0, offset), 8);
        if (!s.ok()) {
          failure = s;
          return;
        }
        offset = kChunkSize + ((offset + 8 * 7) & (kRegionBytes - 1));
      }
    });
  }
  pool.run();
  const uint64_t end = NowNs();
  if (!failure.ok()) throw Error(failure.ToString());
  return static_cast<double>(end - start) / static_cast<double>(per_task * static_cast<uint64_t>(c.depth));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"op_cost_bench: per-operation cost of 8-byte shm READs and its floors"};
  int repetitions = 5;
  uint64_t ops = 2000000;
  app.add_option("--repetitions", repetitions, "runs per case (the median is reported)")->check(CLI::Range(1, 100));
  app.add_option("--ops", ops, "operations per run at latency 0")->check(CLI::Range(1000, 1000000000));
  int only_depth = 0;
  app.add_option("--profile-depth", only_depth,
                 "run only the initiator case at this depth and latency 0, once (for profilers)");
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  SetVerbose(false);
  try {
    BindCore(0);
    EmbeddedMemoryBlade blade(BaseConfig(0), 16);
    if (only_depth > 0) {
      printf("initiator READ, depth %d: %.1f ns/op\n", only_depth, InitiatorRead({only_depth, 0}, ops, blade));
      return 0;
    }
    std::vector<double> floor_ns, switch_ns;
    std::vector<InitiatorCase> cases = {{1, 0}, {8, 0}, {16, 0}, {1, 2000}, {16, 2000}};
    std::vector<std::vector<double>> case_ns(cases.size());
    for (int r = 0; r < repetitions; ++r) {
      floor_ns.push_back(TransportFloor(ops));
      switch_ns.push_back(CoroutineSwitch(ops));
      for (size_t i = 0; i < cases.size(); ++i) {
        const uint64_t n = cases[i].latency_ns ? ops / 20 : ops;
        case_ns[i].push_back(InitiatorRead(cases[i], n, blade));
      }
    }
    printf("op_cost_bench: 8-byte READ on shm, 1 thread, median of %d runs\n", repetitions);
    printf("%-52s %12s %10s\n", "case", "ns/op", "M ops/s");
    auto row = [](const std::string& name, double ns) { printf("%-52s %12.1f %10.2f\n", name.c_str(), ns, 1e3 / ns); };
    row("transport floor: provider post + poll, no coroutines", Median(floor_ns));
    printf("%-52s %12.1f %10s\n", "coroutine switch: task to task (yield)", Median(switch_ns), "-");
    for (size_t i = 0; i < cases.size(); ++i) {
      row("initiator READ, depth " + std::to_string(cases[i].depth) + ", latency " +
              std::to_string(cases[i].latency_ns) + " ns",
          Median(case_ns[i]));
    }
    // Where the depth-8 cost goes: the provider calls, one switch to the
    // next task (each operation parks its task once), and the rest.
    const double floor = Median(floor_ns), one_switch = Median(switch_ns), depth8 = Median(case_ns[1]);
    printf("depth 8 = transport floor %.1f + one switch %.1f + initiator bookkeeping %.1f ns/op\n", floor,
           one_switch, depth8 - floor - one_switch);
    const double hidden = Median(case_ns[3]) / Median(case_ns[4]);
    printf("latency hiding at 2000 ns: depth 16 / depth 1 throughput = %.1fx\n", hidden);
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "op_cost_bench: %s\n", e.what());
    return 1;
  }
}
