// SMART-DTX layouts: record slots, placement, catalog blocks, undo records.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "catalog.h"
#include "record.h"
#include "smart/crc32c.h"
#include "undo_log.h"

namespace smart::dtx {
namespace {

TEST(DtxRecord, ASlotDecodesToWhatWasEncodedAndItsCrcCoversAllButTheLock) {
  const size_t vb = 16;
  std::vector<char> slot(SlotBytes(vb));
  const char value[16] = "fifteen bytes..";
  EncodeSlot(slot.data(), vb, 77, 5, 1234567890123ull, 3, true, value);
  Record r;
  ASSERT_TRUE(DecodeSlot(slot.data(), vb, &r));
  EXPECT_EQ(r.lock, 77u);
  EXPECT_EQ(r.version, 5u);
  EXPECT_EQ(r.key, 1234567890123ull);
  EXPECT_EQ(r.table, 3);
  EXPECT_TRUE(r.valid);
  EXPECT_EQ(memcmp(r.value, value, vb), 0);
  // The lock word changes by CAS alone: not covered.
  SetSlotLock(slot.data(), 99);
  ASSERT_TRUE(DecodeSlot(slot.data(), vb, &r));
  EXPECT_EQ(r.lock, 99u);
  // Any other byte is.
  for (size_t i = 8; i < slot.size(); ++i) {
    std::vector<char> torn = slot;
    torn[i] ^= 0x10;
    EXPECT_FALSE(DecodeSlot(torn.data(), vb, &r)) << "byte " << i;
  }
}

TEST(DtxRecord, AnEmptySlotIsSealedAndNotValid) {
  std::vector<char> slot(SlotBytes(8));
  EncodeSlot(slot.data(), 8, 0, 0, 0, 1, false, nullptr);
  Record r;
  ASSERT_TRUE(DecodeSlot(slot.data(), 8, &r));
  EXPECT_FALSE(r.valid);
  std::vector<char> zeros(SlotBytes(8), 0);
  EXPECT_FALSE(DecodeSlot(zeros.data(), 8, &r)) << "zeros are not a sealed slot";
}

TEST(DtxRecord, BucketsSpreadKeysOfEveryTable) {
  const uint64_t buckets = 1000;
  std::vector<int> count(buckets);
  for (uint64_t k = 0; k < 100000; ++k) ++count[BucketOf(k, 1, buckets)];
  for (uint64_t b = 0; b < buckets; ++b) {
    EXPECT_GT(count[b], 40) << "bucket " << b;
    EXPECT_LT(count[b], 170) << "bucket " << b;
  }
  int same = 0;
  for (uint64_t k = 0; k < 1000; ++k) same += BucketOf(k, 1, buckets) == BucketOf(k, 2, buckets);
  EXPECT_LT(same, 20) << "tables share their layout";
}

TEST(DtxPlacement, PrimaryIsTableModBladesAndBackupsFollowDistinct) {
  for (int blades = 1; blades <= 4; ++blades) {
    for (int degree = 0; degree <= 2; ++degree) {
      for (int t = 0; t < 7; ++t) {
        const std::vector<node_t> r = PlaceTable(t, blades, degree);
        if (degree >= blades) {
          EXPECT_TRUE(r.empty()) << blades << " blades, degree " << degree;
          continue;
        }
        ASSERT_EQ(r.size(), static_cast<size_t>(degree + 1));
        EXPECT_EQ(r[0], t % blades);
        EXPECT_EQ(std::set<node_t>(r.begin(), r.end()).size(), r.size()) << "replicas on one blade";
        for (node_t n : r) EXPECT_LT(n, blades);
      }
    }
  }
}

TEST(DtxCatalog, ABlockRoundTripsAndNonsenseIsRefused) {
  CatalogBlock c;
  c.backup_degree = 1;
  c.blade_count = 2;
  c.log_directory = 4096;
  CatalogBlock::Entry e;
  e.spec.id = 2;
  e.spec.value_bytes = 40;
  e.spec.buckets = 123;
  e.spec.overflow_nodes = 9;
  e.region = 65536;
  e.rows = 555;
  c.tables.push_back(e);
  std::vector<char> bytes(kCatalogBytes);
  EncodeCatalog(c, bytes.data());
  CatalogBlock d;
  ASSERT_EQ(DecodeCatalog(bytes.data(), &d), "");
  EXPECT_EQ(d.backup_degree, 1);
  EXPECT_EQ(d.blade_count, 2);
  EXPECT_EQ(d.log_directory, 4096u);
  ASSERT_EQ(d.tables.size(), 1u);
  EXPECT_EQ(d.tables[0].spec.value_bytes, 40u);
  EXPECT_EQ(d.tables[0].region, 65536u);
  EXPECT_EQ(d.tables[0].rows, 555u);
  std::vector<char> bad = bytes;
  bad[0] ^= 1;
  EXPECT_NE(DecodeCatalog(bad.data(), &d), "");
  bad = bytes;
  bad[12] = 5;  // backup degree 5 with 2 blades
  EXPECT_NE(DecodeCatalog(bad.data(), &d), "");
  bad = bytes;
  bad[32 + 4] = 13;  // value width 13
  EXPECT_NE(DecodeCatalog(bad.data(), &d), "");
}

size_t SlotBytesOf(const void*, uint16_t table) { return table == 1 ? SlotBytes(8) : table == 2 ? SlotBytes(40) : 0; }

TEST(DtxUndo, ARecordRoundTripsAndTornOrForeignBytesAreRefused) {
  UndoRecord r;
  r.tx_id = 0xabcdef;
  UndoItem a;
  a.at = Locator{1, 3, 77};
  a.before.assign(SlotBytes(8), 'a');
  UndoItem b;
  b.at = Locator{2, 7, 123456};
  b.before.assign(SlotBytes(40), 'b');
  r.items = {a, b};
  std::vector<char> slot(kLogSlotBytes, 0);
  const size_t n = EncodeUndo(r, slot.data());
  EXPECT_EQ(n, UndoBytes(r.items));
  UndoRecord d;
  ASSERT_EQ(DecodeUndo(slot.data(), slot.size(), SlotBytesOf, nullptr, &d), "");
  EXPECT_EQ(d.tx_id, r.tx_id);
  ASSERT_EQ(d.items.size(), 2u);
  EXPECT_EQ(d.items[1].at.node, 123456u);
  EXPECT_EQ(d.items[1].at.slot, 7);
  EXPECT_EQ(d.items[1].before, b.before);
  std::vector<char> empty(kLogSlotBytes, 0);
  EXPECT_EQ(DecodeUndo(empty.data(), empty.size(), SlotBytesOf, nullptr, &d), "empty");
  for (size_t i : {size_t{4}, size_t{9}, size_t{30}, n - 1}) {
    std::vector<char> torn = slot;
    torn[i] ^= 0x40;
    EXPECT_NE(DecodeUndo(torn.data(), torn.size(), SlotBytesOf, nullptr, &d), "") << "byte " << i;
  }
  EXPECT_NE(DecodeUndo(slot.data(), n - 1, SlotBytesOf, nullptr, &d), "") << "a cut record";
}

// A record is what EncodeUndo writes, reserved zeros included: one whose
// reserved fields are set (under a matching CRC, so not torn) is refused,
// so that every record decoded encodes back to its bytes (found by fuzz_dtx).
TEST(DtxUndo, ARecordWithAReservedFieldSetIsRefused) {
  UndoRecord r;
  r.tx_id = 42;
  UndoItem a;
  a.at = Locator{1, 2, 0};
  a.before.assign(SlotBytes(8), 'a');
  r.items = {a};
  for (size_t at : {size_t{6}, kUndoHeaderBytes + 7}) {
    std::vector<char> slot(kLogSlotBytes, 0);
    const size_t n = EncodeUndo(r, slot.data());
    slot[at] = 0x60;
    const uint32_t zero = 0;
    memcpy(slot.data() + 16, &zero, 4);
    const uint32_t crc = Crc32c(slot.data(), n);
    memcpy(slot.data() + 16, &crc, 4);
    UndoRecord d;
    EXPECT_NE(DecodeUndo(slot.data(), slot.size(), SlotBytesOf, nullptr, &d), "") << "reserved byte " << at;
  }
}

}  // namespace
}  // namespace smart::dtx
