// btree_check's final check against the writers' logs
// (smart/check/writer_log.h), check-log; its writing commands are the ones
// both checkers share (smart/check/commands.h).
#include <atomic>

#include "check_support.h"
#include "smart/check/writer_log.h"

namespace smart::btree::check {

namespace wl = smart::check;

// The final state against the writers' logs (writer_log.h), and the leaf
// level's structure: fences chained, keys in order, each key once.
int CheckLog(Checker& c, const Options& o) {
  const auto writes = wl::LoadWriterLogs(o.logs);
  std::atomic<uint64_t> checked{0}, absent{0};
  c.each_id([&](uint64_t id, std::string& value) {
    if (!OfParity(o, id)) return;
    auto it = writes.find(id);
    Status s = c.tree().search(Key(id), &value);
    if (s.code() == Status::Code::kNotFound) {
      const std::string wrong = it == writes.end() ? "" : wl::CheckAbsentAgainstLog(id, it->second);
      if (!wrong.empty()) c.fail(wrong);
      absent.fetch_add(1);
      return;
    }
    if (!s.ok()) {
      c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
      return;
    }
    if (it == writes.end()) {
      c.fail("key id " + std::to_string(id) + " is present, but no writer logged a write of it");
      return;
    }
    int writer;
    uint64_t id_in_value, seq;
    if (!ParseValue(value, &writer, &id_in_value, &seq) || id_in_value != (o.short_values ? (id & 0xffffffff) : id)) {
      c.fail("key id " + std::to_string(id) + " holds a value no writer wrote for it");
      return;
    }
    const std::string wrong = wl::CheckAgainstLog(id, writer, seq, it->second);
    if (!wrong.empty()) c.fail(wrong);
    checked.fetch_add(1);
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
