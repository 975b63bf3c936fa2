// The etcd JSON gateway's messages: request bodies, and the parsers fed the
// answers etcd 3.4 gives (samples as the gateway wrote them) and answers
// that make no sense.
#include "smart/membership/etcd_json.h"

#include <gtest/gtest.h>

namespace smart::etcd::json {
namespace {

const std::string kHeader =
    R"("header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"8","raft_term":"2"})";

TEST(EtcdJson, Base64RoundTripsAndRefusesJunk) {
  const std::string bytes("a\0b\xff/c", 6);
  std::string back;
  ASSERT_TRUE(FromBase64(Base64(bytes), &back));
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(Base64("s/k"), "cy9r");
  EXPECT_FALSE(FromBase64("cy9", &back));    // cut
  EXPECT_FALSE(FromBase64("c$9r", &back));   // not base64
  EXPECT_FALSE(FromBase64("cy9r!", &back));  // trailing junk
}

TEST(EtcdJson, RangeWithAndWithoutKeys) {
  RangeResult r;
  ASSERT_TRUE(ParseRange("{" + kHeader +
                             R"(,"kvs":[{"key":"cy9r","create_revision":"5","mod_revision":"6","version":"2","value":"aGVsbG8=","lease":"7587899215001567000"}],"count":"1"})",
                         "t", &r)
                  .ok());
  ASSERT_EQ(r.kvs.size(), 1u);
  EXPECT_EQ(r.revision, 8);
  EXPECT_EQ(r.kvs[0].key, "s/k");
  EXPECT_EQ(r.kvs[0].value, "hello");
  EXPECT_EQ(r.kvs[0].create_revision, 5);
  EXPECT_EQ(r.kvs[0].mod_revision, 6);
  EXPECT_EQ(r.kvs[0].version, 2);
  EXPECT_EQ(r.kvs[0].lease, 7587899215001567000);
  ASSERT_TRUE(ParseRange("{" + kHeader + "}", "t", &r).ok());
  EXPECT_TRUE(r.kvs.empty());
}

TEST(EtcdJson, RangeThatMakesNoSenseIsAnErrorNamingTheCall) {
  RangeResult r;
  for (const std::string bad : {std::string("not json"), std::string("[1]"),
                                "{" + kHeader + R"(,"kvs":{"key":"cy9r"}})",
                                "{" + kHeader + R"(,"kvs":[{"key":"c$9r"}]})",
                                "{" + kHeader + R"(,"kvs":[{"key":"cy9r","mod_revision":"-3"}]})",
                                "{" + kHeader + R"(,"kvs":[{"key":"cy9r","mod_revision":"12x"}]})",
                                "{" + kHeader + R"(,"kvs":[{"key":"cy9r","version":"99999999999999999999"}]})",
                                std::string(R"({"header":{"revision":true}})")}) {
    Status s = ParseRange(bad, "etcd range", &r);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("etcd range"), std::string::npos) << s.message();
  }
}

TEST(EtcdJson, TxnSucceededAndFailed) {
  TxnResult t;
  ASSERT_TRUE(
      ParseTxn("{" + kHeader + R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"8"}}}]})",
               "t", &t)
          .ok());
  EXPECT_TRUE(t.succeeded);
  EXPECT_EQ(t.revision, 8);
  // A failed comparison: "succeeded" is left out; the failure branch's read.
  ASSERT_TRUE(ParseTxn("{" + kHeader +
                           R"(,"responses":[{"response_range":{"header":{"revision":"8"},"kvs":[{"key":"cy9r","create_revision":"5","mod_revision":"7","version":"3","value":"dA==","lease":"42"}],"count":"1"}}]})",
                       "t", &t)
                  .ok());
  EXPECT_FALSE(t.succeeded);
  EXPECT_EQ(t.current.mod_revision, 7);
  EXPECT_EQ(t.current.lease, 42);
  EXPECT_EQ(t.current.value, "t");
  // Failed on an absent key: the read found nothing.
  ASSERT_TRUE(
      ParseTxn("{" + kHeader + R"(,"responses":[{"response_range":{"header":{"revision":"8"}}}]})", "t", &t).ok());
  EXPECT_FALSE(t.succeeded);
  EXPECT_EQ(t.current.create_revision, 0);
  // A success without its put, or a failure without its read, is not taken.
  EXPECT_FALSE(ParseTxn("{" + kHeader + R"(,"succeeded":true})", "t", &t).ok());
  EXPECT_FALSE(ParseTxn("{" + kHeader + "}", "t", &t).ok());
  EXPECT_FALSE(ParseTxn(R"({"succeeded":true,"responses":[{"response_put":{}}]})", "t", &t).ok());
}

TEST(EtcdJson, LeaseGrantAndKeepAlive) {
  Lease l;
  ASSERT_TRUE(ParseLeaseGrant("{" + kHeader + R"(,"ID":"7587899215001567000","TTL":"2"})", "t", &l).ok());
  EXPECT_EQ(l.id, 7587899215001567000);
  EXPECT_EQ(l.ttl_s, 2);
  EXPECT_FALSE(ParseLeaseGrant("{" + kHeader + R"(,"TTL":"2"})", "t", &l).ok());
  EXPECT_FALSE(ParseLeaseGrant("{" + kHeader + R"(,"ID":"5","TTL":"0"})", "t", &l).ok());
  int64_t ttl = -1;
  ASSERT_TRUE(ParseKeepAlive(R"({"result":{)" + kHeader + R"(,"ID":"7587899215001567000","TTL":"2"}})", "t", &ttl)
                  .ok());
  EXPECT_EQ(ttl, 2);
  // A lapsed (or unknown) lease: TTL left out.
  ASSERT_TRUE(ParseKeepAlive(R"({"result":{)" + kHeader + R"(,"ID":"12345"}})", "t", &ttl).ok());
  EXPECT_EQ(ttl, 0);
  EXPECT_FALSE(ParseKeepAlive(R"({"result":{"TTL":"-1"}})", "t", &ttl).ok());
  Status s = ParseKeepAlive(R"({"error":{"code":2,"message":"unexpected EOF"}})", "t", &ttl);
  EXPECT_FALSE(s.ok());
}

TEST(EtcdJson, WatchMessages) {
  WatchBatch b;
  ASSERT_TRUE(ParseWatchMessage(R"({"result":{)" + kHeader + R"(,"created":true}})", &b).ok());
  EXPECT_TRUE(b.created);
  EXPECT_TRUE(b.events.empty());
  ASSERT_TRUE(ParseWatchMessage(
                  R"({"result":{)" + kHeader +
                      R"(,"events":[{"kv":{"key":"dy9i","create_revision":"10","mod_revision":"10","version":"1","value":"eQ=="}},{"type":"DELETE","kv":{"key":"dy9h","mod_revision":"11"}}]}})",
                  &b)
                  .ok());
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(b.events[0].kv.key, "w/b");
  EXPECT_EQ(b.events[0].kv.value, "y");
  EXPECT_EQ(b.events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(b.events[1].kv.key, "w/a");
  EXPECT_EQ(b.events[1].kv.mod_revision, 11);
  // Canceled for compaction: its header has no revision.
  ASSERT_TRUE(ParseWatchMessage(
                  R"({"result":{"header":{"cluster_id":"1","member_id":"2","raft_term":"2"},"canceled":true,"compact_revision":"7"}})",
                  &b)
                  .ok());
  EXPECT_TRUE(b.canceled);
  EXPECT_EQ(b.compact_revision, 7);
  EXPECT_FALSE(ParseWatchMessage(R"({"result":{"events":[{"type":"RENAME","kv":{"key":"dy9h"}}]}})", &b).ok());
  EXPECT_FALSE(ParseWatchMessage(R"({"result":{"events":[{"type":"DELETE"}]}})", &b).ok());
  EXPECT_FALSE(ParseWatchMessage(R"({"header":{}})", &b).ok());
}

TEST(EtcdJson, ErrorsMapToWhatTheyMeanForTheCaller) {
  // A refusal that certainly did not apply.
  Status s = ErrorStatus(
      404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})",
      "etcd put", true);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("requested lease not found"), std::string::npos);
  s = ErrorStatus(400, R"({"error":"unexpected EOF","message":"unexpected EOF","code":3})", "etcd put", true);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  // etcd's timeouts: a change may have been applied.
  s = ErrorStatus(503, R"({"error":"etcdserver: request timed out","code":14})", "etcd put", true);
  EXPECT_EQ(s.code(), Status::Code::kOutcomeUnknown);
  s = ErrorStatus(503, R"({"error":"etcdserver: request timed out","code":14})", "etcd range", false);
  EXPECT_EQ(s.code(), Status::Code::kPeerFailed);
  // Not JSON: the body itself is named, made safe for a log line.
  s = ErrorStatus(502, "bad\x1b gateway", "etcd put", false);
  EXPECT_NE(s.message().find("bad\\x1b gateway"), std::string::npos);
}

TEST(EtcdJson, RequestsAreWhatTheGatewayReads) {
  EXPECT_EQ(RangeRequest("s/k", "", 0), R"({"key":"cy9r"})");
  EXPECT_EQ(PutRequest("s/k", "t", 42), R"({"key":"cy9r","lease":"42","value":"dA=="})");
  EXPECT_EQ(
      PutIfRequest("s/k", 7, "t", 0),
      R"({"compare":[{"key":"cy9r","mod_revision":"7","result":"EQUAL","target":"MOD"}],"failure":[{"request_range":{"key":"cy9r"}}],"success":[{"request_put":{"key":"cy9r","value":"dA=="}}]})");
  EXPECT_NE(PutIfRequest("s/k", 0, "t", 0).find(R"("target":"CREATE")"), std::string::npos);
  EXPECT_EQ(PrefixEnd("a/"), "a0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdJson, WatchStreamSplitsLinesAcrossChunksAndRefusesOverlongOnes) {
  WatchStreamSplitter split;
  std::vector<std::string> got;
  auto collect = [&got](const std::string& m) {
    got.push_back(m);
    return Status::OK();
  };
  const std::string one = "{\"a\":1}\n{\"b\"", two = ":2}\n\n";
  ASSERT_TRUE(split.Feed(one.data(), one.size(), collect).ok());
  ASSERT_TRUE(split.Feed(two.data(), two.size(), collect).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "{\"a\":1}");
  EXPECT_EQ(got[1], "{\"b\":2}");
  EXPECT_EQ(split.buffered(), 0u);
  std::string big(WatchStreamSplitter::kMaxWatchMessage / 2 + 1, 'x');
  ASSERT_TRUE(split.Feed(big.data(), big.size(), collect).ok());
  Status s = split.Feed(big.data(), big.size(), collect);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("refused rather than cut"), std::string::npos);
}

}  // namespace
}  // namespace smart::etcd::json
