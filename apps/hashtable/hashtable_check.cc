// hashtable_check: driver of the SMART-HT integration tests. Each command
// connects to the memory blades given with --server (one shard each), runs
// threads x coroutines against the table, checks what it saw and exits
// non-zero with a message on the first violation. This file: the table
// under the shared checker (smart/check/checker.h) and the command line.
#include <CLI/CLI.hpp>

#include "check_support.h"
#include "smart/check/checker_main.h"

namespace smart::hashtable::check {

void Checker::open() {
  connect();
  TableOptions options;
  options.expected_keys = o_.expected_keys;
  set_common_options(&options);
  options.directory_capacity_depth = o_.directory_capacity_depth;
  options.spread_inserts_for_tests = o_.spread_inserts;
  if (o_.wrap_guard_ms != 0) options.tag_wrap_guard_ns = o_.wrap_guard_ms * 1000000;
  store_ = std::make_unique<HashTable>(initiator(), config(), static_cast<int>(o_.servers.size()), options);
}

std::string Checker::counters() {
  const TableStats s = table().stats();
  return smart::check::Counters(
      {{"torn reads", s.torn_reads}, {"torn buckets", s.torn_buckets}, {"stale directory", s.stale_directory},
       {"CAS failures", s.cas_failures}, {"splits", s.splits}, {"splits of dead clients finished", s.splits_recovered},
       {"retired", s.blocks_retired}, {"reused", s.blocks_reused}, {"duplicates removed", s.duplicates_removed},
       {"lowest copies pinned", s.lowest_pinned},
       {"slot words read again", s.slow_slot_reads}});
}

void Checker::check_value(uint64_t id, const std::string& value, int* writer, uint64_t* seq) {
  uint64_t key_in_value;
  if (!ParseValue(value, writer, &key_in_value, seq)) {
    fail(Key(id) + " holds a malformed value \"" + value + "\"");
  } else if (key_in_value != id) {
    fail(Key(id) + " holds the value of key " + std::to_string(key_in_value));
  } else if (*writer < 0 || *writer >= o_.writers || *seq > static_cast<uint64_t>(o_.rounds)) {
    fail(Key(id) + " holds a value nobody wrote: \"" + value + "\"");
  } else if (o_.exact && (*writer != o_.writer || *seq != static_cast<uint64_t>(o_.rounds))) {
    fail(Key(id) + " holds \"" + value + "\", but the last acknowledged write was \"" +
         Value(o_.writer, id, static_cast<uint64_t>(o_.rounds)) + "\"");
  }
}

bool Checker::count_and_search(uint64_t id, int* copies, std::string* value, Status* found) {
  *copies = 0;
  const Status counted = table().count_copies(Key(id), copies);
  if (!counted.ok()) {
    fail("count_copies " + Key(id) + ": " + counted.ToString());
    return false;
  }
  *found = table().search(Key(id), value);
  return true;
}

}  // namespace smart::hashtable::check

using namespace smart;
using namespace smart::hashtable::check;

namespace {

// The common options' help, worded for a table sharded over the blades.
const smart::check::CheckOptionHelp kHelp{
    .server = "memory blade host:port, one per shard (repeat)", .to = "end of the key range",
    .rounds = "update rounds (largest valid sequence number)", .duration = "seconds to read",
    .lease = "lease of the resize lock and build claim (ms)",
    .log = "insert/update/delete/churn/rmw: write this writer's log of acknowledged operations; "
           "check-log/check-rmw: a log to check against (repeat)",
    .history = "contend: record every operation and its outcome in this file (history.h)"};

}  // namespace

int main(int argc, char** argv) {
  smart::check::CheckerProgram<Checker, Options> program("hashtable_check",
                                                         "hashtable_check: SMART-HT integration test driver");
  CLI::App& app = program.app();
  Options& o = program.options();
  smart::check::AddCheckOptions(app, o, kHelp, [&](const std::string& after, CLI::Option*) {
    if (after == "--coros") {
      app.add_option("--expected-keys", o.expected_keys, "keys to size the table for, if this client builds it");
    } else if (after == "--writer") {
      app.add_option("--load-batch", o.load_batch, "load: keys per load_batch call")->check(CLI::Range(1, 64));
    } else if (after == "--allow-missing") {
      app.add_option("--min-slots", o.min_slots, "capacity: slots each shard must have at least");
    } else if (after == "--retry-timeout-ms") {
      app.add_option("--directory-capacity-depth", o.directory_capacity_depth,
                     "room in the directory of a table this client builds (2^N entries); it moves when outgrown")
          ->check(CLI::Range(0, 32));
    } else if (after == "--zipf") {
      app.add_option("--fresh", o.fresh, "contend: percent of operations that insert (or search) keys of the worker's own, "
                     "so that a small table splits")->check(CLI::Range(0, 100));
      app.add_flag("--spread-inserts", o.spread_inserts, "racing inserts of one key claim different slots, leaving "
                   "duplicates to remove (TableOptions::spread_inserts_for_tests)");
      app.add_option("--wrap-guard-ms", o.wrap_guard_ms, "TableOptions::tag_wrap_guard_ns in ms (0: the table's default)")
          ->check(CLI::Range(uint64_t{0}, uint64_t{3600000}));
      app.add_flag("--exact", o.exact,
                   "verify: each value is the one --writer wrote in round --rounds (its acknowledged write)");
    }
  });
  program.shared_commands({"build (or attach to) the table and exit",
                           "insert keys --from..--to with writer --writer's values (round 0)",
                           "update each key --rounds times (seq = round)", "delete each key once",
                           "each round, delete or reinsert each key (seq = round)"},
                          false);
  program.command("load", "insert's keys and values through load_batch, --load-batch keys a call (no other client may load them)",
                  Load);
  program.command("verify", "each key present once with a valid value (--absent: none found)", Verify);
  program.command("count", "print how many keys are present", Count);
  program.command("capacity", "print each shard's slots and global depth (--min-slots)", Capacity);
  program.command("torn", "tear a block on purpose; a reader must wait for it to be whole", Torn);
  program.command("check-log", "the final state against the writers' --log files", CheckLog);
  program.command("contend", "zipf-skewed searches, inserts, updates, read-modify-writes, deletes for --duration s, "
                  "recorded in --history", Contend);
  program.command("rmw", "every worker bumps every key --rounds times, counting the bumps in --log", Rmw);
  program.command("check-rmw", "each key's value bumped exactly as often as the --log files allow", CheckRmw);
  return program.main(argc, argv);
}
