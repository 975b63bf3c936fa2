// The framework's block pool: size classes, retire with a grace period and
// a tag bump (a longer wait when the tag wraps), release for reuse at once,
// and a memory bound under updates.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/block_pool.h"
#include "smart/initiator.h"
#include "test_util.h"

namespace smart {
namespace {

class BlockPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 16);
    initiator_ = std::make_unique<Initiator>(config_);
    initiator_->connect(0, blade_->host(), blade_->port(), 2);
  }
  BlockPoolOptions Options(uint64_t grace_ns) {
    BlockPoolOptions o;
    o.grace_ns = grace_ns;
    return o;
  }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
};

TEST_F(BlockPoolTest, BadOptionsAreRefusedWithAMessage) {
  auto refused = [&](BlockPoolOptions o, const char* word) {
    try {
      BlockPool pool(*initiator_, o);
      ADD_FAILURE() << "accepted options mentioning " << word;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  BlockPoolOptions o;
  o.unit = 48;
  refused(o, "unit");
  o = BlockPoolOptions{};
  o.max_units = 0;
  refused(o, "max_units");
  o = BlockPoolOptions{};
  o.tag_bits = 9;
  refused(o, "tag_bits");
  o = BlockPoolOptions{};
  o.arena_bytes = 1000;
  refused(o, "arena_bytes");
}

TEST_F(BlockPoolTest, BlocksDoNotOverlapAndSizesAreChecked) {
  BlockPool pool(*initiator_, Options(1000000));
  std::set<uint64_t> starts;
  uint64_t end_of_last = 0;
  for (int units = 1; units <= 63; ++units) {
    Block b;
    ASSERT_TRUE(pool.allocate(0, static_cast<size_t>(units), &b).ok());
    EXPECT_EQ(b.units, static_cast<uint32_t>(units));
    EXPECT_EQ(b.tag, 0);
    EXPECT_EQ(b.address.offset % 64, 0u);
    EXPECT_TRUE(starts.insert(b.address.offset).second);
    if (end_of_last != 0 && b.address.offset > end_of_last - 64 * 63) EXPECT_GE(b.address.offset, end_of_last);
    end_of_last = b.address.offset + 64u * static_cast<uint64_t>(units);
  }
  Block b;
  EXPECT_EQ(pool.allocate(0, 0, &b).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(pool.allocate(0, 64, &b).code(), Status::Code::kInvalidArgument);
}

TEST_F(BlockPoolTest, RetiredBlocksWaitOutTheGracePeriodAndComeBackWithANewTag) {
  BlockPool pool(*initiator_, Options(1000000000));  // 1 s
  Block a;
  ASSERT_TRUE(pool.allocate(0, 2, &a).ok());
  pool.retire(a);
  Block b;
  ASSERT_TRUE(pool.allocate(0, 2, &b).ok());
  EXPECT_NE(b.address.offset, a.address.offset) << "reused before the grace period";
  EXPECT_EQ(pool.retired_pending(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Block c;
  ASSERT_TRUE(pool.allocate(0, 2, &c).ok());
  EXPECT_EQ(c.address.offset, a.address.offset);
  EXPECT_EQ(c.tag, (a.tag + 1) & 0xf);
  EXPECT_EQ(pool.stats().blocks_reused, 1u);
  EXPECT_EQ(pool.retired_pending(), 0u);
}

TEST_F(BlockPoolTest, TheTagWrapsWithinItsBits) {
  BlockPoolOptions o = Options(0);
  o.tag_bits = 2;
  BlockPool pool(*initiator_, o);
  Block b;
  ASSERT_TRUE(pool.allocate(0, 1, &b).ok());
  const uint64_t where = b.address.offset;
  for (int i = 1; i <= 5; ++i) {
    pool.retire(b);
    ASSERT_TRUE(pool.allocate(0, 1, &b).ok());
    ASSERT_EQ(b.address.offset, where);
    EXPECT_EQ(b.tag, i % 4);
  }
}

// A block's (address, tag) pair must not come back within the wrap guard of
// when it was last current: the retire that wraps the tag to 0 waits the
// guard, the others only the grace period.
TEST_F(BlockPoolTest, TheRetireThatWrapsTheTagWaitsTheWrapGuard) {
  BlockPoolOptions o = Options(0);
  o.tag_bits = 2;
  o.wrap_guard_ns = 1000000000;  // 1 s
  BlockPool pool(*initiator_, o);
  Block b;
  ASSERT_TRUE(pool.allocate(0, 1, &b).ok());
  const uint64_t where = b.address.offset;
  for (int i = 1; i <= 3; ++i) {
    pool.retire(b);
    ASSERT_TRUE(pool.allocate(0, 1, &b).ok());
    ASSERT_EQ(b.address.offset, where) << "a retire that does not wrap the tag waited more than the grace period";
    ASSERT_EQ(b.tag, i);
  }
  pool.retire(b);  // tag 3 -> 0
  Block other;
  ASSERT_TRUE(pool.allocate(0, 1, &other).ok());
  EXPECT_NE(other.address.offset, where) << "the block came back with its first tag before the wrap guard";
  EXPECT_EQ(pool.retired_pending(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Block again;
  ASSERT_TRUE(pool.allocate(0, 1, &again).ok());
  EXPECT_EQ(again.address.offset, where);
  EXPECT_EQ(again.tag, 0);
  EXPECT_EQ(pool.retired_pending(), 0u);
}

TEST_F(BlockPoolTest, ReleasedBlocksAreReusedAtOnceWithTheSameTag) {
  BlockPool pool(*initiator_, Options(1000000000));
  Block a;
  ASSERT_TRUE(pool.allocate(0, 3, &a).ok());
  pool.release(a);
  Block b;
  ASSERT_TRUE(pool.allocate(0, 3, &b).ok());
  EXPECT_EQ(b.address.offset, a.address.offset);
  EXPECT_EQ(b.tag, a.tag);
  EXPECT_EQ(pool.stats().blocks_released, 1u);
}

TEST_F(BlockPoolTest, AnUpdateOnlyRunStaysWithinAFixedBound) {
  BlockPool pool(*initiator_, Options(0));
  // 64 live blocks, each replaced 2000 times: without reuse 128000 blocks.
  std::vector<Block> live(64);
  for (auto& b : live) ASSERT_TRUE(pool.allocate(0, 1, &b).ok());
  uint64_t after_first_round = 0;
  for (int round = 0; round < 2000; ++round) {
    for (auto& b : live) {
      Block fresh;
      ASSERT_TRUE(pool.allocate(0, 1, &fresh).ok());
      pool.retire(b);
      b = fresh;
    }
    if (round == 0) after_first_round = pool.stats().bytes_allocated;
  }
  EXPECT_EQ(pool.stats().bytes_allocated, after_first_round) << "the pool kept taking memory";
  EXPECT_GT(pool.stats().blocks_reused, 100000u);
}

TEST_F(BlockPoolTest, BlocksBeyondTheOffsetLimitAreRefusedNamingIt) {
  BlockPoolOptions o = Options(0);
  o.offset_limit = 1;  // nothing is addressable
  BlockPool pool(*initiator_, o);
  Block b;
  const Status s = pool.allocate(0, 1, &b);
  EXPECT_EQ(s.code(), Status::Code::kOutOfMemory);
  EXPECT_NE(s.ToString().find("beyond"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace smart
