// A memory blade inside the process (embedded_blade.h).
#include "smart/embedded_blade.h"

namespace smart {

EmbeddedMemoryBlade::EmbeddedMemoryBlade(const SmartConfig& config, uint64_t capacity_mib) {
  SmartConfig shm_config = config;
  shm_config.transport = TransportChoice::kShm;
  BackendConfig backend;
  backend.source = "embedded memory blade";
  backend.capacity = capacity_mib;
  backend.tcp_port = 0;
  backend.bind = "127.0.0.1";
  // No key needed: it listens on loopback. With one in smart_config.json it
  // uses it, since the bench's own client will ask it for a proof.
  backend.auth.configured = true;
  backend.auth.none = config.auth.none || config.auth.key_file.empty();
  backend.auth.key_file = backend.auth.none ? "" : config.auth.key_file;
  target_ = std::make_unique<Target>(shm_config, backend);
  target_->start();
}

}  // namespace smart
