// hashtable_check: driver of the SMART-HT integration tests. Each command
// connects to the memory blades given with --server (one shard each), runs
// threads x coroutines against the table, checks what it saw and exits
// non-zero with a message on the first violation.
//
// Values written here have the form "w<writer>:<key>:<seq>", so a reader can
// tell who wrote a value, for which key, and in which round.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <map>
#include <mutex>

#include "hash_table.h"
#include "op_history.h"
#include "layout.h"
#include "writer_log.h"
#include "smart/bench.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "smart/ycsb.h"

namespace {

using namespace smart;
using hashtable::HashTable;

struct Options {
  std::vector<std::string> servers;
  int threads = 2;
  int coros = 4;
  uint64_t expected_keys = 10000;
  int load_batch = 7;
  uint64_t from = 0, to = 0;
  int writer = 0;
  int writers = 1;
  int rounds = 1;
  double duration = 1;
  bool absent = false;
  bool allow_missing = false;
  uint64_t min_slots = 0;
  uint64_t lease_ms = 2000;
  uint64_t retry_timeout_ms = 10000;
  int directory_capacity_depth = 20;
  bool exact = false;
  std::vector<std::string> logs;  // writer logs (insert/update/delete/churn write one; check-log reads them)
  std::string history;            // contend: every operation and its outcome (history.h)
  double zipf = 0.99;             // contend: skew of the key chooser
  uint64_t ops = 0;               // contend: operations per worker, on ticks over --duration (0: back to back)
};

std::string Key(uint64_t id) {
  char buf[32];
  snprintf(buf, sizeof(buf), "key%012" PRIu64, id);
  return buf;
}

std::string Value(int writer, uint64_t id, uint64_t seq) {
  return "w" + std::to_string(writer) + ":" + std::to_string(id) + ":" + std::to_string(seq);
}

// Parses "w<writer>:<key>:<seq>"; false when malformed.
bool ParseValue(const std::string& v, int* writer, uint64_t* id, uint64_t* seq) {
  unsigned long long k, s;
  int w;
  char tail;
  if (sscanf(v.c_str(), "w%d:%llu:%llu%c", &w, &k, &s, &tail) != 3) return false;
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
    hashtable::TableOptions options;
    options.expected_keys = o_.expected_keys;
    options.speculative_lookup = config_.use_speculative_lookup;
    // A short grace period makes block reuse (and its checks) frequent.
    options.reclaim_grace_ns = 1000000;
    options.lease.lease_ns = o_.lease_ms * 1000000;
    options.retry_timeout_ns = o_.retry_timeout_ms * 1000000;
    options.directory_capacity_depth = o_.directory_capacity_depth;
    table_ = std::make_unique<HashTable>(*initiator_, config_, static_cast<int>(o_.servers.size()), options);
  }

  HashTable& table() { return *table_; }
  Initiator& initiator() { return *initiator_; }

  // Runs fn(worker, first key, step) on threads x coroutines; the keys of
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
      fprintf(stderr, "hashtable_check %s: FAILED: %s\n", what.c_str(), error_.c_str());
      return 1;
    }
    const hashtable::TableStats s = table_->stats();
    printf("hashtable_check %s: ok (torn reads %" PRIu64 ", torn buckets %" PRIu64 ", stale directory %" PRIu64
           ", CAS failures %" PRIu64
           ", splits %" PRIu64 ", splits of dead clients finished %" PRIu64 ", retired %" PRIu64 ", reused %" PRIu64 ")\n",
           what.c_str(), s.torn_reads, s.torn_buckets, s.stale_directory, s.cas_failures, s.splits, s.splits_recovered,
           s.blocks_retired, s.blocks_reused);
    return 0;
  }

 private:
  const Options& o_;
  SmartConfig config_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<HashTable> table_;
  std::mutex mutex_;
  std::string error_;
};

int Insert(Checker& c, const Options& o) {
  hashtable::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    hashtable::WriterLog log;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      const uint64_t start = NowNs();
      Status s = c.table().insert(Key(id), Value(o.writer, id, 0));
      if (s.ok()) recorder.acknowledged(&log, id, 0, start);
      if (!s.ok()) c.fail("insert " + Key(id) + ": " + s.ToString());
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("insert");
}

// Insert's keys and values through HashTable::load_batch, --load-batch keys
// a call; a batch's keys are acknowledged together when the call returns.
// Keys are the worker's own (no other loader of them): the load's promise.
int Load(Checker& c, const Options& o) {
  hashtable::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    hashtable::WriterLog log;
    std::vector<uint64_t> ids;
    std::vector<std::string> keys, values;
    std::vector<std::string_view> k, v;
    for (uint64_t id = first; id < o.to && !c.failed();) {
      ids.clear();
      keys.clear();
      values.clear();
      for (; id < o.to && ids.size() < static_cast<size_t>(o.load_batch); id += step) {
        ids.push_back(id);
        keys.push_back(Key(id));
        values.push_back(Value(o.writer, id, 0));
      }
      k.assign(keys.begin(), keys.end());
      v.assign(values.begin(), values.end());
      const uint64_t start = NowNs();
      Status s = c.table().load_batch(k.data(), v.data(), k.size());
      if (!s.ok()) {
        c.fail("load " + keys.front() + " .. " + keys.back() + ": " + s.ToString());
        break;
      }
      for (uint64_t loaded : ids) recorder.acknowledged(&log, loaded, 0, start);
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("load");
}

// Every round writes seq = round to each key of the worker, in order.
int Update(Checker& c, const Options& o) {
  hashtable::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    hashtable::WriterLog log;
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        const uint64_t start = NowNs();
        Status s = c.table().update(Key(id), Value(o.writer, id, static_cast<uint64_t>(round)));
        if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
        if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
          c.fail("update " + Key(id) + ": " + s.ToString());
        }
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("update");
}

// Compares every key's final state with the writers' logs (writer_log.h):
// its value (or its absence), and one copy of a present key, none of an
// absent one.
int CheckLog(Checker& c, const Options& o) {
  const auto writes = hashtable::LoadWriterLogs(o.logs);
  const std::vector<hashtable::LoggedWrite> none;
  std::atomic<uint64_t> present{0}, absent{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      auto it = writes.find(id);
      const auto& ops = it == writes.end() ? none : it->second;
      int copies = 0;
      Status s = c.table().count_copies(Key(id), &copies);
      if (!s.ok()) {
        c.fail("count_copies " + Key(id) + ": " + s.ToString());
        continue;
      }
      s = c.table().search(Key(id), &value);
      if (s.code() == Status::Code::kNotFound) {
        const std::string wrong = hashtable::CheckAbsentAgainstLog(id, ops);
        if (!wrong.empty()) c.fail(wrong);
        if (copies != 0) c.fail(Key(id) + " is not found, but " + std::to_string(copies) + " copies of it are in the table");
        absent.fetch_add(1);
        continue;
      }
      if (!s.ok()) {
        c.fail("search " + Key(id) + ": " + s.ToString());
        continue;
      }
      if (copies != 1) c.fail(Key(id) + " has " + std::to_string(copies) + " copies, expected exactly 1");
      int writer;
      uint64_t key_in_value, seq;
      if (!ParseValue(value, &writer, &key_in_value, &seq) || key_in_value != id) {
        c.fail(Key(id) + " holds \"" + value + "\", which no writer wrote for it");
        continue;
      }
      const std::string wrong = ops.empty() ? Key(id) + " is present, but no writer logged a write of it"
                                            : hashtable::CheckAgainstLog(id, writer, seq, ops);
      if (!wrong.empty()) c.fail(wrong);
      present.fetch_add(1);
    }
  });
  printf("hashtable_check check-log: %" PRIu64 " keys present and %" PRIu64 " absent, as the writers' logs allow\n",
         present.load(), absent.load());
  return c.finish("check-log");
}

int Delete(Checker& c, const Options& o) {
  hashtable::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    hashtable::WriterLog log;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      const uint64_t start = NowNs();
      Status s = c.table().remove(Key(id));
      if (s.ok()) recorder.deleted(&log, id, start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("delete " + Key(id) + ": " + s.ToString());
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("delete");
}

// Every round, each key of the worker is deleted or (re)inserted with seq =
// round, as ChurnDeletes (writer_log.h) picks: writers on the same keys
// interleave deletes and reinserts. A delete of an absent key is no error.
int Churn(Checker& c, const Options& o) {
  hashtable::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    hashtable::WriterLog log;
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        const uint64_t start = NowNs();
        if (hashtable::ChurnDeletes(o.writer, id, round)) {
          Status s = c.table().remove(Key(id));
          if (s.ok()) recorder.deleted(&log, id, start);
          if (!s.ok() && s.code() != Status::Code::kNotFound) c.fail("delete " + Key(id) + ": " + s.ToString());
        } else {
          Status s = c.table().insert(Key(id), Value(o.writer, id, static_cast<uint64_t>(round)));
          if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
          if (!s.ok()) c.fail("insert " + Key(id) + ": " + s.ToString());
        }
      }
    }
    recorder.merge(log);
  });
  recorder.save();
  return c.finish("churn");
}

// Checks one value read for key `id`.
void CheckValue(Checker& c, const Options& o, uint64_t id, const std::string& value, int* writer, uint64_t* seq) {
  uint64_t key_in_value;
  if (!ParseValue(value, writer, &key_in_value, seq)) {
    c.fail(Key(id) + " holds a malformed value \"" + value + "\"");
  } else if (key_in_value != id) {
    c.fail(Key(id) + " holds the value of key " + std::to_string(key_in_value));
  } else if (*writer < 0 || *writer >= o.writers || *seq > static_cast<uint64_t>(o.rounds)) {
    c.fail(Key(id) + " holds a value nobody wrote: \"" + value + "\"");
  } else if (o.exact && (*writer != o.writer || *seq != static_cast<uint64_t>(o.rounds))) {
    c.fail(Key(id) + " holds \"" + value + "\", but the last acknowledged write was \"" +
           Value(o.writer, id, static_cast<uint64_t>(o.rounds)) + "\"");
  }
}

// Present keys: exactly one copy and a well-formed value; --absent: none.
int Verify(Checker& c, const Options& o) {
  std::atomic<uint64_t> checked{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      int copies = 0;
      Status s = c.table().count_copies(Key(id), &copies);
      if (!s.ok()) {
        c.fail("count_copies " + Key(id) + ": " + s.ToString());
        break;
      }
      s = c.table().search(Key(id), &value);
      if (o.absent) {
        if (copies != 0 || s.ok()) c.fail(Key(id) + " was deleted but is still found (" + std::to_string(copies) + " copies)");
      } else {
        if (copies != 1) c.fail(Key(id) + " has " + std::to_string(copies) + " copies, expected exactly 1");
        if (!s.ok()) {
          c.fail("search " + Key(id) + ": " + s.ToString());
        } else {
          int writer;
          uint64_t seq;
          CheckValue(c, o, id, value, &writer, &seq);
        }
      }
      checked.fetch_add(1);
    }
  });
  printf("hashtable_check verify: %" PRIu64 " keys checked (%s)\n", checked.load(), o.absent ? "absent" : "present");
  return c.finish("verify");
}

// Readers sweep the keys for `duration` seconds; per key and writer, the
// sequence number a task sees never goes down.
int Read(Checker& c, const Options& o) {
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  std::atomic<uint64_t> reads{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    std::map<std::pair<uint64_t, int>, uint64_t> last;
    std::string value;
    uint64_t id = o.from + static_cast<uint64_t>(worker) * 7;
    while (NowNs() < end && !c.failed()) {
      if (id >= o.to) id = o.from + (id - o.to) % (o.to - o.from);
      Status s = c.table().search(Key(id), &value);
      if (s.ok()) {
        int writer;
        uint64_t seq;
        CheckValue(c, o, id, value, &writer, &seq);
        auto& seen = last[{id, writer}];
        if (seq < seen) {
          c.fail(Key(id) + ": read seq " + std::to_string(seq) + " of writer " + std::to_string(writer) +
                 " after seq " + std::to_string(seen));
        }
        seen = std::max(seen, seq);
      } else if (!(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("search " + Key(id) + ": " + s.ToString());
      }
      reads.fetch_add(1, std::memory_order_relaxed);
      id += 13;
    }
  });
  printf("hashtable_check read: %" PRIu64 " reads\n", reads.load());
  return c.finish("read");
}

// Prints how many keys of [from, to) are present (never fails on absence).
int Count(Checker& c, const Options& o) {
  std::atomic<uint64_t> present{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      Status s = c.table().search(Key(id), &value);
      if (s.ok()) {
        present.fetch_add(1);
      } else if (s.code() != Status::Code::kNotFound) {
        c.fail("search " + Key(id) + ": " + s.ToString());
      }
    }
  });
  printf("present %" PRIu64 "\n", present.load());
  return c.finish("count");
}

int Capacity(Checker& c, const Options& o) {
  for (int shard = 0; shard < c.table().shards(); ++shard) {
    uint64_t slots;
    int depth;
    Status s = c.table().capacity(shard, &slots, &depth);
    if (!s.ok()) c.fail("capacity: " + s.ToString());
    printf("hashtable_check capacity: shard %d: %" PRIu64 " slots, global depth %d\n", shard, slots, depth);
    if (slots < o.min_slots) {
      c.fail("shard " + std::to_string(shard) + " has " + std::to_string(slots) + " slots, expected at least " +
             std::to_string(o.min_slots));
    }
  }
  return c.finish("capacity");
}

// Tears the block of a key on purpose (half of it rewritten, checksum
// stale) and checks that a reader detects it, re-reads, and returns the
// right value once the block is whole again.
int Torn(Checker& c, const Options&) {
  const std::string key = Key(424242);
  const std::string value = Value(0, 424242, 7) + std::string(100, 'x');
  Status s = c.table().insert(key, value);
  if (!s.ok()) c.fail("insert: " + s.ToString());
  HashTable::Location where;
  s = c.table().locate(key, &where);
  if (!s.ok()) c.fail("locate: " + s.ToString());
  if (c.failed()) return c.finish("torn");
  char* whole = static_cast<char*>(c.initiator().alloc_cache(where.block_length));
  char* torn = static_cast<char*>(c.initiator().alloc_cache(where.block_length));
  s = c.initiator().read(whole, where.block, where.block_length);
  if (!s.ok()) c.fail("read block: " + s.ToString());
  memcpy(torn, whole, where.block_length);
  // The second half as a concurrent writer would have left it.
  for (size_t i = where.block_length / 2; i < where.block_length - 4; ++i) torn[i] = 'T';
  s = c.initiator().write(torn, where.block, where.block_length);
  if (!s.ok()) c.fail("write torn block: " + s.ToString());
  const uint64_t torn_before = c.table().stats().torn_reads;
  std::string read_value;
  bool reader_done = false;
  TaskPool pool;
  pool.spawn([&] {
    Status r = c.table().search(key, &read_value);
    if (!r.ok()) c.fail("search after tearing: " + r.ToString());
    reader_done = true;
  });
  pool.spawn([&] {
    // Restore the block only after the reader has seen it torn a few times.
    const uint64_t deadline = NowNs() + 20000000000ull;
    while (c.table().stats().torn_reads < torn_before + 3 && NowNs() < deadline) this_task::yield();
    if (reader_done) c.fail("the reader returned while the block was torn");
    Status w = c.initiator().write(whole, where.block, where.block_length);
    if (!w.ok()) c.fail("restore block: " + w.ToString());
  });
  pool.run();
  const uint64_t torn_seen = c.table().stats().torn_reads - torn_before;
  if (torn_seen < 3) c.fail("the torn block was not detected (" + std::to_string(torn_seen) + " torn reads)");
  if (read_value != value) c.fail("the reader returned \"" + read_value + "\", expected the whole value");
  printf("hashtable_check torn: %" PRIu64 " torn reads detected, then the right value\n", torn_seen);
  return c.finish("torn");
}


// Threads x coroutines issue searches (40%), inserts, updates and deletes
// (20% each) of keys --from..--to, drawn with a zipf law (--zipf), for
// --duration seconds, and record each operation with its outcome in the
// --history file (history.h), for the linearizability checker
// (test/linearizability). With --ops N each worker issues N operations, one
// on each tick of a period of duration / N, ticks counted from 0 on the
// monotonic clock: every worker of every process with the same period
// starts an operation at the same instant, so that on the hot keys they
// overlap, and the history stays small enough to check. Values are "w<writer>:<key>:<seq>", unique per
// process. An error other than not-found fails the command; its operation
// stays in the history without a response (its outcome is unknown).
int Contend(Checker& c, const Options& o) {
  if (o.to <= o.from) throw Error("contend needs keys: --to must be above --from");
  hashtable::HistoryRecorder history(o.history);
  const ycsb::ZipfianParams zipf(o.to - o.from, o.zipf);
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  const uint64_t period = o.ops == 0 ? 0 : std::max<uint64_t>(1, static_cast<uint64_t>(o.duration * 1e9) / o.ops);
  std::atomic<uint64_t> ops{0}, found{0}, not_found{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    ycsb::Random random(static_cast<uint64_t>(o.writer) * 1000003u + static_cast<uint64_t>(worker) + 1);
    hashtable::HistoryRecorder::Op op;
    op.client = "w" + std::to_string(o.writer) + "." + std::to_string(worker);
    std::string value;
    while (NowNs() < end && !c.failed() && (o.ops == 0 || op.seq < o.ops)) {
      if (period != 0) {
        // Far from the tick the thread sleeps (its other tasks wait for the
        // tick too, or for a completion), so that waiting costs no CPU.
        const uint64_t tick = (NowNs() / period + 1) * period;
        for (uint64_t now = NowNs(); now < tick; now = NowNs()) {
          if (tick - now > 300000) {
            usleep(100);
          } else {
            this_task::yield();
          }
        }
      }
      const uint64_t id = o.from + ycsb::ZipfianRank(zipf, random);
      const double pick = random.uniform();
      const int kind = pick < 0.4 ? 0 : pick < 0.6 ? 1 : pick < 0.8 ? 2 : 3;
      static const char* const kKinds[] = {"search", "insert", "update", "delete"};
      ++op.seq;
      op.key = Key(id);
      op.kind = kKinds[kind];
      op.input = kind == 1 || kind == 2 ? Value(o.writer, id, (static_cast<uint64_t>(worker) << 32) | op.seq) : "-";
      history.invoke(&op);
      Status s;
      switch (kind) {
        case 0: s = c.table().search(op.key, &value); break;
        case 1: s = c.table().insert(op.key, op.input); break;
        case 2: s = c.table().update(op.key, op.input); break;
        default: s = c.table().remove(op.key); break;
      }
      if (s.ok()) {
        history.complete(op, kind == 0 ? value : "ok");
        found.fetch_add(1, std::memory_order_relaxed);
      } else if (s.code() == Status::Code::kNotFound && kind != 1) {
        history.complete(op, "not-found");
        not_found.fetch_add(1, std::memory_order_relaxed);
      } else {
        c.fail(std::string(op.kind) + " " + op.key + ": " + s.ToString());
      }
      ops.fetch_add(1, std::memory_order_relaxed);
    }
  });
  if (!history.ok()) c.fail("writing the history " + o.history + " failed");
  printf("hashtable_check contend: %" PRIu64 " operations (%" PRIu64 " ok, %" PRIu64 " not found)\n", ops.load(),
         found.load(), not_found.load());
  return c.finish("contend");
}

}  // namespace

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
  app.add_option("--log", o.logs, "insert/update/delete/churn: write this writer's log of acknowledged operations; "
                 "check-log: a writer log to check against (repeat)");
  app.add_option("--history", o.history, "contend: record every operation and its outcome in this file (history.h)");
  app.add_option("--ops", o.ops, "contend: operations per worker, started on ticks spread over --duration (0: back to back)");
  app.add_option("--zipf", o.zipf, "contend: skew of the zipf key chooser (0: uniform)")->check(CLI::Range(0.0, 0.999));
  app.add_flag("--exact", o.exact, "verify: each value is the one --writer wrote in round --rounds (its acknowledged write)");
  std::map<std::string, std::function<int(Checker&, const Options&)>> commands = {
      {"build", [](Checker& c, const Options&) { return c.finish("build"); }},
      {"insert", Insert}, {"load", Load}, {"update", Update}, {"delete", Delete}, {"churn", Churn}, {"verify", Verify},
      {"read", Read}, {"count", Count}, {"capacity", Capacity}, {"torn", Torn}, {"check-log", CheckLog},
      {"contend", Contend}};
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
      {"contend", "zipf-skewed searches, inserts, updates, deletes for --duration s, recorded in --history"}};
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
