/// @file
/// Harness shared by the benchmarks: latency histograms, a thread runner with
/// start/stop, progress lines for long phases and CSV output. Part of the
/// bench library (smart::bench), not of the engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"
#include "smart/embedded_blade.h"

namespace smart {

/// Log-linear histogram of non-negative values (nanoseconds here): exact
/// below 64, then 32 buckets per power of two (about 3% resolution).
class Histogram {
 public:
  /// An empty histogram.
  Histogram();
  /// Counts one value.
  void record(uint64_t value) {
    ++buckets_[Index(value)];
    ++count_;
  }
  /// Adds every count of `other`.
  void merge(const Histogram& other);
  /// Values recorded.
  uint64_t count() const { return count_; }
  /// Value at quantile q in [0, 1] (bucket midpoint); 0 when empty.
  uint64_t percentile(double q) const;

  /// The bucket of `value`.
  static int Index(uint64_t value) {
    if (value < 64) return static_cast<int>(value);
    const int bits = 63 - __builtin_clzll(value);
    const int shift = bits - 5;
    return (shift + 1) * 32 + static_cast<int>((value >> shift) - 32);
  }
  /// The smallest value of bucket `index`.
  static uint64_t LowerBound(int index);
  static constexpr int kBuckets = 60 * 32;  ///< number of buckets

 private:
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
};

/// Runs fn(thread_index) on `threads` threads (thread i pinned to core i
/// when `bind`) and returns when all are done; rethrows the first exception.
void RunThreads(int threads, bool bind, const std::function<void(int)>& fn);

/// A start gate and a stop flag for timed runs.
class RunControl {
 public:
  /// A gate for `threads` workers.
  explicit RunControl(int threads) : threads_(threads) {}
  /// Worker side: announce readiness and wait for the start.
  void ready_and_wait();
  /// Worker side: true once the run is over.
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }
  /// Main side: wait for every worker, start, sleep `seconds` (or until
  /// `abort` turns true), stop. Returns the measured seconds.
  double run_for(double seconds, const std::atomic<bool>* abort = nullptr);
  /// Ends the run now.
  void stop() { stop_.store(true); }

 private:
  int threads_;
  std::atomic<int> ready_{0};
  std::atomic<bool> start_{false};
  std::atomic<bool> stop_{false};
};

/// Idles the calling task for `ns` nanoseconds, yielding to the thread's
/// other tasks, or until `control` stops (upstream's IDLE_USEC, which
/// lowers the offered load to draw latency-throughput curves).
void IdleTask(uint64_t ns, const RunControl& control);

/// Progress of a long phase on stderr: on a terminal one line redrawn in
/// place a few times a second; in a pipe or a log file a line every 5 s
/// (none for a phase shorter than that). Each says what is done of the
/// total, the rate, the time so far and the time left. The caller prints
/// the phase's summary line either way.
class Progress {
 public:
  /// A line headed `label` for `total` units of work (0: not known; then
  /// the line has no share done and no time left).
  Progress(std::string label, uint64_t total);
  void update(uint64_t done);  ///< cheap; draws only when a line is due
  /// Ends the line (on a terminal).
  void finish();
  /// How often a line goes to a pipe or a log file.
  static constexpr uint64_t kPipeIntervalNs = 5000000000ull;

 private:
  std::string line(uint64_t done, uint64_t now) const;

  std::string label_;
  uint64_t total_;
  bool tty_;
  bool drawn_ = false;
  uint64_t last_draw_ns_ = 0;
  uint64_t start_ns_;
};

/// Appends `line` (a newline is added) to `path`; empty path: nothing.
/// A new or empty file first gets `header`, the column names (when not
/// empty). Throws smart::Error when the file cannot be written.
void AppendCsvLine(const std::string& path, const std::string& line, const std::string& header = "");

/// "1.23", "12.3", "123", "0.0123": three significant digits at any scale.
std::string FormatSignificant(double value);

/// Nanoseconds of the monotonic clock.
uint64_t NowNs();

}  // namespace smart
