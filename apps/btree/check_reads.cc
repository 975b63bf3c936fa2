// btree_check's reading and inspecting commands of its own: verify, scan,
// torn (a leaf torn on purpose) and contend (a recorded history for the
// linearizability checker).
#include <algorithm>
#include <atomic>
#include <mutex>

#include "check_support.h"
#include "page.h"
#include "smart/bench/bench.h"
#include "smart/check/commands.h"
#include "smart/check/contend.h"
#include "smart/check/op_history.h"
#include "smart/bench/ycsb.h"

namespace smart::btree::check {

// Present ids hold a well-formed value (--absent: none is found); with
// --even-stable only the odd ids are checked for absence.
int Verify(Checker& c, const Options& o) {
  std::atomic<uint64_t> checked{0};
  c.each_id([&](uint64_t id, std::string& value) {
    Status s = c.tree().search(Key(id), &value);
    const bool want_absent = o.absent && !c.stays(id);
    if (want_absent) {
      if (s.code() != Status::Code::kNotFound) c.fail("key id " + std::to_string(id) + " was deleted but is still found");
    } else if (!s.ok()) {
      c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
    } else {
      int writer;
      uint64_t seq;
      c.check_value(id, value, &writer, &seq);
    }
    checked.fetch_add(1);
  });
  uint64_t keys = 0;
  Status s = c.tree().check_leaves(&keys);
  if (!s.ok()) c.fail("leaf level: " + s.ToString());
  printf("btree_check verify: %" PRIu64 " keys checked, %" PRIu64 " in the leaves\n", checked.load(), keys);
  return c.finish("verify");
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
        c.check_value(kid, out[i].second, &writer, &seq);
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
  smart::check::Tear tear;
  tear.unit = "leaf";
  tear.id = id;
  tear.where = leaf;
  tear.length = kPageSize;
  tear.tear = [&](const char* whole, char* torn) {
    const int entry = FindLeafKey(whole, Key(id));
    if (entry < 0) {
      c.fail("the key is not in the leaf leaf_of named");
      return false;
    }
    // The key's line as a concurrent writer would have left it: its second
    // half new, its CRC old.
    const size_t line = static_cast<size_t>(EntryLine(entry));
    for (size_t i = line * kLineSize + 40; i < (line + 1) * kLineSize; ++i) torn[i] = 'T';
    return true;
  };
  tear.check = [&](const std::string& read_value) {
    if (read_value != value) c.fail("the reader returned a wrong value after the leaf was restored");
  };
  return smart::check::TornRead(c, tear);
}


namespace {

constexpr char kDigits36[] = "0123456789abcdefghijklmnopqrstuvwxyz";

// contend's value for operation `seq` of `worker`, unique in the run: a
// short one (at most 8 bytes, inline in the leaf) three times in four, else
// a long one of 24-48 bytes (in a value block). Neither holds whitespace.
std::string ContendValue(int writer, int worker, uint64_t seq, ycsb::Random& random) {
  if (random.uniform() < 0.75) {
    // Writer (1 digit) and worker (2 digits) of fixed width, then the seq:
    // base 36, at most 8 characters for seq < 36^5.
    std::string v;
    v += kDigits36[writer % 36];
    v += kDigits36[(worker / 36) % 36];
    v += kDigits36[worker % 36];
    std::string digits;
    for (uint64_t n = seq; n > 0 || digits.empty(); n /= 36) digits += kDigits36[n % 36];
    v.append(digits.rbegin(), digits.rend());
    return v;
  }
  std::string v = "w" + std::to_string(writer) + "." + std::to_string(worker) + ":" + std::to_string(seq);
  v.append(24 + random.next() % 25 - std::min<size_t>(v.size(), 24), '.');
  return v;
}

}  // namespace

// Threads x coroutines issue searches (30%), inserts (20%), updates (15%),
// deletes (15%) and read-modify-writes (20%, the value becomes Bump(value))
// of key ids --from..--to drawn with a zipf law (--zipf), for --duration
// seconds, and record each operation with its outcome in the --history file
// (smart/check/op_history.h), for the linearizability checker
// (test/linearizability). Values are short (inline) or long (value blocks),
// unique per process (--writer < 36); a few hundred ids make a tree of
// several leaves that split while it runs. With --ops N each worker issues
// N operations, one on each tick of a period of duration / N on the
// monotonic clock, as hashtable_check contend does, so that operations of
// all processes overlap on the hot keys and the history stays small enough
// to check. An operation that ends in an error (an unknown outcome, or a
// plain error) stays in the history without a response: it may or may not
// have taken effect as far as the checker is concerned. Such an error fails
// the command, except with --end-on-error (a client that is expected to be
// stopped and fenced): then it ends the command, which prints it.
int Contend(Checker& c, const Options& o) {
  if (o.to <= o.from) throw Error("contend needs keys: --to must be above --from");
  if (o.writer >= 36) throw Error("contend: --writer must be below 36 (one base-36 digit in short values)");
  smart::check::HistoryRecorder history(o.history);
  const ycsb::ZipfianParams zipf(o.to - o.from, o.zipf);
  const smart::check::Pacer pacer(o.duration, o.ops);
  std::atomic<uint64_t> ops{0}, done{0}, not_found{0};
  std::atomic<bool> ended{false};
  std::mutex first_error_mutex;
  std::string first_error;
  c.run([&](int worker, uint64_t, uint64_t) {
    ycsb::Random random(static_cast<uint64_t>(o.writer) * 1000003u + static_cast<uint64_t>(worker) + 1);
    smart::check::HistoryRecorder::Op op;
    op.client = "w" + std::to_string(o.writer) + "." + std::to_string(worker);
    std::string value, wrote;
    while (pacer.more(op.seq) && !c.failed() && !ended.load()) {
      pacer.wait_for_tick();
      const uint64_t id = o.from + ycsb::ZipfianRank(zipf, random);
      const double pick = random.uniform();
      const int kind = pick < 0.3 ? 0 : pick < 0.5 ? 1 : pick < 0.65 ? 2 : pick < 0.8 ? 3 : 4;
      static const char* const kKinds[] = {"search", "insert", "update", "delete", "rmw"};
      ++op.seq;
      op.key = "k" + std::to_string(id);
      op.kind = kKinds[kind];
      op.input = kind == 1 || kind == 2 ? ContendValue(o.writer, worker, op.seq, random) : "-";
      history.invoke(&op);
      Status s;
      switch (kind) {
        case 0: s = c.tree().search(Key(id), &value); break;
        case 1: s = c.tree().insert(Key(id), op.input); break;
        case 2: s = c.tree().update(Key(id), op.input); break;
        case 3: s = c.tree().remove(Key(id)); break;
        default:
          s = c.tree().read_modify_write(Key(id), [&](std::string* v) {
            *v = Bump(*v);
            wrote = *v;
          });
          break;
      }
      ops.fetch_add(1, std::memory_order_relaxed);
      if (s.ok()) {
        history.complete(op, kind == 0 ? value : kind == 4 ? wrote : "ok");
        done.fetch_add(1, std::memory_order_relaxed);
      } else if (s.code() == Status::Code::kNotFound && kind != 1) {
        history.complete(op, "not-found");
        not_found.fetch_add(1, std::memory_order_relaxed);
      } else if (o.end_on_error) {
        std::lock_guard<std::mutex> lock(first_error_mutex);
        if (first_error.empty()) first_error = std::string(op.kind) + " " + op.key + ": " + s.ToString();
        ended = true;
      } else {
        c.fail(std::string(op.kind) + " " + op.key + ": " + s.ToString());
      }
    }
  });
  if (!history.ok()) c.fail("writing the history " + o.history + " failed");
  printf("btree_check contend: %" PRIu64 " operations (%" PRIu64 " done, %" PRIu64 " not found)\n", ops.load(),
         done.load(), not_found.load());
  if (!first_error.empty()) printf("btree_check contend: ended by an error: %s\n", first_error.c_str());
  return c.finish("contend");
}

}  // namespace smart::btree::check
