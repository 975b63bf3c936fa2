#include "smart/check/checker_main.h"

namespace smart::check {

void AddCheckOptions(CLI::App& app, CheckOptions& o, const CheckOptionHelp& help,
                     const std::function<void(const std::string& name, CLI::Option* option)>& more) {
  // Each option, then the application's that follow it.
  const auto added = [&](const std::string& name, CLI::Option* option) {
    if (more) more(name, option);
  };
  added("--server", app.add_option("--server", o.servers, help.server)->required());
  added("--threads", app.add_option("--threads", o.threads, "threads")->check(CLI::Range(1, 64)));
  added("--coros", app.add_option("--coros", o.coros, "coroutines per thread")->check(CLI::Range(1, 64)));
  added("--from", app.add_option("--from", o.from, "first key id"));
  added("--to", app.add_option("--to", o.to, help.to));
  added("--writer", app.add_option("--writer", o.writer, "writer id stored in the values"));
  added("--writers", app.add_option("--writers", o.writers, "number of writers whose values are valid"));
  added("--rounds", app.add_option("--rounds", o.rounds, help.rounds));
  added("--duration", app.add_option("--duration", o.duration, help.duration));
  added("--absent", app.add_flag("--absent", o.absent, "verify: the keys must be absent"));
  added("--allow-missing",
        app.add_flag("--allow-missing", o.allow_missing, "a key may be missing (deleted concurrently)"));
  added("--lease-ms", app.add_option("--lease-ms", o.lease_ms, help.lease)->check(CLI::Range(1, 3600000)));
  added("--retry-timeout-ms", app.add_option("--retry-timeout-ms", o.retry_timeout_ms,
                                             "an operation stuck this long fails (ms)")
                                  ->check(CLI::Range(1, 3600000)));
  added("--log", app.add_option("--log", o.logs, help.log));
  added("--history", app.add_option("--history", o.history, help.history));
  added("--ops", app.add_option("--ops", o.ops,
                                "contend: operations per worker, started on ticks spread over --duration "
                                "(0: back to back)"));
  added("--zipf", app.add_option("--zipf", o.zipf, "contend: skew of the zipf key chooser (0: uniform)")
                      ->check(CLI::Range(0.0, 0.999)));
}

}  // namespace smart::check
