/// @file
/// The memory blades a bench runs against: the ones its configuration names,
/// or, when it names none, blades started inside the process
/// (EmbeddedMemoryBlade, on shm), so that a bench runs on a machine with no
/// RDMA NIC and no memory blade of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"
#include "smart/embedded_blade.h"
#include "smart/initiator.h"

namespace smart {

/// A bench's memory blades: configured or embedded (see the file's description).
class BenchBlades {
 public:
  /// `configured`: the blades the configuration names. When there are none,
  /// starts `embedded_count` blades of `embedded_mib` MiB each and switches
  /// `*config` to the shm transport (logged, headed by `program`, when
  /// `verbose`). Throws smart::Error when a blade cannot start.
  BenchBlades(const std::vector<ServerAddress>& configured, SmartConfig* config, int embedded_count,
              uint64_t embedded_mib, const std::string& program, bool verbose);
  ~BenchBlades();
  BenchBlades(const BenchBlades&) = delete;
  BenchBlades& operator=(const BenchBlades&) = delete;

  /// The blades' addresses: memory node i is entry i.
  const std::vector<ServerAddress>& servers() const { return servers_; }
  /// How many blades there are.
  int count() const { return static_cast<int>(servers_.size()); }
  /// True when the blades run inside this process.
  bool embedded() const { return !embedded_.empty(); }
  /// Connects memory node i of `initiator` to blade i with `qps` queue pairs
  /// (each blade's pinned pool ID checked). Throws smart::Error.
  void connect(Initiator& initiator, int qps) const;
  /// MiB the embedded blades hold resident; 0 for configured ones.
  double resident_mib() const;

 private:
  std::vector<ServerAddress> servers_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> embedded_;
};

}  // namespace smart
