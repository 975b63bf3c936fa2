// The bounds on peers that have not proven the key: max_clients,
// max_startups (early drops, and the longest-waiting peer dropped at full),
// max_startups_per_source, connect_timeout_ms, a blade that cannot start a
// thread; and the client's retries when a blade says it is busy.
#include <gtest/gtest.h>

#include <atomic>
#include <system_error>

#include "smart/fault_injection.h"
#include "test/unit/auth_fixture.h"

namespace smart {
namespace {

using namespace auth_test;  // NOLINT: the shared helpers

TEST(HandshakeLimits, AtMaxClientsTheLongestWaitingUnprovenPeerMakesRoom) {
  TempDir dir;
  const SmartConfig config = ConfigWithKey(dir.write_key("smart.key", kKeyA), 60000);
  const SessionKey key = SessionKey::FromBytes(kKeyA, "test key");
  auto blade = StartBlade(config, 3);
  // The oldest handshake has proven the key and holds the blade's answer,
  // but has not yet said it is ready: it keeps its place.
  RawClient proven(blade->port());
  const AuthHello hello = KeyedHello(proven, RandomNonce());
  const AuthChallenge challenge = SendAuthHello(proven, hello);
  ASSERT_TRUE(challenge.error.empty()) << challenge.error;
  proven.send_frame(HelloWithProof(&key, Opening(hello, challenge)).Encode());
  const ServerHello reply = ServerHello::Decode(proven.recv_frame(), "blade");
  ASSERT_TRUE(reply.error.empty()) << reply.error;
  RawClient idle1(blade->port());
  WaitForHandshakes(*blade, 2);
  RawClient idle2(blade->port());  // connect, then say nothing
  WaitForHandshakes(*blade, 3);

  // Full: a newcomer takes the place of idle1, the longest waiting of the
  // peers that proved nothing.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ConnectError(config, blade->port()), "");
  const AuthChallenge dropped = AuthChallenge::Decode(idle1.recv_frame(), "blade");
  EXPECT_NE(dropped.error.find("dropped this handshake"), std::string::npos) << dropped.error;
  idle1.drain();
  WaitForHandshakes(*blade, 2);  // proven and idle2; the newcomer came and went
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("at max_clients (3): dropped the handshake of 127.0.0.1:"), std::string::npos) << log;

  // The proven peer finishes its handshake and becomes a session.
  WaitForSessions(*blade, 0);  // the newcomer's is gone
  proven.send_bytes(std::string(1, kClientReady));
  EXPECT_EQ(proven.recv_byte(), kServerReady);
  WaitForSessions(*blade, 1);
}

TEST(HandshakeLimits, AtMaxClientsWithEveryPlaceTakenByASessionANewcomerIsRefused) {
  auto blade = StartBlade(testing::TestConfig(), 2);
  Initiator first(testing::TestConfig()), second(testing::TestConfig());
  first.connect(0, "127.0.0.1", blade->port(), 1);
  second.connect(0, "127.0.0.1", blade->port(), 1);
  WaitForSessions(*blade, 2);
  const std::string error = ConnectError(testing::TestConfig(), blade->port());
  EXPECT_NE(error.find("max_clients"), std::string::npos) << error;
  EXPECT_EQ(blade->connected_clients(), 2);
}

TEST(HandshakeLimits, AHandshakeInProgressCountsAgainstMaxClients) {
  auto blade = StartBlade(ConfigWithKey("", 60000), 2);
  Initiator session(testing::TestConfig());
  session.connect(0, "127.0.0.1", blade->port(), 1);
  WaitForSessions(*blade, 1);
  WaitForHandshakes(*blade, 0);
  RawClient idle(blade->port());
  WaitForHandshakes(*blade, 1);
  // Full (a session and a handshake): the newcomer displaces the idle peer.
  EXPECT_EQ(ConnectError(testing::TestConfig(), blade->port()), "");
  const AuthChallenge dropped = AuthChallenge::Decode(idle.recv_frame(), "blade");
  EXPECT_NE(dropped.error.find("max_clients (2) and dropped this handshake"), std::string::npos) << dropped.error;
}

TEST(HandshakeLimits, ABladeThatCannotStartAHandshakeRefusesTheClientAndServesOn) {
  const SmartConfig config = ConfigWithKey("", 300);
  auto blade = StartBlade(config);
  // No thread for any proven client: each is told the blade is busy, tries
  // again until its connect_timeout_ms, and then says why it gave up.
  std::atomic<int> starts{0};
  SetFaultPointHook("blade.handshake.thread", [&starts] {
    starts.fetch_add(1);
    throw std::system_error(EAGAIN, std::generic_category(), "no thread");
  });
  const std::string error = ConnectError(config, blade->port());
  EXPECT_NE(error.find("cannot start a handshake now"), std::string::npos) << error;
  EXPECT_NE(error.find("busy at each of"), std::string::npos) << error;
  EXPECT_GE(starts.load(), 2);
  WaitForHandshakes(*blade, 0);
  // Once only the first start fails, the client's second attempt connects.
  starts.store(0);
  SetFaultPointHook("blade.handshake.thread", [&starts] {
    if (starts.fetch_add(1) == 0) throw std::system_error(EAGAIN, std::generic_category(), "no thread");
  });
  Initiator initiator(config);
  initiator.connect(0, "127.0.0.1", blade->port(), 1);
  EXPECT_NE(initiator.session(0).slot, 0);
  EXPECT_EQ(starts.load(), 2);
  SetFaultPointHook("blade.handshake.thread", {});
}

TEST(HandshakeLimits, ASilentPeerIsDroppedAfterConnectTimeout) {
  auto blade = StartBlade(ConfigWithKey("", 200));
  RawClient silent(blade->port());
  const AuthChallenge answer = AuthChallenge::Decode(silent.recv_frame(), "blade");
  EXPECT_NE(answer.error.find("connect_timeout_ms"), std::string::npos) << answer.error;
  silent.drain();  // and the blade closes the connection
  WaitForHandshakes(*blade, 0);
}


// The blade's answer to a connection that sends nothing yet: a refusal
// arrives at once; an admitted peer hears nothing (the read times out).
std::string AnswerAtConnect(RawClient& client) {
  try {
    return AuthChallenge::Decode(client.recv_frame(), "blade").error;
  } catch (const Error& e) {
    return std::string("no answer: ") + e.what();
  }
}

TEST(HandshakeLimits, OneAddressHoldsAtMostMaxStartupsPerSourcePlaces) {
  BackendConfig backend = SmallBackend(64);
  backend.max_startups_per_source = 2;
  auto blade = StartBlade(ConfigWithKey("", 60000), backend);
  RawClient a(blade->port()), b(blade->port());  // from 127.0.0.1
  RawClient other(blade->port(), "127.0.0.3");
  WaitForHandshakes(*blade, 3);
  // A third from 127.0.0.1 takes the place of that address's longest
  // waiting peer, not of 127.0.0.3's.
  RawClient c(blade->port());
  const AuthChallenge dropped = AuthChallenge::Decode(a.recv_frame(), "blade");
  EXPECT_TRUE(dropped.busy);
  EXPECT_NE(dropped.error.find("max_startups_per_source (2 handshakes in progress from one address)"),
            std::string::npos)
      << dropped.error;
  WaitForHandshakes(*blade, 3);
  // A client from the flooding address itself still gets in, in place of b.
  EXPECT_EQ(ConnectError(ConfigWithKey("", 5000), blade->port()), "");
  EXPECT_NE(AuthChallenge::Decode(b.recv_frame(), "blade").error.find("max_startups_per_source"), std::string::npos);
  WaitForHandshakes(*blade, 2);  // c and other
  WaitForSessions(*blade, 0);    // the client's came and went
}

TEST(HandshakeLimits, FromStartToFullNewcomersAreDroppedAtRandomAndAtFullTheOldestMakesRoom) {
  BackendConfig backend = SmallBackend(64);
  backend.max_startups_per_source = 64;
  // rate 100: every newcomer from `start` on is dropped, so the test is
  // not left to chance.
  backend.max_startups = {2, 100, 4};
  auto blade = StartBlade(ConfigWithKey("", 60000), backend);
  RawClient a(blade->port(), "127.0.0.2"), b(blade->port(), "127.0.0.3");
  WaitForHandshakes(*blade, 2);
  RawClient c(blade->port(), "127.0.0.4");
  const AuthChallenge dropped = AuthChallenge::Decode(c.recv_frame(), "blade");
  EXPECT_TRUE(dropped.busy);
  EXPECT_NE(dropped.error.find("max_startups 2:100:4"), std::string::npos) << dropped.error;
  WaitForHandshakes(*blade, 2);
}

TEST(HandshakeLimits, BelowStartNobodyIsDroppedAndAtFullTheLongestWaitingGoes) {
  BackendConfig backend = SmallBackend(64);
  backend.max_startups_per_source = 64;
  backend.max_startups = {3, 0, 3};
  auto blade = StartBlade(ConfigWithKey("", 60000), backend);
  RawClient a(blade->port(), "127.0.0.2");
  WaitForHandshakes(*blade, 1);
  RawClient b(blade->port(), "127.0.0.3");
  WaitForHandshakes(*blade, 2);
  RawClient c(blade->port(), "127.0.0.4");
  WaitForHandshakes(*blade, 3);
  // Full: the newcomer is admitted and `a`, the longest waiting, is told why.
  RawClient d(blade->port(), "127.0.0.5");
  const AuthChallenge gone = AuthChallenge::Decode(a.recv_frame(), "blade");
  EXPECT_TRUE(gone.busy);
  EXPECT_NE(gone.error.find("max_startups (3 handshakes in progress) and dropped this handshake"), std::string::npos)
      << gone.error;
  WaitForHandshakes(*blade, 3);
  // A keyless client gets in the same way: it displaces `b`.
  EXPECT_EQ(ConnectError(ConfigWithKey("", 5000), blade->port()), "");
  EXPECT_NE(AuthChallenge::Decode(b.recv_frame(), "blade").error.find("dropped this handshake"), std::string::npos);
}

TEST(HandshakeLimits, AClientKeepsTryingABusyBladeUntilItsTimeout) {
  BackendConfig backend = SmallBackend(64);
  backend.max_startups = {1, 100, 64};  // from one peer on, every newcomer is dropped
  auto blade = StartBlade(ConfigWithKey("", 60000), backend);
  auto idle = std::make_unique<RawClient>(blade->port());
  WaitForHandshakes(*blade, 1);
  const auto started = std::chrono::steady_clock::now();
  // A timeout long enough that a loaded host still fits several attempts
  // in it; each must be refused as busy.
  const std::string error = ConnectError(ConfigWithKey("", 1500), blade->port());
  EXPECT_NE(error.find("drops some newcomers (max_startups 1:100:64)"), std::string::npos) << error;
  EXPECT_NE(error.find("busy at each of"), std::string::npos) << error;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(750));
  // The place frees up while the client retries: it gets in.
  std::thread release([&idle] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    idle.reset();
  });
  EXPECT_EQ(ConnectError(ConfigWithKey("", 5000), blade->port()), "");
  release.join();
}

}  // namespace
}  // namespace smart
