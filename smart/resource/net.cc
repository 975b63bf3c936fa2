#include "smart/resource/net.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "smart/status.h"

namespace smart {

namespace {

std::string Peer(const std::string& host, int port) { return host + ":" + std::to_string(port); }

}  // namespace

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void SetSocketTimeouts(int fd, int timeout_ms) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int TcpConnect(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    throw Error("cannot resolve memory blade host \"" + host + "\": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  int fd = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              deadline - std::chrono::steady_clock::now())
                                              .count());
        pollfd p{fd, POLLOUT, 0};
        const int n = poll(&p, 1, left > 0 ? left : 0);
        if (n == 0) {
          err = ETIMEDOUT;
        } else if (n < 0) {
          err = errno;
        } else {
          socklen_t len = sizeof(err);
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    if (err == 0) break;  // connected: do not try further addresses
    last_error = err == ETIMEDOUT ? "no answer within " + std::to_string(timeout_ms) + " ms" : strerror(err);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(result);
  if (fd < 0) {
    throw Error("cannot connect to memory blade at " + Peer(host, port) + ": " + last_error +
                " (is a memory blade running there?)");
  }
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetSocketTimeouts(fd, timeout_ms);
  return fd;
}

int TcpListen(const std::string& address, int port, int* bound_port) {
  const std::string where = (address.find(':') != std::string::npos ? "[" + address + "]" : address) + " port " +
                            std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(address.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) throw Error("cannot listen on " + where + ": cannot resolve \"" + address + "\": " + gai_strerror(rc));
  std::string reason = "no address";
  int listen_fd = -1;
  for (addrinfo* ai = result; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      reason = strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) {
      // "::" serves IPv4 clients too, as 0.0.0.0 would.
      const int zero = 0;
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      reason = strerror(errno);
      if (errno == EADDRINUSE) reason += " (another memory blade may be running; pick another tcp_port)";
      if (errno == EADDRNOTAVAIL) reason += " (no interface of this host has that address; see \"bind\")";
      close(fd);
      continue;
    }
    listen_fd = fd;
  }
  freeaddrinfo(result);
  if (listen_fd < 0) throw Error("cannot listen on " + where + ": " + reason);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return listen_fd;
}

namespace {

void SendAll(int fd, const char* p, size_t n, const std::string& peer) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      throw Error("connection to " + peer + " failed while sending: " +
                  (errno == EAGAIN ? std::string("timed out (connect_timeout_ms in smart_config.json)") : strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void RecvAll(int fd, char* p, size_t n, const std::string& peer, Deadline deadline) {
  while (n > 0) {
    if (deadline != kNoDeadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        throw Error("connection to " + peer + " timed out: the handshake did not finish within connect_timeout_ms");
      }
      SetSocketTimeouts(fd, static_cast<int>(std::min<int64_t>(left.count(), 3600 * 1000)));
    }
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw Error("connection to " + peer + " closed by the peer during the handshake");
    if (r < 0) {
      throw Error("connection to " + peer + " failed while receiving: " +
                  (errno == EAGAIN ? std::string("timed out waiting for an answer (connect_timeout_ms in smart_config.json)") : strerror(errno)));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

void SendFrame(int fd, const std::string& body, const std::string& peer) {
  // One send for header and body: two small writes would meet Nagle's
  // algorithm and the peer's delayed ACK (40 ms per message).
  WireWriter w;
  w.u32(static_cast<uint32_t>(body.size()));
  w.bytes(body.data(), body.size());
  SendAll(fd, w.data().data(), w.data().size(), peer);
}

std::string RecvFrame(int fd, const std::string& peer, uint32_t max_length, Deadline deadline) {
  std::string header(4, '\0');
  RecvAll(fd, header.data(), 4, peer, deadline);
  WireReader r(header, "frame header from " + peer);
  const uint32_t length = r.u32();
  if (length > max_length) {
    throw Error("handshake from " + peer + " announces a " + std::to_string(length) + "-byte message (limit " +
                std::to_string(max_length) + " bytes): not a memory blade or client of this framework?");
  }
  std::string body(length, '\0');
  RecvAll(fd, body.data(), length, peer, deadline);
  return body;
}

void SendByte(int fd, char byte, const std::string& peer) { SendAll(fd, &byte, 1, peer); }

char RecvByte(int fd, const std::string& peer, Deadline deadline) {
  char c;
  RecvAll(fd, &c, 1, peer, deadline);
  return c;
}

void WireWriter::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  data_.append(s);
}

void WireReader::need(size_t n) const {
  if (data_.size() - pos_ < n) {
    throw Error("malformed " + what_ + ": truncated at byte " + std::to_string(pos_) + " of " +
                std::to_string(data_.size()));
  }
}

uint64_t WireReader::get(int n) {
  need(static_cast<size_t>(n));
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
  pos_ += static_cast<size_t>(n);
  return v;
}

void WireReader::bytes(void* p, size_t n) {
  need(n);
  memcpy(p, data_.data() + pos_, n);
  pos_ += n;
}

std::string WireReader::str(size_t max_length) {
  const uint32_t n = u32();
  if (n > max_length) {
    throw Error("malformed " + what_ + ": a " + std::to_string(n) + "-byte field exceeds its limit of " +
                std::to_string(max_length));
  }
  need(n);
  std::string s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

void WireReader::finish() const {
  if (pos_ != data_.size()) {
    throw Error("malformed " + what_ + ": " + std::to_string(data_.size() - pos_) + " unexpected trailing bytes");
  }
}

namespace {

SocketAddress FromSockaddr(const sockaddr_storage& ss) {
  SocketAddress a;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    a.family = 4;
    memcpy(a.addr, &in->sin_addr, 4);
    a.port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    a.port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      a.family = 4;
      memcpy(a.addr, in6->sin6_addr.s6_addr + 12, 4);
    } else {
      a.family = 6;
      memcpy(a.addr, in6->sin6_addr.s6_addr, 16);
    }
  }
  return a;
}

}  // namespace

bool SocketAddress::operator==(const SocketAddress& o) const {
  return family == o.family && port == o.port && memcmp(addr, o.addr, family == 4 ? 4 : 16) == 0;
}

std::string SocketAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family == 4) {
    inet_ntop(AF_INET, addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(port);
  }
  if (family == 6) {
    inet_ntop(AF_INET6, addr, text, sizeof(text));
    return std::string("[") + text + "]:" + std::to_string(port);
  }
  return "an unknown address";
}

SocketAddress PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return FromSockaddr(ss);
}

SocketAddress LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return FromSockaddr(ss);
}

}  // namespace smart
