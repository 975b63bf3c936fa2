// A memory blade's registration in the membership: its key, what it says
// (where clients reach the blade, which pool it serves) and the lease.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "smart/membership.h"
#include "smart/util/peer_text.h"

namespace smart::membership {

Status CheckPathPart(const std::string& part, const char* what) {
  if (part.empty()) return Status::InvalidArgument(std::string("membership: an empty ") + what);
  if (part.size() > 128) return Status::InvalidArgument(std::string("membership: a ") + what + " over 128 bytes");
  for (unsigned char c : part) {
    if (c == '/' || c < 0x21 || c > 0x7e)
      return Status::InvalidArgument(std::string("membership: the ") + what + " '" + PeerText(part) +
                                     "' holds '/', a space or a byte that is not printable ASCII");
  }
  return Status::OK();
}

std::string BladePrefix(const std::string& cluster) { return "/smart/" + cluster + "/blades/"; }

std::string BladeKey(const std::string& cluster, const std::string& blade_id) {
  return BladePrefix(cluster) + blade_id;
}

Status JoinAsBlade(const BladeMemberOptions& options, const std::string& bind_address, int port,
                   const std::string& pool_id, uint64_t capacity_mib, const std::string& transport,
                   std::function<void(const Status&)> on_lost, std::unique_ptr<Registration>* out) {
  Status s = CheckPathPart(options.cluster, "cluster name");
  if (s.ok()) s = CheckPathPart(options.blade_id, "blade id");
  if (!s.ok()) return s;
  std::string host = options.advertise;
  if (host.empty()) host = bind_address;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
      return Status::InvalidArgument("membership: the blade listens on every address and the host has no name; "
                                     "say where clients reach it (--advertise)");
    host = name;
  }
  RegistrationOptions r;
  r.etcd.endpoint = options.etcd;
  r.key = BladeKey(options.cluster, options.blade_id);
  r.value = nlohmann::json{{"host", host},
                           {"port", port},
                           {"pool_id", pool_id},
                           {"capacity_mib", capacity_mib},
                           {"transport", transport}}
                .dump();
  r.lease = options.lease;
  r.on_lost = std::move(on_lost);
  return Registration::Start(r, out);
}

}  // namespace smart::membership
