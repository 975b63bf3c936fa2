// Fuzz target: the memory blade's handshake state machine
// (smart/target/blade_handshake.h), the code every peer on the network
// reaches before proving anything. The input is a peer's byte stream, cut
// into pieces as TCP might deliver it:
//   byte 0   settings: bit 0 the blade has a key, bit 1 accept_forwarded,
//            bit 2 the blade's transport is verbs
//   byte 1   the largest piece (1..256 bytes; 0: the whole stream at once)
//   rest     the stream
// Promises checked: without a key the peer never counts as proven (no proof
// can be forged); whatever arrives, the blade answers with whole frames, at
// most one challenge and then at most one hello, each a message that
// decodes; once refused or given up it says nothing more; it buffers no
// more than one frame of the stage's limit; the outcome does not depend on
// how the stream was cut.
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "smart/resource/auth.h"
#include "smart/resource/handshake.h"
#include "smart/status.h"
#include "smart/target/blade_handshake.h"

namespace {

using smart::BladeHandshake;

struct Outcome {
  BladeHandshake::State state;
  BladeHandshake::Refusal refusal;
  int challenges = 0;
  int hellos = 0;
  bool proven = false;
};

// Splits the blade's output into frames and checks each.
void CheckOutput(const std::string& out, Outcome* o, bool keyed) {
  size_t pos = 0;
  while (pos < out.size()) {
    FuzzCheck(out.size() - pos >= 4, "the blade sent a partial frame header");
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(out[pos + i])) << (8 * i);
    FuzzCheck(out.size() - pos - 4 >= length, "the blade sent a partial frame");
    const std::string body = out.substr(pos + 4, length);
    pos += 4 + length;
    FuzzCheck(o->hellos == 0, "the blade answered after its hello");
    if (o->challenges == 0) {
      const smart::AuthChallenge c = smart::AuthChallenge::Decode(body, "fuzzed blade");
      FuzzCheck(c.error.empty() || !c.has_key, "a refusal decoded with a key flag");
      FuzzCheck(!c.error.empty() || c.has_key == keyed, "the challenge misstates whether the blade has a key");
      ++o->challenges;
      if (!c.error.empty()) o->hellos = 1;  // a refusal in place of the challenge ends the exchange
    } else {
      const smart::ServerHello h = smart::ServerHello::Decode(body, "fuzzed blade");
      FuzzCheck(!h.error.empty(), "the state machine itself sent a hello with the pool's details");
      ++o->hellos;
    }
  }
}

Outcome Run(const uint8_t* data, size_t size, size_t piece, const smart::SessionKey* key, uint8_t settings_byte) {
  BladeHandshake::Settings settings;
  if (key != nullptr) settings.keys.push_back(key);
  settings.arrived.family = 4;
  settings.arrived.addr[0] = 127;
  settings.arrived.addr[3] = 1;
  settings.arrived.port = 12345;
  settings.accept_forwarded = (settings_byte & 2) != 0;
  settings.transport = (settings_byte & 4) != 0 ? smart::TransportKind::kVerbs : smart::TransportKind::kShm;
  settings.pool_id = 0x1122334455667788ull;
  BladeHandshake machine(settings, "fuzzed peer");
  Outcome o{};
  size_t pos = 0;
  while (pos < size) {
    const size_t n = piece == 0 ? size - pos : std::min(piece, size - pos);
    const bool over = machine.state() == BladeHandshake::State::kRefused ||
                      machine.state() == BladeHandshake::State::kGaveUp;
    machine.receive(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    const std::string out = machine.take_output();
    FuzzCheck(!over || out.empty(), "the blade spoke after the exchange was over");
    FuzzCheck(machine.buffered() <= 4 + smart::kMaxHelloFrame, "the blade buffered more than a frame");
    CheckOutput(out, &o, key != nullptr);
  }
  if (key != nullptr) {
    FuzzCheck(machine.state() != BladeHandshake::State::kProven, "a peer counted as proven without the key");
  }
  if (machine.state() == BladeHandshake::State::kProven) {
    const size_t qps = machine.hello().endpoints.size();
    FuzzCheck(qps >= 1 && qps <= smart::kMaxQueuePairsPerConnection, "a proven peer asks for a bad queue-pair count");
    FuzzCheck(machine.hello().transport == settings.transport, "a proven peer speaks another transport");
  }
  o.proven = machine.state() == BladeHandshake::State::kProven;
  // A refusal now (a timeout, a drop) still gives one whole answer.
  const bool over = machine.state() == BladeHandshake::State::kRefused ||
                    machine.state() == BladeHandshake::State::kGaveUp;
  machine.refuse("fuzz: dropped", BladeHandshake::Refusal::kOther, true);
  const std::string last = machine.take_output();
  FuzzCheck(!over || last.empty(), "a refusal after the end said something");
  CheckOutput(last, &o, key != nullptr);
  o.state = machine.state();
  o.refusal = machine.refusal();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const smart::SessionKey key = smart::SessionKey::FromBytes(std::string(32, 'k'), "fuzz key");
  const uint8_t settings = data[0];
  const size_t piece = data[1] == 0 ? 0 : (data[1] % 256) + 1;
  const smart::SessionKey* k = (settings & 1) != 0 ? &key : nullptr;
  const Outcome split = Run(data + 2, size - 2, piece, k, settings);
  const Outcome whole = Run(data + 2, size - 2, 0, k, settings);
  FuzzCheck(split.state == whole.state && split.refusal == whole.refusal && split.challenges == whole.challenges &&
                split.hellos == whole.hellos && split.proven == whole.proven,
            "the outcome depends on how the stream was cut");
  return 0;
}
