// SMART-DTX: a client that dies (or stops) holding record locks, at each
// step of a transfer; the survivor's next transfer on the same accounts
// recovers the dead one's transaction and goes on, and the money, the
// replicas and the locks come out right.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "dtx_fixture.h"
#include "recovery.h"
#include "smart/task.h"
#include "verify.h"

namespace smart::dtx {
namespace {

using namespace smart::dtx::testing;

class DtxRecoveryTest : public DtxTest {
 protected:
  void TearDown() override {
    SetFaultPointHook("dtx.commit.write", nullptr);
    SetFaultPointHook("dtx.commit.release", nullptr);
    SetFaultPointHook("dtx.commit.validated", nullptr);
    DtxTest::TearDown();
  }

  // Runs `fn` as a second client ("the victim") on its own thread, with its
  // own initiator and database handle; returns when fn returned and the
  // victim's connections are gone (its sessions end at the blades).
  void AsVictim(const std::function<void(Initiator&, Database&)>& fn) {
    std::thread victim([&] {
      auto in = Connect();
      auto db = Open(*in);
      victim_thread_ = std::this_thread::get_id();
      fn(*in, *db);
    });
    victim.join();
  }

  // Transfers until it commits (conflicts while the dead client's locks
  // stand); fails the test after `seconds`.
  void TransferUntilCommitted(uint64_t from, uint64_t to, int64_t amount, double seconds) {
    Transaction tx(*db_);
    const uint64_t start = NowNs();
    Status s;
    while (NowNs() - start < static_cast<uint64_t>(seconds * 1e9)) {
      s = Transfer(tx, from, to, amount);
      if (s.ok()) break;
      ASSERT_EQ(s.code(), Status::Code::kRetry) << s.ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(s.ok()) << "no transfer committed in " << seconds << " s: " << s.ToString();
    ASSERT_TRUE(tx.flush().ok());
  }

  void ExpectCleanState() {
    EXPECT_EQ(CompareReplicas(*db_), "");
    EXPECT_EQ(FindLeftLocks(*db_), "");
    Transaction tx(*db_);
    int64_t total = 0;
    for (uint64_t k = 0; k < kAccountCount; ++k) total += Balance(tx, k);
    EXPECT_EQ(total, static_cast<int64_t>(kAccountCount) * kInitialBalance) << "money was made or lost";
  }

  std::thread::id victim_thread_;
};

TEST_F(DtxRecoveryTest, AClientThatDiesHoldingLocksIsRolledBackAndItsLocksReleased) {
  AsVictim([&](Initiator&, Database& db) {
    Transaction tx(db);
    tx.begin();
    const int a = tx.write(kAccounts, 10);
    const int b = tx.write(kAccounts, 11);
    ASSERT_TRUE(tx.execute().ok());
    *tx.value_as<int64_t>(a) -= 400;
    *tx.value_as<int64_t>(b) += 400;
    // Dies here: locks held, undo record written, nothing changed in place.
  });
  TransferUntilCommitted(10, 11, 7, 10);
  EXPECT_GE(db_->stats().recoveries, 1u);
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 10), kInitialBalance - 7);
  EXPECT_EQ(Balance(tx, 11), kInitialBalance + 7);
  ExpectCleanState();
}

TEST_F(DtxRecoveryTest, ACommitCutBetweenPrimaryAndBackupIsRolledBackOnEveryReplica) {
  AsVictim([&](Initiator& in, Database& db) {
    int writes = 0;
    SetFaultPointHook("dtx.commit.write", [&] {
      // Writes: first record's primary (blade 0), its backup (blade 1), the
      // second record's primary... Before the third, the first primary's
      // write has been posted (the switch to blade 1 posted it) and the
      // backup's is still queued: losing blade 0 now keeps it from going out.
      if (std::this_thread::get_id() == victim_thread_ && ++writes == 3) in.disconnect(0);
    });
    Transaction tx(db);
    tx.begin();
    const int a = tx.write(kAccounts, 20);
    const int b = tx.write(kAccounts, 21);
    ASSERT_TRUE(tx.execute().ok());
    *tx.value_as<int64_t>(a) -= 400;
    *tx.value_as<int64_t>(b) += 400;
    EXPECT_FALSE(tx.commit().ok());
    SetFaultPointHook("dtx.commit.write", nullptr);
  });
  // The first record is new on its primary only, and committing.
  {
    const TableInfo& t = *db_->table(kAccounts);
    const std::vector<std::string> r = Replicas(t);
    int committing = 0, differing = 0;
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      for (int i = 0; i < kSlotsPerNode; ++i) {
        const size_t at = n * t.node_bytes() + i * t.slot_bytes();
        committing += (SlotLock(r[0].data() + at) & kInvisible) != 0;
        differing += memcmp(r[0].data() + at + 8, r[1].data() + at + 8, t.slot_bytes() - 8) != 0;
      }
    }
    EXPECT_EQ(committing, 1) << "the cut did not leave one record committing";
    EXPECT_EQ(differing, 1) << "the cut did not leave one record new on its primary only";
  }
  // A reader meets the committing record, recovers the dead transaction
  // (before any other write could hide what the recovery left), and reads.
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 20), kInitialBalance) << "the dead transfer was not rolled back";
  EXPECT_GE(db_->stats().recoveries, 1u);
  ExpectCleanState();
  EXPECT_EQ(Balance(tx, 21), kInitialBalance);
  TransferUntilCommitted(20, 21, 9, 10);
  EXPECT_EQ(Balance(tx, 20), kInitialBalance - 9);
  ExpectCleanState();
}

TEST_F(DtxRecoveryTest, ACommitThatLandedEverywhereBeforeItsUnlocksIsRolledForward) {
  AsVictim([&](Initiator& in, Database& db) {
    SetFaultPointHook("dtx.commit.release", [&] {
      if (std::this_thread::get_id() != victim_thread_) return;
      in.disconnect(0);
      in.disconnect(1);
    });
    Transaction tx(db);
    tx.begin();
    const int a = tx.write(kAccounts, 30);
    const int b = tx.write(kAccounts, 31);
    ASSERT_TRUE(tx.execute().ok());
    *tx.value_as<int64_t>(a) -= 400;
    *tx.value_as<int64_t>(b) += 400;
    // Its unlocks cannot be posted; what it returns is not the question:
    // the survivors' recovery decides the outcome.
    (void)tx.commit();
    SetFaultPointHook("dtx.commit.release", nullptr);
  });
  TransferUntilCommitted(30, 31, 5, 10);
  EXPECT_GE(db_->stats().recoveries, 1u);
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 30), kInitialBalance - 400 - 5) << "a transfer committed on every replica was lost";
  EXPECT_EQ(Balance(tx, 31), kInitialBalance + 400 + 5);
  ExpectCleanState();
}

class DtxShortLeaseTest : public DtxRecoveryTest {
 protected:
  DtxShortLeaseTest() { lease_ns_ = 200000000; }  // 0.2 s

  // A holder stopped before its undo record landed: recovering one of its
  // locks cannot find the other, and the survivor meets that one next.
  void EveryLockOfADeadHolder();

  // Starts a second client (the holder) that locks accounts a and b to move
  // 400 from a to b, and stops at the nth hit of `point` in its commit
  // (default: between its validation and its writes; its session stays
  // open) until resume_ is set; returns once it holds both locks and has
  // stopped. Its commit's status goes to late_.
  std::thread StopHolding(uint64_t from, uint64_t to, const char* point = "dtx.commit.validated", int nth = 1) {
    std::atomic<bool> holding{false};
    stopped_ = false;
    std::thread holder([this, from, to, point, nth, &holding] {
      auto in = Connect();
      auto db = Open(*in);
      const std::thread::id me = std::this_thread::get_id();
      auto hits = std::make_shared<int>(0);
      SetFaultPointHook(point, [this, me, nth, hits] {
        if (std::this_thread::get_id() != me || ++*hits != nth) return;
        stopped_ = true;
        while (!resume_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      });
      Transaction tx(*db);
      tx.begin();
      const int a = tx.write(kAccounts, from);
      const int b = tx.write(kAccounts, to);
      Status s = tx.execute();
      holding = true;
      ASSERT_TRUE(s.ok()) << s.ToString();
      *tx.value_as<int64_t>(a) -= 400;
      *tx.value_as<int64_t>(b) += 400;
      late_ = tx.commit();
      (void)tx.flush();  // late_ holds what this test checks
    });
    while (!holding.load() || !stopped_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return holder;
  }

  // The stopped holder's commit after its locks were taken over: refused,
  // by its lost locks (its check found them taken) or by the fence the
  // recoverer put on it first, never carried out.
  void ExpectTheLateCommitRefused() {
    const bool lost = late_.code() == Status::Code::kLockLost;
    const bool fenced = late_.message().find("fenced") != std::string::npos;
    EXPECT_TRUE(lost || fenced) << "a holder whose locks were taken over went on: " << late_.ToString();
  }

  std::atomic<bool> resume_{false};
  std::atomic<bool> stopped_{false};
  Status late_;
};

// A committer stopped (not dead: its session stays open) after its in-place
// writes landed and before it made them visible leaves its records being
// committed. A reader waits for them, however many times it reads again,
// until the holder's lease (2 s) runs out and it recovers the transaction:
// it neither gives up early nor reads a value before the commit is whole.
class DtxStoppedCommitterTest : public DtxShortLeaseTest {
 protected:
  DtxStoppedCommitterTest() { lease_ns_ = 2000000000; }
};

TEST_F(DtxStoppedCommitterTest, AReaderWaitsOutTheLeaseOfACommitterStoppedBeforeItsRecordsAreVisible) {
  std::thread holder = StopHolding(70, 71, "dtx.commit.release");
  int committing = 0;
  {
    const TableInfo& t = *db_->table(kAccounts);
    const std::vector<std::string> r = Replicas(t);
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      for (int i = 0; i < kSlotsPerNode; ++i) {
        committing += (SlotLock(r[0].data() + n * t.node_bytes() + i * t.slot_bytes()) & kInvisible) != 0;
      }
    }
  }
  Transaction tx(*db_);
  tx.begin();
  const int a = tx.read(kAccounts, 70);
  const Status s = tx.execute();
  int64_t balance = 0;
  if (s.ok()) memcpy(&balance, tx.value(a), 8);
  if (s.ok()) EXPECT_TRUE(tx.commit().ok());
  resume_ = true;
  holder.join();
  EXPECT_EQ(committing, 2) << "the holder did not stop with its two records being committed";
  ASSERT_TRUE(s.ok()) << "a reader gave up on a record whose committer stood still for less than a lease: "
                      << s.ToString();
  EXPECT_GE(db_->stats().recoveries, 1u);
  EXPECT_EQ(balance, kInitialBalance - 400) << "the transfer that landed everywhere was not rolled forward";
  ExpectCleanState();
}

TEST_F(DtxShortLeaseTest, AStoppedHolderIsTakenOverAfterItsLeaseAndFindsOutBeforeWriting) {
  std::thread holder = StopHolding(40, 41);
  const uint64_t start = NowNs();
  TransferUntilCommitted(40, 41, 3, 10);
  const double waited = static_cast<double>(NowNs() - start) / 1e9;
  resume_ = true;
  holder.join();
  ExpectTheLateCommitRefused();
  EXPECT_GE(waited, 0.2) << "the locks were taken over before the lease ran out";
  EXPECT_GE(db_->stats().recoveries, 1u);
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 40), kInitialBalance - 3);
  EXPECT_EQ(Balance(tx, 41), kInitialBalance + 3);
  ExpectCleanState();
}

TEST_F(DtxShortLeaseTest, EveryLockOfAHolderFoundDeadIsRecoveredWithoutAnotherLease) { EveryLockOfADeadHolder(); }

void DtxShortLeaseTest::EveryLockOfADeadHolder() {
  // The holder stops before its undo record landed, so recovering one of its
  // locks cannot find the other; the survivor meets that one next.
  std::thread holder = StopHolding(50, 51);
  Transaction tx(*db_);
  Status s;
  for (int i = 0; i < 100000; ++i) {
    s = Transfer(tx, 50, 60, 3);
    if (s.code() != Status::Code::kRetry) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  const uint64_t recovered = db_->stats().recoveries;
  EXPECT_GE(recovered, 1u);
  // Account 51 is still locked with the same (dead) word: the first
  // transfer that meets it recovers it (and retries), the next commits.
  s = Transfer(tx, 51, 61, 5);
  EXPECT_EQ(db_->stats().recoveries, recovered + 1)
      << "a second lock of a holder found dead waits for a lease of its own: " << s.ToString();
  if (!s.ok()) s = Transfer(tx, 51, 61, 5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(tx.flush().ok());
  resume_ = true;
  holder.join();
  ExpectTheLateCommitRefused();
  ExpectCleanState();
}

// The window the lock check cannot close: the holder passed its check (its
// locks were still its own), then stopped before its writes, for longer
// than a lease. Its locks are recovered meanwhile and the accounts change;
// resumed, it must not land its whole-slot writes over them (the recoverer
// fenced it first), and it cannot say its commit did or did not happen.
TEST_F(DtxShortLeaseTest, AHolderStoppedAfterItsLockCheckIsFencedAndItsWritesNeverLand) {
  std::thread holder = StopHolding(44, 45, "dtx.commit.checked");
  TransferUntilCommitted(44, 45, 3, 10);
  TransferUntilCommitted(45, 44, 1, 10);
  resume_ = true;
  holder.join();
  EXPECT_FALSE(late_.ok()) << "a fenced holder's commit returned OK";
  EXPECT_EQ(late_.code(), Status::Code::kOutcomeUnknown) << late_.ToString();
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 44), kInitialBalance - 2) << "the stopped holder's writes landed after the recovery";
  EXPECT_EQ(Balance(tx, 45), kInitialBalance + 2);
  ExpectCleanState();
}

// Without the fence (FenceMode::kNever), what the lock check alone does: a
// holder stopped between its validation and its writes for longer than a
// lease finds its locks taken before it writes, and aborts.
class DtxShortLeaseUnfencedTest : public DtxShortLeaseTest {
 protected:
  DtxShortLeaseUnfencedTest() { fence_ = FenceMode::kNever; }
};

// Unfenced, a holder found dead keeps its session: only the task's memory
// that it is dead spares each of its other locks a lease of its own.
TEST_F(DtxShortLeaseUnfencedTest, EveryLockOfAHolderFoundDeadIsRecoveredWithoutAnotherLease) {
  EveryLockOfADeadHolder();
}

TEST_F(DtxShortLeaseUnfencedTest, AStoppedHolderFindsItsLocksTakenBeforeWriting) {
  std::thread holder = StopHolding(46, 47);
  TransferUntilCommitted(46, 47, 3, 10);
  resume_ = true;
  holder.join();
  EXPECT_EQ(late_.code(), Status::Code::kLockLost) << "the unfenced holder did not find its locks taken: "
                                                    << late_.ToString();
  Transaction tx(*db_);
  EXPECT_EQ(Balance(tx, 46), kInitialBalance - 3);
  EXPECT_EQ(Balance(tx, 47), kInitialBalance + 3);
  ExpectCleanState();
}

}  // namespace
}  // namespace smart::dtx
