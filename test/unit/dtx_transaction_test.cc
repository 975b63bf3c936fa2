// SMART-DTX transactions against two memory blades inside the test process
// (every table has a backup on the other blade).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "database.h"
#include "db_internal.h"
#include "record.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/task.h"
#include "test_util.h"
#include "transaction.h"
#include "undo_log.h"
#include "dtx_fixture.h"

namespace smart::dtx {
namespace {

using namespace smart::dtx::testing;

TEST_F(DtxTest, TheBuilderLoadsEveryRowOnEveryReplicaAndASecondClientAttaches) {
  const TableInfo* t = db_->table(kAccounts);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->rows, kAccountCount);
  ASSERT_EQ(t->replicas.size(), 2u);
  EXPECT_EQ(t->replicas[0], 0);
  EXPECT_EQ(db_->table(kNotes)->replicas[0], 1);
  const std::vector<std::string> r = Replicas(*t);
  EXPECT_EQ(r[0], r[1]);
  auto other = Connect();
  Database attached(*other, 2, Options());
  EXPECT_EQ(attached.table(kAccounts)->region, t->region);
  Transaction tx(attached);
  for (uint64_t k : {uint64_t{0}, uint64_t{77}, kAccountCount - 1}) EXPECT_EQ(Balance(tx, k), kInitialBalance);
}

TEST_F(DtxTest, ACommittedTransferIsOnBothReplicasAndLeavesNoLock) {
  Transaction tx(*db_);
  ASSERT_TRUE(Transfer(tx, 3, 4, 250).ok());
  ASSERT_TRUE(tx.flush().ok());
  EXPECT_EQ(Balance(tx, 3), kInitialBalance - 250);
  EXPECT_EQ(Balance(tx, 4), kInitialBalance + 250);
  const std::vector<std::string> r = Replicas(*db_->table(kAccounts));
  EXPECT_EQ(r[0], r[1]) << "the backup differs from the primary";
  const TableInfo& t = *db_->table(kAccounts);
  for (uint64_t n = 0; n < t.total_nodes(); ++n) {
    for (int i = 0; i < kSlotsPerNode; ++i) {
      EXPECT_EQ(SlotLock(r[0].data() + n * t.node_bytes() + i * t.slot_bytes()), 0u) << "node " << n << " slot " << i;
    }
  }
  // The version moved by one, and the history says so.
  tx.begin();
  const int a = tx.read(kAccounts, 3);
  ASSERT_TRUE(tx.execute().ok());
  EXPECT_EQ(tx.version(a), 2u);
  ASSERT_TRUE(tx.commit().ok());
}

TEST_F(DtxTest, ALockedRecordMakesASecondWriterAbortAndTheFirstCommits) {
  Transaction first(*db_);
  Transaction second(*db_);
  first.begin();
  const int a = first.write(kAccounts, 10);
  ASSERT_TRUE(first.execute().ok());
  second.begin();
  second.write(kAccounts, 10);
  Status s = second.execute();
  EXPECT_EQ(s.code(), Status::Code::kRetry) << s.ToString();
  *first.value_as<int64_t>(a) += 1;
  ASSERT_TRUE(first.commit().ok());
  ASSERT_TRUE(first.flush().ok());
  ASSERT_TRUE(Transfer(second, 10, 11, 1).ok()) << "the lock was released";
  ASSERT_TRUE(second.flush().ok());
  EXPECT_EQ(Balance(second, 10), kInitialBalance);
  EXPECT_EQ(db_->stats().aborted_conflict, 1u);
}

// Runs `fn` on a thread of its own: a task holds one live transaction at a
// time (its undo-log slot is one), so a second one runs elsewhere.
void OnAnotherThread(const std::function<void()>& fn) {
  std::thread other(fn);
  other.join();
}

TEST_F(DtxTest, AnAbortReleasesOnlyTheLocksItTook) {
  Transaction holder(*db_);
  holder.begin();
  holder.write(kAccounts, 20);
  ASSERT_TRUE(holder.execute().ok());
  OnAnotherThread([&] {
    // `other` locks 21, then fails on 20 (held): it must release 21 and
    // leave 20 to its holder.
    Transaction other(*db_);
    other.begin();
    other.write(kAccounts, 21);
    other.write(kAccounts, 20);
    EXPECT_EQ(other.execute().code(), Status::Code::kRetry);
    ASSERT_TRUE(other.flush().ok());
    Transaction third(*db_);
    third.begin();
    third.write(kAccounts, 20);
    EXPECT_EQ(third.execute().code(), Status::Code::kRetry) << "an abort freed a lock another transaction holds";
    third.begin();
    third.write(kAccounts, 21);
    ASSERT_TRUE(third.execute().ok()) << "an abort kept a lock it took";
    third.abort();
    ASSERT_TRUE(third.flush().ok());
  });
  holder.abort();
  ASSERT_TRUE(holder.flush().ok());
}

// Two transactions of one task at once would share its undo-log slot: the
// second's record would replace the first's, and a recovery of the first
// would find no record of it. The second is refused before it writes.
TEST_F(DtxTest, ASecondLiveTransactionOfATaskIsRefusedItsUndoRecord) {
  Transaction first(*db_);
  first.begin();
  first.write(kAccounts, 24);
  ASSERT_TRUE(first.execute().ok());
  Transaction second(*db_);
  second.begin();
  second.write(kAccounts, 25);
  const Status s = second.execute();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("use one per task"), std::string::npos) << s.message();
  ASSERT_TRUE(second.flush().ok());
  *first.value_as<int64_t>(0) += 1;
  ASSERT_TRUE(first.commit().ok());
  ASSERT_TRUE(first.flush().ok());
  // Once the first is over, the slot is free for the second.
  second.begin();
  second.write(kAccounts, 25);
  ASSERT_TRUE(second.execute().ok());
  second.abort();
  ASSERT_TRUE(second.flush().ok());
  EXPECT_EQ(Balance(second, 24), kInitialBalance + 1);
  EXPECT_EQ(Balance(second, 25), kInitialBalance);
}

TEST_F(DtxTest, WriteSkewIsPrevented) {
  // T1 reads y and writes x; T2 reads x and writes y. Both execute, then both
  // validate before either writes (each held at the point between its
  // validation and its commit writes until the other got there). Each read
  // record is then locked by the other: at most one may commit.
  int at_point = 0, done = 0;
  SetFaultPointHook("dtx.commit.validated", [&] {
    ++at_point;
    while (at_point + done < 2) this_task::yield();
  });
  Status c1, c2;
  bool executed1 = false, executed2 = false;
  TaskPool pool;
  pool.spawn([&] {
    Transaction t1(*db_);
    t1.begin();
    const int x = t1.write(kAccounts, 30);
    t1.read(kAccounts, 31);
    c1 = t1.execute();
    executed1 = true;
    while (!executed2) this_task::yield();
    if (c1.ok()) {
      *t1.value_as<int64_t>(x) -= 150;
      c1 = t1.commit();
    }
    ++done;
    EXPECT_TRUE(t1.flush().ok());
  });
  pool.spawn([&] {
    Transaction t2(*db_);
    t2.begin();
    t2.read(kAccounts, 30);
    const int y = t2.write(kAccounts, 31);
    c2 = t2.execute();
    executed2 = true;
    while (!executed1) this_task::yield();
    if (c2.ok()) {
      *t2.value_as<int64_t>(y) -= 150;
      c2 = t2.commit();
    }
    ++done;
    EXPECT_TRUE(t2.flush().ok());
  });
  pool.run();
  SetFaultPointHook("dtx.commit.validated", nullptr);
  EXPECT_FALSE(c1.ok() && c2.ok()) << "both transactions of a write skew committed";
  Transaction tx(*db_);
  EXPECT_GE(Balance(tx, 30) + Balance(tx, 31), 2 * kInitialBalance - 150);
}

TEST_F(DtxTest, AReadValidatesAgainstAWriteThatCommittedAfterIt) {
  Transaction reader(*db_);
  reader.begin();
  reader.read(kAccounts, 40);
  const int w = reader.write(kAccounts, 41);
  ASSERT_TRUE(reader.execute().ok());
  OnAnotherThread([&] {
    Transaction writer(*db_);
    ASSERT_TRUE(Transfer(writer, 40, 42, 5).ok());
    ASSERT_TRUE(writer.flush().ok());
  });
  *reader.value_as<int64_t>(w) += 1;
  EXPECT_EQ(reader.commit().code(), Status::Code::kRetry) << "a stale read committed";
  ASSERT_TRUE(reader.flush().ok());
  EXPECT_EQ(Balance(reader, 41), kInitialBalance);
}

TEST_F(DtxTest, TheUndoRecordOfTheLastWriteIsOnEveryBladeOfItsReplicas) {
  Transaction tx(*db_);
  ASSERT_TRUE(Transfer(tx, 50, 51, 7).ok());
  ASSERT_TRUE(tx.flush().ok());
  const TableInfo& t = *db_->table(kAccounts);
  for (node_t b : t.replicas) {
    char* buffer = static_cast<char*>(initiator_->alloc_cache(kLogSlotBytes));
    ASSERT_TRUE(initiator_->read(buffer, db_->log_slot(b, ThreadId(), this_task::id()), kLogSlotBytes).ok());
    UndoRecord r;
    auto slot_bytes = [](const void* db, uint16_t table) -> size_t {
      const TableInfo* info = static_cast<const Database*>(db)->table(table);
      return info == nullptr ? 0 : info->slot_bytes();
    };
    ASSERT_EQ(DecodeUndo(buffer, kLogSlotBytes, slot_bytes, db_.get(), &r), "") << "blade " << int(b);
    EXPECT_EQ(r.tx_id, tx.id());
    ASSERT_EQ(r.items.size(), 2u);
    Record before;
    ASSERT_TRUE(DecodeSlot(r.items[0].before.data(), 8, &before));
    EXPECT_EQ(before.key, 50u);
    int64_t balance;
    memcpy(&balance, before.value, 8);
    EXPECT_EQ(balance, kInitialBalance) << "the undo image is not the record before the transaction";
  }
}

TEST_F(DtxTest, ConcurrentTransfersKeepTheTotalAndTheReplicasEqual) {
  constexpr int kThreads = 2, kTasks = 4, kPerTask = 400;
  std::atomic<uint64_t> committed{0}, failures{0};
  RunThreads(kThreads, false, [&](int t) {
    TaskPool pool(TaskPoolOptions{64 * 1024, kTasks});
    for (int k = 0; k < kTasks; ++k) {
      pool.spawn([&, t, k] {
        Transaction tx(*db_);
        uint64_t seed = static_cast<uint64_t>(t * 100 + k + 1);
        for (int i = 0; i < kPerTask; ++i) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          const uint64_t from = (seed >> 33) % 8;  // few accounts: real contention
          const uint64_t to = (from + 1 + (seed >> 20) % 7) % 8;
          Status s = Transfer(tx, from, to, static_cast<int64_t>((seed >> 40) % 50));
          if (s.ok()) {
            ++committed;
          } else if (s.code() != Status::Code::kRetry) {
            ++failures;
          }
        }
        EXPECT_TRUE(tx.flush().ok());
      });
    }
    pool.run();
  });
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(committed.load(), 0u);
  Transaction tx(*db_);
  int64_t total = 0;
  for (uint64_t k = 0; k < kAccountCount; ++k) total += Balance(tx, k);
  EXPECT_EQ(total, static_cast<int64_t>(kAccountCount) * kInitialBalance) << "money was made or lost";
  const std::vector<std::string> r = Replicas(*db_->table(kAccounts));
  EXPECT_EQ(r[0], r[1]) << "the backup differs from the primary";
  const DtxStats s = db_->stats();
  EXPECT_EQ(s.committed, committed.load() + kAccountCount);
}

// Windows held open: every completion takes 2 us, every third CAS 30 us
// more and every second READ 20 us more (on shm a READ takes its snapshot
// when posted, so the snapshot ages before its reader goes on), so the
// tasks of a thread interleave inside each other's transactions.
class DtxRaceTest : public DtxTest {
 protected:
  DtxRaceTest() {
    faults_ = "delay=30us@cas#3+;delay=20us@read#2+";
    latency_ns_ = 2000;
  }
};

TEST_F(DtxRaceTest, RacingInsertsAmongDeletesInOneChainCreateEachKeyOnce) {
  // Round by round, eight tasks all insert the same three fresh keys of one
  // chain while deleting the keys of two rounds before, so inserts race each
  // other next to slots that deletes are freeing. A round's keys are deleted
  // only once every task has inserted them (no task re-creates a deleted
  // key), so every key must be created exactly once: a second copy would
  // outlive its key's delete.
  constexpr int kThreads = 2, kTasks = 4, kRounds = 40, kPerRound = 3;
  constexpr uint64_t kKeys = kRounds * kPerRound;
  std::vector<std::atomic<int>> created(kKeys), deleted(kKeys);
  std::vector<std::atomic<int>> rounds_inserted(kThreads * kTasks);
  auto everyone_inserted = [&](int round) {
    for (auto& r : rounds_inserted) {
      if (r.load() <= round) return false;
    }
    return true;
  };
  std::atomic<uint64_t> failures{0}, conflicts{0};
  RunThreads(kThreads, false, [&](int t) {
    TaskPool pool(TaskPoolOptions{64 * 1024, kTasks});
    for (int k = 0; k < kTasks; ++k) {
      pool.spawn([&, t, k] {
        Transaction tx(*db_);
        // Retries `attempt` until it reports done; counts conflicts.
        auto until_done = [&](const std::function<Status(bool*)>& attempt) {
          for (int tries = 0; tries < 100000; ++tries) {
            bool done = false;
            Status s = attempt(&done);
            if (done) return;
            if (s.code() != Status::Code::kRetry) {
              ADD_FAILURE() << s.ToString();
              ++failures;
              return;
            }
            ++conflicts;
            this_task::yield();
          }
          ++failures;
        };
        for (int r = 0; r < kRounds; ++r) {
          for (int i = 0; i < kPerRound; ++i) {
            const uint64_t key = static_cast<uint64_t>(r * kPerRound + i);
            until_done([&](bool* done) {
              tx.begin();
              const int n = tx.insert(kTiny, key);
              Status s = tx.execute();
              if (s.ok() && tx.exists(n)) {
                tx.abort();
                *done = true;
                return s;
              }
              if (!s.ok()) return s;
              memcpy(tx.value(n), &key, 8);
              s = tx.commit();
              if (s.ok()) {
                ++created[key];
                *done = true;
              }
              return s;
            });
          }
          rounds_inserted[static_cast<size_t>(t * kTasks + k)] = r + 1;
          if (r < 2) continue;
          while (!everyone_inserted(r - 2)) this_task::yield();
          for (int i = 0; i < kPerRound; ++i) {
            const uint64_t key = static_cast<uint64_t>((r - 2) * kPerRound + i);
            until_done([&](bool* done) {
              tx.begin();
              tx.remove(kTiny, key);
              Status s = tx.execute();
              if (s.code() == Status::Code::kNotFound) {
                *done = true;
                return s;
              }
              if (!s.ok()) return s;
              s = tx.commit();
              if (s.ok()) {
                ++deleted[key];
                *done = true;
              }
              return s;
            });
          }
        }
        EXPECT_TRUE(tx.flush().ok());
      });
    }
    pool.run();
  });
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(conflicts.load(), 0u) << "no two transactions met: the test did not race";
  const TableInfo& t = *db_->table(kTiny);
  const std::vector<std::string> r = Replicas(t);
  EXPECT_EQ(r[0], r[1]);
  std::vector<int> copies(kKeys);
  for (uint64_t node = 0; node < t.total_nodes(); ++node) {
    for (int i = 0; i < kSlotsPerNode; ++i) {
      Record rec;
      ASSERT_TRUE(DecodeSlot(r[0].data() + node * t.node_bytes() + i * t.slot_bytes(), 8, &rec));
      if (rec.valid) {
        ASSERT_LT(rec.key, kKeys);
        ++copies[rec.key];
      }
      EXPECT_EQ(rec.lock, 0u) << "a lock was left on node " << node << " slot " << i;
    }
  }
  for (uint64_t key = 0; key < kKeys; ++key) {
    const bool kept = key >= static_cast<uint64_t>((kRounds - 2) * kPerRound);
    EXPECT_EQ(created[key].load(), 1) << "key " << key << " was created " << created[key].load() << " times";
    EXPECT_EQ(deleted[key].load(), kept ? 0 : 1) << "key " << key;
    EXPECT_EQ(copies[key], kept ? 1 : 0) << "key " << key;
  }
}

// A round of lock CASes whose wait fails (here a READ of the round on the
// other blade) may have taken some of its locks: the abort gives them back
// at once, rather than leaving them to the holder's lease.
TEST_F(DtxTest, AnExecutionRoundThatFailsGivesBackTheLocksItTook) {
  SmartConfig victim_config = config_;
  victim_config.faults = ParseFaultRules("delay=1us@read#999999999999");
  auto victim_in = Connect(victim_config);
  auto victim_db = std::make_unique<Database>(*victim_in, blade_count_, Options());
  ASSERT_EQ(victim_db->table(kNotes)->replicas[0], 1);
  {
    Transaction tx(*db_);
    tx.begin();
    tx.insert(kNotes, 61);
    ASSERT_TRUE(tx.execute().ok());
    ASSERT_TRUE(tx.commit().ok());
    ASSERT_TRUE(tx.flush().ok());
  }
  Status s;
  std::thread victim([&] {
    Transaction tx(*victim_db);
    tx.begin();
    tx.write(kAccounts, 60);  // primary on blade 0
    tx.remove(kNotes, 61);    // primary on blade 1
    // Round 1 reads both buckets; round 2 locks and reads both slots: its
    // second READ (blade 1) fails.
    InstallFaultRules(ParseFaultRules("fail@read#4"));
    s = tx.execute();
    InstallFaultRules({});
    (void)tx.flush();
  });
  victim.join();
  ASSERT_FALSE(s.ok());
  ASSERT_NE(s.code(), Status::Code::kNotFound) << s.ToString();
  // The victim is alive and connected: account 60 is free at once only if
  // its abort gave the lock back (one attempt, no waiting out a lease).
  Transaction tx(*db_);
  const Status t = Transfer(tx, 60, 62, 1);
  EXPECT_TRUE(t.ok()) << "the failed round kept its lock: " << t.ToString();
  ASSERT_TRUE(tx.flush().ok());
}

// Ids name one transaction each: the tasks of a thread share one count, so
// no two tasks' transactions share an id, however many each runs.
TEST_F(DtxTest, TransactionIdsOfATaskNeverRepeatAnotherTasks) {
  std::vector<uint64_t> ids;
  RunThreads(1, false, [&](int) {
    db_->thread_state_for_recovery().next_tx_id = (1u << 24) - 3;  // past 2^24: the old per-task count's end
    TaskPool pool(TaskPoolOptions{128 * 1024, 3});
    for (int k = 0; k < 3; ++k) {
      pool.spawn([&] {
        Transaction tx(*db_);
        for (int i = 0; i < 8; ++i) {
          tx.begin();
          ids.push_back(tx.id());
          tx.abort();
          this_task::yield();
        }
      });
    }
    pool.run();
    initiator_->release_thread();
  });
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "two transactions share an id";
  ASSERT_EQ(ids.size(), 24u);
  for (uint64_t id : ids) EXPECT_EQ(id >> 32, ids[0] >> 32) << "the count ran into the id's other fields";
}

}  // namespace
}  // namespace smart::dtx
