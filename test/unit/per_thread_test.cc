// PerThread<T> and the Initiator's masked compare-and-swap.
#include <gtest/gtest.h>

#include <atomic>
#include <new>
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

TEST(PerThread, TwoInstancesUsedInTurnOnOneThreadEachGiveTheirOwnValue) {
  // The thread-local fast path remembers one instance; switching back and
  // forth must never hand one instance's value to the other.
  PerThread<int> a([] { return std::make_unique<int>(1); });
  PerThread<int> b([] { return std::make_unique<int>(2); });
  int* const in_a = &a.get();
  int* const in_b = &b.get();
  EXPECT_NE(in_a, in_b);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(&a.get(), in_a) << "round " << i;
    ASSERT_EQ(&a.get(), in_a) << "round " << i;  // the fast path, same instance again
    ASSERT_EQ(&b.get(), in_b) << "round " << i;
    ++a.get();
    b.get() += 10;
  }
  EXPECT_EQ(*in_a, 101);
  EXPECT_EQ(*in_b, 1002);
}

TEST(PerThread, AnInstanceBuiltWhereADestroyedOneWasStartsFresh) {
  // Both instances live in the same storage, so they have one address: the
  // second must build its own value rather than reach the first's (freed).
  alignas(PerThread<int>) unsigned char storage[sizeof(PerThread<int>)];
  int built = 0;
  auto make = [&] { return std::make_unique<int>(++built * 100); };
  auto* first = new (storage) PerThread<int>(make);
  EXPECT_EQ(first->get(), 100);
  first->get() = 7;
  EXPECT_EQ(first->get(), 7);
  first->~PerThread();
  auto* second = new (storage) PerThread<int>(make);
  ASSERT_EQ(static_cast<void*>(second), static_cast<void*>(first));
  ASSERT_EQ(built, 1);
  const int fresh = second->get();
  EXPECT_EQ(built, 2) << "the new instance reused the destroyed one's value";
  EXPECT_EQ(fresh, 200);
  second->~PerThread();
  // And one on the heap, after both.
  PerThread<int> third(make);
  EXPECT_EQ(third.get(), 300);
  EXPECT_EQ(built, 3);
}

TEST(PerThread, ThreadsUsingTwoInstancesInTurnGetDistinctValuesAndForEachSeesAll) {
  PerThread<Counter> a;
  PerThread<Counter> b;
  constexpr int kThreads = 4;
  std::vector<Counter*> seen_a(kThreads), seen_b(kThreads);
  std::atomic<int> arrived{0};
  std::atomic<bool> wrong{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      seen_a[t] = &a.get();
      seen_b[t] = &b.get();
      for (int i = 0; i < 1000; ++i) {
        if (&a.get() != seen_a[t] || &b.get() != seen_b[t]) wrong = true;
        ++a.get().n;
        b.get().n += 2;
      }
      arrived.fetch_add(1);
      while (arrived.load() < kThreads) std::this_thread::yield();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(wrong.load());
  std::set<Counter*> distinct(seen_a.begin(), seen_a.end());
  distinct.insert(seen_b.begin(), seen_b.end());
  EXPECT_EQ(distinct.size(), 2u * kThreads);
  std::set<const Counter*> visited;
  uint64_t sum_a = 0, sum_b = 0;
  const PerThread<Counter>& const_a = a;
  const_a.for_each([&](const Counter& c) {
    visited.insert(&c);
    sum_a += c.n;
  });
  b.for_each([&](Counter& c) {
    visited.insert(&c);
    sum_b += c.n;
  });
  EXPECT_EQ(visited, std::set<const Counter*>(distinct.begin(), distinct.end()));
  EXPECT_EQ(sum_a, 1000u * kThreads);
  EXPECT_EQ(sum_b, 2000u * kThreads);
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

struct ThreeCounters {
  uint64_t first = 0;
  uint64_t second = 0;
  uint64_t third = 0;
};

TEST(AddCounters, AddsEveryMemberAndLeavesTheSourceAlone) {
  ThreeCounters total{1, 2, 3};
  const ThreeCounters more{10, 0, uint64_t{1} << 40};
  AddCounters(&total, more);
  EXPECT_EQ(total.first, 11u);
  EXPECT_EQ(total.second, 2u);
  EXPECT_EQ(total.third, (uint64_t{1} << 40) + 3);
  EXPECT_EQ(more.first, 10u);
}

// sum_of adds numbers, and structs of counters member by member, over the
// values of every thread that built one.
TEST(PerThread, SumOfAddsNumbersAndCounterStructsOverEveryThread) {
  struct State {
    uint64_t retries = 0;
    ThreeCounters counters;
  };
  PerThread<State> states;
  std::vector<std::thread> threads;
  std::atomic<int> arrived{0};
  for (int t = 1; t <= 3; ++t) {
    threads.emplace_back([&, t] {
      State& s = states.get();
      s.retries = static_cast<uint64_t>(t);
      s.counters = ThreeCounters{uint64_t(t) * 10, 1, uint64_t(t) << 40};
      arrived.fetch_add(1);
      while (arrived.load() < 3) std::this_thread::yield();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(states.sum_of([](const State& s) { return s.retries; }), 6u);
  const ThreeCounters total = states.sum_of([](const State& s) { return s.counters; });
  EXPECT_EQ(total.first, 60u);
  EXPECT_EQ(total.second, 3u);
  EXPECT_EQ(total.third, uint64_t{6} << 40);
  const PerThread<State> none;
  EXPECT_EQ(none.sum_of([](const State& s) { return s.retries; }), 0u);
}

}  // namespace
}  // namespace smart
