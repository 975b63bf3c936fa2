// hashtable_check's own parts: its options, the key and value formats, and
// the Checker (the connected table, through smart/check/checker.h). The
// commands it shares with btree_check are in smart/check/commands.h; its
// own live in check_writes.cc (load, check-log), check_reads.cc (verify,
// count, capacity, torn), check_contend.cc (contend) and check_rmw.cc (rmw,
// check-rmw); hashtable_check.cc makes the command line.
//
// Values written here have the form "w<writer>:<key>:<seq>", so a reader can
// tell who wrote a value, for which key, and in which round; a
// read-modify-write appends "+1" or counts the "+N" up (Bump).
#pragma once

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "hash_table.h"
#include "smart/check/checker.h"
#include "smart/check/contend.h"

namespace smart::hashtable::check {

using smart::check::Bump;

struct Options : smart::check::CheckOptions {
  uint64_t expected_keys = 10000;
  int load_batch = 7;
  uint64_t min_slots = 0;
  int directory_capacity_depth = 20;
  bool exact = false;
  int fresh = 0;                  // contend: percent of operations on keys of the worker's own (inserts: splits)
  bool spread_inserts = false;    // TableOptions::spread_inserts_for_tests
  uint64_t wrap_guard_ms = 0;     // TableOptions::tag_wrap_guard_ns (0: the table's default)
};

inline std::string Key(uint64_t id) {
  char buf[32];
  snprintf(buf, sizeof(buf), "key%012" PRIu64, id);
  return buf;
}

inline std::string Value(int writer, uint64_t id, uint64_t seq) {
  return "w" + std::to_string(writer) + ":" + std::to_string(id) + ":" + std::to_string(seq);
}

// Parses "w<writer>:<key>:<seq>"; false when malformed.
inline bool ParseValue(const std::string& v, int* writer, uint64_t* id, uint64_t* seq) {
  unsigned long long k, s;
  int w;
  char tail;
  if (sscanf(v.c_str(), "w%d:%llu:%llu%c", &w, &k, &s, &tail) != 3) return false;
  *writer = w;
  *id = k;
  *seq = s;
  return true;
}

// The checker over the table: key id i is the key Key(i).
class Checker final : public smart::check::StoreChecker<HashTable, Key, Options> {
 public:
  using StoreChecker::StoreChecker;

  // Connects and builds (or attaches to) the table.
  void open();
  HashTable& table() { return store(); }
  // Counts the copies of key id `id`, then searches it; false (and the
  // checker failed) when the copies could not be counted.
  bool count_and_search(uint64_t id, int* copies, std::string* value, Status* found);

  std::string counters() override;
  std::string name(uint64_t id) const override { return Key(id); }
  std::string value(int writer, uint64_t id, uint64_t seq) const override { return Value(writer, id, seq); }
  void check_value(uint64_t id, const std::string& value, int* writer, uint64_t* seq) override;
};

// A command of hashtable_check's own: returns the process's exit status.
using Command = int(Checker& c, const Options& o);
Command Load, CheckLog;                   // check_writes.cc
Command Verify, Count, Capacity, Torn;    // check_reads.cc
Command Contend;                          // check_contend.cc
Command Rmw, CheckRmw;                    // check_rmw.cc

}  // namespace smart::hashtable::check
