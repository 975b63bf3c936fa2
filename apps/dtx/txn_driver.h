// The transaction benches' driver: NR_THREAD threads of NR_CORO tasks run
// transactions for a duration or a count, and the result line and CSV
// report attempts, commits, latency of committed transactions, aborts by
// kind and RDMA work requests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "database.h"
#include "smart/bench/bench.h"
#include "transaction.h"

namespace smart::dtx {

/// How one attempt ended.
/// What one attempt came to. kUnknown: its commit may or may not have taken
/// effect (Status kOutcomeUnknown); its delta is kept apart.
enum class TxOutcome { kCommitted, kLogicalAbort, kConflict, kError, kUnknown };

/// Maps a Status from execute() or commit() to an outcome.
inline TxOutcome OutcomeOf(const Status& s) {
  if (s.ok()) return TxOutcome::kCommitted;
  // A conflict, or locks taken over from a holder judged dead (this one).
  if (s.code() == Status::Code::kRetry || s.code() == Status::Code::kLockLost) return TxOutcome::kConflict;
  if (s.code() == Status::Code::kNotFound) return TxOutcome::kLogicalAbort;
  if (s.code() == Status::Code::kOutcomeUnknown) return TxOutcome::kUnknown;
  return TxOutcome::kError;
}

/// tx.execute(); false when it failed (the transaction is then aborted),
/// with *outcome and *error saying how.
inline bool ExecuteOrEnd(Transaction& tx, TxOutcome* outcome, Status* error) {
  Status s = tx.execute();
  if (s.ok()) return true;
  *outcome = OutcomeOf(s);
  *error = s;
  return false;
}

/// tx.commit() as an outcome; *error set when it failed.
inline TxOutcome CommitOutcome(Transaction& tx, Status* error) {
  Status s = tx.commit();
  if (!s.ok()) *error = s;
  return OutcomeOf(s);
}

/// The next value of a task's generator (xorshift64*: fast, and good enough
/// to pick keys and transaction types).
inline uint64_t NextRandom(uint64_t* state) {
  uint64_t x = *state ? *state : 0x853c49e6748fea9bull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return (x * 0x2545f4914f6cdd1dull) >> 11;
}

/// One attempt of the workload in the calling task: `rng` is the task's
/// generator state; *delta: what a committed attempt added to a checked sum
/// (SmallBank: money), for a kUnknown too (what it adds if it took effect);
/// *error: the status of a kError or kUnknown.
using TxBody = std::function<TxOutcome(Transaction& tx, uint64_t* rng, int64_t* delta, Status* error)>;

struct TxDriverOptions {
  int threads = 1;
  int coros = 1;
  double duration = 0;          ///< seconds; 0: run `transactions` attempts in all
  uint64_t transactions = 0;
  bool progress = false;        ///< progress of a counted run on a terminal
  std::string history_path;     ///< "": none; else each committed transaction's accesses, one line each
  uint64_t idle_ns = 0;         ///< each coroutine idles this long after each commit (IDLE_USEC)
};

struct TxRunResult {
  double seconds = 0;
  uint64_t attempted = 0;
  uint64_t committed = 0;
  uint64_t conflicts = 0;
  uint64_t logical_aborts = 0;
  uint64_t failed = 0;
  uint64_t unknown = 0;         ///< attempts whose commit's outcome is unknown
  int64_t delta = 0;            ///< sum of committed attempts' deltas
  /// Deltas of the kUnknown attempts: each one took effect or did not.
  std::vector<int64_t> unknown_deltas;
  std::string first_failure;
  Histogram latency;            ///< ns of committed attempts
  /// The longest time one task went without a commit (from the start, and
  /// between commits): how long a task was held up, e.g. by a dead client's
  /// locks until their recovery.
  uint64_t longest_commit_gap_ns = 0;
  DtxStats stats;               ///< the database's counters over the run
};

/// Runs the workload. A kError or kUnknown stops the run (first_failure
/// says why).
TxRunResult RunTransactions(Database& db, const TxDriverOptions& options, const TxBody& body);

/// The upstream result line: "<prefix>: #thread = T, #coro_per_thread = C,
/// attempt txn = X M/s, committed txn = Y M/s, P50 latency = a us, P99
/// latency = b us, abort rate = r, RDMA ops per txn = o, RDMA ops per second
/// = p M", then the aborts by kind, the attempts of unknown outcome, and
/// the failures.
std::string ResultLine(const std::string& prefix, const TxDriverOptions& o, const TxRunResult& r);
/// The CSV line: prefix, threads, coroutines, attempted M/s, committed M/s,
/// P50 us, P99 us, abort rate, RDMA ops per txn, RDMA M ops/s, conflict
/// aborts, logical aborts, failed.
std::string CsvLine(const std::string& prefix, const TxDriverOptions& o, const TxRunResult& r);
// The column names of CsvLine, the first line of a new CSV file.
inline constexpr const char* kCsvHeader =
    "prefix, threads, coroutines, attempted_mtxn_s, committed_mtxn_s, p50_us, p99_us, abort_rate, "
    "rdma_ops_per_txn, rdma_mops, conflict_aborts, logical_aborts, failed";

}  // namespace smart::dtx
