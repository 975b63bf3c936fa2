#include <gtest/gtest.h>
#include <numa.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/resource/net.h"
#include "smart/initiator.h"
#include "smart/target.h"
#include "smart/transport.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart {
namespace {

class InitiatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 4);  // 4 MiB = 256 chunks
    initiator_ = std::make_unique<Initiator>(config_);
    initiator_->connect(0, blade_->host(), blade_->port(), 4);
    buffer_ = static_cast<char*>(initiator_->alloc_cache(4096));
    ASSERT_NE(buffer_, nullptr);
  }

  char* remote_bytes(uint64_t offset) { return static_cast<char*>(blade_->target().local_ptr(GlobalAddress(0, offset))); }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
  char* buffer_ = nullptr;
};

TEST_F(InitiatorTest, WriteAndReadRoundTrip) {
  strcpy(buffer_, "disaggregated");
  ASSERT_TRUE(initiator_->write(buffer_, GlobalAddress(0, 65536), 14).ok());
  EXPECT_STREQ(remote_bytes(65536), "disaggregated");
  memset(buffer_, 0, 64);
  ASSERT_TRUE(initiator_->read(buffer_, GlobalAddress(0, 65536), 14).ok());
  EXPECT_STREQ(buffer_, "disaggregated");
  EXPECT_EQ(initiator_->remote_capacity(0), 4u << 20);
}

TEST_F(InitiatorTest, AtomicsReturnTheOldValue) {
  auto* word = reinterpret_cast<uint64_t*>(remote_bytes(65536));
  *word = 10;
  auto* result = reinterpret_cast<uint64_t*>(buffer_);
  ASSERT_TRUE(initiator_->fetch_and_add(result, GlobalAddress(0, 65536), 5).ok());
  EXPECT_EQ(*result, 10u);
  EXPECT_EQ(*word, 15u);
  ASSERT_TRUE(initiator_->compare_and_swap(result, GlobalAddress(0, 65536), 15, 99).ok());
  EXPECT_EQ(*result, 15u);
  EXPECT_EQ(*word, 99u);
  ASSERT_TRUE(initiator_->compare_and_swap(result, GlobalAddress(0, 65536), 15, 1).ok());
  EXPECT_EQ(*result, 99u);  // lost: the word is unchanged
  EXPECT_EQ(*word, 99u);
}

TEST_F(InitiatorTest, QueuedRequestsGoOutOnSync) {
  for (int i = 0; i < 40; ++i) {  // more than one batch: batches post themselves when full
    buffer_[i * 8] = static_cast<char>('A' + i);
    ASSERT_TRUE(initiator_->write(buffer_ + i * 8, GlobalAddress(0, 65536 + i * 8), 8, Option::kNone).ok());
  }
  ASSERT_TRUE(initiator_->sync().ok());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(remote_bytes(65536 + i * 8)[0], 'A' + i) << i;
}

TEST_F(InitiatorTest, PostThenSyncWaitsForPostedRequests) {
  memset(remote_bytes(70000), 'z', 16);
  ASSERT_TRUE(initiator_->read(buffer_, GlobalAddress(0, 70000), 16, Option::kPost).ok());
  ASSERT_TRUE(initiator_->sync().ok());
  EXPECT_EQ(std::string(buffer_, 16), std::string(16, 'z'));
}

TEST_F(InitiatorTest, OutOfBoundsAddressIsRejectedBeforePosting) {
  const Status s = initiator_->read(buffer_, GlobalAddress(0, (4u << 20) - 4), 8);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("leaves the memory blade's region"), std::string::npos) << s.ToString();
  // The queue pair is still healthy.
  EXPECT_TRUE(initiator_->read(buffer_, GlobalAddress(0, 0), 8).ok());
  // The last 8 bytes of the region are in it; a read longer than the whole
  // region, or of nothing, is not.
  EXPECT_TRUE(initiator_->read(buffer_, GlobalAddress(0, (4u << 20) - 8), 8).ok());
  const Status longer = initiator_->read(buffer_, GlobalAddress(0, 0), (4u << 20) + 64);
  EXPECT_EQ(longer.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(longer.message().find("leaves the memory blade's region"), std::string::npos) << longer.ToString();
  const Status empty = initiator_->read(buffer_, GlobalAddress(0, 64), 0);
  EXPECT_EQ(empty.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(empty.message().find("nothing to transfer"), std::string::npos) << empty.ToString();
}

TEST_F(InitiatorTest, UnknownNodeAndRegionAreRejected) {
  EXPECT_EQ(initiator_->read(buffer_, GlobalAddress(3, 0), 8).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(initiator_->read(buffer_, GlobalAddress(0, 0, 1), 8).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(initiator_->read(buffer_, GlobalAddress(200, 0), 8).code(), Status::Code::kInvalidArgument);
}

TEST_F(InitiatorTest, LocalBufferMustComeFromTheCache) {
  char stack_buffer[8];
  const Status s = initiator_->read(stack_buffer, GlobalAddress(0, 0), 8);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("alloc_cache"), std::string::npos) << s.ToString();
  // Just below the cache, and running past its end, are outside it too.
  EXPECT_EQ(initiator_->read(buffer_ - (16u << 20), GlobalAddress(0, 0), 8).code(), Status::Code::kInvalidArgument);
  char* last = nullptr;
  for (size_t size = 1u << 20; size >= 64; size /= 2) {
    while (char* p = static_cast<char*>(initiator_->alloc_cache(size))) last = p + size - 64;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_TRUE(initiator_->read(last, GlobalAddress(0, 0), 64).ok()) << "the cache's last 64 bytes";
  const Status past = initiator_->read(last, GlobalAddress(0, 0), 128);
  EXPECT_EQ(past.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(past.message().find("alloc_cache"), std::string::npos) << past.ToString();
}

TEST_F(InitiatorTest, UnalignedAtomicIsRejected) {
  const Status s = initiator_->fetch_and_add(reinterpret_cast<uint64_t*>(buffer_), GlobalAddress(0, 65540), 1);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.ToString();
}

TEST_F(InitiatorTest, RootEntriesRoundTrip) {
  ASSERT_TRUE(initiator_->set_root_entry(0, 7, 0xfeedface).ok());
  EXPECT_EQ(blade_->target().get_root_entry(7), 0xfeedfaceu);
  uint64_t value = 0;
  ASSERT_TRUE(initiator_->get_root_entry(0, 7, &value).ok());
  EXPECT_EQ(value, 0xfeedfaceu);
  EXPECT_EQ(initiator_->set_root_entry(0, 256, 1).code(), Status::Code::kInvalidArgument);
}

TEST_F(InitiatorTest, AllocationsAreDistinctAlignedAndInsideThePool) {
  std::set<uint64_t> seen;
  for (size_t size : {8, 24, 64, 64, 100, 1000, 4096, 16384, 20000}) {
    GlobalAddress a;
    ASSERT_TRUE(initiator_->alloc_memory(0, size, &a).ok()) << size;
    EXPECT_EQ(a.node, 0u);
    size_t block = 8;
    while (block < size && block < kChunkSize) block <<= 1;
    EXPECT_EQ(a.offset % block, 0u) << size;
    EXPECT_GE(a.offset, kChunkSize);  // never the super chunk
    EXPECT_LE(a.offset + size, 4u << 20);
    EXPECT_TRUE(seen.insert(uint64_t{a.offset}).second) << size;
  }
}

TEST_F(InitiatorTest, AllocatedBlocksDoNotOverlap) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (int i = 0; i < 300; ++i) {
    const size_t size = 8u << (i % 8);
    GlobalAddress a;
    ASSERT_TRUE(initiator_->alloc_memory(0, size, &a).ok());
    ranges.emplace_back(uint64_t{a.offset}, uint64_t{a.offset} + size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
}

TEST_F(InitiatorTest, FreedMemoryIsReused) {
  GlobalAddress a, b;
  ASSERT_TRUE(initiator_->alloc_memory(0, 64, &a).ok());
  initiator_->free_memory(a, 64);
  ASSERT_TRUE(initiator_->alloc_memory(0, 64, &b).ok());
  EXPECT_EQ(a, b);
}

TEST_F(InitiatorTest, ExhaustedPoolIsOutOfMemoryNotACrash) {
  GlobalAddress a;
  Status s;
  int chunks = 0;
  while ((s = initiator_->alloc_memory(0, kChunkSize, &a)).ok()) ++chunks;
  EXPECT_EQ(chunks, 255);  // 256 chunks, one of them the super chunk
  EXPECT_EQ(s.code(), Status::Code::kOutOfMemory);
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.ToString();
  EXPECT_TRUE(a.is_null());
}

TEST_F(InitiatorTest, TwoInitiatorsShareTheWatermark) {
  Initiator other(config_);
  other.connect(0, blade_->host(), blade_->port(), 1);
  GlobalAddress a, b;
  ASSERT_TRUE(initiator_->alloc_memory(0, kChunkSize, &a).ok());
  ASSERT_TRUE(other.alloc_memory(0, kChunkSize, &b).ok());
  EXPECT_NE(a, b);
  ASSERT_TRUE(initiator_->alloc_memory(0, kChunkSize, &a).ok());  // its cached watermark is stale now
  EXPECT_NE(a, b);
}

TEST_F(InitiatorTest, TasksCountExactlyWithFetchAndAdd) {
  GlobalAddress counter;
  ASSERT_TRUE(initiator_->alloc_memory(0, 8, &counter).ok());
  TaskPool pool;
  for (int t = 0; t < 16; ++t) {
    auto* result = static_cast<uint64_t*>(initiator_->alloc_cache(8));
    pool.spawn([&, result] {
      for (int i = 0; i < 500; ++i) ASSERT_TRUE(initiator_->fetch_and_add(result, counter, 1).ok());
    });
  }
  pool.run();
  auto* value = static_cast<uint64_t*>(initiator_->alloc_cache(8));
  ASSERT_TRUE(initiator_->read(value, counter, 8).ok());
  EXPECT_EQ(*value, 16u * 500u);
}

TEST_F(InitiatorTest, ThreadsBeyondTheQueuePairsAreToldWhy) {
  Initiator narrow(config_);
  narrow.connect(0, blade_->host(), blade_->port(), 1);
  auto* buf = static_cast<char*>(narrow.alloc_cache(64));
  ASSERT_TRUE(narrow.read(buf, GlobalAddress(0, 0), 8).ok());  // this thread takes queue pair 0
  Status other;
  std::thread([&] { other = narrow.read(buf, GlobalAddress(0, 0), 8); }).join();
  EXPECT_EQ(other.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(other.message().find("qp_sharing"), std::string::npos) << other.ToString();
}

// Four threads of eight tasks share one queue pair (experimental.qp_sharing):
// each thread polls the shared completion queue and credits the others'
// completions to them while they credit their own. Every task's requests
// must be acknowledged (a credit lost to a race leaves a task waiting
// forever: ctest's timeout then fails the test) and the counter is exact.
TEST_F(InitiatorTest, ThreadsSharingAQueuePairSeeEveryCompletion) {
  SmartConfig shared = config_;
  shared.experimental.qp_sharing = true;
  Initiator narrow(shared);
  narrow.connect(0, blade_->host(), blade_->port(), 1);
  GlobalAddress counter;
  ASSERT_TRUE(narrow.alloc_memory(0, 8, &counter).ok());
  constexpr int kThreads = 4, kTasks = 8, kAdds = 3000;
  RunThreads(kThreads, false, [&](int) {
    TaskPool pool;
    for (int t = 0; t < kTasks; ++t) {
      auto* result = static_cast<uint64_t*>(narrow.alloc_cache(8));
      pool.spawn([&, result] {
        for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(narrow.fetch_and_add(result, counter, 1).ok());
      });
    }
    pool.run();
  });
  auto* value = static_cast<uint64_t*>(narrow.alloc_cache(8));
  ASSERT_TRUE(narrow.read(value, counter, 8).ok());
  EXPECT_EQ(*value, uint64_t{kThreads} * kTasks * kAdds);
}

TEST_F(InitiatorTest, ThreadsReleaseTheirQueuePairsWhenTheyExit) {
  Initiator narrow(config_);
  narrow.connect(0, blade_->host(), blade_->port(), 1);
  auto* buf = static_cast<char*>(narrow.alloc_cache(64));
  for (int i = 0; i < 3; ++i) {
    Status s;
    std::thread([&] { s = narrow.read(buf, GlobalAddress(0, 0), 8); }).join();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

TEST_F(InitiatorTest, WorkRequestThrottlingKeepsResultsCorrect) {
  SmartConfig throttled = config_;
  throttled.use_work_req_throt = true;
  throttled.work_req_throt.initial_credit = 1;
  throttled.work_req_throt.auto_tuning = false;
  Initiator initiator(throttled);
  initiator.connect(0, blade_->host(), blade_->port(), 1);
  EXPECT_EQ(initiator.credit_bound(), 1);
  GlobalAddress counter;
  ASSERT_TRUE(initiator.alloc_memory(0, 8, &counter).ok());
  TaskPool pool;
  for (int t = 0; t < 8; ++t) {
    auto* result = static_cast<uint64_t*>(initiator.alloc_cache(8 * 4));
    pool.spawn([&, result] {
      for (int i = 0; i < 200; ++i) {
        // Batches of four exceed the bound of one: they go out alone.
        for (int k = 0; k < 4; ++k) ASSERT_TRUE(initiator.fetch_and_add(result + k, counter, 1, Option::kNone).ok());
        ASSERT_TRUE(initiator.sync().ok());
      }
    });
  }
  pool.run();
  auto* value = static_cast<uint64_t*>(initiator.alloc_cache(8));
  ASSERT_TRUE(initiator.read(value, counter, 8).ok());
  EXPECT_EQ(*value, 8u * 200u * 4u);
}

TEST_F(InitiatorTest, WorkRequestCreditGoesToTasksInTheOrderTheyAskedForIt) {
  // A bound of one and 20 us per request: eight tasks take turns. A task
  // whose request just completed must queue behind those already waiting
  // for the credit, not take it again at once (which starved the others).
  SmartConfig throttled = config_;
  throttled.use_work_req_throt = true;
  throttled.work_req_throt.initial_credit = 1;
  throttled.work_req_throt.auto_tuning = false;
  throttled.shm.latency_ns = 20000;
  Initiator initiator(throttled);
  initiator.connect(0, blade_->host(), blade_->port(), 1);
  constexpr int kTasks = 8, kTotal = kTasks * 50;
  int done = 0;
  int per_task[kTasks] = {};
  TaskPool pool;
  for (int t = 0; t < kTasks; ++t) {
    auto* buffer = static_cast<uint64_t*>(initiator.alloc_cache(8));
    pool.spawn([&, t, buffer] {
      while (done < kTotal) {
        ASSERT_TRUE(initiator.read(buffer, GlobalAddress(0, 64 * static_cast<uint64_t>(t)), 8).ok());
        ++per_task[t];
        ++done;
      }
    });
  }
  pool.run();
  for (int t = 0; t < kTasks; ++t) {
    EXPECT_GE(per_task[t], kTotal / kTasks / 2) << "task " << t << " got " << per_task[t] << " of " << done;
  }
}

// Eight tasks of one thread, each reading and waiting 50 times: with
// coalesce_posts their requests share doorbells (rung when no task of the
// thread is runnable); without it each request rings its own. Every read
// gets its own bytes either way.
int DoorbellsForEightTasks(const SmartConfig& config, EmbeddedMemoryBlade& blade, char* remote) {
  Initiator initiator(config);
  initiator.connect(0, blade.host(), blade.port(), 1);
  std::atomic<int> doorbells{0};
  SetFaultPointHook("initiator.doorbell", [&doorbells] { ++doorbells; });
  TaskPool pool;
  for (int t = 0; t < 8; ++t) {
    auto* buffer = static_cast<uint64_t*>(initiator.alloc_cache(8));
    pool.spawn([&, t, buffer] {
      for (int i = 0; i < 50; ++i) {
        const uint64_t offset = 8 * static_cast<uint64_t>(t * 50 + i);
        ASSERT_TRUE(initiator.read(buffer, GlobalAddress(0, 65536 + offset), 8).ok());
        uint64_t expected;
        memcpy(&expected, remote + offset, 8);
        ASSERT_EQ(*buffer, expected);
      }
    });
  }
  pool.run();
  SetFaultPointHook("initiator.doorbell", {});
  return doorbells.load();
}

TEST_F(InitiatorTest, TasksOfAThreadShareDoorbells) {
  char* remote = remote_bytes(65536);
  for (uint64_t i = 0; i < 400; ++i) memcpy(remote + 8 * i, &i, 8);
  SmartConfig coalescing = config_;
  coalescing.coalesce_posts = SmartConfig::CoalescePosts::kOn;
  const int shared = DoorbellsForEightTasks(coalescing, *blade_, remote);
  SmartConfig separate = config_;
  separate.coalesce_posts = SmartConfig::CoalescePosts::kOff;
  const int own = DoorbellsForEightTasks(separate, *blade_, remote);
  EXPECT_EQ(own, 400);
  EXPECT_LE(shared, 400 / 4) << "coalesce_posts rang " << shared << " doorbells for 400 requests";
}

// A task that posts a write without waiting and ends: the write still goes
// out (and on shm, is carried out) by the time the pool's run() returns.
TEST_F(InitiatorTest, AWriteAFinishedTaskLeftWaitingForADoorbellGoesOut) {
  SmartConfig coalescing = config_;
  coalescing.coalesce_posts = SmartConfig::CoalescePosts::kOn;
  std::thread([&] {
    Initiator initiator(coalescing);
    initiator.connect(0, blade_->host(), blade_->port(), 1);
    char* local = static_cast<char*>(initiator.alloc_cache(64));
    strcpy(local, "left behind");
    TaskPool pool;
    pool.spawn([&] { ASSERT_TRUE(initiator.write(local, GlobalAddress(0, 131072), 12, Option::kPost).ok()); });
    pool.run();
    EXPECT_STREQ(remote_bytes(131072), "left behind");
  }).join();
}

TEST_F(InitiatorTest, DeadMemoryBladeGivesAnErrorNotAHang) {
  blade_->target().stop();
  Status s;
  // The failure arrives once the connection monitor notices (within a poll
  // interval); the test's own timeout bounds this loop.
  for (;;) {
    s = initiator_->read(buffer_, GlobalAddress(0, 0), 8);
    if (!s.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.code(), Status::Code::kPeerFailed) << s.ToString();
  EXPECT_NE(s.message().find("memory node 0"), std::string::npos) << s.ToString();
  // Later calls fail at once with the same cause.
  EXPECT_EQ(initiator_->read(buffer_, GlobalAddress(0, 0), 8).code(), Status::Code::kPeerFailed);
}

TEST(MemoryBlade, NumaNodeThatDoesNotExistIsNamed) {
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  backend.nic_numa_node = 4000;  // no machine has that many nodes
  // Without NUMA support the key is ignored with a warning instead.
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support on this system";
  try {
    Target target(testing::TestConfig(), backend);
    FAIL() << "a memory blade started on NUMA node 4000";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("backend.json"), std::string::npos) << what;
    EXPECT_NE(what.find("nic_numa_node"), std::string::npos) << what;
    EXPECT_NE(what.find("4000"), std::string::npos) << what;
  }
}

TEST(MemoryBlade, PoolOnNumaNodeZeroWorks) {
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  backend.nic_numa_node = 0;
  Target target(testing::TestConfig(), backend);
  target.set_root_entry(3, 42);
  EXPECT_EQ(target.get_root_entry(3), 42u);
  EXPECT_EQ(target.super_chunk()->max_chunk, (uint64_t{4} << 20) / kChunkSize);
}

TEST(InitiatorConnect, ClosedPortIsAClearErrorWithinTheTimeout) {
  SmartConfig config = testing::TestConfig();
  config.connect_timeout_ms = 2000;
  Initiator initiator(config);
  int port = 0;
  {
    EmbeddedMemoryBlade blade(config, 1);
    port = blade.port();
  }  // gone: nothing listens there any more
  try {
    initiator.connect(0, "127.0.0.1", port, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to memory blade"), std::string::npos) << e.what();
  }
}

TEST(InitiatorConnect, SilentPeerTimesOut) {
  SmartConfig config = testing::TestConfig();
  config.connect_timeout_ms = 300;
  // A TCP listener that never answers the handshake.
  int port = 0;
  const int fd = TcpListen("127.0.0.1", 0, &port);
  Initiator initiator(config);
  try {
    initiator.connect(0, "127.0.0.1", port, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out waiting for an answer"), std::string::npos) << e.what();
  }
  close(fd);
}

// On a host without an RDMA stack, asking for verbs ends in an error that
// says why and names the way out, not a crash.
TEST(VerbsTransport, WithoutAnRdmaDeviceItIsAClearError) {
  if (CountRdmaDevices() > 0) GTEST_SKIP() << "this host has an RDMA device";
  SmartConfig config = testing::TestConfig();
  config.transport = TransportChoice::kVerbs;
  try {
    const std::unique_ptr<Device> device = Device::Open(config);
    FAIL() << "opened a verbs device on a host without one";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("verbs transport:"), std::string::npos) << what;
    EXPECT_TRUE(what.find("no RDMA device") != std::string::npos ||
                what.find("ibv_get_device_list") != std::string::npos)
        << what;
    EXPECT_NE(what.find("\"shm\""), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace smart
