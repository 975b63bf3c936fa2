// SMART-DTX transactions against two memory blades inside the test process
// (every table has a backup on the other blade).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "database.h"
#include "record.h"
#include "smart/bench.h"
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

TEST_F(DtxTest, AnAbortReleasesOnlyTheLocksItTook) {
  Transaction holder(*db_);
  Transaction other(*db_);
  holder.begin();
  holder.write(kAccounts, 20);
  ASSERT_TRUE(holder.execute().ok());
  // `other` locks 21, then fails on 20 (held): it must release 21 and leave
  // 20 to its holder.
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
  holder.abort();
  ASSERT_TRUE(third.flush().ok());
  ASSERT_TRUE(holder.flush().ok());
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
  Transaction writer(*db_);
  reader.begin();
  reader.read(kAccounts, 40);
  const int w = reader.write(kAccounts, 41);
  ASSERT_TRUE(reader.execute().ok());
  ASSERT_TRUE(Transfer(writer, 40, 42, 5).ok());
  ASSERT_TRUE(writer.flush().ok());
  *reader.value_as<int64_t>(w) += 1;
  EXPECT_EQ(reader.commit().code(), Status::Code::kRetry) << "a stale read committed";
  ASSERT_TRUE(reader.flush().ok());
  EXPECT_EQ(Balance(reader, 41), kInitialBalance);
}

TEST_F(DtxTest, InsertThenFindThenDeleteThenMiss) {
  Transaction tx(*db_);
  tx.begin();
  const int n = tx.insert(kNotes, 5000);
  ASSERT_TRUE(tx.execute().ok());
  EXPECT_FALSE(tx.exists(n));
  memcpy(tx.value(n), "hello, notes!!!", 16);
  ASSERT_TRUE(tx.commit().ok());
  tx.begin();
  const int again = tx.insert(kNotes, 5000);
  ASSERT_TRUE(tx.execute().ok());
  EXPECT_TRUE(tx.exists(again)) << "a second insert did not see the first";
  EXPECT_EQ(memcmp(tx.value(again), "hello, notes!!!", 16), 0);
  tx.abort();
  tx.begin();
  tx.remove(kNotes, 5000);
  ASSERT_TRUE(tx.execute().ok());
  ASSERT_TRUE(tx.commit().ok());
  tx.begin();
  tx.read(kNotes, 5000);
  EXPECT_EQ(tx.execute().code(), Status::Code::kNotFound) << "a deleted record was found";
  // Another client, whose address cache never saw it, agrees.
  auto other = Connect();
  Database attached(*other, 2, Options());
  Transaction fresh(attached);
  fresh.begin();
  fresh.read(kNotes, 5000);
  EXPECT_EQ(fresh.execute().code(), Status::Code::kNotFound);
  ASSERT_TRUE(tx.flush().ok());
  const std::vector<std::string> r = Replicas(*db_->table(kNotes));
  EXPECT_EQ(r[0], r[1]);
}


TEST_F(DtxTest, AKeyInsertedAgainIntoAnotherSlotGetsALaterVersion) {
  // Key 2 takes the chain's second slot and many versions; key 1's slot
  // (the first) is freed, then key 2 is deleted and inserted again: into the
  // first free slot, whose own counter is far behind key 2's.
  Transaction tx(*db_);
  auto write = [&](int kind, uint64_t key) {
    tx.begin();
    const int i = kind == 0 ? tx.insert(kTiny, key) : kind == 1 ? tx.write(kTiny, key) : tx.remove(kTiny, key);
    EXPECT_TRUE(tx.execute().ok());
    if (kind != 2) *tx.value_as<int64_t>(i) += 1;
    EXPECT_TRUE(tx.commit().ok());
    return tx.accesses().back().version;
  };
  write(0, 1);
  write(0, 2);
  for (int i = 0; i < 20; ++i) write(1, 2);
  write(2, 1);
  const uint64_t deleted = write(2, 2);
  const uint64_t inserted = write(0, 2);
  EXPECT_GT(inserted, deleted) << "a history could not tell the insert came after the delete";
  ASSERT_TRUE(tx.flush().ok());
}
TEST_F(DtxTest, InsertsGrowChainsWithOverflowNodesAndEveryKeyIsFoundOnce) {
  Transaction tx(*db_);
  // 8 buckets of 8 slots: 150 keys need overflow nodes linked at run time.
  for (uint64_t k = 0; k < 150; ++k) {
    tx.begin();
    const int n = tx.insert(kNotes, k);
    Status s = tx.execute();
    ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
    ASSERT_FALSE(tx.exists(n));
    memcpy(tx.value(n), &k, 8);
    ASSERT_TRUE(tx.commit().ok()) << k;
  }
  ASSERT_TRUE(tx.flush().ok());
  auto other = Connect();
  Database attached(*other, 2, Options());
  Transaction fresh(attached);
  for (uint64_t k = 0; k < 150; ++k) {
    fresh.begin();
    const int n = fresh.read(kNotes, k);
    ASSERT_TRUE(fresh.execute().ok()) << k;
    uint64_t got;
    memcpy(&got, fresh.value(n), 8);
    EXPECT_EQ(got, k);
    ASSERT_TRUE(fresh.commit().ok());
  }
  // Exactly one copy of each key in the table, on both replicas alike.
  const TableInfo& t = *db_->table(kNotes);
  const std::vector<std::string> r = Replicas(t);
  EXPECT_EQ(r[0], r[1]);
  std::vector<int> copies(150);
  for (uint64_t node = 0; node < t.total_nodes(); ++node) {
    for (int i = 0; i < kSlotsPerNode; ++i) {
      Record rec;
      ASSERT_TRUE(DecodeSlot(r[0].data() + node * t.node_bytes() + i * t.slot_bytes(), 16, &rec));
      if (rec.valid) {
        ASSERT_LT(rec.key, 150u);
        ++copies[rec.key];
      }
    }
  }
  for (uint64_t k = 0; k < 150; ++k) EXPECT_EQ(copies[k], 1) << "key " << k;
}

TEST_F(DtxTest, RacingInsertsOfTheSameKeysCreateEachOnceAndOnlyOnce) {
  // Eight tasks insert the same 60 keys (chains of 8 buckets, so the
  // inserts meet in the same chains and grow them) until each saw every key
  // either created by itself or already there; exactly one creation per key.
  constexpr int kThreads = 2, kTasks = 4;
  constexpr uint64_t kKeys = 60;
  std::vector<std::atomic<int>> created(kKeys);
  std::atomic<uint64_t> failures{0};
  RunThreads(kThreads, false, [&](int t) {
    TaskPool pool(TaskPoolOptions{64 * 1024, kTasks});
    for (int k = 0; k < kTasks; ++k) {
      pool.spawn([&, t, k] {
        Transaction tx(*db_);
        for (uint64_t i = 0; i < kKeys; ++i) {
          const uint64_t key = (i * 7 + static_cast<uint64_t>(t * kTasks + k) * 13) % kKeys;
          for (int attempt = 0;; ++attempt) {
            tx.begin();
            const int n = tx.insert(kNotes, key);
            Status s = tx.execute();
            if (s.ok() && tx.exists(n)) {
              tx.abort();
              break;
            }
            if (s.ok()) {
              memcpy(tx.value(n), &key, 8);
              s = tx.commit();
              if (s.ok()) {
                ++created[key];
                break;
              }
            }
            if (s.code() != Status::Code::kRetry || attempt > 100000) {
              ++failures;
              break;
            }
            this_task::yield();
          }
        }
        EXPECT_TRUE(tx.flush().ok());
      });
    }
    pool.run();
  });
  EXPECT_EQ(failures.load(), 0u);
  for (uint64_t key = 0; key < kKeys; ++key) EXPECT_EQ(created[key].load(), 1) << "key " << key << " created";
  const TableInfo& t = *db_->table(kNotes);
  const std::vector<std::string> r = Replicas(t);
  EXPECT_EQ(r[0], r[1]);
  std::vector<int> copies(kKeys);
  for (uint64_t node = 0; node < t.total_nodes(); ++node) {
    for (int i = 0; i < kSlotsPerNode; ++i) {
      Record rec;
      ASSERT_TRUE(DecodeSlot(r[0].data() + node * t.node_bytes() + i * t.slot_bytes(), 16, &rec));
      if (rec.valid) ++copies[rec.key];
      EXPECT_EQ(rec.lock, 0u) << "a lock was left on node " << node << " slot " << i;
    }
  }
  for (uint64_t key = 0; key < kKeys; ++key) EXPECT_EQ(copies[key], 1) << "copies of key " << key;
}

TEST_F(DtxTest, TwoInsertsOfOneKeyInDifferentSlotsCannotBothCommit) {
  // J sits in the chain's first slot. Task A starts inserting K and locks
  // the first free slot (the second). Task B deletes J, freeing the first,
  // and starts inserting K too: K is not there yet, and the first free slot
  // is now the first. Both validate before either writes (both are held at
  // the point between validation and the commit writes until the other got
  // there): only one may commit, and K must end up in the table once.
  Transaction setup(*db_);
  setup.begin();
  const int j = setup.insert(kTiny, 900);
  ASSERT_TRUE(setup.execute().ok());
  memset(setup.value(j), 1, 8);
  ASSERT_TRUE(setup.commit().ok());
  ASSERT_TRUE(setup.flush().ok());
  bool a_executed = false, j_deleted = false;
  int at_point = 0, done = 0;
  SetFaultPointHook("dtx.commit.validated", [&] {
    if (!j_deleted) return;  // the delete's own commit goes through
    ++at_point;
    while (at_point + done < 2) this_task::yield();
  });
  Status sa, sb;
  TaskPool pool;
  pool.spawn([&] {
    Transaction a(*db_);
    a.begin();
    const int k = a.insert(kTiny, 7);
    sa = a.execute();
    a_executed = true;
    if (sa.ok()) {
      EXPECT_FALSE(a.exists(k));
      while (!j_deleted) this_task::yield();
      sa = a.commit();
    }
    ++done;
    EXPECT_TRUE(a.flush().ok());
  });
  pool.spawn([&] {
    while (!a_executed) this_task::yield();
    Transaction b(*db_);
    b.begin();
    b.remove(kTiny, 900);
    Status s = b.execute();
    if (s.ok()) s = b.commit();
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(b.flush().ok());
    j_deleted = true;
    b.begin();
    const int k = b.insert(kTiny, 7);
    sb = b.execute();
    if (sb.ok()) {
      EXPECT_FALSE(b.exists(k));
      sb = b.commit();
    }
    ++done;
    EXPECT_TRUE(b.flush().ok());
  });
  pool.run();
  SetFaultPointHook("dtx.commit.validated", nullptr);
  EXPECT_FALSE(sa.ok() && sb.ok()) << "both inserts of key 7 committed";
  const TableInfo& t = *db_->table(kTiny);
  const std::vector<std::string> r = Replicas(t);
  int copies = 0;
  for (uint64_t node = 0; node < t.total_nodes(); ++node) {
    for (int i = 0; i < kSlotsPerNode; ++i) {
      Record rec;
      ASSERT_TRUE(DecodeSlot(r[0].data() + node * t.node_bytes() + i * t.slot_bytes(), 8, &rec));
      copies += rec.valid && rec.key == 7;
    }
  }
  EXPECT_EQ(copies, (sa.ok() || sb.ok()) ? 1 : 0);
}

TEST_F(DtxTest, AChainThatCannotGrowEndsInAnErrorNamingTheTable) {
  Transaction tx(*db_);
  Status last;
  for (uint64_t k = 0; k < 400 && last.ok(); ++k) {
    tx.begin();
    const int n = tx.insert(kNotes, k);
    last = tx.execute();
    if (last.ok()) {
      memcpy(tx.value(n), &k, 8);
      last = tx.commit();
    }
  }
  EXPECT_EQ(last.code(), Status::Code::kOutOfMemory) << last.ToString();
  EXPECT_NE(last.ToString().find("table 2"), std::string::npos) << last.ToString();
  ASSERT_TRUE(tx.flush().ok());
}

TEST_F(DtxTest, ADamagedSlotOfAnotherKeyDoesNotStopALookupInItsBucket) {
  Transaction tx(*db_);
  for (uint64_t k = 1; k <= 3; ++k) {
    tx.begin();
    const int n = tx.insert(kTiny, k);
    ASSERT_TRUE(tx.execute().ok());
    memcpy(tx.value(n), &k, 8);
    ASSERT_TRUE(tx.commit().ok());
  }
  ASSERT_TRUE(tx.flush().ok());
  // Flip a value byte of key 1's slot on the primary: its CRC no longer
  // matches, as in a read torn by a landing write.
  const TableInfo& t = *db_->table(kTiny);
  char* node = static_cast<char*>(initiator_->alloc_cache(t.node_bytes()));
  ASSERT_TRUE(initiator_->read(node, NodeAddress(t, 0, 0), t.node_bytes()).ok());
  int at = -1;
  for (int i = 0; i < kSlotsPerNode; ++i) {
    if (SlotNames(node + i * t.slot_bytes(), kTiny, 1)) at = i;
  }
  ASSERT_GE(at, 0);
  char* byte = node + at * t.slot_bytes() + kSlotHeaderBytes;
  *byte ^= 0x5a;
  ASSERT_TRUE(initiator_->write(byte, NodeAddress(t, 0, 0) + at * t.slot_bytes() + kSlotHeaderBytes, 1).ok());

  // A client without cached addresses scans the bucket: keys 2 and 3 are
  // found, an absent key is reported absent, and only key 1 fails, naming it.
  auto other = Connect();
  Database attached(*other, 2, Options());
  Transaction fresh(attached);
  for (uint64_t k = 2; k <= 3; ++k) {
    fresh.begin();
    const int n = fresh.read(kTiny, k);
    Status s = fresh.execute();
    ASSERT_TRUE(s.ok()) << "key " << k << ": " << s.ToString();
    uint64_t v = 0;
    memcpy(&v, fresh.value(n), 8);
    EXPECT_EQ(v, k);
    fresh.abort();
  }
  fresh.begin();
  fresh.read(kTiny, 77);
  EXPECT_EQ(fresh.execute().code(), Status::Code::kNotFound);
  fresh.begin();
  fresh.read(kTiny, 1);
  Status s = fresh.execute();
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("never reads whole"), std::string::npos) << s.ToString();
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

}  // namespace
}  // namespace smart::dtx
