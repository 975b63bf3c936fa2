// The command line and main() of a checker: the options of CheckOptions,
// with the application's own among them, one subcommand per command, and
// the run. Exit status: 2 for a usage error (smart/command_line.h), 0 for
// --help, 1 when the command fails or throws, else the command's own.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "smart/check/checker.h"
#include "smart/check/commands.h"
#include "smart/command_line.h"
#include "smart/logging.h"
#include "smart/status.h"

namespace smart::check {

// The help of the commands both checkers run the same way (commands.h),
// where each words it its own way.
struct SharedCommandHelp {
  std::string build, insert, update, remove, churn;
};

// What --help says of the common options whose meaning depends on the
// store (what a server holds, what a round is, which locks a lease guards).
struct CheckOptionHelp {
  std::string server, to, rounds, duration, lease, log, history;
};

// Adds the options of CheckOptions to `app`. After each one, `more(name,
// option)` may add validators to it and the application's own options, so
// that --help lists them in the application's order.
void AddCheckOptions(CLI::App& app, CheckOptions& o, const CheckOptionHelp& help,
                     const std::function<void(const std::string& name, CLI::Option* option)>& more);

// A checker program over the application's checker and options (derived
// from Checker and CheckOptions): AppChecker(program, const AppOptions&)
// connects with open().
template <class AppChecker, class AppOptions>
class CheckerProgram {
 public:
  using Command = std::function<int(AppChecker&, const AppOptions&)>;

  // `program` names the checker in its messages; `description` heads --help.
  CheckerProgram(std::string program, const std::string& description)
      : program_(std::move(program)), app_(description) {
    app_.fallthrough();
    app_.require_subcommand(1);
  }

  CLI::App& app() { return app_; }
  AppOptions& options() { return options_; }

  // Adds the subcommand `name`; --help lists the subcommands by name.
  void command(const std::string& name, const std::string& what, Command run) {
    commands_[name] = Entry{what, std::move(run)};
  }

  // Adds build (which only opens the checker) and the commands of
  // commands.h; insert writes each id --rounds times with `insert_rounds`,
  // else once.
  void shared_commands(const SharedCommandHelp& help, bool insert_rounds) {
    command("build", help.build, [](AppChecker& c, const AppOptions&) { return c.finish("build"); });
    command("insert", help.insert, [insert_rounds](AppChecker& c, const AppOptions& o) {
      return Insert(c, o, insert_rounds ? o.rounds : 1);
    });
    command("update", help.update, Update);
    command("delete", help.remove, Delete);
    command("churn", help.churn, Churn);
    command("read", "read for --duration seconds; values never go back per writer", Read);
  }

  // Parses the command line, opens the checker and runs the command named.
  // `refuse(name)` may throw smart::Error for options that do not fit the
  // command. Exit status 2 for those, a bad --server or configuration; 1
  // when the check fails or cannot run.
  int main(int argc, char** argv, const std::function<void(const std::string& name)>& refuse = {}) {
    for (auto& [name, entry] : commands_) app_.add_subcommand(name, entry.what);
    SMART_PARSE_COMMAND_LINE(app_, argc, argv);
    std::unique_ptr<AppChecker> checker;
    std::string name;
    try {
      if (options_.to < options_.from) throw Error("--to must not be below --from");
      name = app_.get_subcommands().front()->get_name();
      if (refuse) refuse(name);
      SetVerbose(false);
      checker = std::make_unique<AppChecker>(program_, options_);
      checker->load_config();
    } catch (const std::exception& e) {
      fprintf(stderr, "%s: %s\n", program_.c_str(), e.what());
      return kUsageError;
    }
    try {
      checker->open();
      return commands_.at(name).run(*checker, options_);
    } catch (const std::exception& e) {
      fprintf(stderr, "%s: %s\n", program_.c_str(), e.what());
      return 1;
    }
  }

 private:
  struct Entry {
    std::string what;
    Command run;
  };
  const std::string program_;
  CLI::App app_;
  AppOptions options_;
  std::map<std::string, Entry> commands_;
};

}  // namespace smart::check
