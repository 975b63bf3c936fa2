// Fuzz target: the connection handshake, the first bytes a memory blade
// reads from any client and a client reads from any memory blade
// (smart/resource/handshake.h). Bytes that are not a hello end in
// smart::Error; a hello that decodes encodes to bytes that decode to the
// same hello.
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

void Client(const std::string& bytes) {
  smart::ClientHello hello;
  try {
    hello = smart::ClientHello::Decode(bytes, "fuzzed client hello");
  } catch (const smart::Error&) {
    return;
  }
  FuzzCheck(!hello.endpoints.empty() && hello.endpoints.size() <= smart::kMaxQueuePairsPerConnection,
            "a client hello decoded with a queue-pair count out of range");
  const smart::ClientHello again = smart::ClientHello::Decode(hello.Encode(), "re-encoded client hello");
  FuzzCheck(again.transport == hello.transport && SameEndpoints(again.endpoints, hello.endpoints),
            "a client hello does not survive encode and decode");
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
  const smart::ServerHello again = smart::ServerHello::Decode(hello.Encode(), "re-encoded server hello");
  FuzzCheck(again.error == hello.error && again.exported == hello.exported &&
                again.session.slot == hello.session.slot && again.session.incarnation == hello.session.incarnation &&
                SameEndpoints(again.endpoints, hello.endpoints),
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
  Client(bytes);
  Server(bytes);
  return 0;
}
