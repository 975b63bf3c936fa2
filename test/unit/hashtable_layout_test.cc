// SMART-HT wire format and hashing: pure functions, no memory blade.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "layout.h"

namespace smart::hashtable {
namespace {

TEST(HashTableLayout, SlotFieldsRoundTrip) {
  SlotFields f;
  f.fingerprint = 0xab;
  f.units = 63;
  f.tag = 0xf;
  f.dir_bits = 0xfff;
  f.parity = true;
  f.block_offset = (uint64_t{1} << 37) + 64 * 5;
  const uint64_t slot = EncodeSlot(f);
  const SlotFields g = DecodeSlot(slot);
  EXPECT_EQ(g.fingerprint, 0xab);
  EXPECT_EQ(g.units, 63);
  EXPECT_EQ(g.tag, 0xf);
  EXPECT_EQ(g.dir_bits, 0xfff);
  EXPECT_TRUE(g.parity);
  EXPECT_EQ(g.block_offset, f.block_offset);
  EXPECT_FALSE(SlotEmpty(slot));
  EXPECT_FALSE(SlotFrozen(slot));
  EXPECT_TRUE(SlotFrozen(slot | kFrozenBit));
  EXPECT_EQ(SlotUnfrozen(slot | kFrozenBit), slot);
  EXPECT_EQ(SlotBlockLength(slot), 63u * 64);
  EXPECT_EQ(SlotBlockOffset(slot), f.block_offset);
  EXPECT_EQ(SlotTag(slot), 0xf);
  EXPECT_EQ(SlotDirBits(slot), 0xfffu);
}

TEST(HashTableLayout, FieldsDoNotOverlap) {
  // Each field alone at its maximum leaves every other field zero.
  SlotFields only_fp;
  only_fp.fingerprint = 0xff;
  EXPECT_EQ(EncodeSlot(only_fp), 0xffu);
  SlotFields only_units;
  only_units.units = 0x3f;
  EXPECT_EQ(EncodeSlot(only_units), uint64_t{0x3f} << 8);
  SlotFields only_tag;
  only_tag.tag = 0xf;
  EXPECT_EQ(EncodeSlot(only_tag), uint64_t{0xf} << 14);
  SlotFields only_dir;
  only_dir.dir_bits = 0xfff;
  EXPECT_EQ(EncodeSlot(only_dir), uint64_t{0xfff} << 19);
  SlotFields only_parity;
  only_parity.parity = true;
  EXPECT_EQ(EncodeSlot(only_parity), kParityBit);
  EXPECT_EQ(kFrozenBit, uint64_t{1} << 18);
}

TEST(HashTableLayout, EmptySlotsCarryTheDepth) {
  for (int depth = 0; depth <= kMaxGlobalDepth; ++depth) {
    EXPECT_TRUE(SlotEmpty(EmptySlot(depth)));
    EXPECT_TRUE(SlotEmpty(EmptySlot(depth) | kFrozenBit));
    if (depth > 0) EXPECT_NE(EmptySlot(depth), EmptySlot(depth - 1));
  }
}

TEST(HashTableLayout, ParityFollowsTheDepth) {
  SlotFields f;
  f.block_offset = 4096;
  const uint64_t slot = EncodeSlot(f);
  EXPECT_NE(SlotWithParity(slot, 3), SlotWithParity(slot, 4));
  EXPECT_EQ(SlotWithParity(SlotWithParity(slot, 3), 5), SlotWithParity(slot, 3));
  EXPECT_EQ(SlotBlockOffset(SlotWithParity(slot, 3)), 4096u);
}

TEST(HashTableLayout, BucketHeaderAcceptsOnlyItsSuffix) {
  const uint64_t header = EncodeBucketHeader(3, 0b101);
  EXPECT_EQ(HeaderDepth(header), 3);
  EXPECT_EQ(HeaderSuffix(header), 0b101u);
  EXPECT_TRUE(HeaderAccepts(header, 0b1101));
  EXPECT_TRUE(HeaderAccepts(header, 0b0101));
  EXPECT_FALSE(HeaderAccepts(header, 0b0100));
  EXPECT_TRUE(HeaderAccepts(EncodeBucketHeader(0, 0), 0xfff));
}

TEST(HashTableLayout, DirectoryEntries) {
  const uint64_t e = EncodeDirEntry(123 * 16384, 7);
  EXPECT_EQ(DirEntryOffset(e), 123u * 16384);
  EXPECT_EQ(DirEntryDepth(e), 7);
  EXPECT_EQ(DirectoryBytes(20), 64u + 8 * (1u << 20));
}

TEST(HashTableLayout, DepthWordRoundTripsAndRejectsNonsense) {
  const DirectoryShape d{17, 24, uint64_t{5} << 30};
  const DirectoryShape back = DecodeDepthWord(EncodeDepthWord(d));
  EXPECT_EQ(back.depth, 17);
  EXPECT_EQ(back.capacity_depth, 24);
  EXPECT_EQ(back.entries_offset, uint64_t{5} << 30);
  const uint64_t blade = uint64_t{8} << 30;
  EXPECT_TRUE(DepthWordValid(back, blade));
  EXPECT_FALSE(DepthWordValid(DirectoryShape{21, 20, 0}, blade));                    // depth above capacity
  EXPECT_FALSE(DepthWordValid(DirectoryShape{3, kMaxGlobalDepth + 1, 0}, blade));     // capacity past the limit
  EXPECT_FALSE(DepthWordValid(DirectoryShape{3, 24, blade - 64}, blade));            // array past the pool
  EXPECT_FALSE(DepthWordValid(DirectoryShape{3, 4, (uint64_t{1} << 30) + 3}, blade));  // misaligned
  EXPECT_TRUE(DepthWordValid(DirectoryShape{0, 0, 0}, blade));
}

TEST(HashTableLayout, DirectoryBitsExtendPastTheSlotsBits) {
  const KeyHash h{0xabcdef0123456789ull, 0x00000000000cdea5ull};
  EXPECT_EQ(h.dir_bits() & kSlotDirMask, 0x789u);
  EXPECT_EQ(h.dir_bits() >> kSlotDirBits, 0xcdea5u);
  EXPECT_LT(h.dir_bits(), uint64_t{1} << kMaxGlobalDepth);
}

TEST(HashTableLayout, SplitIntentRoundTrips) {
  const SplitIntent in{2, 11, 0x5a5};
  const SplitIntent out = DecodeSplitIntent(EncodeSplitIntent(in));
  EXPECT_EQ(out.phase, 2);
  EXPECT_EQ(out.depth, 11);
  EXPECT_EQ(out.suffix, 0x5a5u);
  EXPECT_EQ(EncodeSplitIntent(SplitIntent{}), 0u);  // 0: no split under way
  EXPECT_EQ(kResizeLockOffset, 32u);
  EXPECT_EQ(kSplitIntentOffset, 40u);
}

TEST(HashTableLayout, BlockRoundTripAndChecks) {
  const std::string key = "key00000042", value(100, 'v');
  const size_t units = BlockUnits(key.size(), value.size());
  EXPECT_EQ(units, 2u);  // 8 + 11 + 100 + 4 = 123 bytes
  std::vector<char> block(units * kBlockUnit);
  EncodeBlock(key, value, 5, units, block.data());
  EXPECT_EQ(CheckBlock(block.data(), block.size(), 5), BlockCheck::kValid);
  EXPECT_EQ(BlockKey(block.data()), key);
  EXPECT_EQ(BlockValue(block.data()), value);
  EXPECT_EQ(CheckBlock(block.data(), block.size(), 6), BlockCheck::kWrongTag);
  // A torn block: any byte changed, including padding.
  for (size_t i : {size_t{0}, size_t{9}, size_t{70}, block.size() - 6, block.size() - 1}) {
    std::vector<char> torn = block;
    torn[i] ^= 0x20;
    EXPECT_EQ(CheckBlock(torn.data(), torn.size(), 5), BlockCheck::kTorn) << "byte " << i;
  }
  EXPECT_EQ(BlockUnits(8, 8), 1u);
}


TEST(HashTableLayout, HashesAreDeterministicAndSpread) {
  EXPECT_EQ(HashKey("abc").primary, HashKey("abc").primary);
  EXPECT_NE(HashKey("abc").primary, HashKey("abd").primary);
  EXPECT_NE(HashKey("abc").primary, HashKey("abc").secondary);
  // Bucket indices and shards spread evenly over 20000 sequential keys.
  const uint64_t groups = 64;
  std::vector<int> buckets(2 * groups), shards(3);
  std::set<uint64_t> fingerprints;
  for (int i = 0; i < 20000; ++i) {
    const std::string key = "key" + std::to_string(i);
    const KeyHash h = HashKey(key);
    uint64_t a, b;
    BucketIndices(h, groups, &a, &b);
    ASSERT_LT(a, 2 * groups);
    ASSERT_LT(b, 2 * groups);
    ASSERT_NE(a, b);
    ++buckets[a];
    ++shards[ShardOf(key, 3)];
    fingerprints.insert(h.fingerprint());
  }
  for (int n : buckets) EXPECT_NEAR(n, 20000.0 / 128, 60);
  for (int n : shards) EXPECT_NEAR(n, 20000.0 / 3, 400);
  EXPECT_EQ(fingerprints.size(), 256u);
  EXPECT_EQ(ShardOf("anything", 1), 0);
}

TEST(HashTableLayout, ShardHashIsIndependentOfBucketHash) {
  // Among keys of one shard, the bucket indices still cover every bucket.
  std::set<uint64_t> seen;
  for (int i = 0; i < 20000; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (ShardOf(key, 2) != 0) continue;
    uint64_t a, b;
    BucketIndices(HashKey(key), 16, &a, &b);
    seen.insert(a);
    seen.insert(b);
  }
  EXPECT_EQ(seen.size(), 32u);
}

TEST(HashTableLayout, BucketPairsUseAllThreeBuckets) {
  // Even index: buckets 0 and 1 of its group; odd: buckets 1 and 2.
  EXPECT_EQ(BucketPairOffset(0), 0u);
  EXPECT_EQ(BucketPairOffset(1), 64u);
  EXPECT_EQ(BucketPairOffset(2), 192u);
  EXPECT_EQ(BucketPairOffset(3), 256u);
  EXPECT_EQ(MainBucketInPair(0), 0);  // main bucket 0, overflow bucket 1
  EXPECT_EQ(MainBucketInPair(1), 1);  // overflow bucket 1, main bucket 2
}

TEST(HashTableLayout, GeometryFromExpectedKeys) {
  for (uint64_t keys : {uint64_t{1}, uint64_t{1000}, uint64_t{1000000}, uint64_t{100000000}}) {
    const Geometry g = GeometryFor(keys);
    EXPECT_GE(g.capacity_slots(), keys + keys / 3) << keys;
    EXPECT_LE(g.capacity_slots(), 4 * (keys + keys / 3) + 2 * kSlotsPerGroup * kMinGroupsPerSubtable) << keys;
    EXPECT_LE(g.groups, kMaxGroupsPerSubtable) << keys;
    EXPECT_EQ(g.subtable_bytes() % 16384, 0u);
  }
  EXPECT_EQ(GeometryFor(1000).depth, 0);
  EXPECT_GT(GeometryFor(100000000).depth, 0);
}

}  // namespace
}  // namespace smart::hashtable
