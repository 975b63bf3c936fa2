// The transaction driver (RunTransactions): counts, and the idle time after
// each commit (IDLE_USEC) that Fig. 11's latency-throughput curve needs.
#include <gtest/gtest.h>

#include "dtx_fixture.h"
#include "txn_driver.h"

namespace smart::dtx {
namespace {

using testing::DtxTest;

TxOutcome CommitAtOnce(Transaction&, uint64_t*, int64_t* delta, Status*) {
  *delta = 1;
  return TxOutcome::kCommitted;
}

TEST_F(DtxTest, IdleTimeBoundsTheCommitsOfEachCoroutine) {
  TxDriverOptions o;
  o.threads = 1;
  o.coros = 2;
  o.duration = 0.3;
  o.idle_ns = 20000000;  // 20 ms after each commit
  const TxRunResult r = RunTransactions(*db_, o, CommitAtOnce);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_GT(r.committed, 0u);
  EXPECT_EQ(r.delta, static_cast<int64_t>(r.committed));
  // One commit, then at most one per 20 ms of the run, per coroutine.
  EXPECT_LE(static_cast<double>(r.committed), 2 * (2 + r.seconds / 0.020)) << r.seconds << " s";
}

TEST_F(DtxTest, WithoutIdleTimeTheDriverCommitsFarMore) {
  TxDriverOptions o;
  o.threads = 1;
  o.coros = 2;
  o.duration = 0.3;
  const TxRunResult r = RunTransactions(*db_, o, CommitAtOnce);
  EXPECT_EQ(r.failed, 0u);
  // The bound the idle test asserts is far below what the same run does
  // without idle time, so that test can tell the two apart.
  EXPECT_GT(static_cast<double>(r.committed), 10 * 2 * (2 + r.seconds / 0.020));
}

// A slow run's rates keep three significant digits in the result line and
// the CSV (a few thousand transactions a second over Soft-RoCE), a fast
// one's three decimals.
TEST(TxOutput, RatesKeepTheirDigitsAtLowThroughput) {
  TxDriverOptions o;
  o.threads = 2;
  o.coros = 8;
  TxRunResult r;
  r.seconds = 2;
  r.attempted = 6500;
  r.committed = 6240;
  r.stats.rdma_ops = 61000;
  const std::string line = ResultLine("dtx-smallbank", o, r);
  EXPECT_NE(line.find("attempt txn = 0.00325 M/s, committed txn = 0.00312 M/s"), std::string::npos) << line;
  EXPECT_NE(line.find("RDMA ops per second = 0.0305 M"), std::string::npos) << line;
  const std::string csv = CsvLine("dtx-smallbank", o, r);
  EXPECT_EQ(csv.rfind("dtx-smallbank, 2, 8, 0.00325, 0.00312, ", 0), 0u) << csv;
  r.attempted = 3000000;
  r.committed = 2950000;
  EXPECT_NE(ResultLine("dtx-tatp", o, r).find("committed txn = 1.475 M/s"), std::string::npos)
      << ResultLine("dtx-tatp", o, r);
}

}  // namespace
}  // namespace smart::dtx
