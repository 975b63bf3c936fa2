// hashtable_check's reading and inspecting commands of its own: verify,
// count, capacity and torn (a block torn on purpose).
#include <atomic>
#include <cinttypes>
#include <cstdio>

#include "check_support.h"
#include "layout.h"
#include "smart/check/commands.h"

namespace smart::hashtable::check {

// Present keys: exactly one copy and a well-formed value; --absent: none.
int Verify(Checker& c, const Options& o) {
  std::atomic<uint64_t> checked{0};
  c.each_id([&](uint64_t id, std::string& value) {
    int copies;
    Status s;
    if (!c.count_and_search(id, &copies, &value, &s)) return;
    if (o.absent) {
      if (copies != 0 || s.ok()) c.fail(Key(id) + " was deleted but is still found (" + std::to_string(copies) + " copies)");
    } else {
      if (copies != 1) c.fail(Key(id) + " has " + std::to_string(copies) + " copies, expected exactly 1");
      if (!s.ok()) {
        c.fail("search " + Key(id) + ": " + s.ToString());
      } else {
        int writer;
        uint64_t seq;
        c.check_value(id, value, &writer, &seq);
      }
    }
    checked.fetch_add(1);
  });
  printf("hashtable_check verify: %" PRIu64 " keys checked (%s)\n", checked.load(), o.absent ? "absent" : "present");
  return c.finish("verify");
}

// Prints how many keys of [from, to) are present (never fails on absence).
int Count(Checker& c, const Options& o) {
  std::atomic<uint64_t> present{0};
  c.each_id([&](uint64_t id, std::string& value) {
    Status s = c.table().search(Key(id), &value);
    if (s.ok()) {
      present.fetch_add(1);
    } else if (s.code() != Status::Code::kNotFound) {
      c.fail("search " + Key(id) + ": " + s.ToString());
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
  smart::check::Tear tear;
  tear.unit = "block";
  tear.id = 424242;
  tear.where = where.block;
  tear.length = where.block_length;
  tear.tear = [&](const char*, char* torn) {
    // The second half as a concurrent writer would have left it.
    for (size_t i = where.block_length / 2; i < where.block_length - 4; ++i) torn[i] = 'T';
    return true;
  };
  tear.check = [&](const std::string& read_value) {
    if (read_value != value) c.fail("the reader returned \"" + read_value + "\", expected the whole value");
  };
  return smart::check::TornRead(c, tear);
}

}  // namespace smart::hashtable::check
