// SMART-BT when the remote bytes make no sense: random bytes in a leaf,
// sibling links that form a cycle, and sealed pages (every line's CRC
// right) whose fields are random, through every parser of page and block
// images. Each ends in an error or a bounded answer, never a loop or a
// read or write past the image.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>
#include <chrono>
#include <thread>

#include "btree.h"
#include "guarded_page.h"
#include "page.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "blade_fixture.h"
#include "test_util.h"

namespace smart::btree {
namespace {

class BTreeFailureTest : public smart::testing::BladeTest {
 protected:
  void SetUp() override {
    BladeTest::SetUp();
    options_.retry_timeout_ns = 200000000;  // 0.2 s: the errors below come quickly
    tree_ = std::make_unique<BTree>(*initiator_, config_, 1, options_);
  }

  // The leaf holding `key`, read into `page`.
  GlobalAddress ReadLeaf(uint64_t key, char* page) {
    GlobalAddress leaf;
    Status s = tree_->leaf_of(key, &leaf);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(initiator_->read(page, leaf, kPageSize, Option::kSync).ok());
    return leaf;
  }

  TreeOptions options_;
  std::unique_ptr<BTree> tree_;
};

TEST_F(BTreeFailureTest, RandomBytesInALeafEndInAnErrorNotALoop) {
  for (uint64_t k = 0; k < 30; ++k) ASSERT_TRUE(tree_->insert(k, "v").ok());
  auto* page = static_cast<char*>(initiator_->alloc_cache(kPageSize));
  const GlobalAddress leaf = ReadLeaf(7, page);
  std::mt19937_64 random(42);
  for (size_t i = 0; i < kPageSize; i += 8) Store64(page + i, random());
  ASSERT_TRUE(initiator_->write(page, leaf, kPageSize, Option::kSync).ok());

  std::string value;
  Status s = tree_->search(7, &value);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("failing its check"), std::string::npos) << s.ToString();
  s = tree_->insert(7, "again");
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  std::vector<std::pair<uint64_t, std::string>> out;
  s = tree_->scan(0, 10, &out);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
}

TEST_F(BTreeFailureTest, SiblingLinksInACycleEndInAnErrorNotALoop) {
  for (uint64_t k = 0; k < 10; ++k) ASSERT_TRUE(tree_->insert(k, "v").ok());
  auto* page = static_cast<char*>(initiator_->alloc_cache(kPageSize));
  const GlobalAddress leaf = ReadLeaf(5, page);
  // A whole, checked leaf whose upper fence is 100 and whose sibling is
  // itself: keys from 100 up are always "further right".
  PageHeader h = DecodeHeader(page);
  h.unbounded = false;
  h.max = 100;
  h.sibling = leaf;
  EncodeHeader(h, page);
  SealPage(page, TaggedVersion(h.version, true));
  ASSERT_TRUE(PageConsistent(page));
  ASSERT_TRUE(initiator_->write(page, leaf, kPageSize, Option::kSync).ok());

  std::string value;
  ASSERT_TRUE(tree_->search(5, &value).ok());  // inside the fences: still found
  EXPECT_EQ(value, "v");
  Status s = tree_->search(200, &value);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("sibling links"), std::string::npos) << s.ToString();
  s = tree_->insert(200, "x");
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  std::vector<std::pair<uint64_t, std::string>> out;
  s = tree_->scan(0, 20, &out);
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.ToString().find("sibling links"), std::string::npos) << s.ToString();
}

// A page image with 1 KiB of guard bytes behind it: a parser that writes
// past the page changes them.
// A process stopped (SIGSTOP, a debugger) or descheduled in the middle of
// an operation's retries looks at the tree again when it runs: that time
// does not count against retry_timeout_ns.
TEST_F(BTreeFailureTest, TimeTheProcessDidNotRunDoesNotCountAgainstTheRetryBound) {
  options_.retry_timeout_ns = 1000000000;  // 1 s
  tree_ = std::make_unique<BTree>(*initiator_, config_, 1, options_);
  for (uint64_t k = 0; k < 30; ++k) ASSERT_TRUE(tree_->insert(k, "v" + std::to_string(k)).ok());
  auto* page = static_cast<char*>(initiator_->alloc_cache(2 * kPageSize));
  char* image = page + kPageSize;
  const GlobalAddress leaf = ReadLeaf(7, image);
  // The leaf fails its check until another client writes it back.
  memcpy(page, image, kPageSize);
  for (size_t i = 0; i < kPageSize; i += 64) page[i + 8] ^= 0x5a;
  ASSERT_TRUE(initiator_->write(page, leaf, kPageSize, Option::kSync).ok());
  // The search's tenth slow retry sleeps twice the retry bound, as a
  // stopped process would; meanwhile the leaf is written back.
  InstallFaultRules(ParseFaultRules("delay=2000ms@point:bt.retry#10"));
  std::thread repair([&] {
    Initiator other(config_);
    other.connect(0, blade_->host(), blade_->port(), 1);
    auto* buffer = static_cast<char*>(other.alloc_cache(kPageSize));
    memcpy(buffer, image, kPageSize);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(other.write(buffer, leaf, kPageSize, Option::kSync).ok());
    other.release_thread();
  });
  std::string value;
  const Status s = tree_->search(7, &value);
  repair.join();
  InstallFaultRules({});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, "v7");
}

TEST(BTreePageRandom, SealedPagesOfRandomFieldsStayInsideTheImage) {
  std::mt19937_64 random(2024);
  GuardedPage p, right;
  int consistent = 0, internal_full = 0;
  for (int round = 0; round < 20000; ++round) {
    for (size_t i = 0; i < kPageSize; i += 8) Store64(p.page + i, random());
    p.Arm();
    right.Arm();
    // A count and level around the largest a page can have, a page magic,
    // and every line sealed: only the fields are wrong.
    const uint16_t count = static_cast<uint16_t>(random() % 60);
    const uint8_t level = static_cast<uint8_t>(random() % 18);
    Store16(p.page + kCountOffset, count);
    p.page[kLevelOffset] = static_cast<char>(level);
    memcpy(p.page + kMagicOffset, &kPageMagic, 4);
    SealPage(p.page, static_cast<uint32_t>(random()));
    const bool page_like = count <= kPageEntries && level <= kMaxLevel;
    ASSERT_EQ(PageConsistent(p.page), page_like) << "count " << count << ", level " << int{level};
    if (!page_like) continue;
    ++consistent;

    const PageHeader h = DecodeHeader(p.page);
    const uint64_t key = random();
    const int found = FindLeafKey(p.page, key);
    ASSERT_TRUE(found >= -1 && found < kPageEntries);
    const int free_entry = FreeLeafEntry(p.page);
    ASSERT_TRUE(free_entry >= -1 && free_entry < kPageEntries);
    LeafEntry entries[kPageEntries];
    const int n = CollectLeafEntries(p.page, entries);
    ASSERT_TRUE(n >= 0 && n <= kPageEntries);
    for (int i = 0; i < n; ++i) ASSERT_LE(entries[i].inline_length(), kInlineValueBytes);

    // The child a descent takes is the leftmost or one of the page's own.
    std::set<uint64_t> children{h.leftmost.raw};
    for (int i = 0; i < h.count; ++i) children.insert(ReadInternalEntry(p.page, i).child.raw);
    ASSERT_EQ(children.count(InternalChild(p.page, h, key).raw), 1u);
    const int at = FindInternalKey(p.page, h, key);
    ASSERT_TRUE(at >= -1 && at < h.count);

    if (!InsertInternal(p.page, key, GlobalAddress(0, 1024))) {
      ++internal_full;
      SplitInternal(p.page, key, GlobalAddress(0, 1024), GlobalAddress(0, 2048), right.page);
      ASSERT_TRUE(PageConsistent(right.page));
      ASSERT_TRUE(right.GuardIntact());
    }
    ASSERT_TRUE(p.GuardIntact()) << "round " << round;
  }
  EXPECT_GT(consistent, 10000);
  EXPECT_GT(internal_full, 0);  // the split of a full page ran too
}

TEST(BTreePageRandom, BlocksOfNoUnitsOrTooManyAreRejected) {
  alignas(64) char block[kBlockUnit * (kMaxBlockUnits + 1)] = {};
  EncodeBlock(9, "", 2, 1, block);  // an empty value fits in one unit
  std::string_view out;
  ASSERT_TRUE(DecodeBlock(block, 1, 9, 2, &out));
  // Unit counts come from a leaf entry's 6 bits; 0 or more than a block
  // can have are not a block, whatever the bytes say.
  EXPECT_FALSE(DecodeBlock(block, 0, 9, 2, &out));
  EXPECT_FALSE(DecodeBlock(block, kMaxBlockUnits + 1, 9, 2, &out));
  // Random headers claim random lengths: never beyond the units read.
  std::mt19937_64 random(11);
  for (int round = 0; round < 20000; ++round) {
    for (size_t i = 0; i < sizeof(block); i += 8) Store64(block + i, random());
    const uint32_t units = static_cast<uint32_t>(random() % (kMaxBlockUnits + 1));
    uint64_t key;
    memcpy(&key, block + 8, 8);
    const uint8_t tag = static_cast<uint8_t>(block[4]);
    if (DecodeBlock(block, units, key, tag, &out)) {
      ASSERT_GE(units, 1u);
      ASSERT_LE(out.size() + kBlockHeaderBytes, units * kBlockUnit);
    }
  }
}

}  // namespace
}  // namespace smart::btree
