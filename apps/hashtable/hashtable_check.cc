// hashtable_check: driver of the SMART-HT integration tests. Each command
// connects to the memory blades given with --server (one shard each), runs
// threads x coroutines against the table, checks what it saw and exits
// non-zero with a message on the first violation (check_support.h).
#include <CLI/CLI.hpp>
#include <map>

#include "check_support.h"
#include "smart/command_line.h"

using namespace smart;
using namespace smart::hashtable::check;

int main(int argc, char** argv) {
  CLI::App app{"hashtable_check: SMART-HT integration test driver"};
  app.fallthrough();
  app.require_subcommand(1);
  Options o;
  app.add_option("--server", o.servers, "memory blade host:port, one per shard (repeat)")->required();
  app.add_option("--threads", o.threads, "threads")->check(CLI::Range(1, 64));
  app.add_option("--coros", o.coros, "coroutines per thread")->check(CLI::Range(1, 64));
  app.add_option("--expected-keys", o.expected_keys, "keys to size the table for, if this client builds it");
  app.add_option("--from", o.from, "first key id");
  app.add_option("--to", o.to, "end of the key range");
  app.add_option("--writer", o.writer, "writer id stored in the values");
  app.add_option("--load-batch", o.load_batch, "load: keys per load_batch call")->check(CLI::Range(1, 64));
  app.add_option("--writers", o.writers, "number of writers whose values are valid");
  app.add_option("--rounds", o.rounds, "update rounds (largest valid sequence number)");
  app.add_option("--duration", o.duration, "seconds to read");
  app.add_flag("--absent", o.absent, "verify: the keys must be absent");
  app.add_flag("--allow-missing", o.allow_missing, "a key may be missing (deleted concurrently)");
  app.add_option("--min-slots", o.min_slots, "capacity: slots each shard must have at least");
  app.add_option("--lease-ms", o.lease_ms, "lease of the resize lock and build claim (ms)")->check(CLI::Range(1, 3600000));
  app.add_option("--retry-timeout-ms", o.retry_timeout_ms, "an operation stuck this long fails (ms)")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--directory-capacity-depth", o.directory_capacity_depth,
                 "room in the directory of a table this client builds (2^N entries); it moves when outgrown")
      ->check(CLI::Range(0, 32));
  app.add_option("--log", o.logs, "insert/update/delete/churn/rmw: write this writer's log of acknowledged operations; "
                 "check-log/check-rmw: a log to check against (repeat)");
  app.add_option("--history", o.history, "contend: record every operation and its outcome in this file (history.h)");
  app.add_option("--ops", o.ops, "contend: operations per worker, started on ticks spread over --duration (0: back to back)");
  app.add_option("--zipf", o.zipf, "contend: skew of the zipf key chooser (0: uniform)")->check(CLI::Range(0.0, 0.999));
  app.add_option("--fresh", o.fresh, "contend: percent of operations that insert (or search) keys of the worker's own, "
                 "so that a small table splits")->check(CLI::Range(0, 100));
  app.add_flag("--spread-inserts", o.spread_inserts, "racing inserts of one key claim different slots, leaving "
               "duplicates to remove (TableOptions::spread_inserts_for_tests)");
  app.add_option("--wrap-guard-ms", o.wrap_guard_ms, "TableOptions::tag_wrap_guard_ns in ms (0: the table's default)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{3600000}));
  app.add_flag("--exact", o.exact, "verify: each value is the one --writer wrote in round --rounds (its acknowledged write)");
  std::map<std::string, std::function<int(Checker&, const Options&)>> commands = {
      {"build", [](Checker& c, const Options&) { return c.finish("build"); }},
      {"insert", Insert}, {"load", Load}, {"update", Update}, {"delete", Delete}, {"churn", Churn}, {"verify", Verify},
      {"read", Read}, {"count", Count}, {"capacity", Capacity}, {"torn", Torn}, {"check-log", CheckLog},
      {"contend", Contend}, {"rmw", Rmw}, {"check-rmw", CheckRmw}};
  const std::map<std::string, std::string> what = {
      {"build", "build (or attach to) the table and exit"},
      {"insert", "insert keys --from..--to with writer --writer's values (round 0)"},
      {"load", "insert's keys and values through load_batch, --load-batch keys a call (no other client may load them)"},
      {"update", "update each key --rounds times (seq = round)"},
      {"delete", "delete each key once"},
      {"churn", "each round, delete or reinsert each key (seq = round)"},
      {"verify", "each key present once with a valid value (--absent: none found)"},
      {"read", "read for --duration seconds; values never go back per writer"},
      {"count", "print how many keys are present"},
      {"capacity", "print each shard's slots and global depth (--min-slots)"},
      {"torn", "tear a block on purpose; a reader must wait for it to be whole"},
      {"check-log", "the final state against the writers' --log files"},
      {"contend", "zipf-skewed searches, inserts, updates, read-modify-writes, deletes for --duration s, recorded in --history"},
      {"rmw", "every worker bumps every key --rounds times, counting the bumps in --log"},
      {"check-rmw", "each key's value bumped exactly as often as the --log files allow"}};
  for (auto& [name, fn] : commands) app.add_subcommand(name, what.at(name));
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  try {
    if (o.to < o.from) throw Error("--to must not be below --from");
    const std::string name = app.get_subcommands().front()->get_name();
    SetVerbose(false);
    Checker checker(o);
    checker.open();
    return commands.at(name)(checker, o);
  } catch (const std::exception& e) {
    fprintf(stderr, "hashtable_check: %s\n", e.what());
    return 1;
  }
}
