/// @file
/// Log lines go to stderr with a one-letter level; results go to stdout.
#pragma once

#include <cstdio>

namespace smart {

/// Severity of a log line.
enum class LogLevel { kInfo, kWarn, kError };  ///< info, warning, error

/// Prints one line, printf-style, with its level's tag ([I], [W], [E]).
void LogPrintf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// When false, info lines are suppressed (warnings and errors still print).
void SetVerbose(bool verbose);

}  // namespace smart

/// @name Log lines of each level, printf-style
//@{
/// A log line of the level the macro is named after.
#define SMART_INFO(...) ::smart::LogPrintf(::smart::LogLevel::kInfo, __VA_ARGS__)
#define SMART_WARN(...) ::smart::LogPrintf(::smart::LogLevel::kWarn, __VA_ARGS__)
#define SMART_ERROR(...) ::smart::LogPrintf(::smart::LogLevel::kError, __VA_ARGS__)
//@}
