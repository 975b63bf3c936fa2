// Writers' logs and the check that compares what readers saw (and the final
// state) with them. Every operation on a key is logged with the interval in
// which it ran (a steady clock shared by the threads); values name their
// writer and sequence, so each value read names the write that made it.
//
// The check is the one a linearizable register must pass, per key:
//  - a value read was written by a write that began before the read ended,
//    and no write or delete of the key both began after that write had
//    returned and returned before the read began (else the read is stale:
//    a lost update, or a directory that routed it to an old copy);
//  - a key read as absent has a delete (or the initial absence) after which
//    no insert or update both began and returned before the read began (else
//    an acknowledged insert was lost).
// Operations that overlap may take effect in either order, so the check
// never fails a correct table, whatever the interleaving.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace smart::testing {

inline uint64_t SteadyNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

struct LoggedOp {
  enum Kind { kWrite, kRemove, kRead };
  Kind kind = kRead;
  std::string key;
  bool present = false;  // kRead: a value was found; kWrite: always
  std::string value;     // kWrite: the value written; kRead: the value found
  uint64_t start_ns = 0, end_ns = 0;
};

// One writer's log: only its own thread appends, so no lock.
class WriterLog {
 public:
  // Returns a time to pass to the matching record().
  static uint64_t begin() { return SteadyNs(); }
  void wrote(const std::string& key, const std::string& value, uint64_t start) {
    ops_.push_back(LoggedOp{LoggedOp::kWrite, key, true, value, start, SteadyNs()});
  }
  void removed(const std::string& key, uint64_t start) {
    ops_.push_back(LoggedOp{LoggedOp::kRemove, key, false, "", start, SteadyNs()});
  }
  void read(const std::string& key, bool present, const std::string& value, uint64_t start) {
    ops_.push_back(LoggedOp{LoggedOp::kRead, key, present, value, start, SteadyNs()});
  }
  const std::vector<LoggedOp>& ops() const { return ops_; }

 private:
  std::vector<LoggedOp> ops_;
};

// The operations of one key that overlap [from, to], by start time, with
// times in ns from `from`: what a failed check shows to explain itself.
inline std::string Around(const std::vector<LoggedOp>& ops, uint64_t from, uint64_t to) {
  std::vector<const LoggedOp*> near;
  for (const LoggedOp& op : ops) {
    if (op.end_ns >= from && op.start_ns <= to) near.push_back(&op);
  }
  std::sort(near.begin(), near.end(), [](const LoggedOp* a, const LoggedOp* b) { return a->start_ns < b->start_ns; });
  std::string out = "  operations on the key from then to the read (ns after the write began):\n";
  for (const LoggedOp* op : near) {
    const char* kind = op->kind == LoggedOp::kWrite ? "write" : op->kind == LoggedOp::kRemove ? "delete" : "read";
    out += "    " + std::string(kind) + " " + (op->kind == LoggedOp::kRead && !op->present ? "(absent)" : op->value) +
           " " + std::to_string(static_cast<int64_t>(op->start_ns - from)) + ".." +
           std::to_string(static_cast<int64_t>(op->end_ns - from)) + "\n";
  }
  return out;
}

// Checks one key's history (the writers' logs merged, the final state as a
// last read). `initial` is the value the key held before the writers began
// (nullptr: absent). Returns an empty string, or what went wrong.
inline std::string CheckKeyHistory(const std::string& key, const std::vector<LoggedOp>& ops,
                                   const std::string* initial) {
  // Writes (and, separately, writes with deletes) by start time, with the
  // smallest end among those that start at or after each position.
  struct Interval {
    uint64_t start, end;
  };
  auto index = [](std::vector<Interval> v) {
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    for (size_t i = v.size(); i-- > 1;) v[i - 1].end = std::min(v[i - 1].end, v[i].end);
    return v;
  };
  // The earliest return among operations that began after time t.
  auto earliest_after = [](const std::vector<Interval>& v, uint64_t t) {
    auto it = std::upper_bound(v.begin(), v.end(), t, [](uint64_t x, const Interval& i) { return x < i.start; });
    return it == v.end() ? std::numeric_limits<uint64_t>::max() : it->end;
  };
  std::vector<Interval> writes, changes;
  std::map<std::string, const LoggedOp*> by_value;
  LoggedOp initial_op;  // a write (or delete) at time 0
  if (initial != nullptr) {
    initial_op.kind = LoggedOp::kWrite;
    initial_op.value = *initial;
    by_value[*initial] = &initial_op;
  }
  std::vector<const LoggedOp*> removes{&initial_op};
  for (const LoggedOp& op : ops) {
    if (op.kind == LoggedOp::kRead) continue;
    changes.push_back({op.start_ns, op.end_ns});
    if (op.kind == LoggedOp::kWrite) {
      writes.push_back({op.start_ns, op.end_ns});
      if (!by_value.emplace(op.value, &op).second) return key + ": the value " + op.value + " was written twice";
    } else {
      removes.push_back(&op);
    }
  }
  if (initial != nullptr) removes.erase(removes.begin());
  writes = index(std::move(writes));
  changes = index(std::move(changes));
  auto at = [](uint64_t ns) { return std::to_string(ns / 1000) + " us"; };
  for (const LoggedOp& r : ops) {
    if (r.kind != LoggedOp::kRead) continue;
    if (r.present) {
      auto it = by_value.find(r.value);
      if (it == by_value.end()) return key + ": read \"" + r.value + "\", which no acknowledged write wrote";
      const LoggedOp& x = *it->second;
      if (x.start_ns > r.end_ns) return key + ": read \"" + r.value + "\" before its write began";
      const uint64_t next = earliest_after(changes, x.end_ns);
      if (next < r.start_ns) {
        return key + ": read \"" + r.value + "\" (written by " + at(x.start_ns) + ".." + at(x.end_ns) +
               ") at " + at(r.start_ns) + ", but a later write or delete had returned at " + at(next) +
               ": an acknowledged change was lost\n" + Around(ops, x.start_ns, r.end_ns);
      }
    } else {
      // The latest removal the read may follow.
      uint64_t last_removal_end = 0;
      bool any = false;
      for (const LoggedOp* d : removes) {
        if (d->start_ns > r.end_ns) continue;
        any = true;
        last_removal_end = std::max(last_removal_end, d->end_ns);
      }
      const uint64_t next = any ? earliest_after(writes, last_removal_end) : 0;
      if (!any || next < r.start_ns) {
        return key + ": read as absent at " + at(r.start_ns) + ", but an insert or update acknowledged at " +
               at(next) + " followed every delete before the read: an acknowledged write was lost";
      }
    }
  }
  return "";
}

// Merges the logs by key and checks every key; returns the first problems.
inline std::string CheckLogs(const std::vector<const WriterLog*>& logs,
                             const std::map<std::string, std::string>& initial, size_t max_problems = 5) {
  std::map<std::string, std::vector<LoggedOp>> by_key;
  for (const WriterLog* log : logs) {
    for (const LoggedOp& op : log->ops()) by_key[op.key].push_back(op);
  }
  std::string problems;
  size_t found = 0;
  for (const auto& [key, ops] : by_key) {
    auto it = initial.find(key);
    const std::string problem = CheckKeyHistory(key, ops, it == initial.end() ? nullptr : &it->second);
    if (!problem.empty() && found++ < max_problems) problems += problem + "\n";
  }
  if (found > max_problems) problems += "... and " + std::to_string(found - max_problems) + " more keys\n";
  return problems;
}

}  // namespace smart::testing
