// SMART-HT operations against memory blades inside the test process (shm).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/target.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart::hashtable {
namespace {

class HashTableTest : public ::testing::Test {
 protected:
  void Open(uint64_t expected_keys, bool speculative = false, int shards = 1, uint64_t grace_ns = 1000000,
            int directory_capacity_depth = 20) {
    config_ = smart::testing::TestConfig();
    initiator_ = std::make_unique<Initiator>(config_);
    for (int i = 0; i < shards; ++i) {
      blades_.push_back(std::make_unique<EmbeddedMemoryBlade>(config_, 64));
      initiator_->connect(static_cast<node_t>(i), blades_.back()->host(), blades_.back()->port(), 8);
    }
    options_.expected_keys = expected_keys;
    options_.speculative_lookup = speculative;
    options_.speculative_cache_entries = 1024;
    options_.reclaim_grace_ns = grace_ns;
    options_.directory_capacity_depth = directory_capacity_depth;
    table_ = std::make_unique<HashTable>(*initiator_, config_, shards, options_);
  }

  // fn(worker) on `threads` threads x `tasks` tasks.
  void RunTasks(int threads, int tasks, const std::function<void(int)>& fn) {
    RunThreads(threads, false, [&](int t) {
      TaskPool pool;
      for (int k = 0; k < tasks; ++k) pool.spawn([&, t, k] { fn(t * tasks + k); });
      pool.run();
    });
  }

  static std::string Key(int i) { return "key" + std::to_string(i); }

  SmartConfig config_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> blades_;
  std::unique_ptr<Initiator> initiator_;
  TableOptions options_;
  std::unique_ptr<HashTable> table_;
};

TEST_F(HashTableTest, InsertSearchUpdateRemove) {
  Open(1000);
  std::string value;
  EXPECT_EQ(table_->search("missing", &value).code(), Status::Code::kNotFound);
  ASSERT_TRUE(table_->insert("alpha", "1").ok());
  ASSERT_TRUE(table_->search("alpha", &value).ok());
  EXPECT_EQ(value, "1");
  ASSERT_TRUE(table_->update("alpha", std::string(300, 'x')).ok());  // a larger block
  ASSERT_TRUE(table_->search("alpha", &value).ok());
  EXPECT_EQ(value, std::string(300, 'x'));
  EXPECT_EQ(table_->update("beta", "2").code(), Status::Code::kNotFound);
  ASSERT_TRUE(table_->read_modify_write("alpha", [](std::string* v) { *v = "rmw:" + v->substr(0, 2); }).ok());
  ASSERT_TRUE(table_->search("alpha", &value).ok());
  EXPECT_EQ(value, "rmw:xx");
  ASSERT_TRUE(table_->remove("alpha").ok());
  EXPECT_EQ(table_->search("alpha", &value).code(), Status::Code::kNotFound);
  EXPECT_EQ(table_->remove("alpha").code(), Status::Code::kNotFound);
  EXPECT_EQ(table_->read_modify_write("alpha", [](std::string*) {}).code(), Status::Code::kNotFound);
  EXPECT_EQ(table_->insert("k", std::string(5000, 'v')).code(), Status::Code::kInvalidArgument);
}

TEST_F(HashTableTest, InsertOfAnExistingKeyReplacesItsValue) {
  Open(1000);
  ASSERT_TRUE(table_->insert("k", "old").ok());
  ASSERT_TRUE(table_->insert("k", "new").ok());
  std::string value;
  ASSERT_TRUE(table_->search("k", &value).ok());
  EXPECT_EQ(value, "new");
  int copies = 0;
  ASSERT_TRUE(table_->count_copies("k", &copies).ok());
  EXPECT_EQ(copies, 1);
}

TEST_F(HashTableTest, ConcurrentInsertsOfOneKeyLeaveOneCopy) {
  Open(1000);
  for (int round = 0; round < 50; ++round) {
    const std::string key = "contended" + std::to_string(round);
    RunTasks(2, 4, [&](int worker) { ASSERT_TRUE(table_->insert(key, "v" + std::to_string(worker)).ok()); });
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    ASSERT_EQ(copies, 1) << key;
    std::string value;
    ASSERT_TRUE(table_->search(key, &value).ok());
    EXPECT_EQ(value[0], 'v');
  }
}

// Racing inserts of one key placed in different slots: every inserter must
// clear the copies above the lowest, so exactly one remains.
TEST_F(HashTableTest, RacingInsertsInDifferentSlotsLeaveOneCopy) {
  options_.spread_inserts_for_tests = true;
  Open(1000);
  for (int round = 0; round < 50; ++round) {
    const std::string key = "spread" + std::to_string(round);
    RunTasks(2, 4, [&](int worker) { ASSERT_TRUE(table_->insert(key, "v" + std::to_string(worker)).ok()); });
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    ASSERT_EQ(copies, 1) << key;
  }
  // The race happened: inserts found other copies and removed them.
  EXPECT_GT(table_->stats().duplicates_removed, 0u);
}

// load() skips the search for a racing insert's copy: distinct keys loaded
// by many tasks through splits each end up once with their value.
TEST_F(HashTableTest, LoadsOfDistinctKeysLeaveEachOnceThroughSplits) {
  Open(300, /*speculative=*/true);
  constexpr int kKeys = 12000;
  RunTasks(2, 4, [&](int worker) {
    for (int i = worker; i < kKeys; i += 8) ASSERT_TRUE(table_->load(Key(i), "v" + Key(i)).ok()) << i;
  });
  EXPECT_GT(table_->stats().splits, 0u);
  std::string value;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(table_->search(Key(i), &value).ok()) << i;
    ASSERT_EQ(value, "v" + Key(i));
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(Key(i), &copies).ok());
    ASSERT_EQ(copies, 1) << i;
  }
  // A loaded key is an ordinary key: an update and a remove find it.
  ASSERT_TRUE(table_->update(Key(7), "new").ok());
  ASSERT_TRUE(table_->search(Key(7), &value).ok());
  EXPECT_EQ(value, "new");
  ASSERT_TRUE(table_->remove(Key(7)).ok());
  EXPECT_EQ(table_->search(Key(7), &value).code(), Status::Code::kNotFound);
}

// The promise is what load() relies on: racing loads of one key in
// different slots skip the duplicate search and leave copies, which a
// remove then clears one by one. (insert() leaves one copy: above.)
TEST_F(HashTableTest, RacingLoadsOfOneKeyAreWhatTheDuplicateSearchIsFor) {
  options_.spread_inserts_for_tests = true;
  Open(1000);
  int with_copies = 0;
  for (int round = 0; round < 50; ++round) {
    const std::string key = "spread" + std::to_string(round);
    const uint64_t removed_before = table_->stats().duplicates_removed;
    RunTasks(2, 4, [&](int worker) { ASSERT_TRUE(table_->load(key, "v" + std::to_string(worker)).ok()); });
    EXPECT_EQ(table_->stats().duplicates_removed, removed_before) << "a load searched for duplicates";
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    if (copies > 1) ++with_copies;
    std::string value;
    ASSERT_TRUE(table_->search(key, &value).ok());
    EXPECT_EQ(value[0], 'v');
    ASSERT_TRUE(table_->remove(key).ok());
    EXPECT_EQ(table_->search(key, &value).code(), Status::Code::kNotFound);
  }
  EXPECT_GT(with_copies, 0);
}

// Runs `between` on another thread (another client) once, when this thread's
// next write of the table is about to CAS its slot.
void BetweenReadAndCas(std::function<void()> between) {
  const std::thread::id me = std::this_thread::get_id();
  auto fired = std::make_shared<std::atomic<bool>>(false);
  SetFaultPointHook("ht.write.casing", [me, fired, between] {
    if (std::this_thread::get_id() != me || fired->exchange(true)) return;
    std::thread(between).join();
  });
}

// Another client's update of the key lands between this update's read of
// the slot and its CAS: this one takes effect just before it and is done,
// without writing over the newer value.
TEST_F(HashTableTest, AnUpdateOvertakenByAnotherUpdateOfItsKeyIsSuperseded) {
  Open(1000);
  ASSERT_TRUE(table_->insert("k", "v0").ok());
  Initiator other_initiator(config_);
  other_initiator.connect(0, blades_[0]->host(), blades_[0]->port(), 8);
  HashTable other(other_initiator, config_, 1, options_);
  BetweenReadAndCas([&] { ASSERT_TRUE(other.update("k", "theirs").ok()); });
  ASSERT_TRUE(table_->update("k", "mine").ok());
  SetFaultPointHook("ht.write.casing", {});
  std::string value;
  ASSERT_TRUE(table_->search("k", &value).ok());
  EXPECT_EQ(value, "theirs");
  EXPECT_EQ(table_->stats().writes_superseded, 1u);
  int copies = 0;
  ASSERT_TRUE(table_->count_copies("k", &copies).ok());
  EXPECT_EQ(copies, 1);
}

// A read-modify-write of another client replaces the value between the
// update's read and its CAS. The update cannot count itself superseded
// (taken effect just before that write, unseen): the read-modify-write
// computed its value from the one before the update, so it would have had
// to see the update's. The update must try again and land.
TEST_F(HashTableTest, AnUpdateOvertakenByAReadModifyWriteIsNotSuperseded) {
  Open(1000);
  ASSERT_TRUE(table_->insert("k", "v0").ok());
  Initiator other_initiator(config_);
  other_initiator.connect(0, blades_[0]->host(), blades_[0]->port(), 8);
  HashTable other(other_initiator, config_, 1, options_);
  BetweenReadAndCas([&] { ASSERT_TRUE(other.read_modify_write("k", [](std::string* v) { *v += "+1"; }).ok()); });
  ASSERT_TRUE(table_->update("k", "mine").ok());
  SetFaultPointHook("ht.write.casing", {});
  std::string value;
  ASSERT_TRUE(table_->search("k", &value).ok());
  EXPECT_EQ(value, "mine") << "the update counted itself superseded by a read-modify-write that never saw it";
  EXPECT_EQ(table_->stats().writes_superseded, 0u);
  EXPECT_GT(table_->stats().cas_failures, 0u);
}

// A split (another client's inserts) rewrites or moves the key's slot
// between the read and the CAS: no write of the key happened, so the update
// must retry and land, not count itself superseded.
TEST_F(HashTableTest, AnUpdateWhoseSlotASplitMovedIsNotSuperseded) {
  Open(64, /*speculative=*/false, 1, 1000000, /*directory_capacity_depth=*/20);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(table_->insert(Key(i), "v0").ok());
  Initiator other_initiator(config_);
  other_initiator.connect(0, blades_[0]->host(), blades_[0]->port(), 8);
  HashTable other(other_initiator, config_, 1, options_);
  BetweenReadAndCas([&] {
    for (int i = 1000; i < 5000; ++i) ASSERT_TRUE(other.insert(Key(i), "x").ok());
  });
  const uint64_t failures_before = table_->stats().cas_failures;
  ASSERT_TRUE(table_->update(Key(3), "mine").ok());
  SetFaultPointHook("ht.write.casing", {});
  EXPECT_GT(other.stats().splits, 0u);
  EXPECT_GT(table_->stats().cas_failures, failures_before) << "the split did not touch the key's slot";
  EXPECT_EQ(table_->stats().writes_superseded, 0u);
  std::string value;
  ASSERT_TRUE(table_->search(Key(3), &value).ok());
  EXPECT_EQ(value, "mine");
}

TEST_F(HashTableTest, GrowsFromASmallTableUnderConcurrentInserts) {
  Open(300);
  uint64_t initial = 0;
  int depth = 0;
  ASSERT_TRUE(table_->capacity(0, &initial, &depth).ok());
  EXPECT_EQ(depth, 0);
  constexpr int kKeys = 12000;
  RunTasks(2, 4, [&](int worker) {
    for (int i = worker; i < kKeys; i += 8) ASSERT_TRUE(table_->insert(Key(i), Key(i)).ok()) << i;
  });
  uint64_t grown = 0;
  ASSERT_TRUE(table_->capacity(0, &grown, &depth).ok());
  EXPECT_GE(grown, 10 * initial);
  EXPECT_GT(depth, 3);
  EXPECT_GT(table_->stats().splits, 0u);
  std::string value;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(table_->search(Key(i), &value).ok()) << i;
    ASSERT_EQ(value, Key(i));
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(Key(i), &copies).ok());
    ASSERT_EQ(copies, 1) << i;
  }
}

// A directory built with room for 2 entries moves to larger arrays (2^5,
// then 2^9 entries) while four tasks on two threads insert and update;
// every key keeps exactly one copy with its last value.
TEST_F(HashTableTest, DirectoryMovesToLargerArraysAsTheTableGrows) {
  Open(300, false, 1, 1000000, 1);
  constexpr int kKeys = 20000;
  // Each task updates keys it inserted itself, so the last value is known.
  RunTasks(2, 2, [&](int worker) {
    for (int i = worker; i < kKeys; i += 4) {
      ASSERT_TRUE(table_->insert(Key(i), Key(i)).ok()) << i;
      if (i >= 8 && (i - 8) % 7 == 0) ASSERT_TRUE(table_->update(Key(i - 8), "u" + Key(i - 8)).ok()) << i;
    }
  });
  uint64_t grown = 0;
  int depth = 0;
  ASSERT_TRUE(table_->capacity(0, &grown, &depth).ok());
  EXPECT_GT(depth, 5);
  EXPECT_GE(table_->stats().directory_moves, 2u);
  std::string value;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(table_->search(Key(i), &value).ok()) << i;
    const bool updated = i + 8 < kKeys && i % 7 == 0;
    ASSERT_EQ(value, updated ? "u" + Key(i) : Key(i)) << i;
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(Key(i), &copies).ok());
    ASSERT_EQ(copies, 1) << i;
  }
  // A client that opens the table later finds the moved directory.
  TableOptions later = options_;
  HashTable second(*initiator_, config_, 1, later);
  ASSERT_TRUE(second.search(Key(kKeys - 1), &value).ok());
  EXPECT_EQ(value, Key(kKeys - 1));
}

TEST_F(HashTableTest, UpdatesReuseBlocksWithinBoundedMemory) {
  Open(1000, false, 1, 100000);  // 0.1 ms grace period
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(table_->insert(Key(i), "0").ok());
  const uint64_t before = table_->stats().remote_bytes_allocated;
  RunTasks(2, 4, [&](int worker) {
    for (int n = 0; n < 25000; ++n) ASSERT_TRUE(table_->update(Key((worker + n * 8) % 64), std::to_string(n)).ok());
  });
  const TableStats s = table_->stats();
  EXPECT_EQ(s.blocks_retired, 200000u);
  EXPECT_GT(s.blocks_reused, 150000u);
  // 200000 updates of 64-byte blocks would need 12.8 MB without reuse.
  EXPECT_LE(s.remote_bytes_allocated - before, 4u * 256 * 1024) << s.blocks_reused << " reused of " << s.blocks_retired;
}

// Inserts and deletes of the same few keys reuse the deleted blocks: every
// delete retires the block it unlinked.
TEST_F(HashTableTest, DeletesRetireTheirBlocksForReuse) {
  Open(1000, false, 1, 100000);  // 0.1 ms grace period
  const uint64_t before = table_->stats().remote_bytes_allocated;
  constexpr int kRounds = 20000;
  for (int n = 0; n < kRounds; ++n) {
    ASSERT_TRUE(table_->insert(Key(n % 32), std::to_string(n)).ok());
    ASSERT_TRUE(table_->remove(Key(n % 32)).ok());
  }
  const TableStats s = table_->stats();
  EXPECT_EQ(s.blocks_retired, static_cast<uint64_t>(kRounds));
  // 20000 blocks of 64 bytes would need 1.28 MB without reuse.
  EXPECT_LE(s.remote_bytes_allocated - before, 4u * 256 * 1024) << s.blocks_reused << " reused of " << s.blocks_retired;
}

// A delete removes every copy of its key: with a second copy in the next
// slot of the bucket (as two racing inserts leave for a moment), both go.
TEST_F(HashTableTest, DeleteRemovesEveryCopyOfItsKey) {
  Open(1000);
  ASSERT_TRUE(table_->insert("dup", "one").ok());
  HashTable::Location at;
  ASSERT_TRUE(table_->locate("dup", &at).ok());
  ASSERT_NE(at.slot.offset % 64, 56u) << "the key took the last slot of its bucket";
  Target& target = blades_[0]->target();
  auto* next = static_cast<uint64_t*>(target.local_ptr(GlobalAddress(0, at.slot.offset + 8)));
  ASSERT_TRUE(SlotEmpty(*next));
  // The copy's block: the same bytes at an address of its own.
  GlobalAddress copy;
  ASSERT_TRUE(initiator_->alloc_memory(0, 4096, &copy).ok());
  ASSERT_EQ(copy.offset % kBlockUnit, 0u);
  memcpy(target.local_ptr(copy), target.local_ptr(at.block), at.block_length);
  *next = (at.slot_value & 0xffffffffu) | ((copy.offset / kBlockUnit) << 32);
  int copies = 0;
  ASSERT_TRUE(table_->count_copies("dup", &copies).ok());
  ASSERT_EQ(copies, 2);
  ASSERT_TRUE(table_->remove("dup").ok());
  ASSERT_TRUE(table_->count_copies("dup", &copies).ok());
  EXPECT_EQ(copies, 0);
  std::string value;
  EXPECT_EQ(table_->search("dup", &value).code(), Status::Code::kNotFound) << value;
}

TEST_F(HashTableTest, SpeculativeLookupHitsAndNoticesChanges) {
  Open(1000, true);
  ASSERT_TRUE(table_->insert("k", "v1").ok());
  std::string value;
  ASSERT_TRUE(table_->search("k", &value).ok());
  ASSERT_TRUE(table_->search("k", &value).ok());
  EXPECT_EQ(value, "v1");
  EXPECT_GE(table_->stats().speculative_hits, 1u);
  // Another client (its own cache) changes the key.
  HashTable other(*initiator_, config_, 1, options_);
  std::thread writer([&] { ASSERT_TRUE(other.update("k", "v2").ok()); });
  writer.join();
  const uint64_t misses = table_->stats().speculative_misses;
  ASSERT_TRUE(table_->search("k", &value).ok());
  EXPECT_EQ(value, "v2");
  EXPECT_EQ(table_->stats().speculative_misses, misses + 1);
  std::thread remover([&] { ASSERT_TRUE(other.remove("k").ok()); });
  remover.join();
  EXPECT_EQ(table_->search("k", &value).code(), Status::Code::kNotFound);
}

// A copy that a load claimed carries kBlockLoaded through every write of
// it, so speculative reads take its slot and block alone; a copy that an
// insert claimed may have a late insert's copy below it, so they look
// there too (lookup.cc).
TEST_F(HashTableTest, SpeculativeReadsLookBelowOnlyCopiesThatInsertsClaimed) {
  Open(1000, true);
  ASSERT_TRUE(table_->load("loaded", "v1").ok());
  ASSERT_TRUE(table_->update("loaded", "v2").ok());  // through the cache
  HashTable other(*initiator_, config_, 1, options_);
  std::thread writer([&] {
    ASSERT_TRUE(other.update("loaded", "v3").ok());  // another client's write
    ASSERT_TRUE(other.insert("loaded", "v4").ok());  // an upsert of the existing copy
  });
  writer.join();
  std::string value;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table_->search("loaded", &value).ok());
  EXPECT_EQ(value, "v4");
  EXPECT_EQ(table_->stats().speculative_looks_below, 0u) << "a read looked below a loaded copy";
  EXPECT_GT(table_->stats().speculative_hits, 0u);
  ASSERT_TRUE(table_->insert("inserted", "w1").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table_->search("inserted", &value).ok());
  EXPECT_EQ(value, "w1");
  EXPECT_GE(table_->stats().speculative_looks_below, 2u) << "reads of a copy an insert claimed did not look below";
}

TEST_F(HashTableTest, TwoShardsOnTwoBlades) {
  Open(2000, false, 2);
  EXPECT_STREQ(table_->name(), "HashTableMultiShard");
  const uint64_t chunks0 = blades_[0]->target().super_chunk()->alloc_chunk;
  const uint64_t chunks1 = blades_[1]->target().super_chunk()->alloc_chunk;
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(table_->insert(Key(i), Key(i)).ok());
  std::string value;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(table_->search(Key(i), &value).ok());
    EXPECT_EQ(value, Key(i));
  }
  // Both blades took memory for blocks.
  EXPECT_GT(blades_[0]->target().super_chunk()->alloc_chunk, chunks0);
  EXPECT_GT(blades_[1]->target().super_chunk()->alloc_chunk, chunks1);
}

TEST_F(HashTableTest, ReopensAnExistingTable) {
  Open(1000);
  ASSERT_TRUE(table_->insert("persist", "yes").ok());
  HashTable again(*initiator_, config_, 1, options_);
  std::string value;
  ASSERT_TRUE(again.search("persist", &value).ok());
  EXPECT_EQ(value, "yes");
}

TEST_F(HashTableTest, OpeningInsideATaskIsRefusedWithAnError) {
  Open(1000);
  ASSERT_TRUE(table_->insert("kept", "yes").ok());
  std::string error;
  RunTasks(1, 1, [&](int) {
    try {
      HashTable inside(*initiator_, config_, 1, options_);
      error = "no error";
    } catch (const Error& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("outside a task"), std::string::npos) << error;
  // The thread's pool and the table still work.
  std::string value;
  RunTasks(1, 2, [&](int) { EXPECT_TRUE(table_->search("kept", &value).ok()); });
  EXPECT_EQ(value, "yes");
}

}  // namespace
}  // namespace smart::hashtable
