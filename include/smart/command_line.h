/// @file
/// Command lines of the framework's programs (CLI11): exit status 2 for a
/// usage error (an unknown flag, a value out of range, a missing argument),
/// 0 for --help, as most Unix tools do; runtime failures exit with 1.
///
///   CLI::App app{"what the program does"};
///   ... add options ...
///   SMART_PARSE_COMMAND_LINE(app, argc, argv);
#pragma once

#include <CLI/CLI.hpp>

namespace smart {

/// Exit status of a command line that could not be used.
inline constexpr int kUsageError = 2;

/// Prints CLI11's message for `e` (help on stdout, errors on stderr) and
/// returns the exit status: 0 for --help, kUsageError otherwise.
inline int CommandLineExit(const CLI::App& app, const CLI::ParseError& e) {
  return app.exit(e) == 0 ? 0 : kUsageError;
}

}  // namespace smart

/// Parses `argv` into `app`; on --help or a usage error, returns the exit status from the calling main().
#define SMART_PARSE_COMMAND_LINE(app, argc, argv)      \
  do {                                                 \
    try {                                              \
      (app).parse((argc), (argv));                     \
    } catch (const CLI::ParseError& smart_cli_error) { \
      return ::smart::CommandLineExit((app), smart_cli_error); \
    }                                                  \
  } while (false)
