// The memory blade's side of a handshake up to the client's proof, as a
// state machine with no socket and no thread: the listener feeds it the
// bytes a peer sends and sends what it answers. Every peer that has not
// proven the key lives in the listener's one event loop as one of these
// (smart/target/listener.cc); only a proven peer gets a thread, which makes
// its queue pairs and sends the pool's details (target_sessions.cc).
//
// It reads two frames (smart/resource/handshake.h): the AuthHello, answered
// by the AuthChallenge or a refusal, then the ClientHello, whose proof it
// checks. A frame longer than its stage allows is refused before its body
// is buffered; bytes past the ClientHello (the client sends nothing more
// until the blade answers) are refused too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smart/resource/auth.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/transport.h"

namespace smart {

class BladeHandshake {
 public:
  struct Settings {
    // The keys a client may prove, picked by the ID its AuthHello names
    // (two during a rotation: auth.also_accept). Empty: no key required.
    std::vector<const SessionKey*> keys;
    // Keeps the keys above alive while the handshake runs (a reload may
    // replace the blade's set meanwhile); may be empty.
    std::shared_ptr<const std::vector<SessionKey>> key_set;
    SocketAddress arrived;  // where the peer's connection arrived
    bool accept_forwarded = false;
    TransportKind transport = TransportKind::kShm;
    uint64_t pool_id = 0;  // sent in the challenge, covered by both proofs
  };
  enum class State {
    kAwaitingAuthHello,
    kAwaitingClientHello,
    kProven,   // proven (or no key required): hello(), transcript(), key()
    kRefused,  // the answer saying why is in the output
    kGaveUp,   // the client gave up (its words: client_error())
  };
  // Why a peer was refused, so that the listener logs each kind at most
  // once a second.
  enum class Refusal { kNone, kNoKey, kWrongKey, kForwarded, kBadProof, kTransport, kMalformed, kOther };

  BladeHandshake(Settings settings, std::string peer);

  // Takes bytes the peer sent (any split); answers go to the output.
  void receive(const char* data, size_t n);
  // Refuses the peer with `reason` in the answer it waits for, whatever
  // its stage (a timeout, a drop at the limits, a failure after the proof);
  // `busy`: the client may try again shortly. Nothing happens once refused
  // or given up.
  void refuse(const std::string& reason, Refusal kind, bool busy = false);
  // Bytes to send to the peer, taken.
  std::string take_output();

  State state() const { return state_; }
  Refusal refusal() const { return refusal_; }
  const std::string& reason() const { return reason_; }
  const std::string& client_error() const { return client_error_; }
  const std::string& peer() const { return peer_; }
  // With kProven: what the client asked for, the transcript so far (both
  // authentication messages and the ClientHello, for the blade's proof),
  // and the key it proved (nullptr: none required).
  const ClientHello& hello() const { return hello_; }
  Transcript& transcript() { return transcript_; }
  const SessionKey* key() const { return key_; }
  // Bytes buffered of a frame not yet whole (bounded by the stage's limit).
  size_t buffered() const { return buffer_.size(); }

 private:
  void on_auth_hello(const std::string& frame);
  void on_client_hello(const std::string& frame);
  void refuse_at(const std::string& reason, Refusal kind, bool busy);

  Settings settings_;
  std::string peer_;
  State state_ = State::kAwaitingAuthHello;
  Refusal refusal_ = Refusal::kNone;
  std::string reason_;
  std::string client_error_;
  std::string buffer_;
  std::string output_;
  Transcript transcript_;
  ClientHello hello_;
  const SessionKey* key_ = nullptr;
  bool challenge_sent_ = false;
};

}  // namespace smart
