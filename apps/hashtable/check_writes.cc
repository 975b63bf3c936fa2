// hashtable_check's writing commands and the final check against the
// writers' logs (writer_log.h): insert, load, update, delete, churn,
// check-log.
#include <atomic>

#include "check_support.h"
#include "smart/check/writer_log.h"

namespace smart::hashtable::check {

using smart::check::WriteRecorder;
using smart::check::WriterLog;

namespace {

// A worker of a writing command: its key ids are first, first + step, ...
// below --to; it records in `log` (through `recorder`) each operation it
// was told succeeded.
using WriterWork = std::function<void(smart::check::WriteRecorder& recorder, smart::check::WriterLog& log,
                                      uint64_t first, uint64_t step)>;

// Runs `work` on every worker, merges the workers' logs into the one this
// writer saves (--log), and ends with the command's summary.
int RunWriters(Checker& c, const Options& o, const std::string& what, const WriterWork& work) {
  smart::check::WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    smart::check::WriterLog log;
    work(recorder, log, first, step);
    recorder.merge(log);
  });
  recorder.save();
  return c.finish(what);
}

}  // namespace

int Insert(Checker& c, const Options& o) {
  return RunWriters(c, o, "insert", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      const uint64_t start = NowNs();
      Status s = c.table().insert(Key(id), Value(o.writer, id, 0));
      if (s.ok()) recorder.acknowledged(&log, id, 0, start);
      if (!s.ok()) c.fail("insert " + Key(id) + ": " + s.ToString());
    }
  });
}

// Insert's keys and values through HashTable::load_batch, --load-batch keys
// a call; a batch's keys are acknowledged together when the call returns.
// Keys are the worker's own (no other loader of them): the load's promise.
int Load(Checker& c, const Options& o) {
  return RunWriters(c, o, "load", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
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
  });
}

// Every round writes seq = round to each key of the worker, in order.
int Update(Checker& c, const Options& o) {
  return RunWriters(c, o, "update", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
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
  });
}

// Compares every key's final state with the writers' logs (writer_log.h):
// its value (or its absence), and one copy of a present key, none of an
// absent one.
int CheckLog(Checker& c, const Options& o) {
  const auto writes = smart::check::LoadWriterLogs(o.logs);
  const std::vector<smart::check::LoggedWrite> none;
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
        const std::string wrong = smart::check::CheckAbsentAgainstLog(id, ops);
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
                                            : smart::check::CheckAgainstLog(id, writer, seq, ops);
      if (!wrong.empty()) c.fail(wrong);
      present.fetch_add(1);
    }
  });
  printf("hashtable_check check-log: %" PRIu64 " keys present and %" PRIu64 " absent, as the writers' logs allow\n",
         present.load(), absent.load());
  return c.finish("check-log");
}

int Delete(Checker& c, const Options& o) {
  return RunWriters(c, o, "delete", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      const uint64_t start = NowNs();
      Status s = c.table().remove(Key(id));
      if (s.ok()) recorder.deleted(&log, id, start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("delete " + Key(id) + ": " + s.ToString());
      }
    }
  });
}

// Every round, each key of the worker is deleted or (re)inserted with seq =
// round, as ChurnDeletes (writer_log.h) picks: writers on the same keys
// interleave deletes and reinserts. A delete of an absent key is no error.
int Churn(Checker& c, const Options& o) {
  return RunWriters(c, o, "churn", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
        const uint64_t start = NowNs();
        if (smart::check::ChurnDeletes(o.writer, id, round)) {
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
  });
}

}  // namespace smart::hashtable::check
