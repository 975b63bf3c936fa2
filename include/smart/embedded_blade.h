/// @file
/// A memory blade inside the process, on the shm transport and a loopback
/// port: what a bench, a test or an example uses when no memory blade is
/// configured.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "smart/config.h"
#include "smart/target.h"

namespace smart {

/// A memory blade inside the process, on the shm transport and a free
/// loopback port: what a bench uses when no memory server is configured.
class EmbeddedMemoryBlade {
 public:
  /// Starts a blade of `capacity_mib` MiB and listens. Throws smart::Error.
  EmbeddedMemoryBlade(const SmartConfig& config, uint64_t capacity_mib);
  /// The blade itself.
  Target& target() { return *target_; }
  /// Its TCP port.
  int port() const { return target_->port(); }
  /// Its host: loopback.
  std::string host() const { return "127.0.0.1"; }

 private:
  std::unique_ptr<Target> target_;
};

}  // namespace smart
