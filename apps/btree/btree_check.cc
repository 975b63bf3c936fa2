// btree_check: driver of the SMART-BT integration tests. Each command
// connects to the memory blades given with --server, runs threads x
// coroutines against the tree, checks what it saw and exits non-zero with a
// message on the first violation.
//
// Key id i is the tree key i * kKeyStride (order kept, spread over the
// 64-bit range). Values name their writer, key id and round: long values as
// text "w<writer>:<id>:<seq>" padded with dots to 24 bytes (in a value
// block), or with --short-values
// eight bytes (writer 8 bits, seq 24 bits, id 32 bits) inline in the leaf.
// Writers can log their acknowledged writes and deletes (writer_log.h) for
// check-log.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <mutex>

#include "btree.h"
#include "page.h"
#include "smart/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "smart/check/writer_log.h"

namespace {

using namespace smart;
using btree::BTree;
namespace wl = smart::check;  // the checkers' writer logs (smart/check/writer_log.h)

constexpr uint64_t kKeyStride = 1000003;

struct Options {
  std::vector<std::string> servers;
  int threads = 2;
  int coros = 4;
  uint64_t from = 0, to = 0;
  int writer = 0;
  int writers = 1;
  int rounds = 1;
  double duration = 1;
  bool absent = false;
  bool allow_missing = false;
  bool short_values = false;
  bool even_stable = false;
  std::string parity = "all";  // insert, check-log: all ids, or only the even or odd ones
  int min_height = 0;
  uint64_t lease_ms = 2000;
  uint64_t retry_timeout_ms = 10000;
  std::vector<std::string> logs;
};

uint64_t Key(uint64_t id) { return id * kKeyStride; }

// The ids a command with --parity works on.
bool OfParity(const Options& o, uint64_t id) {
  return o.parity == "all" || (o.parity == "even") == (id % 2 == 0);
}

std::string Value(const Options& o, int writer, uint64_t id, uint64_t seq) {
  if (o.short_values) {
    const uint64_t v = (uint64_t{static_cast<uint8_t>(writer)}) | ((seq & 0xffffff) << 8) | ((id & 0xffffffff) << 32);
    return std::string(reinterpret_cast<const char*>(&v), 8);
  }
  // Padded with dots to 24 bytes, so that it never looks like a short value
  // and always lives in a block.
  std::string text = "w" + std::to_string(writer) + ":" + std::to_string(id) + ":" + std::to_string(seq);
  if (text.size() < 24) text.append(24 - text.size(), '.');
  return text;
}

bool ParseValue(const std::string& v, int* writer, uint64_t* id, uint64_t* seq) {
  if (v.size() == 8) {
    uint64_t w;
    memcpy(&w, v.data(), 8);
    *writer = static_cast<int>(w & 0xff);
    *seq = (w >> 8) & 0xffffff;
    *id = w >> 32;
    return true;
  }
  unsigned long long k, s;
  int w, used = 0;
  if (sscanf(v.c_str(), "w%d:%llu:%llu%n", &w, &k, &s, &used) != 3) return false;
  if (v.size() < 24 || v.find_first_not_of('.', static_cast<size_t>(used)) != std::string::npos) return false;
  *writer = w;
  *id = k;
  *seq = s;
  return true;
}

class Checker {
 public:
  explicit Checker(const Options& o) : o_(o) {}

  void open() {
    config_ = SmartConfig::Load();
    smart::ExportProviderEnvironment(config_);
    initiator_ = std::make_unique<Initiator>(config_);
    for (size_t i = 0; i < o_.servers.size(); ++i) {
      const std::string& s = o_.servers[i];
      const ServerAddress address = ParseServerAddress(s);
      initiator_->connect(static_cast<node_t>(i), address.hostname, address.port, o_.threads + 1);
    }
    btree::TreeOptions options;
    options.speculative_lookup = config_.use_speculative_lookup;
    options.reclaim_grace_ns = 1000000;  // frequent block reuse, and its checks
    options.lease.lease_ns = o_.lease_ms * 1000000;
    options.retry_timeout_ns = o_.retry_timeout_ms * 1000000;
    tree_ = std::make_unique<BTree>(*initiator_, config_, static_cast<int>(o_.servers.size()), options);
  }

  BTree& tree() { return *tree_; }
  Initiator& initiator() { return *initiator_; }

  // Runs fn(worker, first id, step) on threads x coroutines; the ids of
  // [from, to) are split among the workers by stride.
  void run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn) {
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

  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty();
  }
  int finish(const std::string& what) {
    if (!error_.empty()) {
      fprintf(stderr, "btree_check %s: FAILED: %s\n", what.c_str(), error_.c_str());
      return 1;
    }
    const btree::TreeStats s = tree_->stats();
    printf("btree_check %s: ok (torn reads %" PRIu64 ", leaf splits %" PRIu64 ", internal splits %" PRIu64
           ", new roots %" PRIu64 ", lock retries %" PRIu64 ", take-overs %" PRIu64 ", hand-overs %" PRIu64
           ", links checked %" PRIu64 ", moved right %" PRIu64 ")\n",
           what.c_str(), s.torn_reads, s.leaf_splits, s.internal_splits, s.root_changes, s.lock_retries,
           s.lock_takeovers, s.handovers, s.links_checked, s.moved_right);
    return 0;
  }

 private:
  const Options& o_;
  SmartConfig config_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<BTree> tree_;
  std::mutex mutex_;
  std::string error_;
};

// Inserts (upserts) every id once per round, seq = round - 1.
int Insert(Checker& c, const Options& o) {
  wl::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    wl::WriterLog log;
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        if (!OfParity(o, id)) continue;
        const uint64_t seq = static_cast<uint64_t>(round - 1);
        const uint64_t start = NowNs();
        Status s = c.tree().insert(Key(id), Value(o, o.writer, id, seq));
        if (s.ok()) {
          recorder.acknowledged(&log, id, seq, start);
        } else {
          c.fail("insert key id " + std::to_string(id) + ": " + s.ToString());
        }
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("insert");
}

// Every round writes seq = round to each id of the worker, in order.
int Update(Checker& c, const Options& o) {
  wl::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    wl::WriterLog log;
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        const uint64_t start = NowNs();
        Status s = c.tree().update(Key(id), Value(o, o.writer, id, static_cast<uint64_t>(round)));
        if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
        if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
          c.fail("update key id " + std::to_string(id) + ": " + s.ToString());
        }
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("update");
}

int Delete(Checker& c, const Options& o) {
  wl::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    wl::WriterLog log;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      if (o.even_stable && id % 2 == 0) continue;  // delete the odd ids only
      const uint64_t start = NowNs();
      Status s = c.tree().remove(Key(id));
      if (s.ok()) recorder.deleted(&log, id, start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("delete key id " + std::to_string(id) + ": " + s.ToString());
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("delete");
}

// Every round, each id of the worker is deleted or (re)inserted with seq =
// round, as ChurnDeletes (writer_log.h) picks: writers on the same ids
// interleave deletes and reinserts. A delete of an absent id is no error.
int Churn(Checker& c, const Options& o) {
  wl::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    wl::WriterLog log;
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        const uint64_t start = NowNs();
        if (wl::ChurnDeletes(o.writer, id, round)) {
          Status s = c.tree().remove(Key(id));
          if (s.ok()) recorder.deleted(&log, id, start);
          if (!s.ok() && s.code() != Status::Code::kNotFound) {
            c.fail("delete key id " + std::to_string(id) + ": " + s.ToString());
          }
        } else {
          Status s = c.tree().insert(Key(id), Value(o, o.writer, id, static_cast<uint64_t>(round)));
          if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
          if (!s.ok()) c.fail("insert key id " + std::to_string(id) + ": " + s.ToString());
        }
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("churn");
}

void CheckValue(Checker& c, const Options& o, uint64_t id, const std::string& value, int* writer, uint64_t* seq) {
  uint64_t id_in_value;
  if (!ParseValue(value, writer, &id_in_value, seq)) {
    c.fail("key id " + std::to_string(id) + " holds a malformed value");
  } else if (id_in_value != (o.short_values ? (id & 0xffffffff) : id)) {
    c.fail("key id " + std::to_string(id) + " holds the value of key id " + std::to_string(id_in_value));
  } else if (*writer < 0 || *writer >= o.writers || *seq > static_cast<uint64_t>(o.rounds)) {
    c.fail("key id " + std::to_string(id) + " holds a value nobody wrote (writer " + std::to_string(*writer) +
           ", seq " + std::to_string(*seq) + ")");
  }
}

// The final state against the writers' logs (writer_log.h), and the leaf
// level's structure: fences chained, keys in order, each key once.
int CheckLog(Checker& c, const Options& o) {
  const auto writes = wl::LoadWriterLogs(o.logs);
  std::atomic<uint64_t> checked{0}, absent{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      if (!OfParity(o, id)) continue;
      auto it = writes.find(id);
      Status s = c.tree().search(Key(id), &value);
      if (s.code() == Status::Code::kNotFound) {
        const std::string wrong = it == writes.end() ? "" : wl::CheckAbsentAgainstLog(id, it->second);
        if (!wrong.empty()) c.fail(wrong);
        absent.fetch_add(1);
        continue;
      }
      if (!s.ok()) {
        c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
        continue;
      }
      if (it == writes.end()) {
        c.fail("key id " + std::to_string(id) + " is present, but no writer logged a write of it");
        continue;
      }
      int writer;
      uint64_t id_in_value, seq;
      if (!ParseValue(value, &writer, &id_in_value, &seq) || id_in_value != (o.short_values ? (id & 0xffffffff) : id)) {
        c.fail("key id " + std::to_string(id) + " holds a value no writer wrote for it");
        continue;
      }
      const std::string wrong = wl::CheckAgainstLog(id, writer, seq, it->second);
      if (!wrong.empty()) c.fail(wrong);
      checked.fetch_add(1);
    }
  });
  uint64_t keys = 0;
  Status s = c.tree().check_leaves(&keys);
  if (!s.ok()) c.fail("leaf level: " + s.ToString());
  int height = 0;
  s = c.tree().height(&height);
  if (!s.ok()) c.fail("height: " + s.ToString());
  if (height < o.min_height) c.fail("the tree has " + std::to_string(height) + " levels, expected at least " + std::to_string(o.min_height));
  printf("btree_check check-log: %" PRIu64 " keys present and %" PRIu64 " absent, as the writers' logs allow; %" PRIu64
         " keys in %d levels\n",
         checked.load(), absent.load(), keys, height);
  return c.finish("check-log");
}

// Present ids hold a well-formed value (--absent: none is found); with
// --even-stable only the odd ids are checked for absence.
int Verify(Checker& c, const Options& o) {
  std::atomic<uint64_t> checked{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      Status s = c.tree().search(Key(id), &value);
      const bool want_absent = o.absent && !(o.even_stable && id % 2 == 0);
      if (want_absent) {
        if (s.code() != Status::Code::kNotFound) c.fail("key id " + std::to_string(id) + " was deleted but is still found");
      } else if (!s.ok()) {
        c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
      } else {
        int writer;
        uint64_t seq;
        CheckValue(c, o, id, value, &writer, &seq);
      }
      checked.fetch_add(1);
    }
  });
  uint64_t keys = 0;
  Status s = c.tree().check_leaves(&keys);
  if (!s.ok()) c.fail("leaf level: " + s.ToString());
  printf("btree_check verify: %" PRIu64 " keys checked, %" PRIu64 " in the leaves\n", checked.load(), keys);
  return c.finish("verify");
}

// Readers sweep the ids for `duration` seconds: values well-formed, and per
// key and writer the sequence number a task sees never goes down.
int Read(Checker& c, const Options& o) {
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  std::atomic<uint64_t> reads{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    std::map<std::pair<uint64_t, int>, uint64_t> last;
    std::string value;
    uint64_t id = o.from + static_cast<uint64_t>(worker) * 7;
    while (NowNs() < end && !c.failed()) {
      if (id >= o.to) id = o.from + (id - o.to) % (o.to - o.from);
      Status s = c.tree().search(Key(id), &value);
      if (s.ok()) {
        int writer;
        uint64_t seq;
        CheckValue(c, o, id, value, &writer, &seq);
        auto& seen = last[{id, writer}];
        if (seq < seen) {
          c.fail("key id " + std::to_string(id) + ": read seq " + std::to_string(seq) + " of writer " +
                 std::to_string(writer) + " after seq " + std::to_string(seen));
        }
        seen = std::max(seen, seq);
      } else if (!(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
      }
      reads.fetch_add(1, std::memory_order_relaxed);
      id += 13;
    }
  });
  printf("btree_check read: %" PRIu64 " reads\n", reads.load());
  return c.finish("read");
}

// Scans for `duration` seconds from random ids: keys sorted, each once,
// within [start, ...), values well-formed; with --even-stable every even id
// (present throughout) in the range covered must be there.
int Scan(Checker& c, const Options& o) {
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  std::atomic<uint64_t> scans{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    std::vector<std::pair<uint64_t, std::string>> out;
    uint64_t id = o.from + static_cast<uint64_t>(worker) * 101;
    while (NowNs() < end && !c.failed()) {
      id = o.from + (id - o.from + 331) % (o.to - o.from);
      const size_t count = 1 + (id * 7) % 100;
      Status s = c.tree().scan(Key(id), count, &out);
      if (!s.ok()) {
        c.fail("scan from key id " + std::to_string(id) + ": " + s.ToString());
        break;
      }
      uint64_t next_even = id + (id % 2);
      for (size_t i = 0; i < out.size(); ++i) {
        const uint64_t key = out[i].first;
        if (i > 0 && key <= out[i - 1].first) {
          c.fail("scan from key id " + std::to_string(id) + ": keys out of order or repeated at position " + std::to_string(i));
          break;
        }
        if (key < Key(id) || key % kKeyStride != 0) {
          c.fail("scan from key id " + std::to_string(id) + " returned key " + std::to_string(key));
          break;
        }
        const uint64_t kid = key / kKeyStride;
        int writer;
        uint64_t seq;
        CheckValue(c, o, kid, out[i].second, &writer, &seq);
        if (o.even_stable && kid < o.to) {
          if (kid > next_even) {
            c.fail("scan from key id " + std::to_string(id) + " skipped key id " + std::to_string(next_even) +
                   ", present throughout");
            break;
          }
          if (kid % 2 == 0) next_even = kid + 2;
        }
      }
      if (o.even_stable && out.size() < count && next_even < o.to) {
        c.fail("scan from key id " + std::to_string(id) + " ended early, before key id " + std::to_string(next_even));
      }
      scans.fetch_add(1, std::memory_order_relaxed);
    }
  });
  printf("btree_check scan: %" PRIu64 " scans\n", scans.load());
  return c.finish("scan");
}

// Tears a leaf on purpose (one line rewritten with a stale CRC) and checks
// that a reader detects it, reads again, and returns the right value once
// the leaf is whole again.
int Torn(Checker& c, const Options& o) {
  const uint64_t id = 424242;
  const std::string value = Value(o, 0, id, 0);
  Status s = c.tree().insert(Key(id), value);
  if (!s.ok()) c.fail("insert: " + s.ToString());
  GlobalAddress leaf;
  s = c.tree().leaf_of(Key(id), &leaf);
  if (!s.ok()) c.fail("leaf_of: " + s.ToString());
  if (c.failed()) return c.finish("torn");
  char* whole = static_cast<char*>(c.initiator().alloc_cache(btree::kPageSize));
  char* torn = static_cast<char*>(c.initiator().alloc_cache(btree::kPageSize));
  s = c.initiator().read(whole, leaf, btree::kPageSize);
  if (!s.ok()) c.fail("read leaf: " + s.ToString());
  memcpy(torn, whole, btree::kPageSize);
  const int entry = btree::FindLeafKey(whole, Key(id));
  if (entry < 0) {
    c.fail("the key is not in the leaf leaf_of named");
    return c.finish("torn");
  }
  // The key's line as a concurrent writer would have left it: its second
  // half new, its CRC old.
  const size_t line = static_cast<size_t>(btree::EntryLine(entry));
  for (size_t i = line * btree::kLineSize + 40; i < (line + 1) * btree::kLineSize; ++i) torn[i] = 'T';
  s = c.initiator().write(torn, leaf, btree::kPageSize);
  if (!s.ok()) c.fail("write torn leaf: " + s.ToString());
  const uint64_t torn_before = c.tree().stats().torn_reads;
  std::string read_value;
  bool reader_done = false;
  TaskPool pool;
  pool.spawn([&] {
    Status r = c.tree().search(Key(id), &read_value);
    if (!r.ok()) c.fail("search after tearing: " + r.ToString());
    reader_done = true;
  });
  pool.spawn([&] {
    const uint64_t deadline = NowNs() + 20000000000ull;
    while (c.tree().stats().torn_reads < torn_before + 3 && NowNs() < deadline) this_task::yield();
    if (reader_done) c.fail("the reader returned while the leaf was torn");
    Status w = c.initiator().write(whole, leaf, btree::kPageSize);
    if (!w.ok()) c.fail("restore leaf: " + w.ToString());
  });
  pool.run();
  const uint64_t torn_seen = c.tree().stats().torn_reads - torn_before;
  if (torn_seen < 3) c.fail("the torn leaf was not detected (" + std::to_string(torn_seen) + " torn reads)");
  if (read_value != value) c.fail("the reader returned a wrong value after the leaf was restored");
  printf("btree_check torn: %" PRIu64 " torn reads detected, then the right value\n", torn_seen);
  return c.finish("torn");
}

}  // namespace

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
  std::map<std::string, std::function<int(Checker&, const Options&)>> commands = {
      {"build", [](Checker& c, const Options&) { return c.finish("build"); }},
      {"insert", Insert}, {"update", Update}, {"delete", Delete}, {"churn", Churn}, {"verify", Verify},
      {"read", Read}, {"scan", Scan}, {"torn", Torn}, {"check-log", CheckLog}};
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
      {"check-log", "the final state against the writers' --log files, and the leaf level"}};
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
