// The transaction benches' driver (txn_driver.h).
#include "txn_driver.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <algorithm>
#include <vector>

#include "history.h"
#include "smart/logging.h"
#include "smart/task.h"

namespace smart::dtx {

namespace {

struct Worker {
  uint64_t attempted = 0, committed = 0, conflicts = 0, logical = 0, failed = 0;
  int64_t delta = 0;
  std::vector<int64_t> unknown_deltas;
  uint64_t last_commit = 0, longest_gap = 0;  // cycles
  std::string first_failure;
  Histogram latency;
  std::string history;
};

double PerSecondM(uint64_t n, double seconds) { return seconds > 0 ? static_cast<double>(n) / seconds / 1e6 : 0; }

// Millions per second as the result line and the CSV print them: three
// decimals, and below 0.1 M/s three significant digits (FormatSignificant: a
// few thousand transactions a second over a slow network are 0.00312, not
// 0.003).
std::string RateM(uint64_t n, double seconds) {
  const double v = PerSecondM(n, seconds);
  if (v > 0 && v < 0.1) return FormatSignificant(v);
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

}  // namespace

TxRunResult RunTransactions(Database& db, const TxDriverOptions& o, const TxBody& body) {
  const size_t tasks = static_cast<size_t>(o.threads) * static_cast<size_t>(o.coros);
  std::vector<Worker> workers(tasks);
  const uint64_t per_task = o.duration > 0 ? 0 : (o.transactions + tasks - 1) / tasks;
  RunControl control(o.threads);
  std::atomic<bool> stop_on_error{false};
  std::atomic<uint64_t> done{0};
  std::atomic<size_t> finished_tasks{0};
  const DtxStats before = db.stats();
  const double cycles_per_ns = CyclesPerNanosecond();
  std::thread runner([&] {
    RunThreads(o.threads, true, [&](int t) {
      TaskPool pool(TaskPoolOptions{128 * 1024, o.coros});
      for (int k = 0; k < o.coros; ++k) {
        pool.spawn([&, t, k] {
          Worker& w = workers[static_cast<size_t>(t) * static_cast<size_t>(o.coros) + static_cast<size_t>(k)];
          Transaction tx(db);
          uint64_t rng = (Cycles() << 8) ^ (static_cast<uint64_t>(t) << 40) ^ (static_cast<uint64_t>(k) << 20) ^ 0x9e37;
          control.ready_and_wait();
          w.last_commit = Cycles();
          while (!control.stopped() && (per_task == 0 || w.attempted < per_task)) {
            const uint64_t begin = Cycles();
            int64_t delta = 0;
            Status error;
            const TxOutcome outcome = body(tx, &rng, &delta, &error);
            ++w.attempted;
            switch (outcome) {
              case TxOutcome::kCommitted: {
                ++w.committed;
                w.delta += delta;
                const uint64_t now = Cycles();
                w.longest_gap = std::max(w.longest_gap, now - w.last_commit);
                w.last_commit = now;
                w.latency.record(static_cast<uint64_t>(static_cast<double>(now - begin) / cycles_per_ns));
                if (!o.history_path.empty()) {
                  std::vector<HistoryAccess> accesses;
                  for (const TxAccess& a : tx.accesses()) {
                    accesses.push_back(HistoryAccess{a.table, a.key, a.version, a.write, a.inserted, a.deleted});
                  }
                  w.history += FormatHistoryLine(tx.id(), accesses);
                  w.history += '\n';
                }
                IdleTask(o.idle_ns, control);
                break;
              }
              case TxOutcome::kConflict:
                ++w.conflicts;
                break;
              case TxOutcome::kLogicalAbort:
                ++w.logical;
                break;
              case TxOutcome::kError:
              case TxOutcome::kUnknown:
                if (outcome == TxOutcome::kUnknown) {
                  w.unknown_deltas.push_back(delta);
                } else {
                  ++w.failed;
                }
                if (w.first_failure.empty()) w.first_failure = error.ToString();
                stop_on_error.store(true);
                control.stop();
                break;
            }
            if ((w.attempted & 255) == 0) done.fetch_add(256, std::memory_order_relaxed);
          }
          finished_tasks.fetch_add(1);
          Status s = tx.flush();
          if (!s.ok() && w.first_failure.empty()) {
            ++w.failed;
            w.first_failure = "releasing locks after the run: " + s.ToString();
          }
        });
      }
      pool.run();
    });
  });
  TxRunResult r;
  if (o.duration > 0) {
    r.seconds = control.run_for(o.duration, &stop_on_error);
  } else {
    // A counted run: start, wait until every task ran its share, then stop.
    std::unique_ptr<Progress> progress;
    if (o.progress) progress = std::make_unique<Progress>("running " + std::to_string(o.transactions) + " transactions", o.transactions);
    std::thread stopper([&] {
      while (!stop_on_error.load() && !TerminationRequested()) {
        if (finished_tasks.load() == tasks) break;
        if (progress) progress->update(done.load());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      control.stop();
    });
    r.seconds = control.run_for(1e9, &stop_on_error);
    stopper.join();
    if (progress) progress->finish();
  }
  runner.join();
  std::string history;
  for (Worker& w : workers) {
    r.attempted += w.attempted;
    r.committed += w.committed;
    r.conflicts += w.conflicts;
    r.logical_aborts += w.logical;
    r.failed += w.failed;
    r.unknown += w.unknown_deltas.size();
    r.unknown_deltas.insert(r.unknown_deltas.end(), w.unknown_deltas.begin(), w.unknown_deltas.end());
    r.delta += w.delta;
    if (r.first_failure.empty()) r.first_failure = w.first_failure;
    r.latency.merge(w.latency);
    r.longest_commit_gap_ns = std::max(r.longest_commit_gap_ns,
                                       static_cast<uint64_t>(static_cast<double>(w.longest_gap) / cycles_per_ns));
    history += w.history;
  }
  if (!o.history_path.empty()) {
    std::ofstream out(o.history_path, std::ios::app);
    out << history;
    if (!out) throw Error("writing the transaction history to " + o.history_path + " failed");
  }
  DtxStats after = db.stats();
  r.stats.committed = after.committed - before.committed;
  r.stats.aborted_conflict = after.aborted_conflict - before.aborted_conflict;
  r.stats.aborted_logical = after.aborted_logical - before.aborted_logical;
  r.stats.failed = after.failed - before.failed;
  r.stats.rdma_ops = after.rdma_ops - before.rdma_ops;
  r.stats.round_trips = after.round_trips - before.round_trips;
  r.stats.torn_reads = after.torn_reads - before.torn_reads;
  r.stats.invisible_waits = after.invisible_waits - before.invisible_waits;
  r.stats.cache_misses = after.cache_misses - before.cache_misses;
  r.stats.recoveries = after.recoveries - before.recoveries;
  return r;
}

std::string ResultLine(const std::string& prefix, const TxDriverOptions& o, const TxRunResult& r) {
  char line[1024];
  const double abort_rate = r.attempted ? 1.0 - static_cast<double>(r.committed) / static_cast<double>(r.attempted) : 0;
  const double ops_per_txn = r.attempted ? static_cast<double>(r.stats.rdma_ops) / static_cast<double>(r.attempted) : 0;
  snprintf(line, sizeof(line),
           "%s: #thread = %d, #coro_per_thread = %d, attempt txn = %s M/s, committed txn = %s M/s, "
           "P50 latency = %.3f us, P99 latency = %.3f us, abort rate = %.3f, RDMA ops per txn = %.3f, "
           "RDMA ops per second = %s M, conflict aborts = %" PRIu64 ", logical aborts = %" PRIu64
           ", unknown = %" PRIu64 ", failed = %" PRIu64,
           prefix.c_str(), o.threads, o.coros, RateM(r.attempted, r.seconds).c_str(),
           RateM(r.committed, r.seconds).c_str(), static_cast<double>(r.latency.percentile(0.5)) / 1e3,
           static_cast<double>(r.latency.percentile(0.99)) / 1e3, abort_rate, ops_per_txn,
           RateM(r.stats.rdma_ops, r.seconds).c_str(), r.conflicts, r.logical_aborts, r.unknown, r.failed);
  return line;
}

std::string CsvLine(const std::string& prefix, const TxDriverOptions& o, const TxRunResult& r) {
  char line[512];
  const double abort_rate = r.attempted ? 1.0 - static_cast<double>(r.committed) / static_cast<double>(r.attempted) : 0;
  const double ops_per_txn = r.attempted ? static_cast<double>(r.stats.rdma_ops) / static_cast<double>(r.attempted) : 0;
  snprintf(line, sizeof(line), "%s, %d, %d, %s, %s, %.3f, %.3f, %.3f, %.3f, %s, %" PRIu64 ", %" PRIu64 ", %" PRIu64,
           prefix.c_str(), o.threads, o.coros, RateM(r.attempted, r.seconds).c_str(),
           RateM(r.committed, r.seconds).c_str(), static_cast<double>(r.latency.percentile(0.5)) / 1e3,
           static_cast<double>(r.latency.percentile(0.99)) / 1e3, abort_rate, ops_per_txn,
           RateM(r.stats.rdma_ops, r.seconds).c_str(), r.conflicts, r.logical_aborts, r.failed);
  return line;
}

}  // namespace smart::dtx
