#include "smart/logging.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>

namespace smart {

namespace {
std::atomic<bool> g_verbose{true};
std::atomic<bool> g_has_sink{false};
std::mutex g_sink_mutex;
std::shared_ptr<const LogSink> g_sink;  // under g_sink_mutex

std::shared_ptr<const LogSink> CurrentSink() {
  if (!g_has_sink.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  return g_sink;
}
}  // namespace

void SetVerbose(bool verbose) { g_verbose.store(verbose); }

void SetLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  g_has_sink.store(g_sink != nullptr, std::memory_order_release);
}

void LogPrintf(LogLevel level, const char* fmt, ...) {
  if (level == LogLevel::kInfo && !g_verbose.load(std::memory_order_relaxed)) return;
  const char* tag = level == LogLevel::kInfo ? "[I]" : level == LogLevel::kWarn ? "[W]" : "[E]";
  char buf[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  // A sink replaced meanwhile stays alive until this line is passed on.
  if (const std::shared_ptr<const LogSink> sink = CurrentSink()) {
    (*sink)(level, buf);
    return;
  }
  // One fprintf per line keeps lines from different threads whole.
  fprintf(stderr, "%s %s\n", tag, buf);
}

}  // namespace smart
