// A registration and an epoch view against a scripted stand-in for etcd:
// a lease counts from when a renewal was sent (an answer that comes late
// extends it less), a lapse is noticed even while etcd hangs, and etcd
// saying the lease is gone, or answering nonsense, ends the registration.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fake_etcd.h"
#include "smart/epoch_view.h"
#include "smart/membership.h"
#include "smart/membership/etcd_json.h"

namespace smart::membership {
namespace {

using etcd::FakeEtcd;
using etcd::FakeReply;
using etcd::Mode;
using std::chrono::milliseconds;

// etcd's answers to a registration: a 2 s lease, the key created, and
// keep-alives answered as `keepalive` says.
FakeEtcd::Script Lease2s(std::function<FakeReply()> keepalive) {
  return [keepalive](const std::string& path, const std::string&) {
    if (path == "/v3/lease/grant") return FakeReply{Mode::kAnswer, 200, R"({"header":{"revision":"3"},"ID":"5","TTL":"2"})"};
    if (path == "/v3/kv/txn")
      return FakeReply{Mode::kAnswer, 200,
                       R"({"header":{"revision":"4"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"4"}}}]})"};
    if (path == "/v3/lease/keepalive") return keepalive();
    return FakeReply{Mode::kAnswer, 200, R"({"header":{"revision":"4"}})"};
  };
}

struct Lost {
  std::atomic<int> calls{0};
  bool stop_from_callback = false;
  std::atomic<Registration*> self{nullptr};
};

std::unique_ptr<Registration> Register(const FakeEtcd& etcd, Lost* lost) {
  RegistrationOptions o;
  o.etcd.endpoint = etcd.url();
  o.key = "/smart/t/blades/b";
  o.value = "v";
  o.lease = milliseconds(2000);
  o.on_lost = [lost](const Status&) {
    ++lost->calls;
    Registration* r = lost->self.load();
    if (lost->stop_from_callback && r != nullptr) r->StopRenewing();  // from the renewal thread itself
  };
  std::unique_ptr<Registration> r;
  Status s = Registration::Start(o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  lost->self = r.get();
  return r;
}

// Polls until the registration is no longer valid, at most `limit` (a
// guard against a hang, not a bound the test asserts on timing).
bool LostWithin(const Registration& r, milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (!r.valid()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return false;
}

TEST(Registration, RenewalsAnsweredLateExtendTheLeaseFromTheirSendAndItRunsOut) {
  // Every renewal is answered, with the full TTL, a second after it was
  // sent: counted from the send, each one extends the lease by less than
  // the time between renewals, so it runs out; counted from the answer,
  // it would hold for ever.
  FakeEtcd etcd(Lease2s([] {
    return FakeReply{Mode::kAnswer, 200, R"({"result":{"header":{"revision":"4"},"ID":"5","TTL":"2"}})",
                     milliseconds(1000)};
  }));
  Lost lost;
  auto r = Register(etcd, &lost);
  ASSERT_TRUE(r);
  EXPECT_TRUE(LostWithin(*r, milliseconds(15000)));
  EXPECT_EQ(r->status().code(), Status::Code::kLockLost) << r->status().ToString();
  for (int i = 0; i < 200 && lost.calls == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(lost.calls, 1);
  // Lost for good: later renewals, however they are answered, revive nothing.
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(r->valid());
}

TEST(Registration, AHungEtcdEndsTheRegistrationWhenTheLeaseRunsOut) {
  FakeEtcd etcd(Lease2s([] { return FakeReply{Mode::kStall}; }));
  Lost lost;
  auto r = Register(etcd, &lost);
  ASSERT_TRUE(r);
  EXPECT_TRUE(LostWithin(*r, milliseconds(15000)));
  for (int i = 0; i < 500 && lost.calls == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(lost.calls, 1);
}

TEST(Registration, ALeaseEtcdNoLongerKnowsIsLost) {
  FakeEtcd etcd(Lease2s([] { return FakeReply{Mode::kAnswer, 200, R"({"result":{"header":{"revision":"9"},"ID":"5"}})"}; }));
  Lost lost;
  lost.stop_from_callback = true;  // and the callback may stop the renewals
  auto r = Register(etcd, &lost);
  ASSERT_TRUE(r);
  EXPECT_TRUE(LostWithin(*r, milliseconds(15000)));
  EXPECT_NE(r->status().message().find("lapsed or was revoked"), std::string::npos) << r->status().ToString();
}

TEST(Registration, ARenewalForMoreThanWasGrantedIsTakenAsLost) {
  FakeEtcd etcd(Lease2s([] {
    return FakeReply{Mode::kAnswer, 200, R"({"result":{"header":{"revision":"9"},"ID":"5","TTL":"9223372036854775807"}})"};
  }));
  Lost lost;
  auto r = Register(etcd, &lost);
  ASSERT_TRUE(r);
  EXPECT_TRUE(LostWithin(*r, milliseconds(15000)));
  EXPECT_NE(r->status().message().find("more than the 2 s granted"), std::string::npos) << r->status().ToString();
}

TEST(EpochView, ReadsAnsweredLateLeaveGapsWhereTheViewIsNotCurrent) {
  // Each read of the epoch is answered half a lease after it was sent; the
  // view counts from the send, so it lapses before each next answer.
  const std::string epoch = R"({"epoch":2,"phase":"open","replicas":1,"members":{"a":"voting"},"shards":[["a"]]})";
  const std::string answer = R"({"header":{"revision":"9"},"kvs":[{"key":")" + etcd::json::Base64("/smart/c/epoch") +
                             R"(","create_revision":"7","mod_revision":"8","version":"2","value":")" +
                             etcd::json::Base64(epoch) + R"("}],"count":"1"})";
  FakeEtcd etcd([answer](const std::string&, const std::string&) {
    return FakeReply{Mode::kAnswer, 200, answer, milliseconds(500)};
  });
  EpochViewOptions o;
  o.etcd.endpoint = etcd.url();
  o.cluster = "c";
  o.lease = milliseconds(1000);
  std::unique_ptr<EpochView> view;
  ASSERT_TRUE(EpochView::Start(o, &view).ok());
  int current = 0, lapsed = 0;
  for (int i = 0; i < 800 && (current == 0 || lapsed == 0); ++i) {
    Epoch e;
    int64_t revision = 0;
    Status s = view->Current(&e, &revision);
    if (s.ok()) {
      ++current;
      EXPECT_EQ(e.number, 2u);
      EXPECT_EQ(revision, 8);
    } else {
      ++lapsed;
      EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_GT(current, 0);
  EXPECT_GT(lapsed, 0);
}

}  // namespace
}  // namespace smart::membership
