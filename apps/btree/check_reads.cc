// btree_check's reading and inspecting commands: verify, read, scan and
// torn (a leaf torn on purpose).
#include <algorithm>
#include <atomic>
#include <map>

#include "check_support.h"
#include "page.h"

namespace smart::btree::check {

namespace {

// Checks one value read for key id `id`.
void CheckValue(Checker& c, const Options& o, uint64_t id, const std::string& value, int* writer, uint64_t* seq) {
  uint64_t id_in_value;
  if (!ParseValue(value, writer, &id_in_value, seq)) {
    c.fail("key id " + std::to_string(id) + " holds a malformed value");
  } else if (id_in_value != (o.short_values ? (id & 0xffffffff) : id)) {
    c.fail("key id " + std::to_string(id) + " holds the value of key id " + std::to_string(id_in_value));
  } else if (*writer < 0 || *writer >= o.writers || *seq > static_cast<uint64_t>(o.rounds)) {
    c.fail("key id " + std::to_string(id) + " holds a value nobody wrote (writer " + std::to_string(*writer) +
           ", seq " + std::to_string(*seq) + ")");
  }
}

}  // namespace

// Present ids hold a well-formed value (--absent: none is found); with
// --even-stable only the odd ids are checked for absence.
int Verify(Checker& c, const Options& o) {
  std::atomic<uint64_t> checked{0};
  c.run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < o.to && !c.failed(); id += step) {
      Status s = c.tree().search(Key(id), &value);
      const bool want_absent = o.absent && !(o.even_stable && id % 2 == 0);
      if (want_absent) {
        if (s.code() != Status::Code::kNotFound) c.fail("key id " + std::to_string(id) + " was deleted but is still found");
      } else if (!s.ok()) {
        c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
      } else {
        int writer;
        uint64_t seq;
        CheckValue(c, o, id, value, &writer, &seq);
      }
      checked.fetch_add(1);
    }
  });
  uint64_t keys = 0;
  Status s = c.tree().check_leaves(&keys);
  if (!s.ok()) c.fail("leaf level: " + s.ToString());
  printf("btree_check verify: %" PRIu64 " keys checked, %" PRIu64 " in the leaves\n", checked.load(), keys);
  return c.finish("verify");
}

// Readers sweep the ids for `duration` seconds: values well-formed, and per
// key and writer the sequence number a task sees never goes down.
int Read(Checker& c, const Options& o) {
  const uint64_t end = NowNs() + static_cast<uint64_t>(o.duration * 1e9);
  std::atomic<uint64_t> reads{0};
  c.run([&](int worker, uint64_t, uint64_t) {
    std::map<std::pair<uint64_t, int>, uint64_t> last;
    std::string value;
    uint64_t id = o.from + static_cast<uint64_t>(worker) * 7;
    while (NowNs() < end && !c.failed()) {
      if (id >= o.to) id = o.from + (id - o.to) % (o.to - o.from);
      Status s = c.tree().search(Key(id), &value);
      if (s.ok()) {
        int writer;
        uint64_t seq;
        CheckValue(c, o, id, value, &writer, &seq);
        auto& seen = last[{id, writer}];
        if (seq < seen) {
          c.fail("key id " + std::to_string(id) + ": read seq " + std::to_string(seq) + " of writer " +
                 std::to_string(writer) + " after seq " + std::to_string(seen));
        }
        seen = std::max(seen, seq);
      } else if (!(o.allow_missing && s.code() == Status::Code::kNotFound)) {
        c.fail("search key id " + std::to_string(id) + ": " + s.ToString());
      }
      reads.fetch_add(1, std::memory_order_relaxed);
      id += 13;
    }
  });
  printf("btree_check read: %" PRIu64 " reads\n", reads.load());
  return c.finish("read");
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
        CheckValue(c, o, kid, out[i].second, &writer, &seq);
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
  char* whole = static_cast<char*>(c.initiator().alloc_cache(kPageSize));
  char* torn = static_cast<char*>(c.initiator().alloc_cache(kPageSize));
  s = c.initiator().read(whole, leaf, kPageSize);
  if (!s.ok()) c.fail("read leaf: " + s.ToString());
  memcpy(torn, whole, kPageSize);
  const int entry = FindLeafKey(whole, Key(id));
  if (entry < 0) {
    c.fail("the key is not in the leaf leaf_of named");
    return c.finish("torn");
  }
  // The key's line as a concurrent writer would have left it: its second
  // half new, its CRC old.
  const size_t line = static_cast<size_t>(EntryLine(entry));
  for (size_t i = line * kLineSize + 40; i < (line + 1) * kLineSize; ++i) torn[i] = 'T';
  s = c.initiator().write(torn, leaf, kPageSize);
  if (!s.ok()) c.fail("write torn leaf: " + s.ToString());
  const uint64_t torn_before = c.tree().stats().torn_reads;
  std::string read_value;
  bool reader_done = false;
  TaskPool pool;
  pool.spawn([&] {
    Status r = c.tree().search(Key(id), &read_value);
    if (!r.ok()) c.fail("search after tearing: " + r.ToString());
    reader_done = true;
  });
  pool.spawn([&] {
    const uint64_t deadline = NowNs() + 20000000000ull;
    while (c.tree().stats().torn_reads < torn_before + 3 && NowNs() < deadline) this_task::yield();
    if (reader_done) c.fail("the reader returned while the leaf was torn");
    Status w = c.initiator().write(whole, leaf, kPageSize);
    if (!w.ok()) c.fail("restore leaf: " + w.ToString());
  });
  pool.run();
  const uint64_t torn_seen = c.tree().stats().torn_reads - torn_before;
  if (torn_seen < 3) c.fail("the torn leaf was not detected (" + std::to_string(torn_seen) + " torn reads)");
  if (read_value != value) c.fail("the reader returned a wrong value after the leaf was restored");
  printf("btree_check torn: %" PRIu64 " torn reads detected, then the right value\n", torn_seen);
  return c.finish("torn");
}

}  // namespace smart::btree::check
