// hashtable_check's writing command of its own, load, and the final check
// against the writers' logs (smart/check/writer_log.h), check-log.
#include <atomic>

#include "check_support.h"
#include "smart/bench/bench.h"
#include "smart/check/commands.h"
#include "smart/check/writer_log.h"

namespace smart::hashtable::check {

using smart::check::WriteRecorder;
using smart::check::WriterLog;

// Insert's keys and values through HashTable::load_batch, --load-batch keys
// a call; a batch's keys are acknowledged together when the call returns.
// Keys are the worker's own (no other loader of them): the load's promise.
int Load(Checker& c, const Options& o) {
  return smart::check::RunWriters(c, o, "load", [&](WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step) {
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

// Compares every key's final state with the writers' logs (writer_log.h):
// its value (or its absence), and one copy of a present key, none of an
// absent one.
int CheckLog(Checker& c, const Options& o) {
  const auto writes = smart::check::LoadWriterLogs(o.logs);
  const std::vector<smart::check::LoggedWrite> none;
  std::atomic<uint64_t> present{0}, absent{0};
  c.each_id([&](uint64_t id, std::string& value) {
    auto it = writes.find(id);
    const auto& ops = it == writes.end() ? none : it->second;
    int copies;
    Status s;
    if (!c.count_and_search(id, &copies, &value, &s)) return;
    if (s.code() == Status::Code::kNotFound) {
      const std::string wrong = smart::check::CheckAbsentAgainstLog(id, ops);
      if (!wrong.empty()) c.fail(wrong);
      if (copies != 0) c.fail(Key(id) + " is not found, but " + std::to_string(copies) + " copies of it are in the table");
      absent.fetch_add(1);
      return;
    }
    if (!s.ok()) {
      c.fail("search " + Key(id) + ": " + s.ToString());
      return;
    }
    if (copies != 1) c.fail(Key(id) + " has " + std::to_string(copies) + " copies, expected exactly 1");
    int writer;
    uint64_t key_in_value, seq;
    if (!ParseValue(value, &writer, &key_in_value, &seq) || key_in_value != id) {
      c.fail(Key(id) + " holds \"" + value + "\", which no writer wrote for it");
      return;
    }
    const std::string wrong = ops.empty() ? Key(id) + " is present, but no writer logged a write of it"
                                          : smart::check::CheckAgainstLog(id, writer, seq, ops);
    if (!wrong.empty()) c.fail(wrong);
    present.fetch_add(1);
  });
  printf("hashtable_check check-log: %" PRIu64 " keys present and %" PRIu64 " absent, as the writers' logs allow\n",
         present.load(), absent.load());
  return c.finish("check-log");
}

}  // namespace smart::hashtable::check
