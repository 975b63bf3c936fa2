// hashtable_check contend: a recorded history for the linearizability
// checker (test/linearizability).
//
// Threads x coroutines issue searches (35%), inserts (20%), updates,
// read-modify-writes and deletes (15% each) of keys --from..--to, drawn with
// a zipf law (--zipf), for --duration seconds, and record each operation
// with its outcome in the --history file (smart/check/op_history.h). With
// --ops N each worker issues N operations, one on each tick of a period of
// duration / N (smart::check::Pacer), so that on the hot keys they overlap,
// and the history stays small enough to check. Values are
// "w<writer>:<key>:<seq>", unique per process; a read-modify-write bumps the
// value (Bump) and records the value it wrote. With --fresh P, P% of the
// operations instead insert keys of the worker's own, never used before, or
// search one it inserted: a table built small splits under the others. An
// operation of unknown outcome (kOutcomeUnknown) stays in the history
// without a response, as one whose process died; any other error but
// not-found fails the command.
#include <atomic>

#include "check_support.h"
#include "smart/bench/bench.h"
#include "smart/check/contend.h"
#include "smart/check/op_history.h"
#include "smart/bench/ycsb.h"

namespace smart::hashtable::check {

namespace {

// Keys of worker `worker` of writer `writer`'s own (--fresh): above any
// range the tests use for shared keys.
uint64_t FreshId(int writer, int worker, uint64_t n) {
  return 1000000000ull + static_cast<uint64_t>(writer) * 10000000ull + static_cast<uint64_t>(worker) * 100000ull + n;
}

}  // namespace

int Contend(Checker& c, const Options& o) {
  if (o.to <= o.from) throw Error("contend needs keys: --to must be above --from");
  if (o.fresh < 0 || o.fresh > 100) throw Error("--fresh is a percentage: 0..100");
  smart::check::HistoryRecorder history(o.history);
  const ycsb::ZipfianParams zipf(o.to - o.from, o.zipf);
  const smart::check::Pacer pacer(o.duration, o.ops);
  std::atomic<uint64_t> ops{0}, found{0}, not_found{0}, unknown{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    ycsb::Random random(static_cast<uint64_t>(o.writer) * 1000003u + static_cast<uint64_t>(worker) + 1);
    smart::check::HistoryRecorder::Op op;
    op.client = "w" + std::to_string(o.writer) + "." + std::to_string(worker);
    std::string value, written;
    uint64_t fresh_keys = 0;  // of this worker, inserted (or tried) so far
    while (pacer.more(op.seq) && !c.failed()) {
      pacer.wait_for_tick();
      enum Kind { kSearch, kInsert, kUpdate, kRmw, kDelete };
      static const char* const kKinds[] = {"search", "insert", "update", "rmw", "delete"};
      Kind kind;
      uint64_t id;
      if (o.fresh > 0 && random.uniform() * 100 < o.fresh) {
        const bool insert = fresh_keys == 0 || random.uniform() < 0.5;
        kind = insert ? kInsert : kSearch;
        id = FreshId(o.writer, worker, insert ? fresh_keys++ : random.next() % fresh_keys);
      } else {
        id = o.from + ycsb::ZipfianRank(zipf, random);
        const double pick = random.uniform();
        kind = pick < 0.35 ? kSearch : pick < 0.55 ? kInsert : pick < 0.70 ? kUpdate : pick < 0.85 ? kRmw : kDelete;
      }
      ++op.seq;
      op.key = Key(id);
      op.kind = kKinds[kind];
      op.input = kind == kInsert || kind == kUpdate ? Value(o.writer, id, (static_cast<uint64_t>(worker) << 32) | op.seq)
                                                    : "-";
      history.invoke(&op);
      Status s;
      switch (kind) {
        case kSearch: s = c.table().search(op.key, &value); break;
        case kInsert: s = c.table().insert(op.key, op.input); break;
        case kUpdate: s = c.table().update(op.key, op.input); break;
        case kRmw:
          s = c.table().read_modify_write(op.key, [&](std::string* v) {
            *v = Bump(*v);
            written = *v;
          });
          break;
        case kDelete: s = c.table().remove(op.key); break;
      }
      if (s.ok()) {
        history.complete(op, kind == kSearch ? value : kind == kRmw ? written : "ok");
        found.fetch_add(1, std::memory_order_relaxed);
      } else if (s.code() == Status::Code::kNotFound && kind != kInsert) {
        history.complete(op, "not-found");
        not_found.fetch_add(1, std::memory_order_relaxed);
      } else if (s.code() == Status::Code::kOutcomeUnknown) {
        unknown.fetch_add(1, std::memory_order_relaxed);
      } else {
        c.fail(std::string(op.kind) + " " + op.key + ": " + s.ToString());
      }
      ops.fetch_add(1, std::memory_order_relaxed);
    }
  });
  if (!history.ok()) c.fail("writing the history " + o.history + " failed");
  printf("hashtable_check contend: %" PRIu64 " operations (%" PRIu64 " ok, %" PRIu64 " not found, %" PRIu64
         " of unknown outcome)\n",
         ops.load(), found.load(), not_found.load(), unknown.load());
  return c.finish("contend");
}

}  // namespace smart::hashtable::check
