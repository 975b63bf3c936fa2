// The etcd client against a scripted stand-in for etcd (a loopback HTTP
// server that answers, stalls or hangs up as a test says): every failure is
// reported in bounded time, and a change whose request may have reached
// etcd is reported as of unknown outcome, never as failed.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fake_etcd.h"
#include "smart/etcd.h"

namespace smart::etcd {
namespace {

std::unique_ptr<Client> Connect(const std::string& url, int timeout_ms = 300) {
  ClientOptions o;
  o.endpoint = url;
  o.request_timeout = std::chrono::milliseconds(timeout_ms);
  std::unique_ptr<Client> c;
  EXPECT_TRUE(Client::Open(o, &c).ok());
  return c;
}

TEST(EtcdClient, RefusesAnEndpointThatIsNotAnHttpUrl) {
  std::unique_ptr<Client> c;
  for (const char* bad : {"127.0.0.1:2379", "https://127.0.0.1:2379", "http://", ""}) {
    ClientOptions o;
    o.endpoint = bad;
    Status s = Client::Open(o, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(EtcdClient, NoServerIsAFailureNothingWasSent) {
  int port;
  {
    FakeEtcd gone(Mode::kAnswer);
    port = std::stoi(gone.url().substr(17));
  }
  auto c = Connect("http://127.0.0.1:" + std::to_string(port));
  Status s = c->Put("k", "v");
  EXPECT_EQ(s.code(), Status::Code::kPeerFailed) << s.ToString();
  EXPECT_NE(s.message().find("nothing was sent"), std::string::npos) << s.message();
}

TEST(EtcdClient, AStalledServerGivesUnknownForAChangeAndTimedOutForARead) {
  FakeEtcd etcd(Mode::kStall);
  auto c = Connect(etcd.url());
  Status put = c->Put("k", "v");
  EXPECT_EQ(put.code(), Status::Code::kOutcomeUnknown) << put.ToString();
  TxnResult txn;
  Status put_if = c->PutIf("k", 0, "v", 0, &txn);
  EXPECT_EQ(put_if.code(), Status::Code::kOutcomeUnknown) << put_if.ToString();
  KeyValue kv;
  Status get = c->Get("k", &kv);
  EXPECT_EQ(get.code(), Status::Code::kTimedOut) << get.ToString();
  EXPECT_GE(etcd.requests(), 1);  // the others wait in the listen queue, sent
}

TEST(EtcdClient, AServerThatHangsUpAfterTheRequestGivesUnknownForAChange) {
  FakeEtcd etcd(Mode::kHangUp);
  auto c = Connect(etcd.url());
  Status s = c->Delete("k");
  EXPECT_EQ(s.code(), Status::Code::kOutcomeUnknown) << s.ToString();
  Lease l;
  s = c->GrantLease(2, &l);
  EXPECT_EQ(s.code(), Status::Code::kOutcomeUnknown) << s.ToString();
  KeyValue kv;
  s = c->Get("k", &kv);
  EXPECT_EQ(s.code(), Status::Code::kPeerFailed) << s.ToString();
}

TEST(EtcdClient, AnAnswerThatMakesNoSenseIsNeverTakenAsSuccess) {
  FakeEtcd etcd(Mode::kAnswer, 200, R"({"succeeded":"yes"})");
  auto c = Connect(etcd.url());
  TxnResult txn;
  Status s = c->PutIf("k", 3, "v", 0, &txn);
  // The request reached etcd; what it did is unknown.
  EXPECT_EQ(s.code(), Status::Code::kOutcomeUnknown) << s.ToString();
  EXPECT_FALSE(txn.succeeded);
  KeyValue kv;
  s = c->Get("k", &kv);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();  // no kvs: absent
}

TEST(EtcdClient, AGetAnsweredWithAnotherKeyIsRefused) {
  FakeEtcd etcd(Mode::kAnswer, 200, R"({"header":{"revision":"3"},"kvs":[{"key":"b3RoZXI=","value":"dg=="}]})");
  auto c = Connect(etcd.url());
  KeyValue kv;
  Status s = c->Get("k", &kv);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  RangeResult r;
  s = c->GetPrefix("k/", &r);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
}

TEST(EtcdClient, ALapsedLeaseIsLost) {
  FakeEtcd etcd(Mode::kAnswer, 200, R"({"result":{"header":{"revision":"9"},"ID":"12345"}})");
  auto c = Connect(etcd.url());
  Status s = c->KeepAlive(12345);
  EXPECT_EQ(s.code(), Status::Code::kLockLost) << s.ToString();
}

TEST(EtcdClient, EtcdsRefusalIsDefinite) {
  FakeEtcd etcd(Mode::kAnswer, 404,
                R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  auto c = Connect(etcd.url());
  Status s = c->Put("k", "v", 99);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
}

TEST(EtcdClient, AWatchEndsWhenAskedAndWhenTheStreamBreaks) {
  {
    FakeEtcd etcd(Mode::kStall);
    auto c = Connect(etcd.url());
    std::atomic<bool> stop{false};
    std::thread stopper([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      stop = true;
    });
    Status s = c->Watch("p/", 0, [](const WatchBatch&) { return true; }, std::chrono::seconds(60), &stop);
    stopper.join();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  {
    FakeEtcd etcd(Mode::kStall);
    auto c = Connect(etcd.url());
    Status s = c->Watch("p/", 0, [](const WatchBatch&) { return true; }, std::chrono::milliseconds(200));
    EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  }
  {
    FakeEtcd etcd(Mode::kHangUp);
    auto c = Connect(etcd.url());
    Status s = c->Watch("p/", 0, [](const WatchBatch&) { return true; }, std::chrono::seconds(60));
    EXPECT_EQ(s.code(), Status::Code::kPeerFailed) << s.ToString();
  }
  {
    FakeEtcd etcd(Mode::kAnswer, 200, "{\"result\":{\"created\":true}}\nnot json\n");
    auto c = Connect(etcd.url());
    int batches = 0;
    Status s = c->Watch("p/", 0, [&batches](const WatchBatch&) { return ++batches < 10; }, std::chrono::seconds(60));
    EXPECT_EQ(batches, 1);
    EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  }
}

}  // namespace
}  // namespace smart::etcd
