// The connection handshake between a compute blade and a memory blade, over
// TCP: the client sends its queue pair endpoints; the memory blade answers
// with its memory regions, its own endpoints and transport-specific details;
// both confirm readiness; the TCP connection then stays open so that either
// side learns at once when the other goes away.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smart/common.h"
#include "smart/transport.h"

namespace smart {

constexpr uint32_t kHandshakeMagic = 0x54524d53;  // "SMRT"
constexpr uint16_t kHandshakeVersion = 2;
constexpr int kMaxQueuePairsPerConnection = 1024;
constexpr char kClientReady = 'B';
constexpr char kServerReady = 'A';

struct ClientHello {
  TransportKind transport = TransportKind::kShm;
  std::vector<QueuePairEndpoint> endpoints;

  std::string Encode() const;
  static ClientHello Decode(const std::string& data, const std::string& peer);
};

struct ServerHello {
  std::string error;  // non-empty: the memory blade refused the client
  RemoteRegion regions[kMemoryRegions];
  std::vector<QueuePairEndpoint> endpoints;
  std::string exported;  // Device::export_regions output
  SessionId session;     // the client's slot in the blade's session table

  std::string Encode() const;
  static ServerHello Decode(const std::string& data, const std::string& peer);
};

}  // namespace smart
