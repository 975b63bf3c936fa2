#include "smart/target/blade_handshake.h"

#include <utility>

#include "smart/status.h"

namespace smart {

namespace {

std::string Frame(const std::string& body) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(body.size()));
  w.bytes(body.data(), body.size());
  return w.data();
}

uint32_t FrameLength(const std::string& buffer) {
  return static_cast<uint32_t>(static_cast<uint8_t>(buffer[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(buffer[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(buffer[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(buffer[3])) << 24;
}

}  // namespace

BladeHandshake::BladeHandshake(Settings settings, std::string peer)
    : settings_(std::move(settings)), peer_(std::move(peer)) {}

void BladeHandshake::receive(const char* data, size_t n) {
  if (state_ != State::kAwaitingAuthHello && state_ != State::kAwaitingClientHello) {
    if (state_ == State::kProven && n > 0) {
      refuse_at("the client sent " + std::to_string(n) + " bytes before the memory blade answered its hello",
                Refusal::kMalformed, false);
    }
    return;
  }
  buffer_.append(data, n);
  while (state_ == State::kAwaitingAuthHello || state_ == State::kAwaitingClientHello) {
    if (buffer_.size() < 4) return;
    const uint32_t length = FrameLength(buffer_);
    const uint32_t limit = state_ == State::kAwaitingAuthHello ? kMaxAuthFrame : kMaxHelloFrame;
    if (length > limit) {
      buffer_.clear();
      refuse_at("handshake from client " + peer_ + " announces a " + std::to_string(length) +
                    "-byte message (limit " + std::to_string(limit) + " at this step)",
                Refusal::kMalformed, false);
      return;
    }
    if (buffer_.size() < 4 + static_cast<size_t>(length)) return;
    std::string frame = buffer_.substr(4, length);
    buffer_.erase(0, 4 + static_cast<size_t>(length));
    try {
      if (state_ == State::kAwaitingAuthHello) {
        on_auth_hello(frame);
      } else {
        on_client_hello(frame);
      }
    } catch (const Error& e) {
      refuse_at(std::string("the memory blade could not complete the handshake: ") + e.what(), Refusal::kMalformed,
                false);
      return;
    }
  }
  // Proven: anything already behind the hello is a client out of step.
  if (state_ == State::kProven && !buffer_.empty()) {
    const size_t extra = buffer_.size();
    buffer_.clear();
    refuse_at("the client sent " + std::to_string(extra) + " bytes before the memory blade answered its hello",
              Refusal::kMalformed, false);
  }
}

void BladeHandshake::on_auth_hello(const std::string& frame) {
  const AuthHello hello = AuthHello::Decode(frame, peer_);
  transcript_.add(frame);
  const bool keyed = !settings_.keys.empty();
  if (keyed && !hello.has_key) {
    refuse_at("the memory blade requires a key and the client has none: set \"auth\": {\"key_file\": ...} "
              "in the client's smart_config.json to a copy of the memory blade's key file",
              Refusal::kNoKey, false);
    return;
  }
  if (keyed) {
    for (const SessionKey* k : settings_.keys) {
      if (k->id() == hello.key_id) key_ = k;
    }
    if (key_ == nullptr) {
      std::string ids;
      for (const SessionKey* k : settings_.keys) ids += (ids.empty() ? "" : " or ") + k->id();
      refuse_at("the client's key (ID " + hello.key_id + ") is not the memory blade's (ID " + ids +
                    "): give both sides the same key file (smart_keygen prints a key's ID, and so does the first "
                    "line of every refusal)",
                Refusal::kWrongKey, false);
      return;
    }
  }
  // The client's proof will cover the address it dialled: a relay that
  // passed the connection on to this blade cannot change it.
  if (keyed && !settings_.accept_forwarded && hello.dialled != settings_.arrived) {
    refuse_at("the client dialled " + hello.dialled.ToString() + " but its connection arrived at " +
                  settings_.arrived.ToString() +
                  ": something forwards connections between them (a relay, NAT or a port mapping), so the client "
                  "may not be talking to the memory blade it meant; if the forwarding is intended, set "
                  "\"accept_forwarded\": true in this blade's backend.json",
              Refusal::kForwarded, false);
    return;
  }
  // No proof here: the blade proves the key only to a client that proved
  // it first (handshake.h).
  AuthChallenge challenge;
  challenge.nonce = RandomNonce();
  challenge.has_key = keyed;
  challenge.pool_id = settings_.pool_id;
  const std::string body = challenge.Encode();
  transcript_.add(body);
  output_ += Frame(body);
  challenge_sent_ = true;
  state_ = State::kAwaitingClientHello;
}

void BladeHandshake::on_client_hello(const std::string& frame) {
  hello_ = ClientHello::Decode(frame, peer_);
  transcript_.add(Unproven(frame, hello_.error.empty() && hello_.has_proof));
  if (!hello_.error.empty()) {
    client_error_ = hello_.error;
    state_ = State::kGaveUp;
    return;
  }
  if (key_ != nullptr && !hello_.has_proof) {
    refuse_at("authentication failed: the client sent no proof of the key", Refusal::kBadProof, false);
    return;
  }
  if (key_ != nullptr && !key_->verify(AuthRole::kClient, transcript_, hello_.proof)) {
    refuse_at("authentication failed: the client's proof does not match the memory blade's key and this handshake "
              "(the two sides' auth.key_file hold different keys, or messages were altered in transit)",
              Refusal::kBadProof, false);
    return;
  }
  if (hello_.transport != settings_.transport) {
    refuse_at(std::string("the memory blade uses the ") + TransportKindName(settings_.transport) +
                  " transport and the client " + TransportKindName(hello_.transport) +
                  ": set \"transport\" in smart_config.json to the same value on both",
              Refusal::kTransport, false);
    return;
  }
  state_ = State::kProven;
}

void BladeHandshake::refuse(const std::string& reason, Refusal kind, bool busy) {
  if (state_ == State::kRefused || state_ == State::kGaveUp) return;
  refuse_at(reason, kind, busy);
}

void BladeHandshake::refuse_at(const std::string& reason, Refusal kind, bool busy) {
  state_ = State::kRefused;
  refusal_ = kind;
  reason_ = reason;
  // The answer the client waits for: the challenge, or after it the
  // blade's hello.
  if (!challenge_sent_) {
    AuthChallenge answer;
    answer.error = reason.substr(0, kMaxHandshakeError);
    answer.busy = busy;
    output_ += Frame(answer.Encode());
  } else {
    ServerHello answer;
    answer.error = reason.substr(0, kMaxHandshakeError);
    answer.busy = busy;
    output_ += Frame(answer.Encode());
  }
}

std::string BladeHandshake::take_output() {
  std::string out;
  out.swap(output_);
  return out;
}

}  // namespace smart
