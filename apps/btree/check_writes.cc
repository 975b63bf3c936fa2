// btree_check's writing commands and the final check against the writers'
// logs (smart/check/writer_log.h): insert, update, delete, churn, check-log.
// A writer logs only what it was told took effect; an operation that failed
// (with an error, or an unknown outcome) fails the command.
#include <atomic>

#include "check_support.h"
#include "smart/check/writer_log.h"

namespace smart::btree::check {

namespace wl = smart::check;

namespace {

// A worker of a writing command: its key ids are first, first + step, ...
// below --to; it records in `log` (through `recorder`) each operation it
// was told succeeded.
using WriterWork = std::function<void(wl::WriteRecorder& recorder, wl::WriterLog& log, uint64_t first, uint64_t step)>;

// Runs `work` on every worker, merges the workers' logs into the one this
// writer saves (--log), and ends with the command's summary.
int RunWriters(Checker& c, const Options& o, const std::string& what, const WriterWork& work) {
  wl::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    wl::WriterLog log;
    work(recorder, log, first, step);
    recorder.merge(log);
  });
  recorder.save();
  return c.finish(what);
}

}  // namespace

// Inserts (upserts) every id once per round, seq = round - 1.
int Insert(Checker& c, const Options& o) {
  return RunWriters(c, o, "insert", [&](wl::WriteRecorder& recorder, wl::WriterLog& log, uint64_t first, uint64_t step) {
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
  });
}

// Every round writes seq = round to each id of the worker, in order.
int Update(Checker& c, const Options& o) {
  return RunWriters(c, o, "update", [&](wl::WriteRecorder& recorder, wl::WriterLog& log, uint64_t first, uint64_t step) {
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
  });
}

int Delete(Checker& c, const Options& o) {
  return RunWriters(c, o, "delete", [&](wl::WriteRecorder& recorder, wl::WriterLog& log, uint64_t first, uint64_t step) {
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      if (o.even_stable && id % 2 == 0) continue;  // delete the odd ids only
      const uint64_t start = NowNs();
      Status s = c.tree().remove(Key(id));
      if (s.ok()) recorder.deleted(&log, id, start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("delete key id " + std::to_string(id) + ": " + s.ToString());
      }
    }
  });
}

// Every round, each id of the worker is deleted or (re)inserted with seq =
// round, as ChurnDeletes (writer_log.h) picks: writers on the same ids
// interleave deletes and reinserts. A delete of an absent id is no error.
int Churn(Checker& c, const Options& o) {
  return RunWriters(c, o, "churn", [&](wl::WriteRecorder& recorder, wl::WriterLog& log, uint64_t first, uint64_t step) {
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
  });
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
  if (height < o.min_height) {
    c.fail("the tree has " + std::to_string(height) + " levels, expected at least " + std::to_string(o.min_height));
  }
  printf("btree_check check-log: %" PRIu64 " keys present and %" PRIu64 " absent, as the writers' logs allow; %" PRIu64
         " keys in %d levels\n",
         checked.load(), absent.load(), keys, height);
  return c.finish("check-log");
}

}  // namespace smart::btree::check
