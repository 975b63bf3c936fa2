// What another party wrote reaches a log line or an error escaped and cut
// short, and lines about refused peers are written at most once a second.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/target.h"
#include "smart/util/peer_text.h"
#include "test/unit/test_util.h"

namespace smart {
namespace {

// A peer's text with a forged second line and a terminal escape, and long.
const std::string kHostileText =
    "giving up\n[W] memory blade: forged line \x1b[31mred\x1b[0m " + std::string(4000, 'x');

// Collects the library's log lines while it lives.
class LogCapture {
 public:
  LogCapture() {
    SetLogSink([this](LogLevel, const char* line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { SetLogSink({}); }
  std::vector<std::string> matching(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> found;
    for (const std::string& line : lines_) {
      if (line.find(needle) != std::string::npos) found.push_back(line);
    }
    return found;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

std::unique_ptr<Target> StartBlade() {
  BackendConfig backend;
  backend.source = "backend.json";
  backend.capacity = 4;
  backend.tcp_port = 0;
  auto target = std::make_unique<Target>(testing::TestConfig(), backend);
  target->start();
  return target;
}

void WaitForHandshakes(const Target& target) {
  for (int i = 0; i < 3000 && target.handshakes_in_progress() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Connects, takes the challenge and gives up with `error` in its hello.
void GiveUp(int port, const std::string& error) {
  int fd = TcpConnect("127.0.0.1", port, 5000);
  SetSocketTimeouts(fd, 10000);
  AuthHello hello;
  hello.nonce = RandomNonce();
  SendFrame(fd, hello.Encode(), "blade");
  AuthChallenge::Decode(RecvFrame(fd, "blade", 1 << 20), "blade");
  ClientHello give_up;
  give_up.error = error;
  SendFrame(fd, give_up.Encode(), "blade");
  char c;
  while (recv(fd, &c, 1, 0) > 0) {
  }
  CloseFd(&fd);
}

void ExpectEscaped(const std::string& text) {
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("giving up\\n[W] memory blade: forged line \\x1b[31mred\\x1b[0m"), std::string::npos) << text;
  EXPECT_LT(text.size(), 600u) << text;
  EXPECT_NE(text.find("(" + std::to_string(kHostileText.size()) + " bytes)"), std::string::npos) << text;
}

TEST(PeerText, EscapesWhatCouldForgeOrColourALineAndCutsItShort) {
  EXPECT_EQ(PeerText("plain \"text\" {1}"), "plain \"text\" {1}");
  EXPECT_EQ(PeerText(std::string("a\nb\r\tc\\d\x1b\x7f\xc3\xa9\0e", 14)),
            "a\\nb\\r\\tc\\\\d\\x1b\\x7f\\xc3\\xa9\\x00e");
  EXPECT_EQ(PeerText("abcdef", 3), "abc... (6 bytes)");
}

TEST(PeerText, TheBladeLogsAClientsReasonEscaped) {
  auto blade = StartBlade();
  LogCapture log;
  GiveUp(blade->port(), kHostileText);
  WaitForHandshakes(*blade);
  const std::vector<std::string> lines = log.matching("gave up the handshake");
  ASSERT_EQ(lines.size(), 1u);
  ExpectEscaped(lines[0]);
  EXPECT_TRUE(log.matching("forged line \x1b").empty());
}

TEST(PeerText, TheClientQuotesABladesReasonEscaped) {
  int port = 0;
  int listen_fd = TcpListen("127.0.0.1", 0, &port);
  std::thread fake_blade([listen_fd] {
    int fd = accept(listen_fd, nullptr, nullptr);
    SetSocketTimeouts(fd, 10000);
    RecvFrame(fd, "client", 1 << 20);
    AuthChallenge refusal;
    refusal.error = kHostileText;
    SendFrame(fd, refusal.Encode(), "client");
    char c;
    while (recv(fd, &c, 1, 0) > 0) {
    }
    CloseFd(&fd);
  });
  std::string error;
  {
    Initiator initiator(testing::TestConfig());
    try {
      initiator.connect(0, "127.0.0.1", port, 1);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  fake_blade.join();
  CloseFd(&listen_fd);
  EXPECT_NE(error.find("refused the connection: giving up"), std::string::npos) << error;
  ExpectEscaped(error);
}

TEST(PeerText, RefusalsAreLoggedAtMostOnceASecond) {
  auto blade = StartBlade();
  LogCapture log;
  for (int i = 0; i < 20; ++i) GiveUp(blade->port(), "attempt " + std::to_string(i));
  WaitForHandshakes(*blade);
  // 20 in well under the few seconds it would take to log more than a few.
  EXPECT_LE(log.matching("gave up the handshake").size(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  GiveUp(blade->port(), "the last");
  WaitForHandshakes(*blade);
  const std::vector<std::string> last = log.matching("gave up the handshake: the last");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_NE(last[0].find("more since the last line not logged"), std::string::npos) << last[0];
}

TEST(LogRateLimit, OneLineAnIntervalAndACountOfTheRest) {
  LogRateLimit limit(std::chrono::milliseconds(200));
  uint64_t suppressed = 99;
  EXPECT_TRUE(limit.allow(&suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_FALSE(limit.allow(&suppressed));
  EXPECT_FALSE(limit.allow(&suppressed));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(limit.allow(&suppressed));
  EXPECT_EQ(suppressed, 2u);
  EXPECT_EQ(LogRateLimit::Suppressed(2), ", 2 more since the last line not logged");
  EXPECT_EQ(LogRateLimit::Suppressed(0), "");
}

}  // namespace
}  // namespace smart
