// What the handshake tests share: key files in a scratch folder, small
// blades, and a client that speaks the handshake by hand.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "smart/initiator.h"
#include "smart/resource/auth.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/target.h"
#include "test/unit/test_util.h"

namespace smart {
namespace auth_test {

// A TCP connection to 127.0.0.1:port from the loopback address `source`.
inline int ConnectFrom(int port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    throw Error("connecting from " + source + ": " + strerror(errno));
  }
  return fd;
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/smart-auth-test.XXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempDir() { [[maybe_unused]] int rc = system(("rm -rf " + path_).c_str()); }
  std::string write(const std::string& name, const std::string& bytes, mode_t mode = 0600) const {
    const std::string path = path_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    chmod(path.c_str(), mode);
    return path;
  }
  // A key file holding the 32-byte `key`.
  std::string write_key(const std::string& name, const std::string& key) const {
    return write(name, KeyFileText(key));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const std::string kKeyA(32, 'a');
inline const std::string kKeyB(32, 'b');

inline SmartConfig ConfigWithKey(const std::string& key_file, int timeout_ms = 5000) {
  SmartConfig config = testing::TestConfig();
  config.auth.key_file = key_file;
  config.connect_timeout_ms = timeout_ms;
  return config;
}

inline BackendConfig SmallBackend(int max_clients = 16) {
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  backend.max_clients = max_clients;
  return backend;
}

// A small blade whose backend.json names `key_file` and `also_accept`.
inline BackendConfig KeyedBackend(const std::string& key_file, const std::vector<std::string>& also_accept) {
  BackendConfig backend = SmallBackend();
  backend.auth.configured = true;
  backend.auth.key_file = key_file;
  backend.auth.also_accept = also_accept;
  return backend;
}

inline std::unique_ptr<Target> StartBlade(const SmartConfig& config, const BackendConfig& backend) {
  auto target = std::make_unique<Target>(config, backend);
  target->start();
  return target;
}

inline std::unique_ptr<Target> StartBlade(const SmartConfig& config, int max_clients = 16) {
  return StartBlade(config, SmallBackend(max_clients));
}

// Waits (bounded) until the blade has no handshake running, so that its
// log lines about one are written.
inline void WaitForHandshakes(const Target& target, int count = 0) {
  for (int i = 0; i < 3000 && target.handshakes_in_progress() != count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(target.handshakes_in_progress(), count);
}

inline std::string ConnectError(const SmartConfig& config, int port) {
  Initiator initiator(config);
  try {
    initiator.connect(0, "127.0.0.1", port, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A client that speaks the handshake by hand and keeps every byte the blade sent.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(TcpConnect("127.0.0.1", port, 5000)) { SetSocketTimeouts(fd_, 20000); }
  // Connects from `source` (another loopback address: 127.0.0.2, ...).
  RawClient(int port, const std::string& source) : fd_(ConnectFrom(port, source)) { SetSocketTimeouts(fd_, 20000); }
  ~RawClient() { CloseFd(&fd_); }
  // The blade's address as this client dialled it.
  SocketAddress dialled() const { return PeerAddress(fd_); }
  void send_frame(const std::string& body) { SendFrame(fd_, body, "blade"); }
  void send_bytes(const std::string& bytes) { ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size())); }
  void finish_sending() { shutdown(fd_, SHUT_WR); }
  char recv_byte() { return RecvByte(fd_, "blade"); }
  std::string recv_frame() {
    std::string body = RecvFrame(fd_, "blade", 1 << 20);
    received_ += body;
    return body;
  }
  // Everything else the blade sends until it closes the connection.
  const std::string& drain() {
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd_, buf, sizeof(buf), 0)) > 0) received_.append(buf, static_cast<size_t>(n));
    return received_;
  }

 private:
  int fd_;
  std::string received_;
};

// A client hello, proven with `key` over `transcript` (which it joins).
inline ClientHello HelloWithProof(const SessionKey* key, Transcript transcript) {
  ClientHello hello;
  hello.transport = TransportKind::kShm;
  hello.endpoints.resize(1);
  hello.endpoints[0].qp_num = 1;
  if (key != nullptr) {
    hello.has_proof = true;
    transcript.add(hello.EncodeUnproven());
    hello.proof = key->prove(AuthRole::kClient, transcript);
  }
  return hello;
}

// An auth hello that says `client` holds key A, with `nonce`.
inline AuthHello KeyedHello(const RawClient& client, const Nonce& nonce) {
  AuthHello hello;
  hello.has_key = true;
  hello.nonce = nonce;
  hello.key_id = KeyId(kKeyA);
  hello.dialled = client.dialled();
  return hello;
}

// Sends `hello` and reads the blade's challenge.
inline AuthChallenge SendAuthHello(RawClient& client, const AuthHello& hello) {
  client.send_frame(hello.Encode());
  return AuthChallenge::Decode(client.recv_frame(), "blade");
}

// The transcript of an auth hello and the challenge that answered it.
inline Transcript Opening(const AuthHello& hello, const AuthChallenge& challenge) {
  Transcript transcript;
  transcript.add(hello.Encode());
  transcript.add(challenge.Encode());
  return transcript;
}

// Waits (bounded) until the blade has `count` sessions.
inline void WaitForSessions(const Target& target, int count) {
  for (int i = 0; i < 3000 && target.connected_clients() != count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(target.connected_clients(), count);
}

}  // namespace auth_test
}  // namespace smart
