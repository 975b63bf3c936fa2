// TCP helpers for the connection handshake: timeouts everywhere, errors that
// name the peer, and length-prefixed frames with a size limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace smart {

// Connects within `timeout_ms`; throws smart::Error naming host:port and why.
int TcpConnect(const std::string& host, int port, int timeout_ms);
// Listens on `address` (an IPv4 or IPv6 address or a host name; "::" is
// every interface, IPv4 too); port 0 picks a free port. Returns the fd and
// stores the bound port in *bound_port. Throws, naming address and port.
int TcpListen(const std::string& address, int port, int* bound_port);
void SetSocketTimeouts(int fd, int timeout_ms);
void CloseFd(int* fd);

// A TCP endpoint as the handshake carries it: IPv4 (IPv4-mapped IPv6
// addresses become IPv4) or IPv6, and a port.
struct SocketAddress {
  uint8_t family = 0;  // 4 or 6; 0: unknown
  uint8_t addr[16] = {};
  uint16_t port = 0;

  bool operator==(const SocketAddress& o) const;
  bool operator!=(const SocketAddress& o) const { return !(*this == o); }
  std::string ToString() const;  // "10.0.0.2:5000", "[fe80::1]:5000"
};
// The remote end of a connected socket (what a client dialled), and the
// local end (where a blade's accepted connection arrived). Family 0 on error.
SocketAddress PeerAddress(int fd);
SocketAddress LocalAddress(int fd);

// A point in time by which a whole exchange must be over.
using Deadline = std::chrono::steady_clock::time_point;
constexpr Deadline kNoDeadline = Deadline::max();

// Frames: a 4-byte little-endian length, then the body (at most
// `max_length` bytes; a longer one is refused before it is read). Receiving
// fails once `deadline` passes, however the peer dribbles its bytes.
// `peer` names the other side in errors. Throw smart::Error.
void SendFrame(int fd, const std::string& body, const std::string& peer);
std::string RecvFrame(int fd, const std::string& peer, uint32_t max_length, Deadline deadline = kNoDeadline);
void SendByte(int fd, char byte, const std::string& peer);
char RecvByte(int fd, const std::string& peer, Deadline deadline = kNoDeadline);

// Little-endian encoding with bounds-checked decoding.
class WireWriter {
 public:
  void u8(uint8_t v) { data_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* p, size_t n) { data_.append(static_cast<const char*>(p), n); }
  void str(const std::string& s);  // 4-byte length + bytes
  const std::string& data() const { return data_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string data_;
};

class WireReader {
 public:
  // `what` names the message in errors ("handshake from 10.0.0.2:5000").
  WireReader(const std::string& data, std::string what) : data_(data), what_(std::move(what)) {}
  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  void bytes(void* p, size_t n);
  std::string str(size_t max_length);
  // Throws unless every byte was consumed.
  void finish() const;

 private:
  uint64_t get(int n);
  void need(size_t n) const;
  const std::string& data_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace smart
