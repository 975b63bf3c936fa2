#include "smart/resource/handshake.h"

#include "smart/resource/net.h"
#include "smart/status.h"

namespace smart {

namespace {

void PutEndpoints(WireWriter& w, const std::vector<QueuePairEndpoint>& endpoints) {
  w.u16(static_cast<uint16_t>(endpoints.size()));
  for (const QueuePairEndpoint& e : endpoints) {
    w.u32(e.qp_num);
    w.u32(e.psn);
    w.u16(e.lid);
    w.bytes(e.gid, sizeof(e.gid));
  }
}

std::vector<QueuePairEndpoint> GetEndpoints(WireReader& r, const std::string& what) {
  const uint16_t count = r.u16();
  if (count == 0 || count > kMaxQueuePairsPerConnection) {
    throw Error("malformed " + what + ": " + std::to_string(count) + " queue pairs (expected 1.." +
                std::to_string(kMaxQueuePairsPerConnection) + ")");
  }
  std::vector<QueuePairEndpoint> endpoints(count);
  for (QueuePairEndpoint& e : endpoints) {
    e.qp_num = r.u32();
    e.psn = r.u32() & 0xffffff;
    e.lid = r.u16();
    r.bytes(e.gid, sizeof(e.gid));
  }
  return endpoints;
}

void CheckHeader(WireReader& r, const std::string& what, HandshakeMessage expected) {
  const uint32_t magic = r.u32();
  if (magic != kHandshakeMagic) {
    throw Error(what + " is not a handshake of this framework (bad magic 0x" + [&] {
      char buf[16];
      snprintf(buf, sizeof(buf), "%08x", magic);
      return std::string(buf);
    }() + ")");
  }
  const uint16_t version = r.u16();
  if (version != kHandshakeVersion) {
    throw Error(what + " speaks handshake version " + std::to_string(version) + ", this build speaks " +
                std::to_string(kHandshakeVersion) + ": run the same release on both sides");
  }
  const uint8_t type = r.u8();
  if (type != static_cast<uint8_t>(expected)) {
    throw Error("malformed " + what + ": message type " + std::to_string(type) + " where type " +
                std::to_string(static_cast<int>(expected)) + " belongs (a message out of order or reflected)");
  }
}

void PutHeader(WireWriter& w, HandshakeMessage type) {
  w.u32(kHandshakeMagic);
  w.u16(kHandshakeVersion);
  w.u8(static_cast<uint8_t>(type));
}

// A flag byte: 0 or 1, nothing else.
bool GetFlag(WireReader& r, const std::string& what, const char* name) {
  const uint8_t v = r.u8();
  if (v > 1) throw Error("malformed " + what + ": " + name + " flag is " + std::to_string(v) + " (expected 0 or 1)");
  return v == 1;
}

}  // namespace

std::string AuthHello::Encode() const {
  WireWriter w;
  PutHeader(w, HandshakeMessage::kAuthHello);
  w.u8(has_key ? 1 : 0);
  w.bytes(nonce.data(), nonce.size());
  if (has_key) w.str(key_id);
  w.u8(dialled.family);
  w.bytes(dialled.addr, sizeof(dialled.addr));
  w.u16(dialled.port);
  return w.data();
}

AuthHello AuthHello::Decode(const std::string& data, const std::string& peer) {
  const std::string what = "handshake from client " + peer;
  WireReader r(data, what);
  CheckHeader(r, what, HandshakeMessage::kAuthHello);
  AuthHello hello;
  hello.has_key = GetFlag(r, what, "key");
  r.bytes(hello.nonce.data(), hello.nonce.size());
  if (hello.has_key) {
    hello.key_id = r.str(2 * kKeyIdBytes);
    if (hello.key_id.size() != 2 * kKeyIdBytes ||
        hello.key_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw Error("malformed " + what + ": a key ID of " + std::to_string(hello.key_id.size()) +
                  " bytes that is not 16 hex digits");
    }
  }
  hello.dialled.family = r.u8();
  if (hello.dialled.family != 0 && hello.dialled.family != 4 && hello.dialled.family != 6) {
    throw Error("malformed " + what + ": address family " + std::to_string(hello.dialled.family) +
                " (expected 4 or 6)");
  }
  r.bytes(hello.dialled.addr, sizeof(hello.dialled.addr));
  hello.dialled.port = r.u16();
  r.finish();
  return hello;
}

std::string AuthChallenge::Encode() const {
  WireWriter w;
  PutHeader(w, HandshakeMessage::kAuthChallenge);
  w.str(error);
  if (!error.empty()) {
    w.u8(busy ? 1 : 0);
    return w.data();
  }
  w.u8(has_key ? 1 : 0);
  w.bytes(nonce.data(), nonce.size());
  w.u64(pool_id);
  return w.data();
}

AuthChallenge AuthChallenge::Decode(const std::string& data, const std::string& peer) {
  const std::string what = "handshake from memory blade " + peer;
  WireReader r(data, what);
  CheckHeader(r, what, HandshakeMessage::kAuthChallenge);
  AuthChallenge challenge;
  challenge.error = r.str(kMaxHandshakeError);
  if (!challenge.error.empty()) {
    challenge.busy = GetFlag(r, what, "busy");
    r.finish();
    return challenge;
  }
  challenge.has_key = GetFlag(r, what, "key");
  r.bytes(challenge.nonce.data(), challenge.nonce.size());
  challenge.pool_id = r.u64();
  r.finish();
  return challenge;
}

std::string ClientHello::EncodeUnproven() const {
  WireWriter w;
  PutHeader(w, HandshakeMessage::kClientHello);
  w.str(error);
  if (!error.empty()) return w.data();
  w.u8(static_cast<uint8_t>(transport));
  PutEndpoints(w, endpoints);
  w.u8(has_proof ? 1 : 0);
  return w.data();
}

std::string ClientHello::Encode() const {
  std::string data = EncodeUnproven();
  if (error.empty() && has_proof) data.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  return data;
}

ClientHello ClientHello::Decode(const std::string& data, const std::string& peer) {
  const std::string what = "handshake from client " + peer;
  WireReader r(data, what);
  CheckHeader(r, what, HandshakeMessage::kClientHello);
  ClientHello hello;
  hello.error = r.str(kMaxHandshakeError);
  if (!hello.error.empty()) {
    r.finish();
    return hello;
  }
  const uint8_t transport = r.u8();
  if (transport != static_cast<uint8_t>(TransportKind::kVerbs) && transport != static_cast<uint8_t>(TransportKind::kShm)) {
    throw Error("malformed " + what + ": unknown transport " + std::to_string(transport));
  }
  hello.transport = static_cast<TransportKind>(transport);
  hello.endpoints = GetEndpoints(r, what);
  hello.has_proof = GetFlag(r, what, "proof");
  if (hello.has_proof) r.bytes(hello.proof.data(), hello.proof.size());
  r.finish();
  return hello;
}

std::string ServerHello::EncodeUnproven() const {
  WireWriter w;
  PutHeader(w, HandshakeMessage::kServerHello);
  w.str(error);
  if (!error.empty()) {
    w.u8(busy ? 1 : 0);
    return w.data();
  }
  for (const RemoteRegion& region : regions) {
    w.u8(region.valid ? 1 : 0);
    w.u64(region.addr);
    w.u64(region.length);
    w.u32(region.rkey);
  }
  PutEndpoints(w, endpoints);
  w.u32(static_cast<uint32_t>(window_rkeys.size()));
  for (uint32_t rkey : window_rkeys) w.u32(rkey);
  w.str(exported);
  w.u16(session.slot);
  w.u16(session.incarnation);
  w.u8(has_proof ? 1 : 0);
  return w.data();
}

std::string ServerHello::Encode() const {
  std::string data = EncodeUnproven();
  if (error.empty() && has_proof) data.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  return data;
}

ServerHello ServerHello::Decode(const std::string& data, const std::string& peer) {
  const std::string what = "handshake from memory blade " + peer;
  WireReader r(data, what);
  CheckHeader(r, what, HandshakeMessage::kServerHello);
  ServerHello hello;
  hello.error = r.str(kMaxHandshakeError);
  if (!hello.error.empty()) {
    hello.busy = GetFlag(r, what, "busy");
    r.finish();
    return hello;
  }
  for (RemoteRegion& region : hello.regions) {
    const uint8_t valid = r.u8();
    if (valid > 1) throw Error("malformed " + what + ": bad region flag");
    region.valid = valid == 1;
    region.addr = r.u64();
    region.length = r.u64();
    region.rkey = r.u32();
    if (region.valid && (region.length == 0 || region.addr + region.length < region.addr)) {
      throw Error("malformed " + what + ": region of " + std::to_string(region.length) + " bytes at 0x" +
                  std::to_string(region.addr) + " wraps or is empty");
    }
  }
  if (!hello.regions[kMainMemoryRegion].valid) throw Error("malformed " + what + ": no main memory region");
  hello.endpoints = GetEndpoints(r, what);
  const uint32_t windows = r.u32();
  if (windows != 0 && windows != hello.endpoints.size()) {
    throw Error("malformed " + what + ": " + std::to_string(windows) + " memory windows for " +
                std::to_string(hello.endpoints.size()) + " queue pairs (expected none or one each)");
  }
  hello.window_rkeys.resize(windows);
  for (uint32_t& rkey : hello.window_rkeys) rkey = r.u32();
  hello.exported = r.str(4096);
  hello.session.slot = r.u16();
  hello.session.incarnation = r.u16();
  if (hello.session.slot == 0 || hello.session.slot >= kMaxSessions ||
      hello.session.incarnation > kSessionIncarnationMask) {
    throw Error("malformed " + what + ": session slot " + std::to_string(hello.session.slot) + " incarnation " +
                std::to_string(hello.session.incarnation) + " (expected slot 1.." + std::to_string(kMaxSessions - 1) +
                ")");
  }
  hello.has_proof = GetFlag(r, what, "proof");
  if (hello.has_proof) r.bytes(hello.proof.data(), hello.proof.size());
  r.finish();
  return hello;
}

std::string Unproven(const std::string& frame, bool has_proof) {
  if (!has_proof) return frame;
  if (frame.size() < kProofBytes) throw Error("a handshake message shorter than its proof");
  return frame.substr(0, frame.size() - kProofBytes);
}

}  // namespace smart
