#include <gtest/gtest.h>

#include "smart/bench/bench.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"

namespace smart {
namespace {

ClientHello SampleClient() {
  ClientHello hello;
  hello.transport = TransportKind::kVerbs;
  for (uint32_t i = 0; i < 3; ++i) {
    QueuePairEndpoint e;
    e.qp_num = 100 + i;
    e.psn = 0x123456;
    e.lid = 7;
    e.gid[15] = static_cast<uint8_t>(i);
    hello.endpoints.push_back(e);
  }
  return hello;
}

TEST(Handshake, ClientHelloRoundTrips) {
  const ClientHello decoded = ClientHello::Decode(SampleClient().Encode(), "peer");
  EXPECT_EQ(decoded.transport, TransportKind::kVerbs);
  ASSERT_EQ(decoded.endpoints.size(), 3u);
  EXPECT_EQ(decoded.endpoints[2].qp_num, 102u);
  EXPECT_EQ(decoded.endpoints[2].psn, 0x123456u);
  EXPECT_EQ(decoded.endpoints[2].gid[15], 2);
}

TEST(Handshake, ServerHelloRoundTrips) {
  ServerHello hello;
  hello.regions[0] = RemoteRegion{0x7f0000000000, 1 << 20, 0xabcd, true};
  hello.endpoints.push_back(QueuePairEndpoint{5, 6, 7, {}});
  hello.exported = std::string("name\0token", 10);
  hello.session = SessionId{17, 4242};
  const ServerHello decoded = ServerHello::Decode(hello.Encode(), "blade");
  EXPECT_TRUE(decoded.error.empty());
  EXPECT_EQ(decoded.session.slot, 17);
  EXPECT_EQ(decoded.session.incarnation, 4242);
  EXPECT_TRUE(decoded.regions[0].valid);
  EXPECT_FALSE(decoded.regions[1].valid);
  EXPECT_EQ(decoded.regions[0].rkey, 0xabcdu);
  EXPECT_EQ(decoded.exported, hello.exported);
}

TEST(Handshake, ServerHelloCarriesAMemoryWindowPerQueuePair) {
  ServerHello hello;
  hello.regions[0] = RemoteRegion{0x7f0000000000, 1 << 20, 0xabcd, true};
  hello.endpoints.push_back(QueuePairEndpoint{5, 6, 7, {}});
  hello.endpoints.push_back(QueuePairEndpoint{8, 9, 7, {}});
  hello.window_rkeys = {0x1101, 0x2202};
  hello.session = SessionId{2, 1};
  EXPECT_EQ(ServerHello::Decode(hello.Encode(), "blade").window_rkeys, hello.window_rkeys);
  // None at all is the other valid form: a blade without windows.
  hello.window_rkeys.clear();
  EXPECT_TRUE(ServerHello::Decode(hello.Encode(), "blade").window_rkeys.empty());
}

TEST(Handshake, MemoryWindowsNotOnePerQueuePairAreRejected) {
  ServerHello hello;
  hello.regions[0] = RemoteRegion{0x7f0000000000, 1 << 20, 0xabcd, true};
  hello.endpoints.push_back(QueuePairEndpoint{5, 6, 7, {}});
  hello.endpoints.push_back(QueuePairEndpoint{8, 9, 7, {}});
  hello.window_rkeys = {0x1101};
  hello.session = SessionId{2, 1};
  try {
    ServerHello::Decode(hello.Encode(), "blade");
    FAIL() << "one window for two queue pairs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 memory windows for 2 queue pairs"), std::string::npos) << e.what();
  }
}

TEST(Handshake, SessionSlotOutOfRangeIsRejected) {
  ServerHello hello;
  hello.regions[0] = RemoteRegion{0x7f0000000000, 1 << 20, 0xabcd, true};
  hello.endpoints.push_back(QueuePairEndpoint{5, 6, 7, {}});
  for (const SessionId bad : {SessionId{0, 1}, SessionId{kMaxSessions, 1}, SessionId{3, 1 << 14}}) {
    hello.session = bad;
    try {
      ServerHello::Decode(hello.Encode(), "blade");
      FAIL() << "slot " << bad.slot << " incarnation " << bad.incarnation << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("session slot"), std::string::npos) << e.what();
    }
  }
}

TEST(Handshake, RefusalCarriesTheReason) {
  ServerHello hello;
  hello.error = "wrong transport";
  EXPECT_EQ(ServerHello::Decode(hello.Encode(), "blade").error, "wrong transport");
}

TEST(Handshake, TruncatedMessageIsRejected) {
  std::string data = SampleClient().Encode();
  data.resize(data.size() - 3);
  try {
    ClientHello::Decode(data, "10.0.0.2:4000");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("10.0.0.2:4000"), std::string::npos) << e.what();
  }
}

TEST(Handshake, TrailingBytesAreRejected) {
  EXPECT_THROW(ClientHello::Decode(SampleClient().Encode() + "x", "peer"), Error);
}

TEST(Handshake, ForeignProtocolIsRejected) {
  try {
    ClientHello::Decode("GET / HTTP/1.1\r\n", "peer");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a handshake"), std::string::npos) << e.what();
  }
}

TEST(Handshake, VersionMismatchIsNamed) {
  std::string data = SampleClient().Encode();
  data[4] = 9;  // version field
  try {
    ClientHello::Decode(data, "peer");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 9"), std::string::npos) << e.what();
  }
}

TEST(Handshake, AbsurdQueuePairCountIsRejected) {
  ClientHello hello = SampleClient();
  hello.endpoints.clear();
  EXPECT_THROW(ClientHello::Decode(hello.Encode(), "peer"), Error);
}

TEST(Histogram, PercentilesOfAUniformSpread) {
  Histogram h;
  for (uint64_t v = 1; v <= 10000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 10000u);
  const double p50 = static_cast<double>(h.percentile(0.5));
  const double p99 = static_cast<double>(h.percentile(0.99));
  EXPECT_NEAR(p50, 5000, 5000 * 0.035);
  EXPECT_NEAR(p99, 9900, 9900 * 0.035);
}

TEST(Histogram, SmallValuesAreExact) {
  Histogram h;
  for (int i = 0; i < 10; ++i) h.record(7);
  h.record(50);
  EXPECT_EQ(h.percentile(0.5), 7u);
  EXPECT_EQ(h.percentile(1.0), 50u);
}

TEST(Histogram, MergeAddsCounts) {
  Histogram a, b;
  a.record(100);
  b.record(1000000);
  a.merge(b);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_GT(a.percentile(1.0), 900000u);
}

TEST(Histogram, BucketIndexIsMonotonicAndBounded) {
  int last = -1;
  for (uint64_t v = 0; v < (1ull << 40); v = v * 3 / 2 + 1) {
    const int i = Histogram::Index(v);
    EXPECT_GE(i, last);
    EXPECT_LT(i, Histogram::kBuckets);
    EXPECT_LE(Histogram::LowerBound(i), v);
    last = i;
  }
  EXPECT_LT(Histogram::Index(~uint64_t{0}), Histogram::kBuckets);
}

TEST(Net, ConnectingToAClosedPortIsAClearError) {
  int port = 0;
  const int fd = TcpListen("127.0.0.1", 0, &port);
  close(fd);  // nobody listens there now
  try {
    TcpConnect("127.0.0.1", port, 2000);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to memory blade at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

TEST(Net, UnknownHostIsAClearError) {
  EXPECT_THROW(TcpConnect("no-such-host.invalid", 1, 1000), Error);
}

}  // namespace
}  // namespace smart
