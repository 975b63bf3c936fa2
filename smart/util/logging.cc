#include "smart/logging.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace smart {

namespace {
std::atomic<bool> g_verbose{true};
}

void SetVerbose(bool verbose) { g_verbose.store(verbose); }

void LogPrintf(LogLevel level, const char* fmt, ...) {
  if (level == LogLevel::kInfo && !g_verbose.load(std::memory_order_relaxed)) return;
  const char* tag = level == LogLevel::kInfo ? "[I]" : level == LogLevel::kWarn ? "[W]" : "[E]";
  char buf[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  // One fprintf per line keeps lines from different threads whole.
  fprintf(stderr, "%s %s\n", tag, buf);
}

}  // namespace smart
