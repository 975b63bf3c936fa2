// btree_check's own parts: its options, the key and value formats, and the
// Checker (the connected tree, through smart/check/checker.h). The commands
// it shares with hashtable_check are in smart/check/commands.h; its own live
// in check_writes.cc (check-log) and check_reads.cc (verify, scan, torn,
// contend); btree_check.cc makes the command line.
//
// Key id i is the tree key i * kKeyStride (order kept, spread over the
// 64-bit range). Values name their writer, key id and round: long values as
// text "w<writer>:<id>:<seq>" padded with dots to 24 bytes (in a value
// block), or with --short-values eight bytes (writer 8 bits, seq 24 bits, id
// 32 bits) inline in the leaf. contend writes values of its own
// (check_reads.cc).
#pragma once

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "btree.h"
#include "smart/check/checker.h"
#include "smart/check/contend.h"

namespace smart::btree::check {

constexpr uint64_t kKeyStride = 1000003;

struct Options : smart::check::CheckOptions {
  bool short_values = false;
  bool even_stable = false;    // even ids stay present throughout
  std::string parity = "all";  // insert, check-log: all ids, or only the even or odd ones
  int min_height = 0;
  bool end_on_error = false;   // contend: an error ends the command quietly (a client expected to be fenced)
};

inline uint64_t Key(uint64_t id) { return id * kKeyStride; }

// The ids a command with --parity works on.
inline bool OfParity(const Options& o, uint64_t id) {
  return o.parity == "all" || (o.parity == "even") == (id % 2 == 0);
}

inline std::string Value(const Options& o, int writer, uint64_t id, uint64_t seq) {
  if (o.short_values) {
    const uint64_t v = (uint64_t{static_cast<uint8_t>(writer)}) | ((seq & 0xffffff) << 8) | ((id & 0xffffffff) << 32);
    return std::string(reinterpret_cast<const char*>(&v), 8);
  }
  // Padded with dots to 24 bytes, so that it never looks like a short value
  // and always lives in a block.
  std::string text = "w" + std::to_string(writer) + ":" + std::to_string(id) + ":" + std::to_string(seq);
  if (text.size() < 24) text.append(24 - text.size(), '.');
  return text;
}

inline bool ParseValue(const std::string& v, int* writer, uint64_t* id, uint64_t* seq) {
  if (v.size() == 8) {
    uint64_t w;
    memcpy(&w, v.data(), 8);
    *writer = static_cast<int>(w & 0xff);
    *seq = (w >> 8) & 0xffffff;
    *id = w >> 32;
    return true;
  }
  unsigned long long k, s;
  int w, used = 0;
  if (sscanf(v.c_str(), "w%d:%llu:%llu%n", &w, &k, &s, &used) != 3) return false;
  if (v.size() < 24 || v.find_first_not_of('.', static_cast<size_t>(used)) != std::string::npos) return false;
  *writer = w;
  *id = k;
  *seq = s;
  return true;
}

using smart::check::Bump;

// The checker over the tree: key id i is the tree key Key(i).
class Checker final : public smart::check::StoreChecker<BTree, Key, Options> {
 public:
  using StoreChecker::StoreChecker;

  // Connects and builds (or attaches to) the tree.
  void open();
  BTree& tree() { return store(); }

  std::string counters() override;
  std::string name(uint64_t id) const override { return "key id " + std::to_string(id); }
  std::string value(int writer, uint64_t id, uint64_t seq) const override { return Value(o_, writer, id, seq); }
  void check_value(uint64_t id, const std::string& value, int* writer, uint64_t* seq) override;
  bool writes(uint64_t id) const override { return OfParity(o_, id); }
  bool stays(uint64_t id) const override { return o_.even_stable && id % 2 == 0; }
};

// A command of btree_check's own: returns the process's exit status.
using Command = int(Checker& c, const Options& o);
Command CheckLog;                         // check_writes.cc
Command Verify, Scan, Torn, Contend;      // check_reads.cc

}  // namespace smart::btree::check
