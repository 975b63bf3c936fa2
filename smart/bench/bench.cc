#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/logging.h"
#include "smart/status.h"
#include "smart/task.h"

namespace smart {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string FormatSignificant(double value) {
  char buf[64];
  const double magnitude = value == 0 ? 0 : std::floor(std::log10(std::fabs(value)));
  const int decimals = std::max(0, 2 - static_cast<int>(magnitude));
  snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

Histogram::Histogram() : buckets_(kBuckets, 0) {}

void Histogram::merge(const Histogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

uint64_t Histogram::LowerBound(int index) {
  if (index < 64) return static_cast<uint64_t>(index);
  const int shift = index / 32 - 1;
  return (static_cast<uint64_t>(index % 32) + 32) << shift;
}

uint64_t Histogram::percentile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const uint64_t lo = LowerBound(i);
      const uint64_t hi = i + 1 < kBuckets ? LowerBound(i + 1) : lo;
      return lo + (hi - lo) / 2;
    }
  }
  return LowerBound(kBuckets - 1);
}

void RunThreads(int threads, bool bind, const std::function<void(int)>& fn) {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::exception_ptr error;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      if (bind) BindCore(i);
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (std::thread& t : workers) t.join();
  if (error) std::rethrow_exception(error);
}

void RunControl::ready_and_wait() {
  ready_.fetch_add(1);
  while (!start_.load(std::memory_order_acquire) && !stop_.load()) std::this_thread::yield();
}

double RunControl::run_for(double seconds, const std::atomic<bool>* abort) {
  while (ready_.load() < threads_ && !stop_.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const uint64_t start = NowNs();
  start_.store(true, std::memory_order_release);
  const uint64_t end = start + static_cast<uint64_t>(seconds * 1e9);
  while (NowNs() < end && !stop_.load() && !(abort && abort->load()) && !TerminationRequested()) {
    const uint64_t left = end - NowNs();
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(left, 50000000)));
  }
  stop_.store(true);
  return static_cast<double>(NowNs() - start) / 1e9;
}

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO) == 1), start_ns_(NowNs()) {
  // In a pipe or a log file the first line comes after a pause, so that a
  // short phase stays silent there.
  last_draw_ns_ = start_ns_;
}

std::string Progress::line(uint64_t done, uint64_t now) const {
  const double elapsed = static_cast<double>(now - start_ns_) / 1e9;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  char text[256];
  if (total_ == 0) {
    snprintf(text, sizeof(text), "%s: %llu so far, %s/s, %.0f s", label_.c_str(), static_cast<unsigned long long>(done),
             FormatSignificant(rate).c_str(), elapsed);
    return text;
  }
  const double pct = 100.0 * static_cast<double>(done) / static_cast<double>(total_);
  std::string eta = "?";
  if (rate > 0 && done <= total_) eta = std::to_string(static_cast<uint64_t>(static_cast<double>(total_ - done) / rate + 0.5));
  snprintf(text, sizeof(text), "%s: %llu / %llu (%.1f%%), %s/s, %.0f s, ETA %s s", label_.c_str(),
           static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_), pct,
           FormatSignificant(rate).c_str(), elapsed, eta.c_str());
  return text;
}

void Progress::update(uint64_t done) {
  const uint64_t now = NowNs();
  if (tty_) {
    if (now - last_draw_ns_ < 200000000ull && (total_ == 0 || done < total_)) return;
    last_draw_ns_ = now;
    fprintf(stderr, "\r%s   ", line(done, now).c_str());
  } else {
    if (now - last_draw_ns_ < kPipeIntervalNs) return;
    last_draw_ns_ = now;
    fprintf(stderr, "%s\n", line(done, now).c_str());
  }
  drawn_ = true;
  fflush(stderr);
}

void Progress::finish() {
  if (tty_ && drawn_) fprintf(stderr, "\n");
}

void AppendCsvLine(const std::string& path, const std::string& line, const std::string& header) {
  if (path.empty()) return;
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot open result file \"" + path + "\" for appending: " + strerror(errno));
  // Several benches may append to one file at once (compute blades of one
  // run): the lock makes "empty, so the header first" and the line one step.
  std::string out;
  struct stat st{};
  bool ok = flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0;
  if (ok && !header.empty() && st.st_size == 0) out = header + "\n";
  out += line + "\n";
  size_t done = 0;
  while (ok && done < out.size()) {
    const ssize_t n = write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int saved = errno;
  if (close(fd) != 0 || !ok) throw Error("cannot write result file \"" + path + "\": " + strerror(ok ? errno : saved));
}

void IdleTask(uint64_t ns, const RunControl& control) {
  if (ns == 0) return;
  const uint64_t until = Cycles() + static_cast<uint64_t>(static_cast<double>(ns) * CyclesPerNanosecond());
  while (Cycles() < until && !control.stopped()) this_task::yield();
}

}  // namespace smart
