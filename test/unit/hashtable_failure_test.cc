// SMART-HT when something went wrong: a client that died holding the resize
// lock (before or in the middle of a split), random bytes in the remote
// structure, another application on the same memory blade.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <chrono>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/named_root.h"
#include "smart/remote_lock.h"
#include "blade_fixture.h"
#include "test_util.h"

namespace smart::hashtable {
namespace {

class HashTableFailureTest : public smart::testing::BladeTest {
 protected:
  void SetUp() override {
    BladeTest::SetUp();
    options_.expected_keys = 300;
    options_.lease.lease_ns = 200000000;  // 0.2 s
    options_.retry_timeout_ns = 1000000000;
  }

  void Open() { table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options_); }

  GlobalAddress Directory(Initiator& in) {
    NamedRoots roots(in);
    uint64_t value = 0;
    EXPECT_TRUE(roots.lookup(0, kRootName, &value).ok());
    return GlobalAddress(0, value);
  }

  static std::string Key(int i) { return "key" + std::to_string(i); }

  void ExpectAllKeys(int from, int to) {
    std::string value;
    for (int i = from; i < to; ++i) {
      ASSERT_TRUE(table_->search(Key(i), &value).ok()) << Key(i);
      ASSERT_EQ(value, "v" + std::to_string(i));
      int copies = 0;
      ASSERT_TRUE(table_->count_copies(Key(i), &copies).ok());
      ASSERT_EQ(copies, 1) << Key(i);
    }
  }

  TableOptions options_;
  std::unique_ptr<HashTable> table_;
};

TEST_F(HashTableFailureTest, ResizeLockOfAClosedSessionIsTakenOver) {
  Open();
  {
    // Another client takes the resize lock and goes away holding it.
    auto other = Connect();
    auto* scratch = static_cast<uint64_t*>(other->alloc_cache(64));
    RemoteLock lock(*other, Directory(*other) + kResizeLockOffset, scratch, options_.lease);
    bool acquired = false;
    ASSERT_TRUE(lock.try_acquire(&acquired).ok());
    ASSERT_TRUE(acquired);
  }
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok()) << i;
  EXPECT_GT(table_->stats().splits, 0u);
  EXPECT_EQ(table_->stats().splits_recovered, 0u);
  ExpectAllKeys(0, 3000);
}

TEST_F(HashTableFailureTest, GarbageInTheResizeLockIsTakenOver) {
  Open();
  auto* word = static_cast<uint64_t*>(initiator_->alloc_cache(8));
  word[0] = 0x1234567890abcdefull & ~(uint64_t{1} << 63);
  ASSERT_TRUE(initiator_->write(word, Directory(*initiator_) + kResizeLockOffset, 8, Option::kSync).ok());
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok()) << i;
  EXPECT_GT(table_->stats().splits, 0u);
  ExpectAllKeys(0, 3000);
}

// A client dies in phase 1 of a split: it holds the lock, recorded its
// intent, allocated the new subtable and froze some slots of the old one.
TEST_F(HashTableFailureTest, SplitLeftInPhaseOneIsFinishedByTheNextClient) {
  Open();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok());
  ASSERT_EQ(table_->stats().splits, 0u);
  {
    auto other = Connect();
    const GlobalAddress dir = Directory(*other);
    auto* buffer = static_cast<uint64_t*>(other->alloc_cache(4096));
    RemoteLock lock(*other, dir + kResizeLockOffset, buffer + 500, options_.lease);
    bool acquired = false;
    ASSERT_TRUE(lock.try_acquire(&acquired).ok());
    ASSERT_TRUE(acquired);
    ASSERT_TRUE(other->read(buffer, dir, sizeof(DirectoryHeader) + 8, Option::kSync).ok());
    DirectoryHeader header;
    memcpy(&header, buffer, sizeof(header));
    const DirectoryShape shape = DecodeDepthWord(header.depth_word);
    ASSERT_EQ(shape.depth, 0);  // one subtable
    ASSERT_EQ(shape.entries_offset, 0u);
    const uint64_t old_subtable = DirEntryOffset(buffer[sizeof(DirectoryHeader) / 8]);
    GlobalAddress fresh;
    ASSERT_TRUE(other->alloc_memory(0, Geometry{0, header.groups_per_subtable}.subtable_bytes(), &fresh).ok());
    // The directory doubles before the intent is written.
    buffer[0] = EncodeDirEntry(old_subtable, 0);
    ASSERT_TRUE(other->write(buffer, dir + (kDirectoryEntriesOffset + 8), 8, Option::kSync).ok());
    buffer[0] = EncodeDepthWord(DirectoryShape{1, shape.capacity_depth, 0});
    ASSERT_TRUE(other->write(buffer, dir, 8, Option::kSync).ok());
    buffer[0] = old_subtable;
    buffer[1] = fresh.offset;
    ASSERT_TRUE(other->write(buffer, dir + offsetof(DirectoryHeader, split_old), 16, Option::kSync).ok());
    buffer[0] = EncodeSplitIntent(SplitIntent{1, 0, 0});
    ASSERT_TRUE(other->write(buffer, dir + kSplitIntentOffset, 8, Option::kSync).ok());
    // Freeze the first 64 slots (of the first groups).
    ASSERT_TRUE(other->read(buffer, GlobalAddress(0, old_subtable), 3 * kGroupSize, Option::kSync).ok());
    for (int w = 0; w < static_cast<int>(3 * kGroupSize / 8); ++w) {
      if (w % 8 == 0) continue;  // bucket headers
      uint64_t* old = buffer + 256;
      ASSERT_TRUE(other->compare_and_swap(old, GlobalAddress(0, old_subtable + 8 * w), buffer[w], buffer[w] | kFrozenBit,
                                          Option::kSync)
                      .ok());
    }
  }  // the client goes away holding the lock
  // Readers find every key; writers of frozen slots get the split finished.
  ExpectAllKeys(0, 200);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(table_->update(Key(i), "v" + std::to_string(i)).ok()) << i;
  for (int i = 200; i < 2000; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok()) << i;
  EXPECT_EQ(table_->stats().splits_recovered, 1u);
  ExpectAllKeys(0, 2000);
  uint64_t slots = 0;
  int depth = 0;
  ASSERT_TRUE(table_->capacity(0, &slots, &depth).ok());
  EXPECT_GE(depth, 1);
}

TEST_F(HashTableFailureTest, RandomBytesInABucketEndInAnErrorNotALoop) {
  Open();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok());
  HashTable::Location where;
  ASSERT_TRUE(table_->locate(Key(7), &where).ok());
  auto* noise = static_cast<uint64_t*>(initiator_->alloc_cache(kBucketSize));
  std::mt19937_64 random(42);
  for (size_t i = 0; i < kBucketSize / 8; ++i) noise[i] = random();
  const GlobalAddress bucket(0, where.slot.offset & ~uint64_t{kBucketSize - 1});
  ASSERT_TRUE(initiator_->write(noise, bucket, kBucketSize, Option::kSync).ok());
  std::string value;
  Status s = table_->search(Key(7), &value);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), Status::Code::kNotFound) << s.ToString();
  s = table_->update(Key(7), "again");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), Status::Code::kNotFound) << s.ToString();
}

// A slot that names a block of no units (its other fields the key's): a
// reader must not take zero bytes for a block with a checksum.
TEST_F(HashTableFailureTest, ASlotNamingABlockOfNoUnitsEndsInAnError) {
  Open();
  ASSERT_TRUE(table_->insert("empty-block", "value").ok());
  HashTable::Location where;
  ASSERT_TRUE(table_->locate("empty-block", &where).ok());
  auto* word = static_cast<uint64_t*>(initiator_->alloc_cache(8));
  word[0] = where.slot_value & ~(uint64_t{0x3f} << 8);  // units 0
  ASSERT_FALSE(SlotEmpty(word[0]));
  ASSERT_TRUE(initiator_->write(word, where.slot, 8, Option::kSync).ok());
  std::string value;
  const Status s = table_->search("empty-block", &value);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("checksum"), std::string::npos) << s.ToString();
}

TEST_F(HashTableFailureTest, RandomBytesInABlockEndInAnErrorNamingTheChecksum) {
  Open();
  ASSERT_TRUE(table_->insert("victim", "value").ok());
  HashTable::Location where;
  ASSERT_TRUE(table_->locate("victim", &where).ok());
  auto* noise = static_cast<uint64_t*>(initiator_->alloc_cache(where.block_length));
  std::mt19937_64 random(7);
  for (size_t i = 0; i < where.block_length / 8; ++i) noise[i] = random();
  ASSERT_TRUE(initiator_->write(noise, where.block, where.block_length, Option::kSync).ok());
  std::string value;
  const Status s = table_->search("victim", &value);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("checksum"), std::string::npos) << s.ToString();
}

// A process that does not run for a while (stopped, in a debugger,
// descheduled) in the middle of an operation's retries looks at the table
// again when it runs: that time does not count against retry_timeout_ns.
TEST_F(HashTableFailureTest, TimeTheProcessDidNotRunDoesNotCountAgainstTheRetryBound) {
  Open();
  ASSERT_TRUE(table_->insert("victim", "value").ok());
  HashTable::Location where;
  ASSERT_TRUE(table_->locate("victim", &where).ok());
  // Freeze the key's slot, as a split under way does.
  auto* word = static_cast<uint64_t*>(initiator_->alloc_cache(16));
  ASSERT_TRUE(initiator_->read(word, where.slot, 8, Option::kSync).ok());
  const uint64_t slot = word[0];
  ASSERT_FALSE(SlotFrozen(slot));
  word[0] = slot | kFrozenBit;
  ASSERT_TRUE(initiator_->write(word, where.slot, 8, Option::kSync).ok());
  // The update's tenth slow retry sleeps twice the retry bound (1 s), as a
  // stopped process would; meanwhile another client unfreezes the slot.
  InstallFaultRules(ParseFaultRules("delay=2000ms@point:ht.retry#10"));
  std::thread thaw([&] {
    auto other = Connect();
    auto* buffer = static_cast<uint64_t*>(other->alloc_cache(16));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(other->compare_and_swap(buffer, where.slot, slot | kFrozenBit, slot, Option::kSync).ok());
    EXPECT_EQ(buffer[0], slot | kFrozenBit);
    other->release_thread();
  });
  const Status s = table_->update("victim", "after");
  thaw.join();
  InstallFaultRules({});
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string value;
  ASSERT_TRUE(table_->search("victim", &value).ok());
  EXPECT_EQ(value, "after");
}

// A READ is atomic only per 8-byte word, so an insert can read a bucket
// while a split rewrites it: the old header (which accepts the key) with
// slots already rewritten as empty for the next depth. Claiming such a slot
// would put the key into the old subtable although the split moved its half
// to the new one, where every later lookup goes: the key would be lost. The
// view is made to stay here (the key's candidate buckets hold the old header
// with rewritten slots); the insert must not take it, and must succeed once
// the bucket makes sense again.
// A reader that loaded a slot before the block was recycled reads the
// block's new bytes: the tag in its old slot value no longer matches.
TEST_F(HashTableFailureTest, AStaleReaderNeverAcceptsARecycledBlock) {
  options_.reclaim_grace_ns = 0;
  Open();
  ASSERT_TRUE(table_->insert("recycled", "first value").ok());
  HashTable::Location before;
  ASSERT_TRUE(table_->locate("recycled", &before).ok());
  bool reused = false;
  for (int i = 0; i < 8 && !reused; ++i) {
    ASSERT_TRUE(table_->update("recycled", "value " + std::to_string(i)).ok());
    HashTable::Location now;
    ASSERT_TRUE(table_->locate("recycled", &now).ok());
    reused = now.block.offset == before.block.offset;
  }
  ASSERT_TRUE(reused) << "the first block was never reused";
  auto* stale = static_cast<char*>(initiator_->alloc_cache(before.block_length));
  ASSERT_TRUE(initiator_->read(stale, before.block, before.block_length, Option::kSync).ok());
  const uint8_t old_tag = DecodeSlot(before.slot_value).tag;
  EXPECT_NE(CheckBlock(stale, before.block_length, old_tag), BlockCheck::kValid)
      << "a reader holding the old slot would accept \"" << BlockValue(stale) << "\"";
}

TEST_F(HashTableFailureTest, SharesItsBladeWithAnotherApplication) {
  NamedRoots roots(*initiator_);
  RootClaim claim;
  ASSERT_TRUE(roots.open(0, "btree", &claim).ok());
  ASSERT_TRUE(claim.must_build());
  GlobalAddress other_root;
  ASSERT_TRUE(initiator_->alloc_memory(0, 4096, &other_root).ok());
  ASSERT_TRUE(claim.publish(other_root.offset).ok());
  Open();
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(table_->insert(Key(i), "v" + std::to_string(i)).ok());
  // A second client attaches to both instead of building either again.
  auto second = Connect();
  HashTable again(*second, config_, 1, options_);
  std::string value;
  ASSERT_TRUE(again.search(Key(42), &value).ok());
  EXPECT_EQ(value, "v42");
  NamedRoots second_roots(*second);
  uint64_t found = 0;
  ASSERT_TRUE(second_roots.lookup(0, "btree", &found).ok());
  EXPECT_EQ(found, other_root.offset);
  std::vector<NamedRootInfo> all;
  ASSERT_TRUE(second_roots.list(0, &all).ok());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].published && all[1].published);
}

}  // namespace
}  // namespace smart::hashtable
