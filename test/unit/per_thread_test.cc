// PerThread<T> and the Initiator's masked compare-and-swap.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/per_thread.h"
#include "smart/target.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart {
namespace {

struct Counter {
  alignas(64) uint64_t n = 0;
};

TEST(PerThread, EachThreadGetsItsOwnValueOnItsOwnLines) {
  PerThread<Counter> counters;
  std::vector<std::thread> threads;
  std::atomic<int> arrived{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i <= t * 1000; ++i) ++counters.get().n;
      // Stay alive until all four hold a thread id (an exited thread's id,
      // and with it its T, goes to the next new thread).
      arrived.fetch_add(1);
      while (arrived.load() < 4) std::this_thread::yield();
    });
  }
  for (auto& t : threads) t.join();
  std::multiset<uint64_t> seen;
  std::set<uintptr_t> lines;
  counters.for_each([&](Counter& c) {
    seen.insert(c.n);
    lines.insert(reinterpret_cast<uintptr_t>(&c) / 64);
  });
  EXPECT_EQ(seen, (std::multiset<uint64_t>{1, 1001, 2001, 3001}));
  EXPECT_EQ(lines.size(), 4u);
}

TEST(PerThread, TheFactoryBuildsOncePerThread) {
  int built = 0;
  PerThread<int> values([&] {
    ++built;
    return std::make_unique<int>(7);
  });
  EXPECT_EQ(values.get(), 7);
  values.get() = 9;
  EXPECT_EQ(values.get(), 9);
  EXPECT_EQ(built, 1);
}

class MaskedCasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 4);
    initiator_ = std::make_unique<Initiator>(config_);
    initiator_->connect(0, blade_->host(), blade_->port(), 4);
    word_ = static_cast<uint64_t*>(blade_->target().local_ptr(GlobalAddress(0, 65536)));
  }
  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
  uint64_t* word_ = nullptr;
};

TEST_F(MaskedCasTest, ComparesAndSwapsOnlyTheMaskedBits) {
  auto* local = static_cast<uint64_t*>(initiator_->alloc_cache(16));
  *word_ = 0xaaaa0000000000ffull;
  // Compared bits (low byte) match; only the top 16 bits are replaced.
  ASSERT_TRUE(initiator_->masked_compare_and_swap(local, GlobalAddress(0, 65536), 0xff, 0xff, 0x5555ull << 48,
                                                  0xffffull << 48)
                  .ok());
  EXPECT_EQ(local[0], 0xaaaa0000000000ffull);
  EXPECT_EQ(*word_, 0x55550000000000ffull);
  // Compared bits differ: nothing changes, the old word comes back.
  ASSERT_TRUE(initiator_->masked_compare_and_swap(local, GlobalAddress(0, 65536), 0x0f, 0xff, 0, ~0ull).ok());
  EXPECT_EQ(local[0], 0x55550000000000ffull);
  EXPECT_EQ(*word_, 0x55550000000000ffull);
}

TEST_F(MaskedCasTest, ConcurrentTasksSettingTheirOwnBitsLoseNone) {
  *word_ = 0;
  RunThreads(2, false, [&](int t) {
    TaskPool pool;
    for (int k = 0; k < 8; ++k) {
      pool.spawn([&, t, k] {
        auto* local = static_cast<uint64_t*>(initiator_->alloc_cache(16));
        const uint64_t bit = uint64_t{1} << (t * 8 + k);
        // Set my bit, provided it is clear; the others' bits are not compared.
        Status s;
        do {
          s = initiator_->masked_compare_and_swap(local, GlobalAddress(0, 65536), 0, bit, bit, bit);
        } while (s.code() == Status::Code::kRetry);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(local[0] & bit, 0u);
      });
    }
    pool.run();
  });
  EXPECT_EQ(*word_, 0xffffull);
}

}  // namespace
}  // namespace smart
