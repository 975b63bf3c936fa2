// A relay between a keyed client and a keyed memory blade. By default the
// blade refuses it: the client's hello names the address it dialled (the
// relay's), not the one its connection arrived at, so a relay cannot pass a
// client meant for one blade on to another. A blade that allows forwarded
// connections (accept_forwarded) lets an honest relay through, and still
// refuses one that passes every proof on unchanged but alters what the
// proofs vouch for: the client's queue pair endpoints (so that the blade
// would connect to the relay's), or the blade's answer (its regions).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "smart/initiator.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/target.h"
#include "test/unit/test_util.h"

namespace smart {
namespace {

// Alters the frame numbered `index` (0, 1) going to the blade or to the client.
using Tamper = std::function<void(bool to_blade, int index, std::string* body)>;

// Accepts one client on a free port, connects it to the blade, passes the
// first two frames each way through `tamper` and every later byte as is.
class Relay {
 public:
  Relay(int blade_port, Tamper tamper) : blade_port_(blade_port), tamper_(std::move(tamper)) {
    listen_fd_ = TcpListen("127.0.0.1", 0, &port_);
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    thread_.join();
    CloseFd(&listen_fd_);
  }
  int port() const { return port_; }

 private:
  void run() {
    int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    int blade = -1;
    try {
      blade = TcpConnect("127.0.0.1", blade_port_, 5000);
    } catch (const Error&) {
      CloseFd(&client);
      return;
    }
    SetSocketTimeouts(client, 10000);
    SetSocketTimeouts(blade, 10000);
    std::thread up([&] { pump(client, blade, true); });
    pump(blade, client, false);
    up.join();
    CloseFd(&client);
    CloseFd(&blade);
  }

  void pump(int from, int to, bool to_blade) {
    try {
      for (int i = 0; i < 2; ++i) {
        std::string body = RecvFrame(from, "relay", 1 << 20);
        tamper_(to_blade, i, &body);
        SendFrame(to, body, "relay");
      }
      char buf[4096];
      ssize_t n;
      while ((n = recv(from, buf, sizeof(buf), 0)) > 0) {
        if (send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
    } catch (const Error&) {
    }
    shutdown(to, SHUT_WR);
  }

  int blade_port_;
  Tamper tamper_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class RelayedHandshake : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/smart-relay-test.XXXXXX";
    dir_ = mkdtemp(name);
    key_path_ = dir_ + "/smart.key";
    std::ofstream(key_path_, std::ios::binary) << KeyFileText(std::string(32, 'k'));
    chmod(key_path_.c_str(), 0600);
    config_ = testing::TestConfig();
    config_.auth.key_file = key_path_;
    config_.connect_timeout_ms = 5000;
    blade_ = StartBlade(true);
  }

  std::unique_ptr<Target> StartBlade(bool accept_forwarded) {
    BackendConfig backend;
    backend.source = "backend.json";
    backend.capacity = 4;
    backend.tcp_port = 0;
    backend.accept_forwarded = accept_forwarded;
    auto blade = std::make_unique<Target>(config_, backend);
    blade->start();
    return blade;
  }
  void TearDown() override {
    blade_.reset();
    [[maybe_unused]] int rc = system(("rm -rf " + dir_).c_str());
  }

  // Connects through a relay; returns the error, or "" with the connection
  // made (and its capacity in *capacity).
  std::string ConnectThrough(Tamper tamper, uint64_t* capacity = nullptr, Target* blade = nullptr) {
    Relay relay((blade != nullptr ? blade : blade_.get())->port(), std::move(tamper));
    Initiator initiator(config_);
    try {
      initiator.connect(0, "127.0.0.1", relay.port(), 1);
    } catch (const Error& e) {
      return e.what();
    }
    if (capacity != nullptr) *capacity = initiator.remote_capacity(0);
    return "";
  }

  void WaitUntilNoHandshake() {
    for (int i = 0; i < 3000 && blade_->handshakes_in_progress() != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string dir_;
  std::string key_path_;
  SmartConfig config_;
  std::unique_ptr<Target> blade_;
};

TEST_F(RelayedHandshake, ARelayToABladeIsRefusedNamingBothAddresses) {
  auto other = StartBlade(false);
  const std::string error = ConnectThrough([](bool, int, std::string*) {}, nullptr, other.get());
  EXPECT_NE(error.find("refused the connection: the client dialled 127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("but its connection arrived at 127.0.0.1:" + std::to_string(other->port())),
            std::string::npos)
      << error;
  EXPECT_EQ(other->connected_clients(), 0);
  // Dialled directly, the same blade takes the same client.
  Initiator initiator(config_);
  initiator.connect(0, "127.0.0.1", other->port(), 1);
  EXPECT_EQ(initiator.remote_capacity(0), uint64_t{4} << 20);
}

TEST_F(RelayedHandshake, AnHonestRelayConnectsWhereForwardingIsAllowed) {
  uint64_t capacity = 0;
  EXPECT_EQ(ConnectThrough([](bool, int, std::string*) {}, &capacity), "");
  EXPECT_EQ(capacity, uint64_t{4} << 20);
}

TEST_F(RelayedHandshake, EndpointsChangedAfterTheClientsProofAreRefused) {
  const std::string error = ConnectThrough([](bool to_blade, int index, std::string* body) {
    if (!to_blade || index != 1) return;
    // The client's proof, passed on with other queue pair endpoints.
    ClientHello hello = ClientHello::Decode(*body, "client");
    hello.endpoints[0].qp_num ^= 0x5a5a;
    hello.endpoints[0].psn ^= 0x1234;
    *body = hello.Encode();
  });
  WaitUntilNoHandshake();
  EXPECT_NE(error.find("refused the connection: authentication failed"), std::string::npos) << error;
  EXPECT_NE(error.find("altered in transit"), std::string::npos) << error;
  EXPECT_EQ(blade_->connected_clients(), 0);
}

TEST_F(RelayedHandshake, ABladeAnswerChangedInTransitIsRefused) {
  uint64_t capacity = 0;
  const std::string error = ConnectThrough(
      [](bool to_blade, int index, std::string* body) {
        if (to_blade || index != 1) return;
        ServerHello reply = ServerHello::Decode(*body, "blade");
        if (!reply.error.empty()) return;
        reply.regions[kMainMemoryRegion].length /= 2;
        *body = reply.Encode();
      },
      &capacity);
  EXPECT_NE(error.find("failed authentication"), std::string::npos) << error << " (capacity " << capacity << ")";
  EXPECT_NE(error.find("altered in transit"), std::string::npos) << error;
}

}  // namespace
}  // namespace smart
