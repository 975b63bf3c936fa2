// SMART-HT reading a bucket while a split rewrites it: a READ is atomic only
// per 8-byte word, so a view can pair a bucket's old header with slots
// already rewritten for the next depth (a torn view). These tests hold such a
// view in place by writing the key's candidate buckets directly, and check
// what each operation does with it (ViewUse in table_internal.h): a reader
// trusts a copy it found but not a miss, an update acts only on a slot that
// agrees with its header, and an insert needs the whole view to agree.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "blade_fixture.h"
#include "hash_table.h"
#include "layout.h"
#include "smart/named_root.h"

namespace smart::hashtable {
namespace {

class HashTableTornViewTest : public smart::testing::BladeTest {
 protected:
  void SetUp() override {
    BladeTest::SetUp();
    TableOptions options;
    options.expected_keys = 300;
    options.retry_timeout_ns = 1000000000;  // 1 s
    table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options);
    buffer_ = static_cast<uint64_t*>(initiator_->alloc_cache(kBucketPairSize));
  }

  // The key's two candidate bucket pairs and their subtable's local depth
  // (the table has one subtable, at depth 0).
  void Candidates(std::string_view key, GlobalAddress pairs[2], int* depth) {
    NamedRoots roots(*initiator_);
    uint64_t root = 0;
    ASSERT_TRUE(roots.lookup(0, kRootName, &root).ok());
    const GlobalAddress dir(0, root);
    ASSERT_TRUE(initiator_->read(buffer_, dir, sizeof(DirectoryHeader), Option::kSync).ok());
    DirectoryHeader header;
    memcpy(&header, buffer_, sizeof(header));
    ASSERT_EQ(DecodeDepthWord(header.depth_word).depth, 0);
    ASSERT_TRUE(initiator_->read(buffer_, dir + kDirectoryEntriesOffset, 8, Option::kSync).ok());
    const uint64_t subtable = DirEntryOffset(buffer_[0]);
    *depth = DirEntryDepth(buffer_[0]);
    uint64_t first = 0, second = 0;
    BucketIndices(HashKey(key), header.groups_per_subtable, &first, &second);
    pairs[0] = GlobalAddress(0, subtable + BucketPairOffset(first));
    pairs[1] = GlobalAddress(0, subtable + BucketPairOffset(second));
  }

  // Rewrites every slot word of the two pairs as change(slot) returns it;
  // headers stay. Checks on the way that the headers are at `depth`.
  void RewriteSlots(const GlobalAddress pairs[2], int depth, const std::function<uint64_t(uint64_t)>& change) {
    for (int p = 0; p < 2; ++p) {
      ASSERT_TRUE(initiator_->read(buffer_, pairs[p], kBucketPairSize, Option::kSync).ok());
      for (int w = 0; w < static_cast<int>(kBucketPairSize / 8); ++w) {
        if (w % 8 == 0) {
          ASSERT_EQ(HeaderDepth(buffer_[w]), depth);
        } else {
          buffer_[w] = change(buffer_[w]);
        }
      }
      ASSERT_TRUE(initiator_->write(buffer_, pairs[p], kBucketPairSize, Option::kSync).ok());
    }
  }

  // Every empty slot of the pairs as a split rewrites it for depth + 1: the
  // view is torn wherever a header still says `depth`.
  void TearEmptySlots(const GlobalAddress pairs[2], int depth) {
    RewriteSlots(pairs, depth, [depth](uint64_t slot) { return SlotEmpty(slot) ? EmptySlot(depth + 1) : slot; });
  }

  static void ExpectTimedOutOnTornView(const Status& s) {
    EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
    EXPECT_NE(s.ToString().find("disagree with its header"), std::string::npos) << s.ToString();
  }

  std::unique_ptr<HashTable> table_;
  uint64_t* buffer_ = nullptr;
};

TEST_F(HashTableTornViewTest, AnInsertNeverClaimsASlotOfABucketReadHalfRewritten) {
  const std::string key = "half-rewritten";
  GlobalAddress pairs[2];
  int depth = 0;
  Candidates(key, pairs, &depth);
  TearEmptySlots(pairs, depth);
  Status s = table_->insert(key, "value");
  ExpectTimedOutOnTornView(s);
  EXPECT_GT(table_->stats().torn_buckets, 0u);
  // Nothing was claimed: every slot still reads as the rewritten empty one.
  for (const GlobalAddress& pair : pairs) {
    ASSERT_TRUE(initiator_->read(buffer_, pair, kBucketPairSize, Option::kSync).ok());
    for (int w = 1; w < static_cast<int>(kBucketPairSize / 8); ++w) {
      if (w % 8 != 0) EXPECT_EQ(buffer_[w], EmptySlot(depth + 1)) << "slot word " << w;
    }
  }
  RewriteSlots(pairs, depth, [depth](uint64_t) { return EmptySlot(depth); });
  ASSERT_TRUE(table_->insert(key, "value").ok());
  std::string value;
  ASSERT_TRUE(table_->search(key, &value).ok());
  EXPECT_EQ(value, "value");
  HashTable::Location where;
  ASSERT_TRUE(table_->locate(key, &where).ok());
  EXPECT_TRUE(SlotAgreesWithHeader(where.slot_value, EncodeBucketHeader(depth, 0)));
}

// A miss in a torn view may be a key the split just moved away.
TEST_F(HashTableTornViewTest, ASearchDoesNotTrustAMissInATornView) {
  const std::string key = "moved-away";
  GlobalAddress pairs[2];
  int depth = 0;
  Candidates(key, pairs, &depth);
  TearEmptySlots(pairs, depth);
  std::string value;
  ExpectTimedOutOnTornView(table_->search(key, &value));
  EXPECT_GT(table_->stats().torn_buckets, 0u);
  RewriteSlots(pairs, depth, [depth](uint64_t) { return EmptySlot(depth); });
  EXPECT_EQ(table_->search(key, &value).code(), Status::Code::kNotFound);
}

// A copy found is the key's, whatever else the split rewrote; an update acts
// on that copy's slot alone, so the rest of the view need not agree; an
// insert of the same key might claim or clear slots, so it waits.
TEST_F(HashTableTornViewTest, ReadersAndUpdatesActOnACopyInATornViewAndInsertsWait) {
  const std::string key = "stays";
  ASSERT_TRUE(table_->insert(key, "v1").ok());
  GlobalAddress pairs[2];
  int depth = 0;
  Candidates(key, pairs, &depth);
  TearEmptySlots(pairs, depth);
  std::string value;
  ASSERT_TRUE(table_->search(key, &value).ok());
  EXPECT_EQ(value, "v1");
  ASSERT_TRUE(table_->update(key, "v2").ok());
  EXPECT_EQ(table_->stats().torn_buckets, 0u);
  ExpectTimedOutOnTornView(table_->insert(key, "v3"));
  ASSERT_TRUE(table_->search(key, &value).ok());
  EXPECT_EQ(value, "v2");
}

// A full slot whose parity is the next depth's was rewritten by the split;
// under the old header the update must not act on it.
TEST_F(HashTableTornViewTest, AnUpdateNeverActsOnASlotThatDisagreesWithItsHeader) {
  const std::string key = "kept";
  ASSERT_TRUE(table_->insert(key, "v1").ok());
  HashTable::Location where;
  ASSERT_TRUE(table_->locate(key, &where).ok());
  GlobalAddress pairs[2];
  int depth = 0;
  Candidates(key, pairs, &depth);
  const uint64_t rewritten = SlotWithParity(where.slot_value, depth + 1);
  ASSERT_NE(rewritten, where.slot_value);
  RewriteSlots(pairs, depth, [&](uint64_t slot) { return slot == where.slot_value ? rewritten : slot; });
  ExpectTimedOutOnTornView(table_->update(key, "v2"));
  ASSERT_TRUE(initiator_->read(buffer_, where.slot, 8, Option::kSync).ok());
  EXPECT_EQ(buffer_[0], rewritten);
  RewriteSlots(pairs, depth, [&](uint64_t slot) { return slot == rewritten ? where.slot_value : slot; });
  ASSERT_TRUE(table_->update(key, "v2").ok());
  std::string value;
  ASSERT_TRUE(table_->search(key, &value).ok());
  EXPECT_EQ(value, "v2");
}

}  // namespace
}  // namespace smart::hashtable
