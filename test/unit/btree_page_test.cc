// SMART-BT page images: lines and their checks, headers and fences, leaf
// and internal entries, the two halves of a split, value blocks.
#include <gtest/gtest.h>

#include <atomic>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "page.h"
#include "tree_internal.h"
#include "smart/crc32c.h"

namespace smart::btree {
namespace {

struct alignas(64) PageImage {
  char bytes[kPageSize];
  char* data() { return bytes; }
};

PageHeader Header(uint64_t min, uint64_t max, bool unbounded, uint8_t level = 0) {
  PageHeader h;
  h.min = min;
  h.max = max;
  h.unbounded = unbounded;
  h.level = level;
  h.version = 7;
  return h;
}

TEST(BTreePage, LayoutIsFixed) {
  EXPECT_EQ(kPageEntries, 45);
  EXPECT_EQ(EntryOffset(0), 64u + 16);
  EXPECT_EQ(EntryOffset(2), 64u + 48);
  EXPECT_EQ(EntryOffset(3), 128u + 16);
  EXPECT_EQ(EntryOffset(44), 15 * 64u + 48);
  EXPECT_EQ(MetaOffset(4), 128u + 8 + 2);
  EXPECT_EQ(EntryLine(44), 15);
  // Every entry lies inside one line, past its tag and meta word.
  for (int e = 0; e < kPageEntries; ++e) {
    EXPECT_EQ(EntryOffset(e) / kLineSize, (EntryOffset(e) + kEntrySize - 1) / kLineSize);
    EXPECT_GE(EntryOffset(e) % kLineSize, 16u);
  }
}

// A speculative-lookup entry keeps the page, the line and the key's tag in
// one word, for every node and every page offset below 2^48.
TEST(BTreePage, SpeculativeEntryKeepsPageLineAndTag) {
  const uint64_t top_page = (uint64_t{1} << 48) - kPageSize;
  for (node_t node : {node_t{0}, node_t{1}, node_t{77}, node_t{255}}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{kPageSize}, uint64_t{123} * kPageSize, top_page}) {
      for (int line = 1; line < kLinesPerPage; line += 7) {
        const uint64_t mixed = MixKey(offset + static_cast<uint64_t>(line) + node);
        SpeculativeEntry e;
        ASSERT_TRUE(e.store(mixed, GlobalAddress(node, offset), line));
        EXPECT_TRUE(e.holds(mixed));
        EXPECT_FALSE(e.holds(mixed ^ (uint64_t{1} << 63))) << "another key's tag";
        EXPECT_EQ(e.page(), GlobalAddress(node, offset)) << e.page().to_string();
        EXPECT_EQ(e.line(), line);
      }
    }
  }
  SpeculativeEntry empty;
  EXPECT_FALSE(empty.holds(0)) << "an empty entry holds no key, not even one whose tag is 0";
  SpeculativeEntry other_region;
  EXPECT_FALSE(other_region.store(MixKey(5), GlobalAddress(0, kPageSize, kMainMemoryRegion + 1), 1));
}

TEST(BTreePage, HeaderRoundTripsAndFencesHold) {
  PageImage p;
  PageHeader h = Header(100, 200, false, 2);
  h.sibling = GlobalAddress(1, 4096);
  h.leftmost = GlobalAddress(0, 8192);
  BuildInternal(p.data(), h, nullptr, 0);
  ASSERT_TRUE(PageConsistent(p.data()));
  const PageHeader d = DecodeHeader(p.data());
  EXPECT_EQ(d.min, 100u);
  EXPECT_EQ(d.max, 200u);
  EXPECT_FALSE(d.unbounded);
  EXPECT_EQ(d.level, 2);
  EXPECT_EQ(d.version, 7u);
  EXPECT_EQ(d.sibling, GlobalAddress(1, 4096));
  EXPECT_EQ(d.leftmost, GlobalAddress(0, 8192));
  EXPECT_FALSE(d.covers(99));
  EXPECT_TRUE(d.covers(100));
  EXPECT_TRUE(d.covers(199));
  EXPECT_FALSE(d.covers(200));
  EXPECT_TRUE(d.right_of(200));
  EXPECT_FALSE(d.right_of(150));
  // The last page of a level holds every key up to UINT64_MAX.
  const PageHeader last = Header(5, 0, true);
  EXPECT_TRUE(last.covers(UINT64_MAX));
  EXPECT_FALSE(last.right_of(UINT64_MAX));
  EXPECT_FALSE(last.covers(4));
}

TEST(BTreePage, EveryTornLineIsDetected) {
  PageImage p;
  LeafEntry entries[3] = {InlineEntry(1, "a"), InlineEntry(2, "bb"), InlineEntry(3, "ccc")};
  BuildLeaf(p.data(), Header(0, 0, true), entries, 3);
  ASSERT_TRUE(PageConsistent(p.data()));
  EXPECT_TRUE(LineVersion(p.data()) & kLeafVersionFlag);
  for (size_t byte = 0; byte < kPageSize; byte += 7) {
    PageImage torn = p;
    torn.bytes[byte] ^= 0x10;
    EXPECT_FALSE(PageConsistent(torn.data())) << "byte " << byte;
  }
  // A line from a different version of the page (sealed, but with the
  // version of a later write) is a torn page too.
  PageImage mixed = p;
  SealLine(mixed.data(), 5, TaggedVersion(8, true));
  EXPECT_TRUE(LineIntact(mixed.data() + 5 * kLineSize));
  EXPECT_FALSE(PageConsistent(mixed.data()));
  // Zeroed memory is not a page.
  PageImage zero{};
  EXPECT_FALSE(PageConsistent(zero.data()));
}

TEST(BTreePage, LineCrcIsTheFrameworksCrc32c) {
  PageImage p;
  for (size_t i = 0; i < kPageSize; ++i) p.bytes[i] = static_cast<char>(i * 131 + 7);
  SealPage(p.data(), TaggedVersion(3, false));
  for (int line = 0; line < kLinesPerPage; ++line) {
    const char* l = p.data() + kLineSize * static_cast<size_t>(line);
    uint32_t stored;
    memcpy(&stored, l, 4);
    EXPECT_EQ(stored, Crc32c(l + 4, kLineSize - 4)) << line;
  }
}

TEST(BTreePage, LeafEntriesAreFoundFreedAndReused) {
  PageImage p;
  BuildLeaf(p.data(), Header(0, 0, true), nullptr, 0);
  EXPECT_EQ(FindLeafKey(p.data(), 0), -1);  // key 0 is a key, not "empty"
  EXPECT_EQ(FreeLeafEntry(p.data()), 0);
  WriteLeafEntry(p.data(), 0, InlineEntry(0, "zero"));
  WriteLeafEntry(p.data(), 1, InlineEntry(UINT64_MAX, "12345678"));
  SealPage(p.data(), TaggedVersion(1, true));
  ASSERT_TRUE(PageConsistent(p.data()));
  EXPECT_EQ(FindLeafKey(p.data(), 0), 0);
  EXPECT_EQ(FindLeafKey(p.data(), UINT64_MAX), 1);
  const LeafEntry e = ReadLeafEntry(p.data(), 1);
  EXPECT_FALSE(e.in_block());
  EXPECT_EQ(InlineValue(e, &e.value), "12345678");
  EXPECT_EQ(FreeLeafEntry(p.data()), 2);
  // Deleting clears the entry; its place is the next free one.
  WriteLeafEntry(p.data(), 0, LeafEntry{});
  EXPECT_EQ(FindLeafKey(p.data(), 0), -1);
  EXPECT_EQ(FreeLeafEntry(p.data()), 0);
  const LeafEntry b = BlockEntry(9, GlobalAddress(1, 64 * 1000), 3, 5);
  EXPECT_TRUE(b.in_block());
  EXPECT_EQ(b.block_units(), 3u);
  EXPECT_EQ(b.block_tag(), 5);
  EXPECT_EQ(GlobalAddress(b.value), GlobalAddress(1, 64 * 1000));
}

TEST(BTreePage, AnInlineLengthAboveEightBytesNeverReadsPastTheValue) {
  // The 4-bit length field can say up to 15; the value word holds 8.
  LeafEntry e = InlineEntry(5, "abcdefgh");
  for (uint16_t length = 0; length <= 0xf; ++length) {
    e.meta = static_cast<uint16_t>(kMetaValid | length);
    EXPECT_EQ(e.inline_length(), std::min<size_t>(length, kInlineValueBytes)) << length;
    EXPECT_EQ(InlineValue(e, &e.value), std::string("abcdefgh").substr(0, std::min<size_t>(length, 8))) << length;
  }
}

TEST(BTreePage, LeafSplitKeepsEveryKeyOnceInOrderAndLinksTheSibling) {
  PageImage p, right;
  PageHeader h = Header(1000, 0, true);
  h.sibling = GlobalAddress();
  std::vector<LeafEntry> entries;
  for (int i = 0; i < kPageEntries; ++i) entries.push_back(InlineEntry(1000 + 37 * ((i * 11) % kPageEntries), "v"));
  BuildLeaf(p.data(), h, entries.data(), kPageEntries);
  EXPECT_EQ(FreeLeafEntry(p.data()), -1);
  const GlobalAddress right_addr(1, 1 << 20);
  const uint64_t split = SplitLeaf(p.data(), InlineEntry(1001, "new"), right_addr, right.data());
  ASSERT_TRUE(PageConsistent(p.data()));
  ASSERT_TRUE(PageConsistent(right.data()));
  const PageHeader l = DecodeHeader(p.data()), r = DecodeHeader(right.data());
  EXPECT_EQ(l.min, 1000u);
  EXPECT_FALSE(l.unbounded);
  EXPECT_EQ(l.max, split);
  EXPECT_EQ(l.sibling, right_addr);
  EXPECT_EQ(l.version, 8u);
  EXPECT_EQ(r.min, split);
  EXPECT_TRUE(r.unbounded);
  EXPECT_TRUE(r.sibling.is_null());
  LeafEntry out[kPageEntries];
  std::set<uint64_t> keys;
  const int nl = CollectLeafEntries(p.data(), out);
  for (int i = 0; i < nl; ++i) {
    EXPECT_TRUE(l.covers(out[i].key));
    EXPECT_TRUE(keys.insert(out[i].key).second);
  }
  const int nr = CollectLeafEntries(right.data(), out);
  for (int i = 0; i < nr; ++i) {
    EXPECT_TRUE(r.covers(out[i].key));
    EXPECT_TRUE(keys.insert(out[i].key).second);
  }
  EXPECT_EQ(nl, 23);
  EXPECT_EQ(nr, 23);
  EXPECT_EQ(keys.size(), static_cast<size_t>(kPageEntries + 1));
  EXPECT_TRUE(keys.count(1001));
}

TEST(BTreePage, InternalPagesInsertInOrderAndSplit) {
  PageImage p, right;
  PageHeader h = Header(0, 0, true, 1);
  h.leftmost = GlobalAddress(0, 0);
  BuildInternal(p.data(), h, nullptr, 0);
  // Keys 10, 20, ..., inserted out of order; child of key k is offset k*1024.
  std::vector<uint64_t> keys;
  for (int i = 1; i <= kPageEntries; ++i) keys.push_back(10 * static_cast<uint64_t>((i * 17) % kPageEntries + 1));
  for (uint64_t k : keys) ASSERT_TRUE(InsertInternal(p.data(), k, GlobalAddress(0, k * 1024)));
  // Inserting a present key replaces its child (a repeated separator insert).
  ASSERT_TRUE(InsertInternal(p.data(), 200, GlobalAddress(0, 200 * 1024)));
  SealPage(p.data(), TaggedVersion(2, false));
  ASSERT_TRUE(PageConsistent(p.data()));
  PageHeader d = DecodeHeader(p.data());
  ASSERT_EQ(d.count, kPageEntries);
  for (int i = 1; i < d.count; ++i) EXPECT_LT(ReadInternalEntry(p.data(), i - 1).key, ReadInternalEntry(p.data(), i).key);
  EXPECT_EQ(InternalChild(p.data(), d, 5), GlobalAddress(0, 0));
  EXPECT_EQ(InternalChild(p.data(), d, 10), GlobalAddress(0, 10 * 1024));
  EXPECT_EQ(InternalChild(p.data(), d, 19), GlobalAddress(0, 10 * 1024));
  EXPECT_EQ(InternalChild(p.data(), d, UINT64_MAX), GlobalAddress(0, 450 * 1024));
  EXPECT_FALSE(InsertInternal(p.data(), 455, GlobalAddress(0, 455 * 1024)));  // full

  const GlobalAddress right_addr(0, 1 << 22);
  const uint64_t up = SplitInternal(p.data(), 455, GlobalAddress(0, 455 * 1024), right_addr, right.data());
  ASSERT_TRUE(PageConsistent(p.data()));
  ASSERT_TRUE(PageConsistent(right.data()));
  const PageHeader l = DecodeHeader(p.data()), r = DecodeHeader(right.data());
  EXPECT_EQ(l.max, up);
  EXPECT_EQ(r.min, up);
  EXPECT_EQ(l.sibling, right_addr);
  EXPECT_EQ(l.count + r.count + 1, kPageEntries + 1);
  // The key that went up is in neither page; its child is the right leftmost.
  EXPECT_EQ(r.leftmost, GlobalAddress(0, up * 1024));
  // Every key still leads to its child, from the page that covers it.
  for (uint64_t k = 10; k <= 455; k += 5) {
    const char* page = l.covers(k) ? p.data() : right.data();
    const PageHeader& ph = l.covers(k) ? l : r;
    const uint64_t expect = k < 450 ? (k / 10) * 10 : (k >= 455 ? 455 : 450);
    EXPECT_EQ(InternalChild(page, ph, k), GlobalAddress(0, expect * 1024)) << k;
  }
}

TEST(BTreePage, ValueBlocksDetectTearsAndReuse) {
  alignas(64) char block[kBlockUnit * 4];
  const std::string value(150, 'q');
  const uint32_t units = BlockUnitsFor(value.size());
  ASSERT_EQ(units, 3u);
  EncodeBlock(42, value, 3, units, block);
  std::string_view out;
  ASSERT_TRUE(DecodeBlock(block, units, 42, 3, &out));
  EXPECT_EQ(out, value);
  EXPECT_FALSE(DecodeBlock(block, units, 43, 3, &out));  // another key's block
  EXPECT_FALSE(DecodeBlock(block, units, 42, 4, &out));  // reused since
  block[100] ^= 1;
  EXPECT_FALSE(DecodeBlock(block, units, 42, 3, &out));  // torn
}

// Level-1 pages [0,100) [100,200) ... [100 (n-1), inf), each with children
// at offset (key / 10) * 1024 for separators 10, 20, ...
std::vector<PageImage> LevelOnePages(int n) {
  std::vector<PageImage> pages(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    PageHeader h = Header(100 * static_cast<uint64_t>(i), 100 * static_cast<uint64_t>(i + 1), i == n - 1, 1);
    h.leftmost = GlobalAddress(0, static_cast<uint64_t>(i) * 10 * 1024);
    std::vector<InternalEntry> entries;
    for (uint64_t k = 100 * static_cast<uint64_t>(i) + 10; k < 100 * static_cast<uint64_t>(i + 1); k += 10) {
      entries.push_back(InternalEntry{k, GlobalAddress(0, (k / 10) * 1024)});
    }
    BuildInternal(pages[static_cast<size_t>(i)].data(), h, entries.data(), static_cast<int>(entries.size()));
  }
  return pages;
}

TEST(BTreeIndexCache, EvictsTheLeastRecentlyUsedAndInvalidates) {
  std::vector<PageImage> pages = LevelOnePages(3);
  std::atomic<size_t> used{0};
  IndexCache cache(2, &used, 1000);
  GlobalAddress leaf;
  uint64_t min = 0;
  EXPECT_FALSE(cache.lookup(5, &leaf, &min));
  cache.insert(pages[0].data());
  cache.insert(pages[1].data());
  ASSERT_TRUE(cache.lookup(155, &leaf, &min));
  EXPECT_EQ(leaf, GlobalAddress(0, 15 * 1024));
  EXPECT_EQ(min, 100u);
  ASSERT_TRUE(cache.lookup(5, &leaf, &min));  // page 0 is now the most recent
  EXPECT_EQ(leaf, GlobalAddress(0, 0));
  cache.insert(pages[2].data());  // evicts page 1
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.lookup(155, &leaf, &min));
  ASSERT_TRUE(cache.lookup(UINT64_MAX, &leaf, &min));
  EXPECT_EQ(leaf, GlobalAddress(0, 29 * 1024));
  ASSERT_TRUE(cache.lookup(99, &leaf, &min));
  EXPECT_EQ(leaf, GlobalAddress(0, 9 * 1024));
  cache.invalidate(0);
  EXPECT_FALSE(cache.lookup(99, &leaf, &min));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(used.load(), 1u);
  IndexCache off(0, &used, 1000);
  off.insert(pages[0].data());
  EXPECT_FALSE(off.lookup(5, &leaf, &min));
  EXPECT_EQ(used.load(), 1u);
}

// Thousands of pages span several of the cache's 2 MiB chunks of slots;
// every page still gives its own children, and the slots of invalidated
// and evicted pages are taken again without mixing up two pages.
TEST(BTreeIndexCache, ManyPagesAcrossChunksKeepTheirOwnChildren) {
  constexpr int kPages = 5000;
  std::vector<PageImage> pages = LevelOnePages(kPages);
  std::atomic<size_t> used{0};
  IndexCache cache(4000, &used, 100000);
  for (int i = 0; i < kPages; ++i) cache.insert(pages[static_cast<size_t>(i)].data());
  EXPECT_EQ(cache.size(), 4000u);
  EXPECT_EQ(used.load(), 4000u);
  GlobalAddress leaf;
  uint64_t min = 0;
  // The first 1000 went (least recently used); the rest answer for themselves.
  EXPECT_FALSE(cache.lookup(100 * 999 + 55, &leaf, &min));
  for (uint64_t i = 1000; i < kPages; i += 7) {
    ASSERT_TRUE(cache.lookup(100 * i + 55, &leaf, &min)) << "page " << i;
    EXPECT_EQ(leaf, GlobalAddress(0, (10 * i + 5) * 1024)) << "page " << i;
    EXPECT_EQ(min, 100 * i);
  }
  for (uint64_t i = 1000; i < 3000; ++i) cache.invalidate(100 * i);
  EXPECT_EQ(cache.size(), 2000u);
  for (int i = 0; i < 1000; ++i) cache.insert(pages[static_cast<size_t>(i)].data());
  EXPECT_EQ(cache.size(), 3000u);
  for (uint64_t i = 0; i < kPages; i += 3) {
    const bool cached = i < 1000 || i >= 3000;
    ASSERT_EQ(cache.lookup(100 * i + 5, &leaf, &min), cached) << "page " << i;
    if (cached) EXPECT_EQ(leaf, GlobalAddress(0, (10 * i) * 1024)) << "page " << i;
  }
  EXPECT_EQ(used.load(), 3000u);
}

// A page that went from the cache's sorted part and is cached again is
// found again, and its neighbours are not disturbed.
TEST(BTreeIndexCache, APageCachedAgainIsFoundAgain) {
  std::vector<PageImage> pages = LevelOnePages(200);
  std::atomic<size_t> used{0};
  IndexCache cache(1000, &used, 100000);
  for (PageImage& p : pages) cache.insert(p.data());
  GlobalAddress leaf;
  uint64_t min = 0;
  cache.invalidate(1000);  // page 10
  EXPECT_FALSE(cache.lookup(1055, &leaf, &min));
  EXPECT_EQ(cache.size(), 199u);
  cache.insert(pages[10].data());
  ASSERT_TRUE(cache.lookup(1055, &leaf, &min));
  EXPECT_EQ(leaf, GlobalAddress(0, 105 * 1024));
  EXPECT_EQ(min, 1000u);
  ASSERT_TRUE(cache.lookup(955, &leaf, &min));
  EXPECT_EQ(leaf, GlobalAddress(0, 95 * 1024));
  EXPECT_EQ(cache.size(), 200u);
  EXPECT_EQ(used.load(), 200u);
}

// The threads' caches share one budget: a cache at the budget makes room
// by evicting its own pages, one with none caches nothing until another
// gives pages back, and a cache that goes gives back all it held.
TEST(BTreeIndexCache, ThreadsCachesShareOneBudget) {
  std::vector<PageImage> pages = LevelOnePages(5);
  std::atomic<size_t> used{0};
  GlobalAddress leaf;
  uint64_t min = 0;
  IndexCache a(100, &used, 3);
  {
    IndexCache b(100, &used, 3);
    for (int i = 0; i < 3; ++i) a.insert(pages[static_cast<size_t>(i)].data());
    EXPECT_EQ(used.load(), 3u);
    b.insert(pages[3].data());
    EXPECT_EQ(b.size(), 0u) << "a cache with no pages took one past the budget";
    EXPECT_FALSE(b.lookup(350, &leaf, &min));
    a.insert(pages[3].data());  // evicts a's least recently used, page 0
    EXPECT_EQ(a.size(), 3u);
    EXPECT_EQ(used.load(), 3u);
    EXPECT_FALSE(a.lookup(50, &leaf, &min));
    ASSERT_TRUE(a.lookup(350, &leaf, &min));
    a.invalidate(100);
    EXPECT_EQ(used.load(), 2u);
    b.insert(pages[4].data());
    EXPECT_EQ(b.size(), 1u);
    EXPECT_EQ(used.load(), 3u);
  }
  EXPECT_EQ(used.load(), 2u) << "a cache that went kept its pages counted";
  a.insert(pages[0].data());
  EXPECT_EQ(a.size(), 3u);
}

}  // namespace
}  // namespace smart::btree
