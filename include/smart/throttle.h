/// @file
/// Adaptive work-request throttling and conflict avoidance.
///
/// CreditTuner: every thread may have at most `bound` work requests in
/// flight. The tuner measures completed work requests per epoch (sample_cycles
/// TSC cycles) and, in a training phase, tries the bounds initial_credit,
/// initial_credit + credit_step, ..., max_credit and then "unbounded" (the
/// queue depth), one epoch each. Unbounded wins unless the best finite bound
/// beat it by more than inf_credit_weight (5% by default); when one did, the
/// best of several noisy epochs may merely have been lucky, so it must win
/// again: three pairs of epochs alternate it with unbounded, and it is kept
/// only if the median of its ratios to unbounded is above the weight. The
/// chosen bound holds for execution_epochs epochs, then training starts
/// again, so the bound follows load changes; each training in a row that
/// finds no gain doubles that period (up to 16 times), so a tuner that
/// cannot help steps aside. Too many outstanding requests thrash a NIC's
/// caches; on a transport without that cliff, training settles on
/// unbounded.
///
/// Backoff: per thread, for code that retries after losing a CAS race. A
/// retry waits a truncated exponential delay with jitter (starting at
/// initial_backoff_ns, doubling per retry of the same task, capped by a limit
/// that itself adapts). Once per epoch the retry rate r = retries / (retries +
/// finished tasks) is compared with two water marks: above the high mark the
/// number of tasks admitted to run concurrently halves, below the low mark it
/// doubles (up to max_tasks). When the admission limit cannot move further,
/// the backoff cap moves instead (doubles when at one task, halves when at
/// max_tasks). Admission and backoff cost time where retries are cheap or
/// rare. With conflict_avoidance.gain_check on (off by default), Backoff
/// checks its own gain (GainCheck): epochs with both off alternate with
/// epochs with both on, and where on does not finish more operations per
/// second, both step aside for a while. A thread's own rate cannot see what
/// its unpaced retries cost other clients, which is why the check is off
/// unless asked for (docs/throttle.md).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "smart/config.h"

namespace smart {

/// Chooses the per-thread bound on work requests in flight (see the file's description).
class CreditTuner {
 public:
  /// `unbounded` is the bound that means no throttling (the queue depth).
  CreditTuner(const WorkReqThrotConfig& config, int unbounded);

  /// The bound in force.
  int bound() const { return bound_; }
  /// True while bounds are being tried (the sweep, then the check of a
  /// finite winner).
  bool training() const { return training_; }
  /// Epochs the chosen bound holds before the next training.
  int64_t execution_period() const { return static_cast<int64_t>(config_.execution_epochs) << quiet_; }
  /// Feeds one epoch's completed work requests (normalised to a nominal
  /// epoch; epochs with no completions should not be fed). Returns the bound
  /// for the next epoch.
  int on_epoch(double completed);

 private:
  static constexpr int kVerifyPairs = 3;
  static constexpr int kMaxQuietDoublings = 4;
  // Ends training with the best finite bound, or unbounded.
  int decide(bool finite);

  WorkReqThrotConfig config_;
  int unbounded_;
  int bound_;
  bool training_ = true;
  double best_ = 0;
  int best_bound_;
  int64_t execution_epochs_ = 0;
  bool verifying_ = false;   // alternating the best finite bound with unbounded
  double pair_finite_ = 0;   // the finite epoch of the pair under way
  double ratios_[kVerifyPairs] = {};
  int pairs_ = 0;
  int quiet_ = 0;            // trainings in a row that found no gain (capped)
};

/// Decides, epoch by epoch, whether a technique that can cost more than it
/// gives stays on. It starts on, checks after `first_check_epochs`, then again
/// after each period: three
/// pairs of epochs alternate the technique off and on, and it stays on when
/// the median of the on/off ratios of work done per second is at least
/// `min_gain`; otherwise it steps aside (off) until the next check. A
/// decision equal to the one before doubles the period (up to 16 times), so
/// a steady workload is checked rarely; a decision that differs from the one
/// before sets the period back to its base.
class GainCheck {
 public:
  /// `period_epochs`: epochs between checks at first; `min_gain`: the
  /// on/off ratio the technique must reach to stay on; `first_check_epochs`:
  /// epochs before the first check.
  GainCheck(int period_epochs, double min_gain, int first_check_epochs);

  /// The technique is on for the epoch under way.
  bool on() const { return phase_ == Phase::kOn || phase_ == Phase::kCheckOn; }
  /// A check is under way.
  bool checking() const { return phase_ == Phase::kCheckOff || phase_ == Phase::kCheckOn; }
  /// Checks that ended with the technique aside.
  uint64_t asides() const { return asides_; }
  /// Checks that ended.
  uint64_t checks() const { return checks_; }
  /// The last check's median on/off ratio (0 before the first).
  double last_gain() const { return last_gain_; }
  /// Epochs until the next check once the current decision holds.
  int64_t period() const { return static_cast<int64_t>(period_epochs_) << streak_; }
  /// Feeds the epoch that just ended: the work it finished per second (any
  /// unit, the same for every epoch). Returns whether the technique is on
  /// for the next epoch.
  bool on_epoch(double rate);

 private:
  enum class Phase { kOn, kAside, kCheckOff, kCheckOn };
  static constexpr int kPairs = 3;
  static constexpr int kMaxDoublings = 4;

  int period_epochs_;
  double min_gain_;
  Phase phase_ = Phase::kOn;
  int64_t until_check_;       // epochs before the next check begins
  double off_rate_ = 0;       // the off epoch of the pair under way
  double ratios_[kPairs] = {};
  int pairs_ = 0;
  int streak_ = 0;            // decisions in a row equal to the last (capped)
  bool last_on_ = true;
  uint64_t checks_ = 0;
  uint64_t asides_ = 0;
  double last_gain_ = 0;
};

/// One thread's conflict avoidance: admission of tasks and backoff of retries.
class Backoff {
 public:
  /// Reads conflict_avoidance and use_conflict_avoidance from `config`.
  explicit Backoff(const SmartConfig& config);

  /// Admission: waits (as a task) until this task may run. Call once per
  /// operation that may retry; pair with end_task().
  void begin_task();
  /// The operation begun by begin_task() finished.
  void end_task();
  /// The running operation lost a race: count it and, if `suspend`, wait
  /// the task's current backoff (yielding to other tasks) and double it.
  void retry_task(bool suspend = true);

  /// Applies one epoch's counts to the admission limit and backoff cap.
  void end_epoch(uint64_t retries, uint64_t tasks);

  /// use_conflict_avoidance was on.
  bool enabled() const { return enabled_; }
  /// Admission and backoff are in force for the epoch under way (enabled,
  /// and not set aside by the gain check).
  bool active() const { return enabled_ && on_; }
  /// The gain check (conflict_avoidance.gain_check): its checks so far and
  /// how many of them set admission and backoff aside.
  const GainCheck& gain_check() const { return gain_; }
  /// Tasks admitted at once right now.
  int admission_limit() const { return max_credit_; }
  /// The current backoff cap.
  uint64_t backoff_limit_ns() const;
  /// Retries counted so far.
  uint64_t total_retries() const { return total_retries_; }
  /// Operations finished so far.
  uint64_t total_tasks() const { return total_tasks_; }
  /// Operations that needed k retries, k = 0..8 (8: eight or more).
  const uint64_t* retry_histogram() const { return retry_histogram_; }

 private:
  void maybe_end_epoch();
  uint64_t jitter();
  bool admitting() const { return on_ && coroutine_throttling_; }

  bool enabled_;
  bool gain_checked_;
  bool on_ = true;  // false while the gain check sets both techniques aside
  GainCheck gain_;
  bool coroutine_throttling_;
  bool adaptive_limit_;
  double low_water_mark_;
  double high_water_mark_;
  uint64_t epoch_cycles_;
  uint64_t initial_cycles_;
  uint64_t max_cycles_;
  uint64_t limit_cycles_;
  int max_tasks_;
  int max_credit_;
  int credit_;
  std::deque<int> admission_queue_;
  std::vector<uint64_t> task_backoff_;
  std::vector<uint32_t> task_retries_;
  std::vector<uint8_t> holds_credit_;  // the task was admitted against credit_
  uint64_t epoch_start_ = 0;
  uint64_t epoch_retries_ = 0;
  uint64_t epoch_tasks_ = 0;
  uint64_t total_retries_ = 0;
  uint64_t total_tasks_ = 0;
  uint64_t retry_histogram_[9] = {};
  uint64_t seed_;
};

/// begin_task() on construction, end_task() on destruction.
/// Scoped admission for one operation under a Backoff.
class BackoffGuard {
 public:
  /// Waits for admission.
  explicit BackoffGuard(Backoff& backoff) : backoff_(backoff) { backoff_.begin_task(); }
  /// Leaves admission.
  ~BackoffGuard() { backoff_.end_task(); }
  BackoffGuard(const BackoffGuard&) = delete;
  BackoffGuard& operator=(const BackoffGuard&) = delete;
  /// Same as Backoff::retry_task.
  void retry_task(bool suspend = true) { backoff_.retry_task(suspend); }

 private:
  Backoff& backoff_;
};

}  // namespace smart
