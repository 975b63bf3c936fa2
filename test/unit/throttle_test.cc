#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "smart/store_thread.h"
#include "smart/task.h"
#include "smart/throttle.h"
#include "test_util.h"

namespace smart {
namespace {

WorkReqThrotConfig TunerConfig() {
  WorkReqThrotConfig c;
  c.initial_credit = 4;
  c.max_credit = 12;
  c.credit_step = 2;
  c.execution_epochs = 3;
  c.inf_credit_weight = 1.05;
  return c;
}

TEST(CreditTuner, TrainsOverTheBoundsThenUnbounded) {
  CreditTuner tuner(TunerConfig(), 256);
  std::vector<int> tried = {tuner.bound()};
  for (int i = 0; i < 5; ++i) tried.push_back(tuner.on_epoch(100));
  EXPECT_EQ(tried, (std::vector<int>{4, 6, 8, 10, 12, 256}));
  EXPECT_TRUE(tuner.training());
}

TEST(CreditTuner, KeepsTheBestFiniteBoundWhenItWinsAgainAgainstUnbounded) {
  CreditTuner tuner(TunerConfig(), 256);
  // Throughput per bound: 4->100, 6->300, 8->200, 10->150, 12->120, inf->200.
  for (double rate : {100.0, 300.0, 200.0, 150.0, 120.0}) tuner.on_epoch(rate);
  // 6 beat unbounded by more than the weight: it is checked, alternating
  // with unbounded, three pairs.
  std::vector<int> tried = {tuner.on_epoch(200)};
  for (int pair = 0; pair < 3; ++pair) {
    EXPECT_TRUE(tuner.training());
    tried.push_back(tuner.on_epoch(300));  // bound 6
    tried.push_back(tuner.on_epoch(200));  // unbounded
  }
  EXPECT_EQ(tried, (std::vector<int>{6, 256, 6, 256, 6, 256, 6}));
  EXPECT_EQ(tuner.bound(), 6);
  EXPECT_FALSE(tuner.training());
}

TEST(CreditTuner, AFiniteBoundThatWonByChanceLosesItsCheck) {
  CreditTuner tuner(TunerConfig(), 256);
  // One lucky epoch at bound 6 (300 against 200 unbounded)...
  for (double rate : {100.0, 300.0, 200.0, 150.0, 120.0}) tuner.on_epoch(rate);
  tuner.on_epoch(200);
  // ...then, alternating, 6 is no better than unbounded in two pairs of three.
  for (double finite : {200.0, 300.0, 195.0}) {
    tuner.on_epoch(finite);
    tuner.on_epoch(200);
  }
  EXPECT_EQ(tuner.bound(), 256);
  EXPECT_FALSE(tuner.training());
}

TEST(CreditTuner, UnboundedWinsUnlessBeatenByMoreThanTheWeight) {
  CreditTuner tuner(TunerConfig(), 256);
  for (double rate : {100.0, 104.0, 100.0, 100.0, 100.0}) tuner.on_epoch(rate);
  // Best finite (104) is within 5% of unbounded (100): unbounded stays.
  EXPECT_EQ(tuner.on_epoch(100), 256);
  EXPECT_FALSE(tuner.training());
}

TEST(CreditTuner, RetrainsAfterTheExecutionEpochs) {
  CreditTuner tuner(TunerConfig(), 256);
  for (double rate : {100.0, 300.0, 200.0, 150.0, 120.0, 200.0}) tuner.on_epoch(rate);
  for (int pair = 0; pair < 3; ++pair) {
    tuner.on_epoch(300);
    tuner.on_epoch(200);
  }
  EXPECT_EQ(tuner.bound(), 6);
  tuner.on_epoch(1);
  tuner.on_epoch(1);
  EXPECT_EQ(tuner.on_epoch(1), 4);  // back to initial_credit: training again
  EXPECT_TRUE(tuner.training());
}

// A tuner that keeps finding no gain trains ever less often (it steps
// aside), and trains at the base rate again once a bound wins.
TEST(CreditTuner, EachTrainingInARowThatFindsNoGainDoublesTheTimeToTheNext) {
  CreditTuner tuner(TunerConfig(), 256);  // execution_epochs 3
  auto train_without_gain = [&] {
    EXPECT_TRUE(tuner.training());
    for (int i = 0; i < 6; ++i) tuner.on_epoch(100);  // 4, 6, 8, 10, 12, unbounded
    EXPECT_FALSE(tuner.training());
  };
  auto epochs_until_training = [&] {
    int n = 0;
    while (!tuner.training()) {
      tuner.on_epoch(100);
      ++n;
    }
    return n;
  };
  std::vector<int64_t> periods;
  for (int round = 0; round < 6; ++round) {
    train_without_gain();
    periods.push_back(tuner.execution_period());
    EXPECT_EQ(epochs_until_training(), periods.back());
  }
  EXPECT_EQ(periods, (std::vector<int64_t>{6, 12, 24, 48, 48, 48}));
  // A bound that wins (and wins its check) brings the base period back.
  for (double rate : {100.0, 300.0, 100.0, 100.0, 100.0, 100.0}) tuner.on_epoch(rate);
  for (int pair = 0; pair < 3; ++pair) {
    tuner.on_epoch(300);
    tuner.on_epoch(100);
  }
  EXPECT_EQ(tuner.bound(), 6);
  EXPECT_EQ(tuner.execution_period(), 3);
}

TEST(CreditTuner, NeverExceedsTheUnboundedLimit) {
  CreditTuner tuner(TunerConfig(), 8);  // a queue depth of 8
  std::vector<int> tried = {tuner.bound()};
  for (int i = 0; i < 3; ++i) tried.push_back(tuner.on_epoch(100));
  EXPECT_EQ(tried, (std::vector<int>{4, 6, 8, 8}));
}

SmartConfig BackoffConfig(bool enabled) {
  SmartConfig c = testing::TestConfig();
  c.use_conflict_avoidance = enabled;
  c.conflict_avoidance.max_tasks = 8;
  // These tests drive admission and backoff themselves (gain_check_test.cc
  // tests the check that may set both aside).
  c.conflict_avoidance.gain_check = false;
  return c;
}

TEST(Backoff, HighRetryRateHalvesAdmissionDownToOneThenRaisesTheCap) {
  Backoff backoff(BackoffConfig(true));
  EXPECT_EQ(backoff.admission_limit(), 8);
  const uint64_t cap0 = backoff.backoff_limit_ns();
  backoff.end_epoch(90, 10);  // rate 0.9
  EXPECT_EQ(backoff.admission_limit(), 4);
  backoff.end_epoch(90, 10);
  backoff.end_epoch(90, 10);
  EXPECT_EQ(backoff.admission_limit(), 1);
  backoff.end_epoch(90, 10);
  EXPECT_EQ(backoff.admission_limit(), 1);
  EXPECT_GT(backoff.backoff_limit_ns(), cap0);  // the cap moves instead
}

TEST(Backoff, LowRetryRateDoublesAdmissionBackToTheMaximum) {
  Backoff backoff(BackoffConfig(true));
  for (int i = 0; i < 3; ++i) backoff.end_epoch(90, 10);
  EXPECT_EQ(backoff.admission_limit(), 1);
  backoff.end_epoch(1, 99);  // rate 0.01
  EXPECT_EQ(backoff.admission_limit(), 2);
  backoff.end_epoch(1, 99);
  backoff.end_epoch(1, 99);
  EXPECT_EQ(backoff.admission_limit(), 8);
  backoff.end_epoch(1, 99);
  EXPECT_EQ(backoff.admission_limit(), 8);
}

TEST(Backoff, RatesBetweenTheWaterMarksChangeNothing) {
  Backoff backoff(BackoffConfig(true));
  backoff.end_epoch(90, 10);
  const int limit = backoff.admission_limit();
  backoff.end_epoch(30, 70);  // 0.3 lies between 0.1 and 0.5
  EXPECT_EQ(backoff.admission_limit(), limit);
}

TEST(Backoff, DisabledChangesNothingButCounts) {
  Backoff backoff(BackoffConfig(false));
  backoff.end_epoch(90, 10);
  EXPECT_EQ(backoff.admission_limit(), 8);
  backoff.begin_task();
  backoff.retry_task();
  backoff.retry_task();
  backoff.end_task();
  EXPECT_EQ(backoff.total_retries(), 2u);
  EXPECT_EQ(backoff.total_tasks(), 1u);
  EXPECT_EQ(backoff.retry_histogram()[2], 1u);
}

TEST(Backoff, RetryWaitsAtLeastTheInitialBackoffAndThenLonger) {
  SmartConfig config = BackoffConfig(true);
  config.conflict_avoidance.initial_backoff_ns = 2000000;  // 2 ms, far above noise
  config.conflict_avoidance.adaptive_backoff_limit = false;
  config.conflict_avoidance.fixed_backoff_limit_ns = 64000000;
  Backoff backoff(config);
  backoff.begin_task();
  auto t0 = std::chrono::steady_clock::now();
  backoff.retry_task();
  auto t1 = std::chrono::steady_clock::now();
  backoff.retry_task();
  auto t2 = std::chrono::steady_clock::now();
  backoff.end_task();
  EXPECT_GE(t1 - t0, std::chrono::milliseconds(2));
  EXPECT_GE(t2 - t1, std::chrono::milliseconds(4));  // doubled
}

TEST(Backoff, AdmissionLimitBoundsConcurrentTasks) {
  Backoff backoff(BackoffConfig(true));
  for (int i = 0; i < 3; ++i) backoff.end_epoch(90, 10);  // admit one task at a time
  ASSERT_EQ(backoff.admission_limit(), 1);
  TaskPool pool;
  int inside = 0;
  int most = 0;
  int finished = 0;
  for (int t = 0; t < 6; ++t) {
    pool.spawn([&] {
      BackoffGuard guard(backoff);
      ++inside;
      most = std::max(most, inside);
      for (int i = 0; i < 5; ++i) this_task::yield();
      --inside;
      ++finished;
    });
  }
  pool.run();
  EXPECT_EQ(finished, 6);
  EXPECT_EQ(most, 1);
}

// A store's counters summed over its threads: the services' from the
// services, whatever a thread's own copy says, the rest as the threads kept
// them.
TEST(StoreThread, SumStoreStatsTakesRetriesFromEveryThreadsBackoff) {
  struct Stats {
    uint64_t operations = 0;
    uint64_t retries = 0;
    uint64_t blocks_retired = 0;
    uint64_t blocks_reused = 0;
    uint64_t blocks_released = 0;
    uint64_t remote_bytes_allocated = 0;
  };
  struct Context : StoreThread {
    using StoreThread::StoreThread;
    Stats stats;
  };
  const SmartConfig config = BackoffConfig(false);
  PerThread<Context> contexts([&] { return std::make_unique<Context>(config); });
  std::vector<std::thread> threads;
  std::atomic<int> arrived{0};
  for (int t = 1; t <= 3; ++t) {
    threads.emplace_back([&, t] {
      Context& c = contexts.get();
      c.backoff.begin_task();
      for (int i = 0; i < t; ++i) c.backoff.retry_task();
      c.backoff.end_task();
      c.stats.operations = 10;
      c.stats.retries = 1000;  // not the services' count: overwritten
      // Stay alive until all three hold a thread id (an exited thread's id,
      // and with it its context, goes to the next new thread).
      arrived.fetch_add(1);
      while (arrived.load() < 3) std::this_thread::yield();
    });
  }
  for (auto& t : threads) t.join();
  const Stats total = SumStoreStats(contexts);
  EXPECT_EQ(total.operations, 30u);
  EXPECT_EQ(total.retries, 1u + 2u + 3u);
  EXPECT_EQ(total.blocks_retired, 0u);  // no thread built a block pool
  EXPECT_EQ(total.remote_bytes_allocated, 0u);
}

}  // namespace
}  // namespace smart
