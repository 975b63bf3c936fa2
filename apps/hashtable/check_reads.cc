// hashtable_check's reading and inspecting commands: verify, read, count,
// capacity and torn (a block torn on purpose).
#include <algorithm>
#include <atomic>
#include <map>
#include <unistd.h>

#include "check_support.h"
#include "layout.h"

namespace smart::hashtable::check {

namespace {

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

}  // namespace

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

}  // namespace smart::hashtable::check
