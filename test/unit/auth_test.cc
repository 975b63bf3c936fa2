// Authenticated sessions: the key, the handshake's proofs, what a memory
// blade says and withholds when a peer fails them, and the bounds on
// handshakes (max_clients, connect_timeout_ms).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <atomic>
#include <memory>
#include <system_error>
#include <thread>

#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/resource/auth.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/target.h"
#include "test/unit/auth_fixture.h"
#include "test/unit/test_util.h"

namespace smart {
namespace {

using namespace auth_test;  // NOLINT: the shared helpers

bool Contains(const std::string& haystack, const void* needle, size_t n) {
  return haystack.find(std::string(static_cast<const char*>(needle), n)) != std::string::npos;
}

class AuthenticatedBlade : public ::testing::Test {
 protected:
  void SetUp() override {
    key_path_ = dir_.write_key("smart.key", kKeyA);
    blade_ = StartBlade(ConfigWithKey(key_path_));
    key_.emplace(SessionKey::FromBytes(kKeyA, "test key"));
    // What a successful handshake reveals, to look for in failed ones.
    RawClient client(blade_->port());
    const AuthHello hello = KeyedHello(client, RandomNonce());
    const AuthChallenge challenge = SendAuthHello(client, hello);
    ASSERT_TRUE(challenge.error.empty()) << challenge.error;
    ASSERT_TRUE(challenge.has_key);
    recorded_nonce_ = hello.nonce;
    Transcript transcript = Opening(hello, challenge);
    const ClientHello proven = HelloWithProof(&*key_, transcript);
    recorded_hello_ = proven.Encode();
    transcript.add(proven.EncodeUnproven());
    client.send_frame(recorded_hello_);
    const std::string reply_frame = client.recv_frame();
    const ServerHello reply = ServerHello::Decode(reply_frame, "blade");
    ASSERT_TRUE(reply.error.empty()) << reply.error;
    // The blade's one proof, over the whole handshake.
    ASSERT_TRUE(reply.has_proof);
    transcript.add(Unproven(reply_frame, true));
    ASSERT_TRUE(key_->verify(AuthRole::kBladeHello, transcript, reply.proof));
    secret_addr_ = reply.regions[kMainMemoryRegion].addr;
    secret_rkey_ = reply.regions[kMainMemoryRegion].rkey;
    secret_path_ = reply.exported.substr(0, reply.exported.find('\0'));
    ASSERT_FALSE(secret_path_.empty());
  }

  // The bytes a failed peer got hold nothing about the pool.
  void ExpectNothingRevealed(const std::string& bytes) {
    EXPECT_FALSE(Contains(bytes, &secret_addr_, sizeof(secret_addr_))) << "the pool's address leaked";
    EXPECT_FALSE(Contains(bytes, &secret_rkey_, sizeof(secret_rkey_))) << "the pool's rkey leaked";
    EXPECT_EQ(bytes.find(secret_path_), std::string::npos) << "the memfd socket leaked";
  }

  TempDir dir_;
  std::string key_path_;
  std::unique_ptr<Target> blade_;
  std::optional<SessionKey> key_;
  Nonce recorded_nonce_{};
  std::string recorded_hello_;
  uint64_t secret_addr_ = 0;
  uint32_t secret_rkey_ = 0;
  std::string secret_path_;
};

TEST_F(AuthenticatedBlade, TheRightKeyConnects) {
  EXPECT_TRUE(blade_->authenticates());
  Initiator initiator(ConfigWithKey(key_path_));
  initiator.connect(0, "127.0.0.1", blade_->port(), 1);
  EXPECT_NE(initiator.session(0).slot, 0);
  EXPECT_EQ(initiator.remote_capacity(0), uint64_t{4} << 20);
}

TEST_F(AuthenticatedBlade, AWrongKeyIsAClearErrorOnBothSides) {
  const std::string wrong = dir_.write_key("other.key", kKeyB);
  ::testing::internal::CaptureStderr();
  const std::string error = ConnectError(ConfigWithKey(wrong), blade_->port());
  WaitForHandshakes(*blade_);
  const std::string blade_log = ::testing::internal::GetCapturedStderr();
  const std::string peer = "127.0.0.1:" + std::to_string(blade_->port());
  // Refused at the first message, by the key's ID: both IDs named.
  const std::string mismatch = "the client's key (ID " + KeyId(kKeyB) + ") is not the memory blade's (ID " +
                               KeyId(kKeyA) + ")";
  EXPECT_NE(error.find("memory blade " + peer + " refused the connection"), std::string::npos) << error;
  EXPECT_NE(error.find(mismatch), std::string::npos) << error;
  EXPECT_NE(error.find(wrong), std::string::npos) << error;
  EXPECT_NE(blade_log.find("refused client 127.0.0.1:"), std::string::npos) << blade_log;
  EXPECT_NE(blade_log.find(mismatch), std::string::npos) << blade_log;
  EXPECT_EQ(blade_->connected_clients(), 0);
}

TEST_F(AuthenticatedBlade, AClientWithoutAKeyIsRefused) {
  ::testing::internal::CaptureStderr();
  const std::string error = ConnectError(testing::TestConfig(), blade_->port());
  WaitForHandshakes(*blade_);
  const std::string blade_log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(error.find("refused the connection"), std::string::npos) << error;
  EXPECT_NE(error.find("requires a key"), std::string::npos) << error;
  EXPECT_NE(blade_log.find("refused client 127.0.0.1:"), std::string::npos) << blade_log;
  EXPECT_EQ(blade_->connected_clients(), 0);
}

TEST_F(AuthenticatedBlade, AReplayedProofFailsAgainstAFreshNonce) {
  RawClient client(blade_->port());
  const AuthHello hello = KeyedHello(client, recorded_nonce_);  // the recorded session's nonce, too
  const AuthChallenge challenge = SendAuthHello(client, hello);
  ASSERT_TRUE(challenge.error.empty());
  client.send_frame(recorded_hello_);
  const ServerHello reply = ServerHello::Decode(client.recv_frame(), "blade");
  EXPECT_NE(reply.error.find("authentication failed"), std::string::npos) << reply.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, TheBladeProvesNothingToAPeerThatHasNotProvenTheKey) {
  // Its challenge carries no proof: nothing to test key guesses against.
  RawClient client(blade_->port());
  AuthHello hello = KeyedHello(client, RandomNonce());
  client.send_frame(hello.Encode());
  const std::string challenge_frame = client.recv_frame();
  const AuthChallenge challenge = AuthChallenge::Decode(challenge_frame, "blade");
  EXPECT_EQ(challenge.Encode(), challenge_frame);
  EXPECT_EQ(challenge_frame.size(), 4u + 2 + 1 + 4 + 1 + kNonceBytes + 8);  // ... and the pool ID
  // A wrong proof gets a refusal without a proof either.
  ClientHello wrong = HelloWithProof(nullptr, Opening(hello, challenge));
  wrong.has_proof = true;
  wrong.proof.fill(7);
  client.send_frame(wrong.Encode());
  const ServerHello reply = ServerHello::Decode(client.recv_frame(), "blade");
  EXPECT_NE(reply.error.find("authentication failed"), std::string::npos) << reply.error;
  EXPECT_FALSE(reply.has_proof);
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AProofWithTheBladesLabelIsNoClientProof) {
  RawClient client(blade_->port());
  const AuthHello hello = KeyedHello(client, RandomNonce());
  const AuthChallenge challenge = SendAuthHello(client, hello);
  Transcript transcript = Opening(hello, challenge);
  ClientHello reflected = HelloWithProof(nullptr, transcript);
  reflected.has_proof = true;
  transcript.add(reflected.EncodeUnproven());
  reflected.proof = key_->prove(AuthRole::kBladeHello, transcript);
  client.send_frame(reflected.Encode());
  const ServerHello reply = ServerHello::Decode(client.recv_frame(), "blade");
  EXPECT_NE(reply.error.find("authentication failed"), std::string::npos) << reply.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AnotherKeyIsNamedByItsIdAndRefusedAtOnce) {
  RawClient client(blade_->port());
  AuthHello hello = KeyedHello(client, RandomNonce());
  hello.key_id = KeyId(kKeyB);
  const AuthChallenge challenge = SendAuthHello(client, hello);
  EXPECT_NE(challenge.error.find("the client's key (ID " + KeyId(kKeyB) + ") is not the memory blade's (ID " +
                                 KeyId(kKeyA) + ")"),
            std::string::npos)
      << challenge.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AClientThatDialledAnotherAddressIsRefused) {
  // What a relay in between looks like to the blade: the client's hello
  // names the address it dialled, the relay's, not the blade's.
  RawClient client(blade_->port());
  AuthHello hello = KeyedHello(client, RandomNonce());
  hello.dialled.port = static_cast<uint16_t>(hello.dialled.port + 1);
  const AuthChallenge challenge = SendAuthHello(client, hello);
  EXPECT_NE(challenge.error.find("forwards connections"), std::string::npos) << challenge.error;
  EXPECT_NE(challenge.error.find("accept_forwarded"), std::string::npos) << challenge.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AHelloWithoutProofIsRefused) {
  RawClient client(blade_->port());
  const AuthHello hello = KeyedHello(client, RandomNonce());
  const AuthChallenge challenge = SendAuthHello(client, hello);
  client.send_frame(HelloWithProof(nullptr, Opening(hello, challenge)).Encode());
  const ServerHello reply = ServerHello::Decode(client.recv_frame(), "blade");
  EXPECT_NE(reply.error.find("no proof"), std::string::npos) << reply.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, ATruncatedMessageIsRefused) {
  AuthHello hello;
  hello.has_key = true;
  hello.key_id = KeyId(kKeyA);
  hello.dialled.family = 4;
  std::string body = hello.Encode();
  body.resize(body.size() - 10);  // a whole frame, but the dialled address is cut short
  RawClient client(blade_->port());
  client.send_frame(body);
  const AuthChallenge answer = AuthChallenge::Decode(client.recv_frame(), "blade");
  EXPECT_NE(answer.error.find("truncated"), std::string::npos) << answer.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AFrameCutOffMidwayIsRefused) {
  RawClient client(blade_->port());
  WireWriter header;
  header.u32(40);
  client.send_bytes(header.data() + "only ten b");
  client.finish_sending();
  const AuthChallenge answer = AuthChallenge::Decode(client.recv_frame(), "blade");
  EXPECT_NE(answer.error.find("closed by the peer"), std::string::npos) << answer.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AnOversizedMessageIsRefusedUnread) {
  RawClient client(blade_->port());
  WireWriter header;
  header.u32(64u << 20);  // 64 MiB announced
  client.send_bytes(header.data());
  const AuthChallenge answer = AuthChallenge::Decode(client.recv_frame(), "blade");
  EXPECT_NE(answer.error.find("limit " + std::to_string(kMaxAuthFrame)), std::string::npos) << answer.error;
  ExpectNothingRevealed(client.drain());
}

TEST_F(AuthenticatedBlade, AnOversizedHelloAfterTheChallengeIsRefused) {
  RawClient client(blade_->port());
  SendAuthHello(client, KeyedHello(client, RandomNonce()));
  WireWriter header;
  header.u32(kMaxHelloFrame + 1);
  client.send_bytes(header.data());
  const ServerHello reply = ServerHello::Decode(client.recv_frame(), "blade");
  EXPECT_NE(reply.error.find("limit"), std::string::npos) << reply.error;
  ExpectNothingRevealed(client.drain());
}

TEST(Authentication, AKeyedClientRefusesABladeWithoutAKey) {
  TempDir dir;
  auto blade = StartBlade(testing::TestConfig());
  EXPECT_FALSE(blade->authenticates());
  const std::string error = ConnectError(ConfigWithKey(dir.write_key("k", kKeyA)), blade->port());
  EXPECT_NE(error.find("proves no key"), std::string::npos) << error;
}

TEST(Authentication, WithoutKeysOnLoopbackClientsConnect) {
  auto blade = StartBlade(testing::TestConfig());
  EXPECT_EQ(blade->listen_address(), "127.0.0.1");
  Initiator initiator(testing::TestConfig());
  initiator.connect(0, "127.0.0.1", blade->port(), 2);
  EXPECT_NE(initiator.session(0).slot, 0);
}

TEST(Authentication, ProofsDependOnRoleTranscriptAndKey) {
  const SessionKey a = SessionKey::FromBytes(kKeyA, "a");
  const SessionKey b = SessionKey::FromBytes(kKeyB, "b");
  const Nonce n1 = RandomNonce(), n2 = RandomNonce();
  const std::string m1(n1.begin(), n1.end()), m2(n2.begin(), n2.end());
  Transcript t;
  t.add(m1);
  t.add(m2);
  const Proof p = a.prove(AuthRole::kClient, t);
  EXPECT_TRUE(a.verify(AuthRole::kClient, t, p));
  EXPECT_FALSE(a.verify(AuthRole::kBladeHello, t, p));
  EXPECT_FALSE(b.verify(AuthRole::kClient, t, p));
  Transcript swapped, joined, longer = t;
  swapped.add(m2);
  swapped.add(m1);
  joined.add(m1 + m2);  // the same bytes, split otherwise
  longer.add("");
  EXPECT_FALSE(a.verify(AuthRole::kClient, swapped, p));
  EXPECT_FALSE(a.verify(AuthRole::kClient, joined, p));
  EXPECT_FALSE(a.verify(AuthRole::kClient, longer, p));
  EXPECT_NE(RandomNonce(), RandomNonce());
}

TEST(Authentication, AKeyMovedAwayLeavesNoKeyBehind) {
  Transcript t;
  t.add("message");
  SessionKey original = SessionKey::FromBytes(kKeyA, "a");
  const SessionKey copy = original;
  const Proof p = original.prove(AuthRole::kClient, t);
  EXPECT_TRUE(copy.verify(AuthRole::kClient, t, p));
  const SessionKey moved = std::move(original);
  EXPECT_TRUE(moved.verify(AuthRole::kClient, t, p));
  // The moved-from key's bytes are wiped: it proves with an all-zero key now.
  EXPECT_FALSE(original.verify(AuthRole::kClient, t, p));  // NOLINT(bugprone-use-after-move)
}

// The message of the error Load throws for `path` ("" if it loads).
std::string LoadError(const std::string& path) {
  try {
    SessionKey::Load(path, "auth.key_file in test");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Authentication, KeyFileErrorsNameTheFile) {
  TempDir dir;
  const std::string short_key = dir.write("short.key", "too short");
  const std::string error = LoadError(short_key);
  EXPECT_NE(error.find(short_key), std::string::npos) << error;
  EXPECT_NE(error.find("smart_keygen"), std::string::npos) << error;
  try {
    Initiator initiator(ConfigWithKey(dir.path() + "/missing.key"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auth.key_file"), std::string::npos) << e.what();
  }
}

TEST(Authentication, NewKeyFilesArePrivateAndNeverReplaced) {
  TempDir dir;
  const std::string path = dir.path() + "/new.key";
  const std::string id = WriteNewKeyFile(path);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(id.size(), 2 * kKeyIdBytes);
  EXPECT_THROW(WriteNewKeyFile(path), Error);
  EXPECT_EQ(SessionKey::Load(path, "test").id(), id);
  // Two new keys differ.
  EXPECT_NE(WriteNewKeyFile(dir.path() + "/other.key"), id);
}

TEST(Authentication, OnlyAKeyFileInTheFormatIsAKey) {
  TempDir dir;
  const std::string good = KeyFileText(kKeyA);
  EXPECT_EQ(LoadError(dir.write("good.key", good)), "");
  EXPECT_EQ(LoadError(dir.write("no-newline.key", good.substr(0, good.size() - 1))), "");
  EXPECT_EQ(SessionKey::Load(dir.write("id.key", good), "t").id(), KeyId(kKeyA));
  // Raw bytes, passphrases and other text: not keys, however long.
  const std::string refused[] = {
      std::string(32, '\0'),
      "passwordpasswordpasswordpassword",
      std::string(4096, 'x'),
      "",
      "SMART-KEY v2\nid 0000000000000000\nkey " + std::string(64, '0') + "\n",
      good + "extra\n",
      // The id does not belong to the key: damaged, or edited by hand.
      "SMART-KEY v1\nid " + KeyId(kKeyB) + good.substr(good.find("\nkey")),
      // Upper-case or short hex.
      "SMART-KEY v1\nid " + KeyId(kKeyA) + "\nkey " + std::string(64, 'A') + "\n",
      "SMART-KEY v1\nid " + KeyId(kKeyA) + "\nkey " + std::string(62, '0') + "\n",
  };
  int n = 0;
  for (const std::string& text : refused) {
    const std::string path = dir.write("bad" + std::to_string(n++) + ".key", text);
    const std::string error = LoadError(path);
    EXPECT_NE(error.find(path), std::string::npos) << "text " << n << ": " << error;
    EXPECT_NE(error.find("smart_keygen"), std::string::npos) << "text " << n << ": " << error;
  }
  EXPECT_NE(LoadError(dir.write("damaged.key", refused[6])).find("damaged"), std::string::npos);
}

TEST(Authentication, AKeyFileOthersMayReadOrThatIsNotOursIsRefused) {
  TempDir dir;
  for (mode_t mode : {0640, 0604, 0660, 0606, 0644}) {
    const std::string path = dir.write("open.key", KeyFileText(kKeyA), mode);
    const std::string error = LoadError(path);
    EXPECT_NE(error.find("chmod 600"), std::string::npos) << std::oct << mode << ": " << error;
  }
  EXPECT_EQ(LoadError(dir.write("owner-only.key", KeyFileText(kKeyA), 0400)), "");
  if (geteuid() == 0) {
    const std::string foreign = dir.write("foreign.key", KeyFileText(kKeyA));
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
    const std::string error = LoadError(foreign);
    EXPECT_NE(error.find("belongs to uid 65534"), std::string::npos) << error;
  }
}

TEST(Authentication, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("::"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("node1"));
}

TEST(Authentication, BeyondLoopbackWithoutAKeyTheBladeRefusesToStart) {
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  backend.bind = "0.0.0.0";
  Target target(testing::TestConfig(), backend);
  try {
    target.start();
    FAIL() << "a blade without a key listens on 0.0.0.0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without a key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"auth\": \"none\""), std::string::npos) << e.what();
  }
  backend.auth.configured = true;
  backend.auth.none = true;
  Target open_target(testing::TestConfig(), backend);
  ::testing::internal::CaptureStderr();
  open_target.start();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("WITHOUT authentication"), std::string::npos) << log;
}

TEST(Authentication, AllowUidsAloneInBackendJsonKeepsSmartConfigsKey) {
  TempDir dir;
  const SmartConfig keyed = ConfigWithKey(dir.write_key("smart.key", kKeyA));
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  backend.auth.configured = true;  // "auth": {"allow_uids": [4242]}
  backend.auth.allow_uids = {4242};
  Target target(keyed, backend);
  target.start();
  EXPECT_TRUE(target.authenticates());
  EXPECT_NE(ConnectError(testing::TestConfig(), target.port()).find("requires a key"), std::string::npos);
  EXPECT_EQ(ConnectError(keyed, target.port()), "");
}

TEST(Authentication, DuringARotationTheBladeAcceptsBothKeysAndProvesWithTheClientsOne) {
  TempDir dir;
  const std::string key_a = dir.write_key("a.key", kKeyA);
  const std::string key_b = dir.write_key("b.key", kKeyB);
  BackendConfig backend = KeyedBackend(key_b, {key_a});  // the new key, and the old
  auto blade = StartBlade(ConfigWithKey(key_b), backend);
  // Clients still on the old key and clients already on the new one both
  // connect, and each checks the blade's proof with its own key.
  EXPECT_EQ(ConnectError(ConfigWithKey(key_a), blade->port()), "");
  EXPECT_EQ(ConnectError(ConfigWithKey(key_b), blade->port()), "");
  const std::string key_c = dir.write_key("c.key", std::string(32, 'c'));
  const std::string error = ConnectError(ConfigWithKey(key_c), blade->port());
  EXPECT_NE(error.find("is not the memory blade's (ID " + KeyId(kKeyB) + " or " + KeyId(kKeyA) + ")"),
            std::string::npos)
      << error;
  // Listing one key twice is a config error that names both files.
  backend.auth.also_accept = {dir.write_key("b-again.key", kKeyB)};
  try {
    Target twice(ConfigWithKey(key_b), backend);
    ADD_FAILURE() << "a key listed twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("list each key once"), std::string::npos) << e.what();
  }
}

TEST(Authentication, AReloadSwapsTheKeysWithoutEndingSessions) {
  TempDir dir;
  const std::string key_a = dir.write_key("a.key", kKeyA);
  const std::string key_b = dir.write_key("b.key", kKeyB);
  BackendConfig backend = KeyedBackend(key_a, {});
  auto blade = StartBlade(ConfigWithKey(key_a), backend);
  Initiator on_a(ConfigWithKey(key_a));
  on_a.connect(0, "127.0.0.1", blade->port(), 1);
  // Step 1 of a rotation: the new key joins.
  backend.auth.also_accept = {key_b};
  blade->reload_keys(testing::TestConfig(), backend);
  EXPECT_EQ(ConnectError(ConfigWithKey(key_b), blade->port()), "");
  EXPECT_EQ(ConnectError(ConfigWithKey(key_a), blade->port()), "");
  // Step 3: the old key leaves. Its clients can no longer connect; the
  // session made with it goes on.
  backend.auth.key_file = key_b;
  backend.auth.also_accept.clear();
  blade->reload_keys(testing::TestConfig(), backend);
  EXPECT_NE(ConnectError(ConfigWithKey(key_a), blade->port()).find("is not the memory blade's"), std::string::npos);
  EXPECT_EQ(ConnectError(ConfigWithKey(key_b), blade->port()), "");
  EXPECT_TRUE(on_a.connected(0));
  WaitForSessions(*blade, 1);  // on_a's; the others came and went
  // A reload that fails keeps the keys it had.
  backend.auth.key_file = dir.path() + "/missing.key";
  EXPECT_THROW(blade->reload_keys(testing::TestConfig(), backend), Error);
  EXPECT_EQ(ConnectError(ConfigWithKey(key_b), blade->port()), "");
  // Nor can a reload turn authentication off.
  backend.auth.key_file.clear();
  backend.auth.none = true;
  try {
    blade->reload_keys(testing::TestConfig(), backend);
    ADD_FAILURE() << "a reload turned authentication off";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot turn authentication off"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(blade->authenticates());
}

TEST(Authentication, AClientThatPinsAPoolRefusesABladeServingAnother) {
  TempDir dir;
  const SmartConfig config = ConfigWithKey(dir.write_key("smart.key", kKeyA));
  auto blade = StartBlade(config);
  auto other = StartBlade(config);
  ASSERT_NE(blade->pool_id(), 0u);
  ASSERT_NE(blade->pool_id(), other->pool_id());
  {
    Initiator initiator(config);
    initiator.connect(0, "127.0.0.1", blade->port(), 1, blade->pool_id());
    EXPECT_NE(initiator.session(0).slot, 0);
  }
  Initiator initiator(config);
  try {
    initiator.connect(0, "127.0.0.1", other->port(), 1, blade->pool_id());
    ADD_FAILURE() << "a client that pins one pool connected to another";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("it serves pool " + other->pool_id_text() + ", and this client pins pool " +
                        blade->pool_id_text()),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(other->connected_clients(), 0);
}

TEST(Authentication, AFilePoolKeepsItsIdAcrossRestarts) {
  TempDir dir;
  BackendConfig backend = SmallBackend();
  backend.backing = "file:" + dir.path() + "/pool";
  uint64_t first = 0;
  {
    Target target(testing::TestConfig(), backend);
    first = target.pool_id();
    EXPECT_FALSE(target.reopened());
  }
  Target again(testing::TestConfig(), backend);
  EXPECT_TRUE(again.reopened());
  EXPECT_EQ(again.pool_id(), first);
  EXPECT_EQ(again.pool_id_text().size(), 16u);
}

}  // namespace
}  // namespace smart
