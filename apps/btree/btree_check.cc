// btree_check: driver of the SMART-BT integration tests. Each command
// connects to the memory blades given with --server, runs threads x
// coroutines against the tree, checks what it saw and exits non-zero with a
// message on the first violation. This file: the tree under the shared
// checker (smart/check/checker.h) and the command line; the commands of its
// own are in check_writes.cc and check_reads.cc.
#include <CLI/CLI.hpp>

#include "check_support.h"
#include "smart/check/checker_main.h"

namespace smart::btree::check {

void Checker::open() {
  connect();
  TreeOptions options;
  set_common_options(&options);
  store_ = std::make_unique<BTree>(initiator(), config(), static_cast<int>(o_.servers.size()), options);
}

std::string Checker::counters() {
  const TreeStats s = tree().stats();
  return smart::check::Counters({{"torn reads", s.torn_reads}, {"leaf splits", s.leaf_splits},
                                 {"internal splits", s.internal_splits}, {"new roots", s.root_changes},
                                 {"lock retries", s.lock_retries}, {"take-overs", s.lock_takeovers},
                                 {"holders fenced", s.holders_fenced}, {"hand-overs", s.handovers},
                                 {"writes unknown", s.writes_unknown}, {"blocks leaked", s.blocks_leaked},
                                 {"links checked", s.links_checked}, {"moved right", s.moved_right}});
}

void Checker::check_value(uint64_t id, const std::string& value, int* writer, uint64_t* seq) {
  uint64_t id_in_value;
  if (!ParseValue(value, writer, &id_in_value, seq)) {
    fail("key id " + std::to_string(id) + " holds a malformed value");
  } else if (id_in_value != (o_.short_values ? (id & 0xffffffff) : id)) {
    fail("key id " + std::to_string(id) + " holds the value of key id " + std::to_string(id_in_value));
  } else if (*writer < 0 || *writer >= o_.writers || *seq > static_cast<uint64_t>(o_.rounds)) {
    fail("key id " + std::to_string(id) + " holds a value nobody wrote (writer " + std::to_string(*writer) +
         ", seq " + std::to_string(*seq) + ")");
  }
}

}  // namespace smart::btree::check

using namespace smart;
using namespace smart::btree::check;

namespace {

// The common options' help, worded for a tree whose pages spread over the
// blades.
const smart::check::CheckOptionHelp kHelp{
    .server = "memory blade host:port (repeat: pages spread over all)",
    .to = "end of the key id range", .rounds = "rounds (largest valid sequence number)",
    .duration = "seconds to read or scan", .lease = "lease of the page locks and build claim (ms)",
    .log = "insert/update/delete/churn: write this writer's log of acknowledged operations; "
           "check-log: a writer log to check against (repeat)",
    .history = "contend: record every operation and its outcome in this file"};

}  // namespace

int main(int argc, char** argv) {
  smart::check::CheckerProgram<Checker, Options> program("btree_check", "btree_check: SMART-BT integration test driver");
  CLI::App& app = program.app();
  Options& o = program.options();
  // Ids and writers fit the short values' fields (32 and 8 bits), rounds
  // their 24-bit seq.
  smart::check::AddCheckOptions(app, o, kHelp, [&](const std::string& after, CLI::Option* option) {
    if (after == "--to") {
      option->check(CLI::Range(uint64_t{0}, uint64_t{1} << 32));
    } else if (after == "--writer") {
      option->check(CLI::Range(0, 255));
    } else if (after == "--writers") {
      option->check(CLI::Range(1, 256));
    } else if (after == "--rounds") {
      option->check(CLI::Range(1, 1 << 24));
    } else if (after == "--allow-missing") {
      app.add_flag("--short-values", o.short_values, "8-byte values, inline in the leaves");
      app.add_flag("--even-stable", o.even_stable,
                   "even ids stay present: delete and --absent skip them, scans must see them");
      app.add_option("--parity", o.parity, "insert, check-log: all ids, or only the even or the odd ones")
          ->check(CLI::IsMember({"all", "even", "odd"}));
      app.add_option("--min-height", o.min_height, "check-log: levels the tree must have at least");
    } else if (after == "--zipf") {
      app.add_flag("--end-on-error", o.end_on_error,
                   "contend: an operation that fails ends the command without failing it (a client that is to be fenced)");
    }
  });
  program.shared_commands({"build (or attach to) the tree and exit",
                           "insert (upsert) ids --from..--to, --rounds times (seq = round - 1)",
                           "update each id --rounds times (seq = round)",
                           "delete each id once (--even-stable: the odd ones)",
                           "each round, delete or reinsert each id (seq = round)"},
                          true);
  program.command("verify", "each id present with a valid value (--absent: none found)", Verify);
  program.command("scan", "scan for --duration seconds: sorted, no duplicates, stable ids present", Scan);
  program.command("torn", "tear a leaf on purpose; a reader must read it again", Torn);
  program.command("check-log", "the final state against the writers' --log files, and the leaf level", CheckLog);
  program.command("contend", "search/insert/update/delete/rmw zipf-drawn ids for --duration, recording a --history",
                  Contend);
  return program.main(argc, argv, [&](const std::string& name) {
    if ((name == "read" || name == "scan") && o.to == o.from) throw Error(name + " needs a non-empty --from/--to range");
  });
}
