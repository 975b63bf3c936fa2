#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/named_root.h"
#include "smart/target.h"
#include "test_util.h"

namespace smart {
namespace {

class NamedRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 4);
  }
  std::unique_ptr<Initiator> Client() {
    auto in = std::make_unique<Initiator>(config_);
    in->connect(0, blade_->host(), blade_->port(), 2);
    return in;
  }
  static LeaseOptions Lease(uint64_t ms) {
    LeaseOptions o;
    o.lease_ns = ms * 1000000;
    o.session_check_ns = 1000000;
    return o;
  }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
};

TEST_F(NamedRootTest, FirstOpenBuildsOthersAttachToThePublishedValue) {
  auto a = Client(), b = Client();
  NamedRoots ra(*a), rb(*b);
  RootClaim claim;
  ASSERT_TRUE(ra.open(0, "hashtable", &claim).ok());
  ASSERT_TRUE(claim.must_build());
  EXPECT_FALSE(claim.took_over());

  std::atomic<bool> attached{false};
  uint64_t seen = 0;
  Status seen_status;
  std::thread other([&] {
    RootClaim c;
    seen_status = rb.open(0, "hashtable", &c);
    seen = c.must_build() ? ~uint64_t{0} : c.value();
    attached = true;
    b->release_thread();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(attached.load());  // waits for the builder
  uint64_t early = 0;
  EXPECT_EQ(ra.lookup(0, "hashtable", &early).code(), Status::Code::kNotFound) << "found before its publish: " << early;
  ASSERT_TRUE(claim.renew_if_due().ok());
  ASSERT_TRUE(claim.publish(0x123456).ok());
  other.join();
  ASSERT_TRUE(seen_status.ok()) << seen_status.ToString();
  EXPECT_EQ(seen, 0x123456u);
  uint64_t value = 0;
  ASSERT_TRUE(ra.lookup(0, "hashtable", &value).ok());
  EXPECT_EQ(value, 0x123456u);
}

TEST_F(NamedRootTest, TwoApplicationsShareOneBlade) {
  auto a = Client();
  NamedRoots roots(*a);
  RootClaim ht, bt;
  ASSERT_TRUE(roots.open(0, "hashtable", &ht).ok());
  ASSERT_TRUE(roots.open(0, "btree", &bt).ok());
  ASSERT_TRUE(ht.must_build());
  ASSERT_TRUE(bt.must_build());  // independent of the other name's claim
  ASSERT_TRUE(bt.publish(222).ok());
  ASSERT_TRUE(ht.publish(111).ok());
  std::vector<NamedRootInfo> list;
  ASSERT_TRUE(roots.list(0, &list).ok());
  ASSERT_EQ(list.size(), 2u);
  for (const NamedRootInfo& info : list) {
    EXPECT_TRUE(info.published);
    EXPECT_EQ(info.value, info.name == "hashtable" ? 111u : 222u) << info.name;
  }
  RootClaim again;
  ASSERT_TRUE(roots.open(0, "btree", &again).ok());
  EXPECT_FALSE(again.must_build());
  EXPECT_EQ(again.value(), 222u);
}

TEST_F(NamedRootTest, DeadBuildersClaimIsTakenOver) {
  auto a = Client(), b = Client();
  LeaseOptions long_lease = Lease(3600 * 1000);
  {
    NamedRoots ra(*a, long_lease);
    RootClaim claim;
    ASSERT_TRUE(ra.open(0, "dtx/smallbank", &claim).ok());
    ASSERT_TRUE(claim.must_build());
  }
  a.reset();  // the builder dies half-way: its session closes
  NamedRoots rb(*b, long_lease);
  RootClaim claim;
  ASSERT_TRUE(rb.open(0, "dtx/smallbank", &claim).ok());
  ASSERT_TRUE(claim.must_build());
  EXPECT_TRUE(claim.took_over());
  ASSERT_TRUE(claim.publish(7).ok());
}

TEST_F(NamedRootTest, PausedBuilderCannotPublishAfterATakeOver) {
  auto a = Client(), b = Client();
  NamedRoots ra(*a, Lease(30)), rb(*b, Lease(30));
  RootClaim slow;
  ASSERT_TRUE(ra.open(0, "btree", &slow).ok());
  ASSERT_TRUE(slow.must_build());
  RootClaim fresh;
  ASSERT_TRUE(rb.open(0, "btree", &fresh).ok());  // waits out the lease
  ASSERT_TRUE(fresh.must_build());
  EXPECT_TRUE(fresh.took_over());
  ASSERT_TRUE(fresh.publish(99).ok());
  // The take-over fenced the slow builder: its publish is refused (by its
  // lost lock, or by the fence itself) and writes nothing.
  const Status s = slow.publish(55);
  EXPECT_TRUE(s.code() == Status::Code::kLockLost || s.code() == Status::Code::kPeerFailed) << s.ToString();
  uint64_t value = 0;
  ASSERT_TRUE(rb.lookup(0, "btree", &value).ok());
  EXPECT_EQ(value, 99u);
}

TEST_F(NamedRootTest, BadNamesAndAFullRegistryAreRefused) {
  auto a = Client();
  NamedRoots roots(*a);
  RootClaim c;
  EXPECT_EQ(roots.open(0, "", &c).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(roots.open(0, "has space", &c).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(roots.open(0, std::string(kMaxRootNameLength + 1, 'x'), &c).code(), Status::Code::kInvalidArgument);
  for (int i = 0; i < kMaxNamedRoots; ++i) {
    RootClaim claim;
    ASSERT_TRUE(roots.open(0, "app" + std::to_string(i), &claim).ok()) << i;
    ASSERT_TRUE(claim.publish(static_cast<uint64_t>(i)).ok());
  }
  const Status full = roots.open(0, "one-too-many", &c);
  EXPECT_EQ(full.code(), Status::Code::kOutOfMemory) << full.ToString();
  EXPECT_NE(full.message().find("registry of named roots is full"), std::string::npos) << full.message();
  // Every name still leads to its own value.
  for (int i = 0; i < kMaxNamedRoots; ++i) {
    uint64_t value = ~uint64_t{0};
    ASSERT_TRUE(roots.lookup(0, "app" + std::to_string(i), &value).ok());
    EXPECT_EQ(value, static_cast<uint64_t>(i));
  }
  uint64_t value;
  EXPECT_EQ(roots.lookup(0, "absent", &value).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace smart
