// The scaffolding under both applications' checkers (hashtable_check,
// btree_check): the options every checker takes, the connection to the
// memory blades, threads x coroutines over a range of key ids, and the first
// failure seen, with the process's exit status.
//
// An application's checker derives from Checker and says, through the
// virtual functions below, how its store names, writes and reads a key id.
// That small interface is what lets the commands both checkers run the same
// way (commands.h) exist once, here, while nothing in this folder knows an
// application.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "smart/config.h"
#include "smart/initiator.h"
#include "smart/status.h"
#include "smart/store_options.h"

namespace smart::check {

// The options every checker takes (AddCheckOptions in checker_main.h puts
// them on the command line); an application's options derive from it.
struct CheckOptions {
  std::vector<std::string> servers;
  int threads = 2;
  int coros = 4;
  uint64_t from = 0, to = 0;  // the key ids a command works on: [from, to)
  int writer = 0;             // the writer id this process stores in its values
  int writers = 1;            // writers 0 .. writers - 1 may have written a value
  int rounds = 1;             // the largest valid sequence number
  double duration = 1;        // seconds, for the commands that run for a while
  bool absent = false;
  bool allow_missing = false;
  uint64_t lease_ms = 2000;
  uint64_t retry_timeout_ms = 10000;
  std::vector<std::string> logs;  // writer logs (writing commands write one; check-log reads them)
  std::string history;            // contend: every operation and its outcome (op_history.h)
  double zipf = 0.99;             // contend: skew of the key chooser
  uint64_t ops = 0;               // contend: operations per worker, on ticks over --duration (0: back to back)
};

class Checker {
 public:
  // `program` names the checker in what it prints ("hashtable_check").
  Checker(std::string program, const CheckOptions& o) : program_(std::move(program)), options_(o) {}
  virtual ~Checker() = default;
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // Loads the configuration and reads every --server; throws smart::Error
  // for either (a usage or configuration error).
  void load_config();
  // Connects to every --server (the i-th is node i), with a queue pair for
  // every thread and one more; loads the configuration first if not yet.
  void connect();

  // Sets what a checker wants of any store's options: the configuration's
  // speculative lookup, --lease-ms and --retry-timeout-ms, and a short grace
  // period, so that block reuse (and its checks) is frequent.
  void set_common_options(StoreOptions* options) const {
    options->speculative_lookup = config_.use_speculative_lookup;
    options->reclaim_grace_ns = 1000000;
    options->lease.lease_ns = options_.lease_ms * 1000000;
    options->retry_timeout_ns = options_.retry_timeout_ms * 1000000;
  }

  const std::string& program() const { return program_; }
  const SmartConfig& config() const { return config_; }
  Initiator& initiator() { return *initiator_; }

  // Runs fn(worker, first id, step) on threads x coroutines; the ids of
  // [from, to) are split among the workers by stride.
  void run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn);
  // Runs fn(id, value) for every id of [from, to) on threads x coroutines,
  // until the first failure; `value` is the worker's buffer for what it
  // reads (kept across calls, so that it is not allocated for every key).
  void each_id(const std::function<void(uint64_t id, std::string& value)>& fn);

  // Keeps the first failure: the one the process reports.
  void fail(const std::string& message);
  bool failed();
  // Prints the command's outcome, with the store's counters when it went
  // well; the process's exit status (0, or 1 after a failure).
  int finish(const std::string& what);

  // --- What the application's store says and does, for the shared commands.

  // The store's counters, as finish() prints them after "ok (".
  virtual std::string counters() = 0;
  // How a message names key id `id`.
  virtual std::string name(uint64_t id) const = 0;
  // The value writer `writer` writes to key id `id` with sequence number `seq`.
  virtual std::string value(int writer, uint64_t id, uint64_t seq) const = 0;
  // Checks a value read for key id `id` (a bad one fails the checker) and
  // sets who wrote it and its sequence number.
  virtual void check_value(uint64_t id, const std::string& value, int* writer, uint64_t* seq) = 0;
  // Whether the writing commands write key id `id` (options may leave some out).
  virtual bool writes(uint64_t) const { return true; }
  // Whether key id `id` stays present throughout: delete leaves it alone.
  virtual bool stays(uint64_t) const { return false; }
  virtual Status search(uint64_t id, std::string* value) = 0;
  virtual Status insert(uint64_t id, const std::string& value) = 0;
  virtual Status update(uint64_t id, const std::string& value) = 0;
  virtual Status remove(uint64_t id) = 0;
  // Reads the store found torn so far (and read again).
  virtual uint64_t torn_reads() = 0;

 private:
  const std::string program_;
  const CheckOptions& options_;
  SmartConfig config_;
  std::vector<ServerAddress> servers_;  // --server, read (load_config)
  bool config_loaded_ = false;
  std::unique_ptr<Initiator> initiator_;
  std::mutex mutex_;
  std::string error_;
};

// The store interface for a store whose operations take the application's
// key for an id, KeyOf(id): Store has search, insert, update and remove of
// a key, and stats() with the torn_reads counter. The application creates
// the store (store_) in its open(); o_ holds its options.
template <class Store, auto KeyOf, class Options>
class StoreChecker : public Checker {
 public:
  StoreChecker(std::string program, const Options& o) : Checker(std::move(program), o), o_(o) {}

  Store& store() { return *store_; }

  Status search(uint64_t id, std::string* value) override { return store_->search(KeyOf(id), value); }
  Status insert(uint64_t id, const std::string& value) override { return store_->insert(KeyOf(id), value); }
  Status update(uint64_t id, const std::string& value) override { return store_->update(KeyOf(id), value); }
  Status remove(uint64_t id) override { return store_->remove(KeyOf(id)); }
  uint64_t torn_reads() override { return store_->stats().torn_reads; }

 protected:
  const Options& o_;
  std::unique_ptr<Store> store_;
};

// A store's counters as Checker::counters() gives them: "name value, name
// value, ...".
std::string Counters(std::initializer_list<std::pair<const char*, uint64_t>> counters);

}  // namespace smart::check
