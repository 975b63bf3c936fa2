// A scripted stand-in for etcd in unit tests: a loopback HTTP server that,
// for each request it has read whole, answers, stalls or hangs up, as the
// test's script says (one request at a time, one connection each).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace smart::etcd {

// What the stand-in does with a request.
enum class Mode { kAnswer, kStall, kHangUp };

struct FakeReply {
  Mode mode = Mode::kAnswer;
  int status = 200;
  std::string body = "{}";
  std::chrono::milliseconds delay{0};  // before the answer
};

class FakeEtcd {
 public:
  using Script = std::function<FakeReply(const std::string& path, const std::string& body)>;

  explicit FakeEtcd(Script script) : script_(std::move(script)) { Listen(); }
  FakeEtcd(Mode mode, int status = 200, std::string body = "{}")
      : script_([mode, status, body](const std::string&, const std::string&) {
          return FakeReply{mode, status, body, std::chrono::milliseconds(0)};
        }) {
    Listen();
  }
  ~FakeEtcd() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

 private:
  void Listen() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(listen(fd_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }

  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      size_t head = std::string::npos, want = 0;
      for (;;) {
        head = in.find("\r\n\r\n");
        if (head != std::string::npos) {
          const size_t cl = in.find("Content-Length: ");
          want = cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16));
          if (in.size() >= head + 4 + want) break;
        }
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, n);
      }
      ++requests_;
      const size_t sp1 = in.find(' '), sp2 = in.find(' ', sp1 + 1);
      const std::string path = sp1 == std::string::npos ? "" : in.substr(sp1 + 1, sp2 - sp1 - 1);
      const std::string body = head == std::string::npos ? "" : in.substr(head + 4);
      const FakeReply r = script_(path, body);
      const auto until = std::chrono::steady_clock::now() + r.delay;
      while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (r.mode == Mode::kAnswer) {
        const std::string out = "HTTP/1.1 " + std::to_string(r.status) +
                                " X\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
        (void)!send(c, out.data(), out.size(), MSG_NOSIGNAL);  // the client may have given up
      } else if (r.mode == Mode::kStall) {
        while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      close(c);
    }
  }

  Script script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace smart::etcd
