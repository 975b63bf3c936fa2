// The connection handshake between a compute blade and a memory blade, over
// TCP, in four messages and a readiness exchange:
//   client -> blade  AuthHello      a random nonce; the ID of the client's key
//                                   (if it has one); the address it dialled
//   blade -> client  AuthChallenge  the blade's nonce; whether it has a key;
//                                   its pool ID
//   client -> blade  ClientHello    queue pair endpoints and the client's proof
//   blade -> client  ServerHello    memory regions, endpoints, transport details
//                                   and, with a key, the blade's proof
// then both confirm readiness; the TCP connection stays open so that either
// side learns at once when the other goes away. Each proof covers the
// transcript up to it: every earlier message and its own message but the
// proof (smart/resource/auth.h), so a relay cannot pass a proof on with other
// endpoints, other regions or another dialled address.
//
// The client proves first, and only to the blade it dialled: a blade hands
// out no proof to a peer that has not proven the key, so connecting to a
// blade yields nothing to test key guesses against offline. A blade with a
// key checks, before anything else, that the key IDs match and that the
// address the client dialled is where the connection arrived (a relay or
// port mapping in between is refused unless backend.json allows it); it
// checks the client's proof before it creates anything or reveals any
// address, rkey or memory handle. A client with a key checks the blade's
// proof before it uses anything the ServerHello says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smart/common.h"
#include "smart/resource/auth.h"
#include "smart/resource/net.h"
#include "smart/transport.h"

namespace smart {

constexpr uint32_t kHandshakeMagic = 0x54524d53;  // "SMRT"
constexpr uint16_t kHandshakeVersion = 7;
// Frame limits: nothing before a proven key may make the other side
// buffer more than a small message.
constexpr uint32_t kMaxAuthFrame = 8192;
constexpr uint32_t kMaxHelloFrame = 64 * 1024;
constexpr size_t kMaxHandshakeError = 4096;
constexpr int kMaxQueuePairsPerConnection = 1024;
constexpr char kClientReady = 'B';
constexpr char kServerReady = 'A';

// Each message starts with the magic, the version and its type.
enum class HandshakeMessage : uint8_t { kAuthHello = 1, kAuthChallenge = 2, kClientHello = 3, kServerHello = 4 };

struct AuthHello {
  bool has_key = false;  // the client will check the blade's proof
  Nonce nonce{};
  std::string key_id;    // with has_key: its key's ID (16 hex digits)
  SocketAddress dialled;  // the blade's address as the client connected to it

  std::string Encode() const;
  static AuthHello Decode(const std::string& data, const std::string& peer);
};

struct AuthChallenge {
  std::string error;  // non-empty: the memory blade refused the client
  bool busy = false;  // with error: refused for load; the client may try again shortly
  bool has_key = false;
  Nonce nonce{};
  // The blade's pool ID (Target::pool_id): covered by both proofs, and
  // checked by a client that pins it (memory_servers' "pool_id").
  uint64_t pool_id = 0;

  std::string Encode() const;
  static AuthChallenge Decode(const std::string& data, const std::string& peer);
};

struct ClientHello {
  std::string error;  // non-empty: the client gives up (the blade's proof failed)
  TransportKind transport = TransportKind::kShm;
  std::vector<QueuePairEndpoint> endpoints;
  bool has_proof = false;
  Proof proof{};  // the client's proof (AuthRole::kClient)

  std::string EncodeUnproven() const;  // all but the proof, which comes last
  std::string Encode() const;
  static ClientHello Decode(const std::string& data, const std::string& peer);
};

struct ServerHello {
  std::string error;  // non-empty: the memory blade refused the client
  bool busy = false;  // with error: refused for load; the client may try again shortly
  RemoteRegion regions[kMemoryRegions];
  std::vector<QueuePairEndpoint> endpoints;
  // Empty, or one per endpoint: the key to the main region that only the
  // client's queue pair connected to that endpoint can use (a memory
  // window); it replaces the region's rkey on that queue pair.
  std::vector<uint32_t> window_rkeys;
  std::string exported;  // Device::export_regions output
  SessionId session;     // the client's slot in the blade's session table
  bool has_proof = false;
  Proof proof{};  // a blade with a key: its proof (AuthRole::kBladeHello)

  std::string EncodeUnproven() const;  // all but the proof, which comes last
  std::string Encode() const;
  static ServerHello Decode(const std::string& data, const std::string& peer);
};

// What a received message's proof covers: the frame without its last
// kProofBytes when it carries one (a decoded message is whole, so a proof
// is there to strip), the whole frame otherwise.
std::string Unproven(const std::string& frame, bool has_proof);

}  // namespace smart
