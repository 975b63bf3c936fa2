// SMART-DTX: two clients recover one dead client's transaction at once, each
// from a lock it met on a different memory blade. The dead transaction
// locked a record whose primary is on blade 0 and one whose primary is on
// blade 1. One recoverer is held right after it decided (holding its claim,
// before it writes) while the other recovers and a transfer commits on the
// record it released; the held one then goes on. It must not write the
// image from before over that transfer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "dtx_fixture.h"
#include "recovery.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "undo_log.h"
#include "verify.h"

namespace smart::dtx {
namespace {

using namespace smart::dtx::testing;

constexpr uint64_t kNoteKey = 5;
constexpr char kNote[16] = "a note, 16 B";

class DtxRecoveryRaceTest : public DtxTest {
 protected:
  void SetUp() override {
    DtxTest::SetUp();
    // A note (table kNotes, primary on blade 1) for the dead transaction to
    // write along with an account (primary on blade 0).
    Transaction tx(*db_);
    tx.begin();
    const int n = tx.insert(kNotes, kNoteKey);
    ASSERT_TRUE(tx.execute().ok());
    memcpy(tx.value(n), kNote, sizeof(kNote));
    ASSERT_TRUE(tx.commit().ok());
    ASSERT_TRUE(tx.flush().ok());
  }

  void TearDown() override {
    SetFaultPointHook("dtx.recovery.decided", nullptr);
    SetFaultPointHook("lock.acquire.wait", nullptr);
    SetFaultPointHook("dtx.recovery.rolling_back", nullptr);
    DtxTest::TearDown();
  }

  // A second client locks account 10 and the note to change both, writes
  // its undo record (on both blades) and dies. Returns its log slot on
  // blade 0.
  GlobalAddress DieHoldingAnAccountAndTheNote() {
    GlobalAddress log_slot;
    std::thread victim([&] {
      auto in = Connect();
      auto db = Open(*in);
      Transaction tx(*db);
      tx.begin();
      const int a = tx.write(kAccounts, 10);
      const int n = tx.write(kNotes, kNoteKey);
      ASSERT_TRUE(tx.execute().ok());
      ASSERT_TRUE(tx.flush().ok());  // the undo record is on both blades
      *tx.value_as<int64_t>(a) -= 400;
      memset(tx.value(n), 'x', sizeof(kNote));
      log_slot = db->log_slot(0, ThreadId(), this_task::id());
    });
    victim.join();
    return log_slot;
  }

  // The one locked primary slot of table `id`: its address and lock word.
  void LockedSlot(uint16_t id, GlobalAddress* at, uint64_t* lock) {
    const TableInfo& t = *db_->table(id);
    const std::string primary = Replicas(t)[0];
    int found = 0;
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      for (int i = 0; i < kSlotsPerNode; ++i) {
        const uint64_t word = SlotLock(primary.data() + n * t.node_bytes() + i * t.slot_bytes());
        if (word == 0) continue;
        ++found;
        *at = SlotAddress(t, 0, Locator{id, static_cast<uint16_t>(i), n});
        *lock = word;
      }
    }
    ASSERT_EQ(found, 1) << "table " << id << " should have exactly one locked record";
  }

  // Recoverer B starts from the note's lock and is held once it decided.
  // Recoverer A starts from the account's lock, then moves 7 from account
  // 10 to 12. B goes on when A is done, or as soon as A waits for a lock
  // (the recovery claim B holds).
  void RaceTwoRecoverers(bool b_waits_for_a = false) {
    GlobalAddress account_at, note_at;
    uint64_t account_lock = 0, note_lock = 0;
    LockedSlot(kAccounts, &account_at, &account_lock);
    LockedSlot(kNotes, &note_at, &note_lock);
    ASSERT_NE(account_at.node, note_at.node);
    int a_task = -1, b_task = -1;
    bool b_decided = false, a_done = false, a_waits = false;
    SetFaultPointHook("dtx.recovery.decided", [&] {
      if (this_task::id() != b_task) return;
      b_decided = true;
      while (!a_done && (b_waits_for_a || !a_waits)) this_task::yield();
    });
    SetFaultPointHook("lock.acquire.wait", [&] {
      if (this_task::id() == a_task) a_waits = true;
    });
    Status a, b, transfer;
    TaskPool pool;
    pool.spawn([&] {
      b_task = this_task::id();
      RecoveryReport report;
      b = RecoverLock(*db_, note_at, note_lock, &report);
    });
    pool.spawn([&] {
      a_task = this_task::id();
      while (!b_decided) this_task::yield();
      RecoveryReport report;
      a = RecoverLock(*db_, account_at, account_lock, &report);
      Transaction tx(*db_);
      transfer = Transfer(tx, 10, 12, 7);
      EXPECT_TRUE(tx.flush().ok());
      a_done = true;
    });
    pool.run();
    ASSERT_TRUE(a.ok()) << a.ToString();
    b_status_ = b;
    if (!b_waits_for_a) ASSERT_TRUE(b.ok()) << b.ToString();
    ASSERT_TRUE(transfer.ok()) << transfer.ToString();
  }

  Status b_status_;

  void ExpectTheTransferKeptAndTheDeadTransactionUndone() {
    Transaction tx(*db_);
    EXPECT_EQ(Balance(tx, 10), kInitialBalance - 7) << "a recovery wrote its image from before over a transfer "
                                                        "committed after the other recovery released the record";
    EXPECT_EQ(Balance(tx, 12), kInitialBalance + 7);
    tx.begin();
    const int n = tx.read(kNotes, kNoteKey);
    ASSERT_TRUE(tx.execute().ok());
    EXPECT_EQ(memcmp(tx.value(n), kNote, sizeof(kNote)), 0) << "the dead transaction's note was not rolled back";
    ASSERT_TRUE(tx.commit().ok());
    EXPECT_EQ(CompareReplicas(*db_), "");
    EXPECT_EQ(FindLeftLocks(*db_), "");
    int64_t total = 0;
    for (uint64_t k = 0; k < kAccountCount; ++k) total += Balance(tx, k);
    EXPECT_EQ(total, static_cast<int64_t>(kAccountCount) * kInitialBalance) << "money was made or lost";
  }
};

TEST_F(DtxRecoveryRaceTest, RecoverersThatMetTheDeadTransactionOnDifferentBladesTakeTurns) {
  DieHoldingAnAccountAndTheNote();
  RaceTwoRecoverers();
  ExpectTheTransferKeptAndTheDeadTransactionUndone();
}

TEST_F(DtxRecoveryRaceTest, ALockReleasedForWantOfAnUndoRecordWaitsForTheRecovererThatHasIt) {
  // The undo record reached blade 1 only (the dead client's write to blade 0
  // had not landed): the recoverer from the account finds no record there
  // and may only release the lock, while the one from the note has the
  // record and rolls back both.
  const GlobalAddress log_slot = DieHoldingAnAccountAndTheNote();
  char* zeros = static_cast<char*>(initiator_->alloc_cache(kLogSlotBytes));
  memset(zeros, 0, kLogSlotBytes);
  ASSERT_TRUE(initiator_->write(zeros, log_slot, kLogSlotBytes).ok());
  RaceTwoRecoverers();
  ExpectTheTransferKeptAndTheDeadTransactionUndone();
}

class DtxRecoveryRaceShortLeaseTest : public DtxRecoveryRaceTest {
 protected:
  DtxRecoveryRaceShortLeaseTest() { lease_ns_ = 200000000; }  // 0.2 s
};

TEST_F(DtxRecoveryRaceShortLeaseTest, ARecovererThatStoodStillForALeaseLosesItsClaimAndWritesNothing) {
  // B holds the claim and stands still after deciding until A took the
  // claim over (a lease later), recovered and committed its transfer.
  DieHoldingAnAccountAndTheNote();
  RaceTwoRecoverers(/*b_waits_for_a=*/true);
  EXPECT_EQ(b_status_.code(), Status::Code::kRetry)
      << "a recoverer whose claim was taken over went on: " << b_status_.ToString();
  ExpectTheTransferKeptAndTheDeadTransactionUndone();
}

// A recoverer of another client is stopped between its claim's check and
// a write of its roll-back (the account's backup, on blade 1) until the
// next recoverer took its claim over by lease, finished the recovery and a
// transfer committed on that account. The take-over fenced it where the
// claim lives (blade 0); resumed, its write to blade 1 must not land either
// (the new recoverer fenced it on every blade), or the account's backup
// would go back to its image from before the transfer.
TEST_F(DtxRecoveryRaceShortLeaseTest, ARecovererStoppedBeforeARollBackWriteIsFencedOnEveryBlade) {
  DieHoldingAnAccountAndTheNote();
  GlobalAddress account_at, note_at;
  uint64_t account_lock = 0, note_lock = 0;
  LockedSlot(kAccounts, &account_at, &account_lock);
  LockedSlot(kNotes, &note_at, &note_lock);
  std::atomic<bool> held{false}, go_on{false};
  Status stopped;
  std::thread other([&] {
    auto in = Connect();
    auto db = Open(*in);
    const std::thread::id me = std::this_thread::get_id();
    SetFaultPointHook("dtx.recovery.rolling_back", [&] {
      if (std::this_thread::get_id() != me || held.exchange(true)) return;
      while (!go_on.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    RecoveryReport report;
    stopped = RecoverLock(*db, note_at, note_lock, &report);
  });
  while (!held.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  RecoveryReport report;
  const Status taken = RecoverLock(*db_, account_at, account_lock, &report);
  ASSERT_TRUE(taken.ok()) << taken.ToString();
  Transaction tx(*db_);
  ASSERT_TRUE(Transfer(tx, 10, 12, 7).ok());
  ASSERT_TRUE(tx.flush().ok());
  go_on = true;
  other.join();
  SetFaultPointHook("dtx.recovery.rolling_back", nullptr);
  EXPECT_FALSE(stopped.ok()) << "a recoverer whose claim was taken over wrote on";
  ExpectTheTransferKeptAndTheDeadTransactionUndone();
}

}  // namespace
}  // namespace smart::dtx
