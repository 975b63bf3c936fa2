// Log lines go to stderr with a one-letter level; results go to stdout.
#pragma once

#include <cstdio>

namespace smart {

enum class LogLevel { kInfo, kWarn, kError };

void LogPrintf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// When false, info lines are suppressed (warnings and errors still print).
void SetVerbose(bool verbose);

}  // namespace smart

#define SMART_INFO(...) ::smart::LogPrintf(::smart::LogLevel::kInfo, __VA_ARGS__)
#define SMART_WARN(...) ::smart::LogPrintf(::smart::LogLevel::kWarn, __VA_ARGS__)
#define SMART_ERROR(...) ::smart::LogPrintf(::smart::LogLevel::kError, __VA_ARGS__)
