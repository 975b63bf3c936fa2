// The reading commands both checkers share (commands.h): read, and the
// torn unit's reader and restorer.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "smart/bench/bench.h"
#include "smart/check/commands.h"
#include "smart/task.h"

namespace smart::check {

int Read(Checker& c, const CheckOptions& o) {
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  std::atomic<uint64_t> reads{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    std::map<std::pair<uint64_t, int>, uint64_t> last;
    std::string value;
    // Workers start at different ids and stride by 13, so that they read
    // the keys in different orders.
    uint64_t id = o.from + static_cast<uint64_t>(worker) * 7;
    while (NowNs() < end && !c.failed()) {
      if (id >= o.to) id = o.from + (id - o.to) % (o.to - o.from);
      Status s = c.search(id, &value);
      if (s.ok()) {
        int writer;
        uint64_t seq;
        c.check_value(id, value, &writer, &seq);
        auto& seen = last[{id, writer}];
        if (seq < seen) {
          c.fail(c.name(id) + ": read seq " + std::to_string(seq) + " of writer " + std::to_string(writer) +
                 " after seq " + std::to_string(seen));
        }
        seen = std::max(seen, seq);
      } else if (!(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("search " + c.name(id) + ": " + s.ToString());
      }
      reads.fetch_add(1, std::memory_order_relaxed);
      id += 13;
    }
  });
  printf("%s read: %" PRIu64 " reads\n", c.program().c_str(), reads.load());
  return c.finish("read");
}

int TornRead(Checker& c, const Tear& t) {
  char* whole = static_cast<char*>(c.initiator().alloc_cache(t.length));
  char* torn = static_cast<char*>(c.initiator().alloc_cache(t.length));
  Status s = c.initiator().read(whole, t.where, t.length);
  if (!s.ok()) c.fail("read " + t.unit + ": " + s.ToString());
  memcpy(torn, whole, t.length);
  if (!t.tear(whole, torn)) return c.finish("torn");
  s = c.initiator().write(torn, t.where, t.length);
  if (!s.ok()) c.fail("write torn " + t.unit + ": " + s.ToString());
  const uint64_t torn_before = c.torn_reads();
  std::string read_value;
  bool reader_done = false;
  TaskPool pool;
  pool.spawn([&] {
    Status r = c.search(t.id, &read_value);
    if (!r.ok()) c.fail("search after tearing: " + r.ToString());
    reader_done = true;
  });
  pool.spawn([&] {
    // Restore the unit only after the reader has seen it torn a few times.
    const uint64_t deadline = NowNs() + 20000000000ull;
    while (c.torn_reads() < torn_before + 3 && NowNs() < deadline) this_task::yield();
    if (reader_done) c.fail("the reader returned while the " + t.unit + " was torn");
    Status w = c.initiator().write(whole, t.where, t.length);
    if (!w.ok()) c.fail("restore " + t.unit + ": " + w.ToString());
  });
  pool.run();
  const uint64_t torn_seen = c.torn_reads() - torn_before;
  if (torn_seen < 3) c.fail("the torn " + t.unit + " was not detected (" + std::to_string(torn_seen) + " torn reads)");
  t.check(read_value);
  printf("%s torn: %" PRIu64 " torn reads detected, then the right value\n", c.program().c_str(), torn_seen);
  return c.finish("torn");
}

}  // namespace smart::check
