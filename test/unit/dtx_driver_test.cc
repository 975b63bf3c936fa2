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

}  // namespace
}  // namespace smart::dtx
