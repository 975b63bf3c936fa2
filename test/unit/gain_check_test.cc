// GainCheck's decisions, fed epoch rates by hand, and Backoff setting its
// admission and backoff aside through it.
#include <gtest/gtest.h>

#include <algorithm>

#include "smart/task.h"
#include "smart/throttle.h"
#include "test_util.h"

namespace smart {
namespace {

constexpr int kPeriod = 4;
constexpr double kMinGain = 1.02;

// Runs one check from its first epoch: `pairs` of (off rate, on rate).
// Returns whether the technique is on afterwards.
bool RunCheck(GainCheck& g, std::initializer_list<std::pair<double, double>> pairs) {
  EXPECT_TRUE(g.checking());
  bool on = g.on();
  for (const auto& [off, with] : pairs) {
    EXPECT_FALSE(g.on()) << "a check's first epoch of a pair is off";
    on = g.on_epoch(off);
    EXPECT_TRUE(on) << "a check's second epoch of a pair is on";
    on = g.on_epoch(with);
  }
  EXPECT_FALSE(g.checking());
  return on;
}

// Feeds epochs while the decision holds; returns how many passed before the
// next check began.
int EpochsUntilCheck(GainCheck& g, double rate) {
  int epochs = 0;
  while (!g.checking() && epochs < 1000) {
    g.on_epoch(rate);
    ++epochs;
  }
  return epochs;
}

TEST(GainCheck, StartsOnAndChecksAfterTheFirstEpochs) {
  GainCheck g(kPeriod, kMinGain, 2);
  EXPECT_TRUE(g.on());
  EXPECT_FALSE(g.checking());
  EXPECT_EQ(EpochsUntilCheck(g, 100), 2);
  EXPECT_FALSE(g.on()) << "a check begins with the technique off";
}

TEST(GainCheck, StaysOnWhereOnFinishesMore) {
  GainCheck g(kPeriod, kMinGain, 1);
  EpochsUntilCheck(g, 100);
  EXPECT_TRUE(RunCheck(g, {{100, 150}, {100, 140}, {100, 160}}));
  EXPECT_DOUBLE_EQ(g.last_gain(), 1.5);
  EXPECT_EQ(g.checks(), 1u);
  EXPECT_EQ(g.asides(), 0u);
  EXPECT_TRUE(g.on());
}

TEST(GainCheck, StepsAsideWhereOnFinishesNoMore) {
  GainCheck g(kPeriod, kMinGain, 1);
  EpochsUntilCheck(g, 100);
  EXPECT_FALSE(RunCheck(g, {{100, 100}, {100, 101}, {100, 99}}));
  EXPECT_EQ(g.asides(), 1u);
  // Aside until the next check.
  for (int i = 0; i < kPeriod - 1; ++i) EXPECT_FALSE(g.on_epoch(100));
}

TEST(GainCheck, TheMedianPairDecidesNotOneLuckyEpoch) {
  GainCheck g(kPeriod, kMinGain, 1);
  EpochsUntilCheck(g, 100);
  EXPECT_FALSE(RunCheck(g, {{100, 300}, {100, 100}, {100, 98}}));
  EpochsUntilCheck(g, 100);
  EXPECT_TRUE(RunCheck(g, {{100, 90}, {100, 110}, {100, 120}}));
}

TEST(GainCheck, EqualDecisionsInARowDoubleThePeriodAndAChangeResetsIt) {
  GainCheck g(kPeriod, kMinGain, 1);
  EpochsUntilCheck(g, 100);
  RunCheck(g, {{100, 100}, {100, 100}, {100, 100}});
  EXPECT_EQ(EpochsUntilCheck(g, 100), kPeriod);
  for (int doubling = 1; doubling <= 4; ++doubling) {
    RunCheck(g, {{100, 100}, {100, 100}, {100, 100}});
    EXPECT_EQ(EpochsUntilCheck(g, 100), kPeriod << doubling);
  }
  RunCheck(g, {{100, 100}, {100, 100}, {100, 100}});
  EXPECT_EQ(EpochsUntilCheck(g, 100), kPeriod << 4) << "the period doubles 4 times at most";
  EXPECT_TRUE(RunCheck(g, {{100, 200}, {100, 200}, {100, 200}}));
  EXPECT_EQ(EpochsUntilCheck(g, 100), kPeriod) << "a changed decision sets the period back";
}

TEST(GainCheck, EpochsThatDidNothingAreNoGain) {
  GainCheck g(kPeriod, kMinGain, 1);
  EpochsUntilCheck(g, 0);
  EXPECT_FALSE(RunCheck(g, {{0, 0}, {0, 0}, {0, 0}}));
  EpochsUntilCheck(g, 0);
  EXPECT_TRUE(RunCheck(g, {{0, 5}, {0, 5}, {0, 5}}));
}

SmartConfig CheckedConfig() {
  SmartConfig c = testing::TestConfig();
  c.use_conflict_avoidance = true;
  c.conflict_avoidance.max_tasks = 8;
  c.conflict_avoidance.epoch_us = 100;
  c.conflict_avoidance.gain_check = true;
  return c;
}

// A task that holds admission and finishes nothing: epochs with admission
// on and off do equally little, so the check sets admission aside. The task
// waiting behind the holder goes in as soon as admission is off (in the
// check's first epoch), without waiting for the holder to finish.
TEST(BackoffGainCheck, TasksWaitingForAdmissionGoOnWhileItIsOff) {
  Backoff backoff(CheckedConfig());
  for (int i = 0; i < 3; ++i) backoff.end_epoch(90, 10);  // admit one task at a time
  ASSERT_EQ(backoff.admission_limit(), 1);
  ASSERT_TRUE(backoff.active());
  TaskPool pool;
  bool second_in = false;
  bool holder_in = false;
  bool holder_out = false;
  bool second_before_holder_out = false;
  pool.spawn([&] {
    BackoffGuard guard(backoff);
    holder_in = true;
    // Retries without a wait end epochs as time passes; bounded so that a
    // check that never sets admission aside fails instead of hanging.
    for (int i = 0; i < 20000000 && !(second_in && backoff.gain_check().checks() > 0); ++i) {
      guard.retry_task(false);
      this_task::yield();
    }
    holder_out = true;
  });
  pool.spawn([&] {
    while (!holder_in) this_task::yield();
    BackoffGuard guard(backoff);
    second_in = true;
    second_before_holder_out = !holder_out;
  });
  pool.run();
  EXPECT_TRUE(second_before_holder_out) << "the second task waited for the holder";
  EXPECT_GE(backoff.gain_check().asides(), 1u);
  EXPECT_FALSE(backoff.active());
}

// Every retry waits 2 ms while on; off it does not wait, and finishes many
// times more tasks per second, so the check sets backoff aside.
TEST(BackoffGainCheck, ABackoffThatOnlySlowsStepsAside) {
  SmartConfig config = CheckedConfig();
  config.conflict_avoidance.coroutine_throttling = false;
  config.conflict_avoidance.initial_backoff_ns = 2000000;
  config.conflict_avoidance.adaptive_backoff_limit = false;
  config.conflict_avoidance.fixed_backoff_limit_ns = 2000000;
  config.conflict_avoidance.epoch_us = 5000;
  Backoff backoff(config);
  int i = 0;
  // Off, a task takes well under a microsecond: a 5-ms epoch holds many.
  for (; i < 50000000 && backoff.gain_check().checks() == 0; ++i) {
    BackoffGuard guard(backoff);
    guard.retry_task();
  }
  ASSERT_EQ(backoff.gain_check().checks(), 1u) << "no check ended after " << i << " tasks";
  EXPECT_EQ(backoff.gain_check().asides(), 1u);
  // Off, retries did not wait: on finished a small part of what off did.
  EXPECT_LT(backoff.gain_check().last_gain(), 0.5);
  EXPECT_FALSE(backoff.active());
  EXPECT_TRUE(backoff.enabled());
}

TEST(BackoffGainCheck, OffInTheConfigKeepsBothInForce) {
  SmartConfig config = CheckedConfig();
  config.conflict_avoidance.gain_check = false;
  Backoff backoff(config);
  for (int i = 0; i < 20000; ++i) {
    BackoffGuard guard(backoff);
    guard.retry_task(false);
  }
  EXPECT_EQ(backoff.gain_check().checks(), 0u);
  EXPECT_TRUE(backoff.active());
}

}  // namespace
}  // namespace smart
