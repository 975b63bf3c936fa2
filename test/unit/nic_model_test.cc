// The shm transport's NIC model (shm.nic_model): the message-rate cap, the
// work-request cache penalty and the shared doorbells, first on the model
// alone with a clock of one cycle per nanosecond, then through the
// transport.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "smart/status.h"
#include "smart/task.h"
#include "smart/transport.h"
#include "smart/transport/shm/nic_model.h"
#include "smart/transport/shm/shm_transport.h"
#include "test_util.h"

namespace smart {
namespace {

using shm::NicDoorbell;
using shm::NicModel;

NicModel::Params Params(double rate_mops, uint64_t cache, double miss_ns, int doorbells = 2,
                        double handoff_ns = 0) {
  NicModel::Params p;
  p.enabled = true;
  p.rate_mops = rate_mops;
  p.wr_cache_entries = cache;
  p.wr_miss_ns = miss_ns;
  p.shared_doorbells = doorbells;
  p.doorbell_handoff_ns = handoff_ns;
  return p;
}

// The device's lock excludes: increments made under it by threads that
// keep taking it from each other are never lost.
TEST(NicModelTest, TheDeviceLockLetsOneThreadInAtATime) {
  shm::NicLock lock;
  uint64_t counter = 0;
  constexpr int kThreads = 3;
  constexpr int kRounds = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        lock.lock();
        const uint64_t seen = counter;
        if (i % 64 == 0) std::this_thread::yield();  // a holder off its core
        counter = seen + 1;
        lock.unlock();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
}

TEST(NicModelTest, TheRateCapQueuesRequestsBehindEachOther) {
  NicModel nic(Params(1.0, 1000, 0), 1.0);  // 1000 cycles a request
  EXPECT_EQ(nic.admit(0, 1), 1000u);
  EXPECT_EQ(nic.admit(0, 1), 2000u);      // posted at the same time: waits for the first
  EXPECT_EQ(nic.admit(0, 10), 12000u);    // a list of ten takes ten times as long
  EXPECT_EQ(nic.admit(50000, 1), 51000u); // an idle device banks no time
}

TEST(NicModelTest, RequestsBeyondTheCacheCostTheirMissShare) {
  NicModel nic(Params(1.0, 4, 1000), 1.0);
  EXPECT_DOUBLE_EQ(nic.request_cycles(1), 1000.0);
  EXPECT_DOUBLE_EQ(nic.request_cycles(4), 1000.0);
  EXPECT_DOUBLE_EQ(nic.request_cycles(8), 1500.0);   // half of them miss
  EXPECT_DOUBLE_EQ(nic.request_cycles(16), 1750.0);  // three quarters miss
  EXPECT_EQ(nic.admit(0, 4), 4000u);
  EXPECT_EQ(nic.admit(0, 4), 4000u + 4 * 1500u);  // eight outstanding now
  EXPECT_EQ(nic.outstanding(0), 8u);
  EXPECT_EQ(nic.outstanding(4000), 4u);   // the first four are done
  EXPECT_EQ(nic.outstanding(10000), 0u);  // all done, polled or not
  EXPECT_EQ(nic.admit(20000, 1), 21000u);  // back within the cache
}

TEST(NicModelTest, ARequestStaysOutstandingForItsRoundTrip) {
  NicModel nic(Params(1.0, 1, 1000), 1.0, 500);  // 1000 cycles on the device, then 500 to answer
  EXPECT_EQ(nic.admit(0, 1), 1000u);
  EXPECT_EQ(nic.outstanding(1200), 1u);
  EXPECT_EQ(nic.admit(1200, 1), 1200u + 1500u);  // two in flight, the cache holds one: half a miss more
  EXPECT_EQ(nic.outstanding(1500), 1u);
  EXPECT_EQ(nic.outstanding(3200), 0u);
}

TEST(NicModelTest, ThroughputFallsOnceTheCacheOverflows) {
  // The shape of the paper's Fig. 4 at the ConnectX-6 fit: flat up to the
  // cache, then falling with the requests in flight.
  NicModel::Params cx6;
  NicModel nic(cx6, 1.0);
  const auto mops = [&](uint64_t outstanding) { return 1000.0 / nic.request_cycles(outstanding); };
  EXPECT_NEAR(mops(768), 111.1, 0.1);   // 96 threads x depth 8
  EXPECT_NEAR(mops(1152), 111.1, 0.1);  // 48 x 24
  EXPECT_LT(mops(1536), 0.8 * mops(768));
  EXPECT_LT(mops(3072), 0.55 * mops(768));
  EXPECT_GT(mops(3072), 0.4 * mops(768));
}

TEST(NicModelTest, ASharedDoorbellCostsAHandoffOnlyWhenAnotherThreadRangItLast) {
  NicDoorbell doorbell;
  EXPECT_FALSE(doorbell.ring(1, 0));
  EXPECT_FALSE(doorbell.ring(1, 0));
  EXPECT_TRUE(doorbell.ring(2, 0));
  EXPECT_TRUE(doorbell.ring(1, 0));
  EXPECT_EQ(doorbell.handoffs(), 2u);
}

TEST(NicModelTest, QueuePairsWithAThreadDomainRingTheirOwnDoorbell) {
  NicModel nic(Params(1.0, 4, 0, 2), 1.0);
  EXPECT_EQ(nic.doorbell_for_new_qp(true), nullptr);
  NicDoorbell* first = nic.doorbell_for_new_qp(false);
  NicDoorbell* second = nic.doorbell_for_new_qp(false);
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first, second);
  EXPECT_EQ(nic.doorbell_for_new_qp(false), first);  // round robin over two
}

TEST(NicModelTest, ParametersOutOfRangeAreRefusedByName) {
  try {
    NicModel nic(Params(0, 4, 0), 1.0);
    FAIL() << "a zero rate was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rate_mops"), std::string::npos) << e.what();
  }
  try {
    testing::TestConfig(R"("shm": {"nic_model": {"enabled": true, "wr_cache_entries": 0}},)");
    FAIL() << "a cache of no entries was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shm.nic_model.wr_cache_entries"), std::string::npos) << e.what();
  }
  const SmartConfig c = testing::TestConfig(R"("shm": {"nic_model": {"enabled": true, "rate_mops": 4.5}},)");
  EXPECT_TRUE(c.shm.nic_model.enabled);
  EXPECT_DOUBLE_EQ(c.shm.nic_model.rate_mops, 4.5);
  EXPECT_EQ(c.shm.nic_model.wr_cache_entries, 1152u);  // the ConnectX-6 fit stays the default
}

// The model through the shm transport: a device, a pool and queue pairs.
class NicModelTransportTest : public ::testing::Test {
 protected:
  void Open(const std::string& model) {
    config_ = testing::TestConfig(R"("shm": {"nic_model": )" + model + "},");
    device_ = OpenShmDevice(config_);
    pool_ = device_->allocate_shared_region(1 << 20);
    memset(pool_->addr(), 0, 1 << 20);
    peer_ = device_->import_regions({pool_->remote()}, device_->export_regions({pool_.get()}));
  }
  shm::NicModel* nic() { return static_cast<shm::ShmDevice*>(device_.get())->nic(); }

  // One thread's queue: a completion queue, a queue pair and a buffer.
  struct Queue {
    std::unique_ptr<ThreadDomain> domain;
    std::unique_ptr<CompletionQueue> cq;
    std::unique_ptr<QueuePair> qp;
    std::vector<uint64_t> buffer;
    std::unique_ptr<MemoryRegion> mr;
  };
  std::unique_ptr<Queue> MakeQueue(bool own_doorbell) {
    auto q = std::make_unique<Queue>();
    if (own_doorbell) q->domain = device_->create_thread_domain();
    q->cq = device_->create_cq(256, q->domain.get(), false);
    QueuePairOptions options;
    options.cq = q->cq.get();
    options.domain = q->domain.get();
    options.max_send_wr = 128;
    q->qp = device_->create_qp(options);
    q->qp->connect(QueuePairEndpoint{}, peer_);
    q->buffer.assign(64, 0);
    q->mr = device_->register_memory(q->buffer.data(), q->buffer.size() * 8);
    return q;
  }
  // Reads `count` words, `batch` per post, and waits for each batch.
  void ReadWords(Queue& q, int count, int batch) {
    for (int done = 0; done < count; done += batch) {
      std::vector<ibv_sge> sges(batch);
      std::vector<ibv_send_wr> wrs(batch);
      for (int i = 0; i < batch; ++i) {
        const uint64_t word = static_cast<uint64_t>((done + i) % 64);
        sges[i] = ibv_sge{reinterpret_cast<uint64_t>(&q.buffer[word]), 8, q.mr->lkey()};
        wrs[i] = ibv_send_wr{};
        wrs[i].wr_id = static_cast<uint64_t>(done + i);
        wrs[i].sg_list = &sges[i];
        wrs[i].num_sge = 1;
        wrs[i].opcode = IBV_WR_RDMA_READ;
        wrs[i].send_flags = IBV_SEND_SIGNALED;
        wrs[i].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(pool_->addr()) + word * 8;
        wrs[i].wr.rdma.rkey = pool_->rkey();
        wrs[i].next = i + 1 < batch ? &wrs[i + 1] : nullptr;
      }
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(q.qp->post_send(wrs.data(), &bad), 0);
      int got = 0;
      ibv_wc wc[32];
      while (got < batch) {
        const int n = q.cq->poll(32, wc);
        ASSERT_GE(n, 0);
        for (int i = 0; i < n; ++i) ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS);
        got += n;
      }
    }
  }

  SmartConfig config_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<MemoryRegion> pool_;
  std::shared_ptr<PeerMemory> peer_;
};

TEST_F(NicModelTransportTest, ACappedDeviceIsNeverFasterThanItsCap) {
  Open(R"({"enabled": true, "rate_mops": 0.05})");  // 20 us a request
  ASSERT_NE(nic(), nullptr);
  EXPECT_NE(device_->description().find("NIC model"), std::string::npos) << device_->description();
  auto q = MakeQueue(true);
  for (int i = 0; i < 64; ++i) static_cast<uint64_t*>(pool_->addr())[i] = 1000 + static_cast<uint64_t>(i);
  const auto start = std::chrono::steady_clock::now();
  ReadWords(*q, 100, 10);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::microseconds(100 * 20));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(q->buffer[i], 1000u + static_cast<uint64_t>(i));
  EXPECT_EQ(nic()->outstanding(Cycles()), 0u);  // every request polled was done
}

TEST_F(NicModelTransportTest, RequestsLeaveTheDeviceWhenDoneEvenIfNeverPolled) {
  Open(R"({"enabled": true, "rate_mops": 0.001})");  // 1 ms a request: none is ready soon
  auto q = MakeQueue(true);
  ibv_sge sge{reinterpret_cast<uint64_t>(q->buffer.data()), 8, q->mr->lkey()};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(pool_->addr());
  wr.wr.rdma.rkey = pool_->rkey();
  ibv_send_wr* bad = nullptr;
  const uint64_t posted = Cycles();
  ASSERT_EQ(q->qp->post_send(&wr, &bad), 0);
  ASSERT_EQ(q->qp->post_send(&wr, &bad), 0);
  EXPECT_EQ(nic()->outstanding(posted), 2u);
  q->qp.reset();
  q->cq.reset();
  // Two requests of 1 ms each are done within 3 ms of their post.
  const uint64_t later = posted + static_cast<uint64_t>(3e6 * CyclesPerNanosecond());
  EXPECT_EQ(nic()->outstanding(later), 0u);
}

TEST_F(NicModelTransportTest, ThreadsShareDoorbellsOnlyWithoutAThreadDomain) {
  for (const bool own : {false, true}) {
    SCOPED_TRACE(own ? "own doorbells" : "shared doorbell");
    Open(R"({"enabled": true, "rate_mops": 1000, "shared_doorbells": 1, "doorbell_handoff_ns": 0})");
    auto a = MakeQueue(own);
    auto b = MakeQueue(own);
    // Turns, so that the two threads' posts interleave on any machine.
    std::atomic<int> turn{0};
    const auto run = [&](Queue& q, int me) {
      for (int round = 0; round < 20; ++round) {
        while (turn.load() % 2 != me) std::this_thread::yield();
        ReadWords(q, 1, 1);
        turn.fetch_add(1);
      }
    };
    std::thread ta([&] { run(*a, 0); });
    std::thread tb([&] { run(*b, 1); });
    ta.join();
    tb.join();
    if (own) {
      EXPECT_EQ(nic()->handoffs(), 0u);
    } else {
      EXPECT_EQ(nic()->handoffs(), 39u);  // every post but the first follows the other thread's
    }
    a.reset();
    b.reset();
    peer_.reset();
    pool_.reset();
    device_.reset();
  }
}

TEST_F(NicModelTransportTest, OffByDefault) {
  device_ = OpenShmDevice(testing::TestConfig());
  EXPECT_EQ(nic(), nullptr);
  EXPECT_EQ(device_->description().find("NIC model"), std::string::npos);
}

}  // namespace
}  // namespace smart
