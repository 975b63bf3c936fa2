// hashtable_check's read-modify-write commands, checked by counting rather
// than by a history (so that they run where the linearizability checker
// does not, over verbs in the Soft-RoCE guest):
//   rmw        every worker bumps every key of --from..--to (Bump), --rounds
//              times, so that all workers of all processes contend on every
//              key; per key it counts the bumps it was told took effect and
//              those of unknown outcome, and appends them to --log as lines
//              "id acknowledged unknown";
//   check-rmw  each key's value must be its first value bumped N times, N
//              between the acknowledged bumps of all --log files and those
//              plus the unknown ones: a bump computed from an older value
//              (a lost update) leaves N short, a bump applied twice long.
// The keys must exist (insert them first); a bump of a missing key fails.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "check_support.h"

namespace smart::hashtable::check {

namespace {

struct BumpCount {
  uint64_t acknowledged = 0;
  uint64_t unknown = 0;
};

// Splits "<value>+N" into the value and N (0 without a count).
bool SplitCount(const std::string& v, std::string* base, uint64_t* n) {
  const size_t plus = v.find('+');
  if (plus == std::string::npos) {
    *base = v;
    *n = 0;
    return true;
  }
  *base = v.substr(0, plus);
  const std::string digits = v.substr(plus + 1);
  char* end = nullptr;
  errno = 0;
  *n = strtoull(digits.c_str(), &end, 10);
  return !digits.empty() && errno == 0 && *end == '\0' && *n > 0 && v == *base + "+" + std::to_string(*n);
}

}  // namespace

int Rmw(Checker& c, const Options& o) {
  if (o.to <= o.from) throw Error("rmw needs keys: --to must be above --from");
  const uint64_t keys = o.to - o.from;
  std::vector<std::atomic<uint64_t>> acknowledged(keys), unknown(keys);
  c.run([&](int worker, uint64_t, uint64_t) {
    for (int round = 1; round <= o.rounds && !c.failed(); ++round) {
      for (uint64_t k = 0; k < keys && !c.failed(); ++k) {
        // Workers start at different keys, so that they meet on all of them.
        const uint64_t index = (k + static_cast<uint64_t>(worker) * 7) % keys;
        const Status s = c.table().read_modify_write(Key(o.from + index), [](std::string* v) { *v = Bump(*v); });
        if (s.ok()) {
          acknowledged[index].fetch_add(1, std::memory_order_relaxed);
        } else if (s.code() == Status::Code::kOutcomeUnknown) {
          unknown[index].fetch_add(1, std::memory_order_relaxed);
        } else {
          c.fail("rmw " + Key(o.from + index) + ": " + s.ToString());
        }
      }
    }
  });
  if (!o.logs.empty()) {
    std::ofstream log(o.logs.front(), std::ios::app);
    for (uint64_t k = 0; k < keys; ++k) {
      log << (o.from + k) << ' ' << acknowledged[k].load() << ' ' << unknown[k].load() << '\n';
    }
    log.flush();
    if (!log) throw Error("rmw: cannot write its log " + o.logs.front() + ": " + strerror(errno));
  }
  return c.finish("rmw");
}

int CheckRmw(Checker& c, const Options& o) {
  std::map<uint64_t, BumpCount> counts;
  for (const std::string& path : o.logs) {
    std::ifstream in(path);
    if (!in) throw Error("check-rmw: cannot read the log " + path);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::istringstream fields(line);
      uint64_t id, acked, unsure;
      if (!(fields >> id >> acked >> unsure)) {
        throw Error("check-rmw: " + path + " line " + std::to_string(number) + " is not \"id acknowledged unknown\"");
      }
      counts[id].acknowledged += acked;
      counts[id].unknown += unsure;
    }
  }
  std::atomic<uint64_t> checked{0};
  c.each_id([&](uint64_t id, std::string& value) {
    const Status s = c.table().search(Key(id), &value);
    if (!s.ok()) {
      c.fail("search " + Key(id) + ": " + s.ToString());
      return;
    }
    int copies = 0;
    const Status counted = c.table().count_copies(Key(id), &copies);
    if (!counted.ok() || copies != 1) {
      c.fail(Key(id) + " has " + std::to_string(copies) + " copies, expected exactly 1 (" + counted.ToString() + ")");
    }
    std::string base;
    uint64_t n = 0;
    int writer;
    uint64_t key_in_value, seq;
    if (!SplitCount(value, &base, &n) || !ParseValue(base, &writer, &key_in_value, &seq) || key_in_value != id) {
      c.fail(Key(id) + " holds \"" + value + "\", which is no value of it bumped a number of times");
      return;
    }
    const auto it = counts.find(id);
    const BumpCount count = it == counts.end() ? BumpCount{} : it->second;
    if (n < count.acknowledged || n > count.acknowledged + count.unknown) {
      c.fail(Key(id) + " holds \"" + value + "\": bumped " + std::to_string(n) + " times, but " +
             std::to_string(count.acknowledged) + " bumps were acknowledged and " + std::to_string(count.unknown) +
             " had an unknown outcome" + (n < count.acknowledged ? " (an acknowledged bump was lost)" : ""));
    }
    checked.fetch_add(1);
  });
  printf("hashtable_check check-rmw: %" PRIu64 " keys hold exactly their bumps\n", checked.load());
  return c.finish("check-rmw");
}

}  // namespace smart::hashtable::check
