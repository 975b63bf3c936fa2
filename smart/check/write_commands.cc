// The writing commands both checkers share (commands.h). An operation that
// failed fails the command, except where a command says a miss is expected.
#include "smart/bench/bench.h"
#include "smart/check/commands.h"

namespace smart::check {

int RunWriters(Checker& c, const CheckOptions& o, const std::string& what, const WriterWork& work) {
  WriteRecorder recorder(o.writer, o.logs.empty() ? "" : o.logs.front());
  c.run([&](int, uint64_t first, uint64_t step) {
    WriterLog log;
    work(recorder, log, first, step);
    recorder.merge(log);
  });
  recorder.save();
  return c.finish(what);
}

namespace {

// Calls fn(round, id) for rounds 1 .. rounds and in each for the ids first,
// first + step, ... below --to, in order, until the first failure.
void EachRound(Checker& c, const CheckOptions& o, int rounds, uint64_t first, uint64_t step,
               const std::function<void(int round, uint64_t id)>& fn) {
  for (int round = 1; round <= rounds && !c.failed(); ++round) {
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) fn(round, id);
  }
}

}  // namespace

int Insert(Checker& c, const CheckOptions& o, int rounds) {
  return RunWriters(c, o, "insert", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    EachRound(c, o, rounds, first, step, [&](int round, uint64_t id) {
      if (!c.writes(id)) return;
      const uint64_t seq = static_cast<uint64_t>(round - 1);
      const uint64_t start = NowNs();
      Status s = c.insert(id, c.value(o.writer, id, seq));
      if (s.ok()) {
        recorder.acknowledged(&log, id, seq, start);
      } else {
        c.fail("insert " + c.name(id) + ": " + s.ToString());
      }
    });
  });
}

int Update(Checker& c, const CheckOptions& o) {
  return RunWriters(c, o, "update", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    EachRound(c, o, o.rounds, first, step, [&](int round, uint64_t id) {
      const uint64_t start = NowNs();
      Status s = c.update(id, c.value(o.writer, id, static_cast<uint64_t>(round)));
      if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("update " + c.name(id) + ": " + s.ToString());
      }
    });
  });
}

int Delete(Checker& c, const CheckOptions& o) {
  return RunWriters(c, o, "delete", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    EachRound(c, o, 1, first, step, [&](int, uint64_t id) {
      if (c.stays(id)) return;
      const uint64_t start = NowNs();
      Status s = c.remove(id);
      if (s.ok()) recorder.deleted(&log, id, start);
      if (!s.ok() && !(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("delete " + c.name(id) + ": " + s.ToString());
      }
    });
  });
}

// Writers on the same ids interleave deletes and reinserts, each as
// ChurnDeletes (writer_log.h) picks; a delete of an absent id is no error.
int Churn(Checker& c, const CheckOptions& o) {
  return RunWriters(c, o, "churn", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
    EachRound(c, o, o.rounds, first, step, [&](int round, uint64_t id) {
      const uint64_t start = NowNs();
      if (ChurnDeletes(o.writer, id, round)) {
        Status s = c.remove(id);
        if (s.ok()) recorder.deleted(&log, id, start);
        if (!s.ok() && s.code() != Status::Code::kNotFound) c.fail("delete " + c.name(id) + ": " + s.ToString());
      } else {
        Status s = c.insert(id, c.value(o.writer, id, static_cast<uint64_t>(round)));
        if (s.ok()) recorder.acknowledged(&log, id, static_cast<uint64_t>(round), start);
        if (!s.ok()) c.fail("insert " + c.name(id) + ": " + s.ToString());
      }
    });
  });
}

}  // namespace smart::check
