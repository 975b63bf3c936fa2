#include <algorithm>

#include "smart/task.h"
#include "smart/throttle.h"

namespace smart {

namespace {
constexpr uint64_t kTasksPerEpochCheck = 16;
// The gain check (conflict_avoidance.gain_check): the epochs between two
// checks at first (50 x 20 ms: a second), the epochs a thread runs before
// its first check, and how much more work per second admission and backoff
// must finish to stay on. Below 2% the measurement cannot tell a gain from
// noise.
constexpr int kGainCheckEpochs = 50;
constexpr int kFirstGainCheckEpochs = 5;
constexpr double kMinGain = 1.02;
}

Backoff::Backoff(const SmartConfig& config)
    : enabled_(config.use_conflict_avoidance),
      gain_checked_(config.conflict_avoidance.gain_check),
      gain_(kGainCheckEpochs, kMinGain, kFirstGainCheckEpochs),
      coroutine_throttling_(config.conflict_avoidance.coroutine_throttling),
      adaptive_limit_(config.conflict_avoidance.adaptive_backoff_limit),
      low_water_mark_(config.conflict_avoidance.low_water_mark),
      high_water_mark_(config.conflict_avoidance.high_water_mark),
      max_tasks_(config.conflict_avoidance.max_tasks),
      max_credit_(config.conflict_avoidance.max_tasks),
      credit_(config.conflict_avoidance.max_tasks),
      task_backoff_(kMaxTasksPerThread, 0),
      task_retries_(kMaxTasksPerThread, 0),
      holds_credit_(kMaxTasksPerThread, 0) {
  const double rate = CyclesPerNanosecond();
  epoch_cycles_ = static_cast<uint64_t>(static_cast<double>(config.conflict_avoidance.epoch_us) * 1000 * rate);
  initial_cycles_ = std::max<uint64_t>(1, static_cast<uint64_t>(
                                              static_cast<double>(config.conflict_avoidance.initial_backoff_ns) * rate));
  max_cycles_ = static_cast<uint64_t>(static_cast<double>(config.conflict_avoidance.max_backoff_ns) * rate);
  limit_cycles_ = adaptive_limit_
                      ? initial_cycles_
                      : static_cast<uint64_t>(static_cast<double>(config.conflict_avoidance.fixed_backoff_limit_ns) * rate);
  max_cycles_ = std::max(max_cycles_, initial_cycles_);
  seed_ = Cycles() | 1;
  epoch_start_ = Cycles();
}

uint64_t Backoff::backoff_limit_ns() const {
  return static_cast<uint64_t>(static_cast<double>(limit_cycles_) / CyclesPerNanosecond());
}

uint64_t Backoff::jitter() {
  seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull;
  return (seed_ >> 33) % initial_cycles_;
}

void Backoff::begin_task() {
  const int task = this_task::id();
  task_backoff_[task] = initial_cycles_;
  task_retries_[task] = 0;
  holds_credit_[task] = 0;
  if (!enabled_ || !admitting() || task == 0) return;
  admission_queue_.push_back(task);
  while (admitting() && (admission_queue_.front() != task || credit_ <= 0)) this_task::wait();
  if (!admitting()) {
    // The gain check set admission aside while this task waited.
    admission_queue_.erase(std::find(admission_queue_.begin(), admission_queue_.end(), task));
    return;
  }
  admission_queue_.pop_front();
  --credit_;
  holds_credit_[task] = 1;
  // Admission may allow more than one task: pass the turn on.
  if (!admission_queue_.empty() && credit_ > 0) this_task::notify(admission_queue_.front());
}

void Backoff::end_task() {
  const int task = this_task::id();
  ++total_tasks_;
  ++epoch_tasks_;
  ++retry_histogram_[std::min<uint32_t>(task_retries_[task], 8)];
  if (!enabled_) return;
  if (holds_credit_[task] != 0) {
    holds_credit_[task] = 0;
    ++credit_;
    if (!admission_queue_.empty() && credit_ > 0) this_task::notify(admission_queue_.front());
  }
  // Epochs must also end when nobody retries, or a throttled admission limit
  // would never grow back.
  if (epoch_tasks_ % kTasksPerEpochCheck == 0) maybe_end_epoch();
}

void Backoff::maybe_end_epoch() {
  const uint64_t now = Cycles();
  if (now - epoch_start_ < epoch_cycles_) return;
  // The admission limit and the backoff cap adapt to retry rates seen with
  // both in force.
  if (on_) end_epoch(epoch_retries_, epoch_tasks_);
  if (gain_checked_ && enabled_) {
    const bool was_on = on_;
    on_ = gain_.on_epoch(static_cast<double>(epoch_tasks_) / static_cast<double>(now - epoch_start_));
    // Set aside: the tasks waiting for admission go on without it.
    if (was_on && !on_) {
      for (int waiting : admission_queue_) this_task::notify(waiting);
    }
  }
  epoch_start_ = now;
  epoch_retries_ = 0;
  epoch_tasks_ = 0;
}

void Backoff::end_epoch(uint64_t retries, uint64_t tasks) {
  if (!enabled_ || retries + tasks == 0) return;
  const double rate = static_cast<double>(retries) / static_cast<double>(retries + tasks);
  if (coroutine_throttling_) {
    const int old_credit = max_credit_;
    if (rate < low_water_mark_) {
      if (max_credit_ < max_tasks_) {
        max_credit_ = std::min(max_credit_ * 2, max_tasks_);
      } else if (adaptive_limit_) {
        limit_cycles_ = std::max(limit_cycles_ / 2, initial_cycles_);
      }
    } else if (rate > high_water_mark_) {
      if (max_credit_ > 1) {
        max_credit_ = std::max(max_credit_ / 2, 1);
      } else if (adaptive_limit_) {
        limit_cycles_ = std::min(limit_cycles_ * 2, max_cycles_);
      }
    }
    credit_ += max_credit_ - old_credit;
    if (!admission_queue_.empty() && credit_ > 0) this_task::notify(admission_queue_.front());
  } else if (adaptive_limit_) {
    if (rate < low_water_mark_) {
      limit_cycles_ = std::max(limit_cycles_ / 2, initial_cycles_);
    } else if (rate > high_water_mark_) {
      limit_cycles_ = std::min(limit_cycles_ * 2, max_cycles_);
    }
  }
}

void Backoff::retry_task(bool suspend) {
  const int task = this_task::id();
  ++total_retries_;
  ++epoch_retries_;
  ++task_retries_[task];
  if (!enabled_) return;
  maybe_end_epoch();
  if (!suspend || !on_) return;
  const uint64_t delay = task_backoff_[task] + jitter();
  const uint64_t start = Cycles();
  while (Cycles() - start < delay) this_task::yield();
  task_backoff_[task] = std::min(task_backoff_[task] * 2, std::max(limit_cycles_, initial_cycles_));
}

}  // namespace smart
