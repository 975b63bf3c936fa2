/// @file
/// Log lines go to stderr with a one-letter level (or to a sink the host
/// program sets); results go to stdout.
#pragma once

#include <cstdio>
#include <functional>

namespace smart {

/// Severity of a log line.
enum class LogLevel { kInfo, kWarn, kError };  ///< info, warning, error

/// Prints one line, printf-style, with its level's tag ([I], [W], [E]).
void LogPrintf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// When false, info lines are suppressed (warnings and errors still print).
void SetVerbose(bool verbose);

/// Receives every log line the library emits: its level and its text
/// (without the level tag and the newline). Called on the thread that logs,
/// possibly from several threads at once; it must not log through the
/// library itself.
using LogSink = std::function<void(LogLevel level, const char* line)>;

/// Routes the library's log lines to `sink` instead of stderr; an empty
/// sink restores stderr. Lines suppressed by SetVerbose(false) are not
/// passed on. May be called at any time, from any thread.
void SetLogSink(LogSink sink);

}  // namespace smart

/// @name Log lines of each level, printf-style
//@{
/// A log line of the level the macro is named after.
#define SMART_INFO(...) ::smart::LogPrintf(::smart::LogLevel::kInfo, __VA_ARGS__)
#define SMART_WARN(...) ::smart::LogPrintf(::smart::LogLevel::kWarn, __VA_ARGS__)
#define SMART_ERROR(...) ::smart::LogPrintf(::smart::LogLevel::kError, __VA_ARGS__)
//@}
