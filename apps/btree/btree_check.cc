// btree_check: driver of the SMART-BT integration tests. Each command
// connects to the memory blades given with --server, runs threads x
// coroutines against the tree, checks what it saw and exits non-zero with a
// message on the first violation. This file: the command line and what the
// commands share (check_support.h); the commands are in check_writes.cc and
// check_reads.cc.
#include <CLI/CLI.hpp>
#include <charconv>
#include <map>

#include "check_support.h"

namespace smart::btree::check {

std::string Bump(const std::string& value) {
  const size_t plus = value.rfind('+');
  if (plus != std::string::npos) {
    const char* first = value.data() + plus + 1;
    const char* last = value.data() + value.size();
    uint64_t n = 0;
    const auto [end, error] = std::from_chars(first, last, n);
    // Canonical decimal only (no sign, no leading zero), as Go's
    // strconv.FormatUint(ParseUint(s)) == s.
    if (error == std::errc() && end == last && std::string_view(first, last - first) == std::to_string(n)) {
      return value.substr(0, plus + 1) + std::to_string(n + 1);
    }
  }
  return value + "+1";
}

void Checker::open() {
  config_ = SmartConfig::Load();
  smart::ExportProviderEnvironment(config_);
  initiator_ = std::make_unique<Initiator>(config_);
  for (size_t i = 0; i < o_.servers.size(); ++i) {
    const ServerAddress address = ParseServerAddress(o_.servers[i]);
    initiator_->connect(static_cast<node_t>(i), address.hostname, address.port, o_.threads + 1);
  }
  TreeOptions options;
  options.speculative_lookup = config_.use_speculative_lookup;
  options.reclaim_grace_ns = 1000000;  // frequent block reuse, and its checks
  options.lease.lease_ns = o_.lease_ms * 1000000;
  options.retry_timeout_ns = o_.retry_timeout_ms * 1000000;
  tree_ = std::make_unique<BTree>(*initiator_, config_, static_cast<int>(o_.servers.size()), options);
}

void Checker::run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn) {
  const uint64_t workers = static_cast<uint64_t>(o_.threads) * static_cast<uint64_t>(o_.coros);
  RunThreads(o_.threads, false, [&](int t) {
    TaskPool pool(TaskPoolOptions{128 * 1024, o_.coros});
    for (int k = 0; k < o_.coros; ++k) {
      const int worker = t * o_.coros + k;
      pool.spawn([&, worker] { fn(worker, o_.from + static_cast<uint64_t>(worker), workers); });
    }
    pool.run();
  });
}

int Checker::finish(const std::string& what) {
  if (!error_.empty()) {
    fprintf(stderr, "btree_check %s: FAILED: %s\n", what.c_str(), error_.c_str());
    return 1;
  }
  const TreeStats s = tree_->stats();
  printf("btree_check %s: ok (torn reads %" PRIu64 ", leaf splits %" PRIu64 ", internal splits %" PRIu64
         ", new roots %" PRIu64 ", lock retries %" PRIu64 ", take-overs %" PRIu64 ", holders fenced %" PRIu64
         ", hand-overs %" PRIu64 ", writes unknown %" PRIu64 ", blocks leaked %" PRIu64 ", links checked %" PRIu64
         ", moved right %" PRIu64 ")\n",
         what.c_str(), s.torn_reads, s.leaf_splits, s.internal_splits, s.root_changes, s.lock_retries,
         s.lock_takeovers, s.holders_fenced, s.handovers, s.writes_unknown, s.blocks_leaked, s.links_checked,
         s.moved_right);
  return 0;
}

}  // namespace smart::btree::check

using namespace smart;
using namespace smart::btree::check;

int main(int argc, char** argv) {
  CLI::App app{"btree_check: SMART-BT integration test driver"};
  app.fallthrough();
  app.require_subcommand(1);
  Options o;
  app.add_option("--server", o.servers, "memory blade host:port (repeat: pages spread over all)")->required();
  app.add_option("--threads", o.threads, "threads")->check(CLI::Range(1, 64));
  app.add_option("--coros", o.coros, "coroutines per thread")->check(CLI::Range(1, 64));
  app.add_option("--from", o.from, "first key id");
  app.add_option("--to", o.to, "end of the key id range")->check(CLI::Range(uint64_t{0}, uint64_t{1} << 32));
  app.add_option("--writer", o.writer, "writer id stored in the values")->check(CLI::Range(0, 255));
  app.add_option("--writers", o.writers, "number of writers whose values are valid")->check(CLI::Range(1, 256));
  app.add_option("--rounds", o.rounds, "rounds (largest valid sequence number)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--duration", o.duration, "seconds to read or scan");
  app.add_flag("--absent", o.absent, "verify: the keys must be absent");
  app.add_flag("--allow-missing", o.allow_missing, "a key may be missing (deleted concurrently)");
  app.add_flag("--short-values", o.short_values, "8-byte values, inline in the leaves");
  app.add_flag("--even-stable", o.even_stable, "even ids stay present: delete and --absent skip them, scans must see them");
  app.add_option("--parity", o.parity, "insert, check-log: all ids, or only the even or the odd ones")
      ->check(CLI::IsMember({"all", "even", "odd"}));
  app.add_option("--min-height", o.min_height, "check-log: levels the tree must have at least");
  app.add_option("--lease-ms", o.lease_ms, "lease of the page locks and build claim (ms)")->check(CLI::Range(1, 3600000));
  app.add_option("--retry-timeout-ms", o.retry_timeout_ms, "an operation stuck this long fails (ms)")->check(CLI::Range(1, 3600000));
  app.add_option("--log", o.logs, "insert/update/delete/churn: write this writer's log of acknowledged operations; "
                 "check-log: a writer log to check against (repeat)");
  app.add_option("--history", o.history, "contend: record every operation and its outcome in this file");
  app.add_option("--ops", o.ops, "contend: operations per worker, started on ticks spread over --duration (0: back to back)");
  app.add_option("--zipf", o.zipf, "contend: skew of the zipf key chooser (0: uniform)")->check(CLI::Range(0.0, 0.999));
  app.add_flag("--end-on-error", o.end_on_error,
               "contend: an operation that fails ends the command without failing it (a client that is to be fenced)");
  std::map<std::string, std::function<int(Checker&, const Options&)>> commands = {
      {"build", [](Checker& c, const Options&) { return c.finish("build"); }},
      {"insert", Insert}, {"update", Update}, {"delete", Delete}, {"churn", Churn}, {"verify", Verify},
      {"read", Read}, {"scan", Scan}, {"torn", Torn}, {"check-log", CheckLog}, {"contend", Contend}};
  const std::map<std::string, std::string> what = {
      {"build", "build (or attach to) the tree and exit"},
      {"insert", "insert (upsert) ids --from..--to, --rounds times (seq = round - 1)"},
      {"update", "update each id --rounds times (seq = round)"},
      {"delete", "delete each id once (--even-stable: the odd ones)"},
      {"churn", "each round, delete or reinsert each id (seq = round)"},
      {"verify", "each id present with a valid value (--absent: none found)"},
      {"read", "read for --duration seconds; values never go back per writer"},
      {"scan", "scan for --duration seconds: sorted, no duplicates, stable ids present"},
      {"torn", "tear a leaf on purpose; a reader must read it again"},
      {"check-log", "the final state against the writers' --log files, and the leaf level"},
      {"contend", "search/insert/update/delete/rmw zipf-drawn ids for --duration, recording a --history"}};
  for (auto& [name, fn] : commands) app.add_subcommand(name, what.at(name));
  CLI11_PARSE(app, argc, argv);
  try {
    if (o.to < o.from) throw Error("--to must not be below --from");
    const std::string name = app.get_subcommands().front()->get_name();
    if ((name == "read" || name == "scan") && o.to == o.from) throw Error(name + " needs a non-empty --from/--to range");
    SetVerbose(false);
    Checker checker(o);
    checker.open();
    return commands.at(name)(checker, o);
  } catch (const std::exception& e) {
    fprintf(stderr, "btree_check: %s\n", e.what());
    return 1;
  }
}
