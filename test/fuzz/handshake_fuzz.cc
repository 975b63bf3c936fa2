// Fuzz target: the connection handshake, the first bytes a memory blade
// reads from any client and a client reads from any memory blade, before
// either has proven anything (smart/resource/handshake.h): the
// authentication messages and the hellos. Bytes that are not such a message
// end in smart::Error; a message that decodes encodes to bytes that decode
// to the same message. A decoded message never carries a proof its flag
// says is absent.
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "smart/resource/handshake.h"
#include "smart/status.h"

namespace {

bool SameEndpoints(const std::vector<smart::QueuePairEndpoint>& a, const std::vector<smart::QueuePairEndpoint>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].qp_num != b[i].qp_num || a[i].psn != b[i].psn || a[i].lid != b[i].lid ||
        memcmp(a[i].gid, b[i].gid, sizeof(a[i].gid)) != 0) {
      return false;
    }
  }
  return true;
}

bool Zero(const smart::Proof& p) {
  for (uint8_t b : p) {
    if (b != 0) return false;
  }
  return true;
}

void Client(const std::string& bytes) {
  smart::ClientHello hello;
  try {
    hello = smart::ClientHello::Decode(bytes, "fuzzed client hello");
  } catch (const smart::Error&) {
    return;
  }
  FuzzCheck(!hello.error.empty() ||
                (!hello.endpoints.empty() && hello.endpoints.size() <= smart::kMaxQueuePairsPerConnection),
            "a client hello decoded with a queue-pair count out of range");
  FuzzCheck(hello.has_proof || Zero(hello.proof), "a client hello without a proof flag decoded a proof");
  FuzzCheck(hello.error.size() <= smart::kMaxHandshakeError, "a client hello decoded an overlong error");
  const smart::ClientHello again = smart::ClientHello::Decode(hello.Encode(), "re-encoded client hello");
  FuzzCheck(again.error == hello.error && again.transport == hello.transport &&
                SameEndpoints(again.endpoints, hello.endpoints) && again.has_proof == hello.has_proof &&
                again.proof == hello.proof,
            "a client hello does not survive encode and decode");
}

void Auth(const std::string& bytes) {
  try {
    const smart::AuthHello hello = smart::AuthHello::Decode(bytes, "fuzzed auth hello");
    const size_t key_id = hello.has_key ? 4 + 2 * smart::kKeyIdBytes : 0;
    FuzzCheck(bytes.size() == 4 + 2 + 1 + 1 + smart::kNonceBytes + key_id + 1 + 16 + 2,
              "an auth hello decoded from the wrong length");
    FuzzCheck(!hello.has_key || hello.key_id.size() == 2 * smart::kKeyIdBytes, "an auth hello decoded a bad key ID");
    FuzzCheck(hello.dialled.family == 0 || hello.dialled.family == 4 || hello.dialled.family == 6,
              "an auth hello decoded an unknown address family");
    const smart::AuthHello again = smart::AuthHello::Decode(hello.Encode(), "re-encoded auth hello");
    FuzzCheck(again.has_key == hello.has_key && again.nonce == hello.nonce && again.key_id == hello.key_id &&
                  again.dialled.family == hello.dialled.family && again.dialled.port == hello.dialled.port &&
                  memcmp(again.dialled.addr, hello.dialled.addr, sizeof(hello.dialled.addr)) == 0,
              "an auth hello does not survive encode and decode");
  } catch (const smart::Error&) {
  }
  smart::AuthChallenge challenge;
  try {
    challenge = smart::AuthChallenge::Decode(bytes, "fuzzed auth challenge");
  } catch (const smart::Error&) {
    return;
  }
  FuzzCheck(challenge.error.size() <= smart::kMaxHandshakeError, "a challenge decoded an overlong error");
  const smart::AuthChallenge again = smart::AuthChallenge::Decode(challenge.Encode(), "re-encoded auth challenge");
  FuzzCheck(again.error == challenge.error && again.has_key == challenge.has_key && again.nonce == challenge.nonce,
            "an auth challenge does not survive encode and decode");
}

void Server(const std::string& bytes) {
  smart::ServerHello hello;
  try {
    hello = smart::ServerHello::Decode(bytes, "fuzzed server hello");
  } catch (const smart::Error&) {
    return;
  }
  if (hello.error.empty()) {
    const smart::RemoteRegion& main = hello.regions[smart::kMainMemoryRegion];
    FuzzCheck(main.valid, "a server hello without an error decoded without its main memory region");
    for (const smart::RemoteRegion& r : hello.regions) {
      FuzzCheck(!r.valid || r.addr + r.length >= r.addr, "a region decoded that wraps the address space");
    }
  }
  FuzzCheck(hello.window_rkeys.empty() || hello.window_rkeys.size() == hello.endpoints.size(),
            "a server hello decoded with memory windows that do not match its queue pairs one to one");
  FuzzCheck(hello.has_proof || Zero(hello.proof), "a server hello without a proof flag decoded a proof");
  const smart::ServerHello again = smart::ServerHello::Decode(hello.Encode(), "re-encoded server hello");
  FuzzCheck(again.error == hello.error && again.exported == hello.exported && again.has_proof == hello.has_proof &&
                again.proof == hello.proof &&
                again.session.slot == hello.session.slot && again.session.incarnation == hello.session.incarnation &&
                SameEndpoints(again.endpoints, hello.endpoints) && again.window_rkeys == hello.window_rkeys,
            "a server hello does not survive encode and decode");
  for (int i = 0; i < smart::kMemoryRegions; ++i) {
    FuzzCheck(again.regions[i].valid == hello.regions[i].valid &&
                  (!hello.regions[i].valid || (again.regions[i].addr == hello.regions[i].addr &&
                                               again.regions[i].length == hello.regions[i].length &&
                                               again.regions[i].rkey == hello.regions[i].rkey)),
              "a server hello's regions do not survive encode and decode");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Auth(bytes);
  Client(bytes);
  Server(bytes);
  return 0;
}
