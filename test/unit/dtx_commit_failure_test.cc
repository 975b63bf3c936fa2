// SMART-DTX commits that fail at each of their writes: the undo record's
// writes to every blade, then each replica's write of each record, made to
// complete with an error one at a time (fail@write#N). For a transfer, a
// one-record update, an insert and a delete, on two blades (one backup) and
// on three (two backups), and then:
//   - recovered:       the client goes; a survivor recovers what it left;
//   - task goes on:    the client's task first begins another transaction
//                      (it must not take the log slot its failed commit's
//                      undo record is still needed in);
//   - recoverer dies:  the first recoverer dies in the middle of a roll-back
//                      and a second one finishes it.
// Each case ends with replicas equal byte for byte, no lock left, and the
// transaction either whole or absent, as commit() reported: OK means it
// took effect, another error that it did not, kOutcomeUnknown either.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "dtx_fixture.h"
#include "recovery.h"
#include "verify.h"

namespace smart::dtx {
namespace {

using namespace smart::dtx::testing;

enum class Kind { kTransfer, kUpdate, kInsert, kDelete };
enum class After { kRecovered, kTaskGoesOn, kRecovererDies };

struct Case {
  int blades;
  Kind kind;
  int write;  // the commit's write that fails (1: the first undo write)
  After after;
};

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kTransfer: return "Transfer";
    case Kind::kUpdate: return "Update";
    case Kind::kInsert: return "Insert";
    case Kind::kDelete: return "Delete";
  }
  return "";
}

const char* AfterName(After a) {
  switch (a) {
    case After::kRecovered: return "Recovered";
    case After::kTaskGoesOn: return "TaskGoesOn";
    case After::kRecovererDies: return "RecovererDies";
  }
  return "";
}

// Writes of one commit: its undo record to each blade (every table has a
// replica on each), then each record to each of its replicas.
int CommitWrites(int blades, Kind kind) { return blades + (kind == Kind::kTransfer ? 2 : 1) * blades; }

constexpr uint64_t kFrom = 10, kTo = 11, kUpdated = 12, kAfterward = 20;
constexpr uint64_t kInserted = 7000, kDeleted = 7001;
constexpr int64_t kAmount = 100;

class DtxCommitFailureTest : public DtxTest, public ::testing::WithParamInterface<Case> {
 protected:
  DtxCommitFailureTest() { blade_count_ = GetParam().blades; }

  void TearDown() override {
    SetFaultPointHook("dtx.recovery.rolling_back", nullptr);
    DtxTest::TearDown();
  }

  Status Note(Transaction& tx, uint64_t key, bool insert) {
    tx.begin();
    const int n = insert ? tx.insert(kNotes, key) : tx.remove(kNotes, key);
    Status s = tx.execute();
    if (!s.ok()) return s;
    if (insert) memcpy(tx.value(n), "note:abcdefghijk", 16);
    return tx.commit();
  }

  Status Update(Transaction& tx, uint64_t account, int64_t amount) {
    tx.begin();
    const int a = tx.write(kAccounts, account);
    Status s = tx.execute();
    if (!s.ok()) return s;
    *tx.value_as<int64_t>(a) += amount;
    return tx.commit();
  }

  Status Run(Transaction& tx, Kind kind) {
    switch (kind) {
      case Kind::kTransfer: return Transfer(tx, kFrom, kTo, kAmount);
      case Kind::kUpdate: return Update(tx, kUpdated, kAmount);
      case Kind::kInsert: return Note(tx, kInserted, true);
      case Kind::kDelete: return Note(tx, kDeleted, false);
    }
    return Status::Internal("no such kind");
  }

  bool NoteExists(uint64_t key) {
    Transaction tx(*db_);
    tx.begin();
    tx.read(kNotes, key);
    const Status s = tx.execute();
    EXPECT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
    if (s.ok()) EXPECT_TRUE(tx.commit().ok());
    return s.ok();
  }

  // Waits (bounded by the test's timeout) until every blade saw these
  // sessions end: a recovery by session needs the blade to have seen it.
  void WaitUntilEnded(const std::vector<SessionId>& sessions) {
    for (size_t b = 0; b < sessions.size(); ++b) {
      if (sessions[b].slot == 0) continue;
      const auto* word = static_cast<const uint64_t*>(
          blades_[b]->target().local_ptr(GlobalAddress(static_cast<node_t>(b), SessionWordAddress(sessions[b].slot))));
      while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == (kSessionAliveBit | sessions[b].incarnation)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

  // Whether the failed transaction took effect, from the records; fails the
  // test when it took effect in part.
  bool TookEffect(Kind kind) {
    Transaction tx(*db_);
    switch (kind) {
      case Kind::kTransfer: {
        const int64_t from = Balance(tx, kFrom), to = Balance(tx, kTo);
        EXPECT_EQ(from + to, 2 * kInitialBalance) << "money was made or lost";
        EXPECT_TRUE(from == kInitialBalance || from == kInitialBalance - kAmount) << "balance " << from;
        return from != kInitialBalance;
      }
      case Kind::kUpdate: {
        const int64_t b = Balance(tx, kUpdated);
        EXPECT_TRUE(b == kInitialBalance || b == kInitialBalance + kAmount) << "balance " << b;
        return b != kInitialBalance;
      }
      case Kind::kInsert: return NoteExists(kInserted);
      case Kind::kDelete: return !NoteExists(kDeleted);
    }
    return false;
  }
};

TEST_P(DtxCommitFailureTest, TheCommitIsWholeOrAbsentAsReportedAndTheReplicasAgree) {
  const Case c = GetParam();
  if (c.kind == Kind::kDelete) {
    Transaction tx(*db_);
    ASSERT_TRUE(Note(tx, kDeleted, true).ok());
    ASSERT_TRUE(tx.flush().ok());
  }
  // The victim's transport counts its own writes only: it is wrapped for
  // fault injection (a rule that never fires), the survivors' is not.
  SmartConfig victim_config = config_;
  victim_config.faults = ParseFaultRules("delay=1us@write#999999999999");
  Status outcome, afterward;
  std::vector<SessionId> victim_sessions;
  std::thread victim([&] {
    auto in = Connect(victim_config);
    for (int b = 0; b < blade_count_; ++b) victim_sessions.push_back(in->session(static_cast<node_t>(b)));
    auto db = Open(*in);
    Transaction tx(*db);
    InstallFaultRules(ParseFaultRules("fail@write#" + std::to_string(c.write)));
    outcome = Run(tx, c.kind);
    InstallFaultRules({});
    if (c.after == After::kTaskGoesOn) afterward = Update(tx, kAfterward, 1);
    (void)tx.flush();
    // The victim's client goes: its sessions end at every blade.
  });
  victim.join();
  WaitUntilEnded(victim_sessions);
  const bool control = c.write > CommitWrites(c.blades, c.kind);
  if (control) ASSERT_TRUE(outcome.ok()) << "a commit with no failed write: " << outcome.ToString();
  if (!control) EXPECT_FALSE(outcome.ok()) << "a commit whose write " << c.write << " failed returned OK";

  if (c.after == After::kRecovererDies) {
    // The first recoverer dies (its blades gone) before its second write of
    // a roll-back; its claim goes with its sessions.
    std::vector<SessionId> recoverer_sessions;
    std::thread first([&] {
      auto in = Connect();
      for (int b = 0; b < blade_count_; ++b) recoverer_sessions.push_back(in->session(static_cast<node_t>(b)));
      auto db = Open(*in);
      const std::thread::id me = std::this_thread::get_id();
      SetFaultPointHook("dtx.recovery.rolling_back", [&in, me, this] {
        if (std::this_thread::get_id() != me) return;
        for (int b = 0; b < blade_count_; ++b) in->disconnect(static_cast<node_t>(b));
      });
      int swept = 0;
      (void)SweepDeadLocks(*db, &swept);
    });
    first.join();
    WaitUntilEnded(recoverer_sessions);
    SetFaultPointHook("dtx.recovery.rolling_back", nullptr);
  }
  int swept = 0, repaired = 0;
  const Status s = SweepDeadLocks(*db_, &swept);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(RepairChainLinks(*db_, &repaired).ok());
  EXPECT_EQ(CompareReplicas(*db_), "");
  EXPECT_EQ(FindLeftLocks(*db_), "");
  const bool took_effect = TookEffect(c.kind);
  if (outcome.ok()) {
    EXPECT_TRUE(took_effect) << "commit() returned OK for a transaction that did not take effect";
  } else if (outcome.code() != Status::Code::kOutcomeUnknown) {
    EXPECT_FALSE(took_effect) << "commit() failed (" << outcome.ToString() << ") but the transaction took effect";
  }
  if (c.after == After::kTaskGoesOn) {
    Transaction tx(*db_);
    const int64_t b = Balance(tx, kAfterward);
    if (afterward.ok()) EXPECT_EQ(b, kInitialBalance + 1);
    if (!afterward.ok() && afterward.code() != Status::Code::kOutcomeUnknown) EXPECT_EQ(b, kInitialBalance);
  }
  // The database goes on: a transfer over the same accounts commits.
  Transaction tx(*db_);
  ASSERT_TRUE(Transfer(tx, kFrom, kTo, 1).ok());
  ASSERT_TRUE(tx.flush().ok());
  EXPECT_EQ(CompareReplicas(*db_), "");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int blades : {2, 3}) {
    for (Kind kind : {Kind::kTransfer, Kind::kUpdate, Kind::kInsert, Kind::kDelete}) {
      for (After after : {After::kRecovered, After::kTaskGoesOn, After::kRecovererDies}) {
        // Every write of the commit, and one past them (nothing fails).
        for (int write = 1; write <= CommitWrites(blades, kind) + 1; ++write) cases.push_back({blades, kind, write, after});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryWrite, DtxCommitFailureTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return std::string(KindName(c.kind)) + "Blades" + std::to_string(c.blades) + "Write" +
                                  std::to_string(c.write) + AfterName(c.after);
                         });

}  // namespace
}  // namespace smart::dtx
