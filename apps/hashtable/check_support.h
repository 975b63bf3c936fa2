// hashtable_check's shared parts: the command line's options, the key and
// value formats, and the Checker (the connected table and the first failure
// seen). The commands live in check_writes.cc (insert, load, update,
// delete, churn, check-log), check_reads.cc (verify, read, count, capacity,
// torn), check_contend.cc (contend) and check_rmw.cc (rmw, check-rmw);
// hashtable_check.cc parses the command line.
//
// Values written here have the form "w<writer>:<key>:<seq>", so a reader can
// tell who wrote a value, for which key, and in which round; a
// read-modify-write appends "+1" or counts the "+N" up (Bump).
#pragma once

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hash_table.h"
#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/task.h"

namespace smart::hashtable::check {

struct Options {
  std::vector<std::string> servers;
  int threads = 2;
  int coros = 4;
  uint64_t expected_keys = 10000;
  int load_batch = 7;
  uint64_t from = 0, to = 0;
  int writer = 0;
  int writers = 1;
  int rounds = 1;
  double duration = 1;
  bool absent = false;
  bool allow_missing = false;
  uint64_t min_slots = 0;
  uint64_t lease_ms = 2000;
  uint64_t retry_timeout_ms = 10000;
  int directory_capacity_depth = 20;
  bool exact = false;
  std::vector<std::string> logs;  // writer logs (insert/update/delete/churn write one; check-log reads them)
  std::string history;            // contend: every operation and its outcome (history.h)
  double zipf = 0.99;             // contend: skew of the key chooser
  uint64_t ops = 0;               // contend: operations per worker, on ticks over --duration (0: back to back)
  int fresh = 0;                  // contend: percent of operations on keys of the worker's own (inserts: splits)
  bool spread_inserts = false;    // TableOptions::spread_inserts_for_tests
  uint64_t wrap_guard_ms = 0;     // TableOptions::tag_wrap_guard_ns (0: the table's default)
};

inline std::string Key(uint64_t id) {
  char buf[32];
  snprintf(buf, sizeof(buf), "key%012" PRIu64, id);
  return buf;
}

// What the checkers' read-modify-write does to a value, as the
// linearizability checker's model has it (test/linearizability/model.go,
// Bump): a value ending in "+N" (N a number written without leading zeros)
// ends in "+N+1" instead; any other value gets "+1" appended.
inline std::string Bump(const std::string& v) {
  const size_t plus = v.rfind('+');
  if (plus != std::string::npos) {
    const char* first = v.data() + plus + 1;
    const char* last = v.data() + v.size();
    uint64_t n = 0;
    const auto [end, error] = std::from_chars(first, last, n);
    if (error == std::errc() && end == last && first != last && std::to_string(n) == std::string(first, last)) {
      return v.substr(0, plus + 1) + std::to_string(n + 1);
    }
  }
  return v + "+1";
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

class Checker {
 public:
  explicit Checker(const Options& o) : o_(o) {}

  void open() {
    config_ = SmartConfig::Load();
    smart::ExportProviderEnvironment(config_);
    initiator_ = std::make_unique<Initiator>(config_);
    for (size_t i = 0; i < o_.servers.size(); ++i) {
      const std::string& s = o_.servers[i];
      const ServerAddress address = ParseServerAddress(s);
      initiator_->connect(static_cast<node_t>(i), address.hostname, address.port, o_.threads + 1);
    }
    hashtable::TableOptions options;
    options.expected_keys = o_.expected_keys;
    options.speculative_lookup = config_.use_speculative_lookup;
    // A short grace period makes block reuse (and its checks) frequent.
    options.reclaim_grace_ns = 1000000;
    options.lease.lease_ns = o_.lease_ms * 1000000;
    options.retry_timeout_ns = o_.retry_timeout_ms * 1000000;
    options.directory_capacity_depth = o_.directory_capacity_depth;
    options.spread_inserts_for_tests = o_.spread_inserts;
    if (o_.wrap_guard_ms != 0) options.tag_wrap_guard_ns = o_.wrap_guard_ms * 1000000;
    table_ = std::make_unique<HashTable>(*initiator_, config_, static_cast<int>(o_.servers.size()), options);
  }

  HashTable& table() { return *table_; }
  Initiator& initiator() { return *initiator_; }

  // Runs fn(worker, first key, step) on threads x coroutines; the keys of
  // [from, to) are split among the workers by stride.
  void run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn) {
    const uint64_t workers = static_cast<uint64_t>(o_.threads) * static_cast<uint64_t>(o_.coros);
    RunThreads(o_.threads, false, [&](int t) {
      TaskPool pool(TaskPoolOptions{128 * 1024, o_.coros});
      for (int k = 0; k < o_.coros; ++k) {
        const int worker = t * o_.coros + k;
        pool.spawn([&, worker] { fn(worker, o_.from + static_cast<uint64_t>(worker), workers); });
      }
      pool.run();
    });
  }

  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty();
  }
  int finish(const std::string& what) {
    if (!error_.empty()) {
      fprintf(stderr, "hashtable_check %s: FAILED: %s\n", what.c_str(), error_.c_str());
      return 1;
    }
    const hashtable::TableStats s = table_->stats();
    printf("hashtable_check %s: ok (torn reads %" PRIu64 ", torn buckets %" PRIu64 ", stale directory %" PRIu64
           ", CAS failures %" PRIu64
           ", splits %" PRIu64 ", splits of dead clients finished %" PRIu64 ", retired %" PRIu64 ", reused %" PRIu64
           ", duplicates removed %" PRIu64 ", slot words read again %" PRIu64 ")\n",
           what.c_str(), s.torn_reads, s.torn_buckets, s.stale_directory, s.cas_failures, s.splits, s.splits_recovered,
           s.blocks_retired, s.blocks_reused, s.duplicates_removed, s.slow_slot_reads);
    return 0;
  }

 private:
  const Options& o_;
  SmartConfig config_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<HashTable> table_;
  std::mutex mutex_;
  std::string error_;
};

// The commands: each returns the process's exit status.
int Insert(Checker& c, const Options& o);
int Load(Checker& c, const Options& o);
int Update(Checker& c, const Options& o);
int Delete(Checker& c, const Options& o);
int Churn(Checker& c, const Options& o);
int CheckLog(Checker& c, const Options& o);
int Verify(Checker& c, const Options& o);
int Read(Checker& c, const Options& o);
int Count(Checker& c, const Options& o);
int Capacity(Checker& c, const Options& o);
int Torn(Checker& c, const Options& o);
int Contend(Checker& c, const Options& o);
int Rmw(Checker& c, const Options& o);
int CheckRmw(Checker& c, const Options& o);

}  // namespace smart::hashtable::check
