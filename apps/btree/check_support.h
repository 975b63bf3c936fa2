// btree_check's shared parts: the command line's options, the key and value
// formats, and the Checker (the connected tree and the first failure seen).
// The commands live in check_writes.cc (insert, update, delete, churn,
// check-log) and check_reads.cc (verify, read, scan, torn, contend);
// btree_check.cc parses the command line.
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
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "btree.h"
#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"

namespace smart::btree::check {

constexpr uint64_t kKeyStride = 1000003;

struct Options {
  std::vector<std::string> servers;
  int threads = 2;
  int coros = 4;
  uint64_t from = 0, to = 0;
  int writer = 0;
  int writers = 1;
  int rounds = 1;
  double duration = 1;
  bool absent = false;
  bool allow_missing = false;
  bool short_values = false;
  bool even_stable = false;
  std::string parity = "all";  // insert, check-log: all ids, or only the even or odd ones
  int min_height = 0;
  uint64_t lease_ms = 2000;
  uint64_t retry_timeout_ms = 10000;
  std::vector<std::string> logs;
  std::string history;        // contend: every operation and its outcome (smart/check/op_history.h)
  double zipf = 0.99;         // contend: skew of the key chooser
  uint64_t ops = 0;           // contend: operations per worker, on ticks over --duration (0: back to back)
  bool end_on_error = false;  // contend: an error ends the command quietly (a client expected to be fenced)
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

// What contend's read-modify-write does to a value, exactly as the
// linearizability checker's model (test/linearizability/model.go, Bump): a
// value ending in "+N" (N a number in canonical decimal that fits 64 bits)
// ends in "+N+1" instead; any other value gets "+1" appended.
std::string Bump(const std::string& value);

class Checker {
 public:
  explicit Checker(const Options& o) : o_(o) {}

  void open();
  BTree& tree() { return *tree_; }
  Initiator& initiator() { return *initiator_; }

  // Runs fn(worker, first id, step) on threads x coroutines; the ids of
  // [from, to) are split among the workers by stride.
  void run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn);

  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty();
  }
  // Prints the outcome and the tree's counters; the process's exit status.
  int finish(const std::string& what);

 private:
  const Options& o_;
  SmartConfig config_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<BTree> tree_;
  std::mutex mutex_;
  std::string error_;
};

// The commands: each returns the process's exit status.
int Insert(Checker& c, const Options& o);
int Update(Checker& c, const Options& o);
int Delete(Checker& c, const Options& o);
int Churn(Checker& c, const Options& o);
int CheckLog(Checker& c, const Options& o);
int Verify(Checker& c, const Options& o);
int Read(Checker& c, const Options& o);
int Scan(Checker& c, const Options& o);
int Torn(Checker& c, const Options& o);
int Contend(Checker& c, const Options& o);

}  // namespace smart::btree::check
