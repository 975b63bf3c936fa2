// SMART-DTX inserts and deletes: finding, re-inserting, chains that grow
// with overflow nodes (and their links on the backups), racing inserts of
// one key, and slots that fail their check.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "database.h"
#include "dtx_fixture.h"
#include "record.h"
#include "recovery.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/task.h"
#include "transaction.h"
#include "verify.h"

namespace smart::dtx {
namespace {

using namespace smart::dtx::testing;

// Inserts keys first..last into kTiny (one bucket), each valued its key.
void InsertTinyKeys(Transaction& tx, uint64_t first, uint64_t last) {
  for (uint64_t k = first; k <= last; ++k) {
    tx.begin();
    const int n = tx.insert(kTiny, k);
    ASSERT_TRUE(tx.execute().ok());
    memcpy(tx.value(n), &k, 8);
    ASSERT_TRUE(tx.commit().ok());
  }
  ASSERT_TRUE(tx.flush().ok());
}

// The slot of `key` in a kTiny bucket node read into `node`; -1 when none.
int SlotOfKey(const TableInfo& t, const char* node, uint64_t key) {
  int at = -1;
  for (int i = 0; i < kSlotsPerNode; ++i) {
    if (SlotNames(node + i * t.slot_bytes(), kTiny, key)) at = i;
  }
  return at;
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
  InsertTinyKeys(tx, 1, 3);
  // Flip a value byte of key 1's slot on the primary: its CRC no longer
  // matches, as in a read torn by a landing write.
  const TableInfo& t = *db_->table(kTiny);
  char* node = static_cast<char*>(initiator_->alloc_cache(t.node_bytes()));
  ASSERT_TRUE(initiator_->read(node, NodeAddress(t, 0, 0), t.node_bytes()).ok());
  const int at = SlotOfKey(t, node, 1);
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

// An insert of a key that is there already reads it; a commit after the
// application changed that item's value is refused (an insert never
// overwrites), and the record keeps its value.
TEST_F(DtxTest, ChangingTheValueOfAnInsertThatFoundItsKeyFailsTheCommit) {
  Transaction tx(*db_);
  tx.begin();
  int n = tx.insert(kNotes, 6100);
  ASSERT_TRUE(tx.execute().ok());
  memcpy(tx.value(n), "first...........", 16);
  ASSERT_TRUE(tx.commit().ok());
  tx.begin();
  n = tx.insert(kNotes, 6100);
  ASSERT_TRUE(tx.execute().ok());
  ASSERT_TRUE(tx.exists(n));
  EXPECT_EQ(memcmp(tx.value(n), "first...........", 16), 0);
  ASSERT_TRUE(tx.commit().ok()) << "an unchanged insert of a present key is a read";
  tx.begin();
  n = tx.insert(kNotes, 6100);
  ASSERT_TRUE(tx.execute().ok());
  memcpy(tx.value(n), "second..........", 16);
  const Status s = tx.commit();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("never overwrites"), std::string::npos) << s.message();
  tx.begin();
  n = tx.read(kNotes, 6100);
  ASSERT_TRUE(tx.execute().ok());
  EXPECT_EQ(memcmp(tx.value(n), "first...........", 16), 0) << "the refused insert wrote its value";
  ASSERT_TRUE(tx.commit().ok());
  ASSERT_TRUE(tx.flush().ok());
}

// A slot that fails its check with no lock on it, read after read, is
// damaged, not being written: an insert into its chain passes it by
// instead of waiting for it (it used to retry until it gave up).
TEST_F(DtxTest, AnInsertPassesADamagedSlotOfAnotherKeyInItsChain) {
  Transaction tx(*db_);
  InsertTinyKeys(tx, 1, 3);
  const TableInfo& t = *db_->table(kTiny);
  char* node = static_cast<char*>(initiator_->alloc_cache(t.node_bytes()));
  ASSERT_TRUE(initiator_->read(node, NodeAddress(t, 0, 0), t.node_bytes()).ok());
  const int at = SlotOfKey(t, node, 1);
  ASSERT_EQ(at, 0) << "key 1 is not in the chain's first slot, ahead of the free ones";
  // Its key field damaged too, so that no scan takes it for key 1 either.
  for (size_t off : {size_t{16}, kSlotHeaderBytes}) {
    char* byte = node + at * t.slot_bytes() + off;
    *byte ^= 0x5a;
    for (size_t r = 0; r < t.replicas.size(); ++r) {
      ASSERT_TRUE(initiator_->write(byte, NodeAddress(t, r, 0) + at * t.slot_bytes() + off, 1).ok());
    }
  }
  auto other = Connect();
  Database attached(*other, blade_count_, Options());
  Transaction fresh(attached);
  fresh.begin();
  int n = fresh.insert(kTiny, 9);
  Status s = fresh.execute();
  ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t nine = 9;
  memcpy(fresh.value(n), &nine, 8);
  s = fresh.commit();
  ASSERT_TRUE(s.ok()) << "an insert waited on a damaged slot of another key: " << s.ToString();
  fresh.begin();
  n = fresh.read(kTiny, 9);
  ASSERT_TRUE(fresh.execute().ok());
  uint64_t v = 0;
  memcpy(&v, fresh.value(n), 8);
  EXPECT_EQ(v, 9u);
  ASSERT_TRUE(fresh.commit().ok());
  ASSERT_TRUE(fresh.flush().ok());
}

// A client that dies between linking a new overflow node on the primary and
// on the backups leaves the backups without the link. The next insert into
// that node writes the chain's links to the backups again, and
// RepairChainLinks mends a link no insert has used.
TEST_F(DtxTest, AnOverflowLinkTheGrowerLeftOffTheBackupsIsRepaired) {
  Transaction tx(*db_);
  InsertTinyKeys(tx, 100, 100 + kSlotsPerNode - 1);  // fills kTiny's one bucket
  const TableInfo& t = *db_->table(kTiny);
  std::thread victim([&] {
    auto in = Connect();
    auto db = Open(*in);
    const std::thread::id me = std::this_thread::get_id();
    SetFaultPointHook("dtx.chain.linked", [&in, me, this] {
      if (std::this_thread::get_id() != me) return;
      for (int b = 1; b < blade_count_; ++b) in->disconnect(static_cast<node_t>(b));
    });
    Transaction mine(*db);
    mine.begin();
    mine.insert(kTiny, 200);
    EXPECT_FALSE(mine.execute().ok()) << "the insert went on without its backups";
  });
  victim.join();
  SetFaultPointHook("dtx.chain.linked", nullptr);
  EXPECT_NE(CompareReplicas(*db_), "") << "the cut did not leave a backup without the link";
  // An insert that lands in the overflow node mends it.
  tx.begin();
  int n = tx.insert(kTiny, 201);
  ASSERT_TRUE(tx.execute().ok());
  uint64_t v = 201;
  memcpy(tx.value(n), &v, 8);
  ASSERT_TRUE(tx.commit().ok());
  ASSERT_TRUE(tx.flush().ok());
  EXPECT_EQ(CompareReplicas(*db_), "");
  // Another cut: the new overflow node's own link, which nobody uses yet.
  for (uint64_t k = 202; k < 202 + kSlotsPerNode - 1; ++k) {
    tx.begin();
    n = tx.insert(kTiny, k);
    ASSERT_TRUE(tx.execute().ok());
    memcpy(tx.value(n), &k, 8);
    ASSERT_TRUE(tx.commit().ok());
  }
  ASSERT_TRUE(tx.flush().ok());
  ASSERT_EQ(CompareReplicas(*db_), "");
  std::thread second([&] {
    auto in = Connect();
    auto db = Open(*in);
    const std::thread::id me = std::this_thread::get_id();
    SetFaultPointHook("dtx.chain.linked", [&in, me, this] {
      if (std::this_thread::get_id() != me) return;
      for (int b = 1; b < blade_count_; ++b) in->disconnect(static_cast<node_t>(b));
    });
    Transaction mine(*db);
    mine.begin();
    mine.insert(kTiny, 300);
    EXPECT_FALSE(mine.execute().ok());
  });
  second.join();
  SetFaultPointHook("dtx.chain.linked", nullptr);
  ASSERT_NE(CompareReplicas(*db_), "");
  int repaired = 0;
  ASSERT_TRUE(RepairChainLinks(*db_, &repaired).ok());
  EXPECT_EQ(repaired, blade_count_ - 1);
  EXPECT_EQ(CompareReplicas(*db_), "");
  (void)t;
}

}  // namespace
}  // namespace smart::dtx
