// A bench's memory blades, configured or embedded (blades.h).
#include "smart/bench/blades.h"

#include <cinttypes>

#include "smart/logging.h"

namespace smart {

BenchBlades::BenchBlades(const std::vector<ServerAddress>& configured, SmartConfig* config, int embedded_count,
                         uint64_t embedded_mib, const std::string& program, bool verbose)
    : servers_(configured) {
  if (!servers_.empty()) return;
  if (embedded_count < 1) throw Error(program + ": no memory blade configured and none to start");
  config->transport = TransportChoice::kShm;
  for (int b = 0; b < embedded_count; ++b) {
    embedded_.push_back(std::make_unique<EmbeddedMemoryBlade>(*config, embedded_mib));
    servers_.push_back(ServerAddress{embedded_.back()->host(), embedded_.back()->port()});
  }
  if (!verbose) return;
  if (embedded_count == 1) {
    SMART_INFO("%s: a memory blade inside this process (shm, %" PRIu64 " MiB)", program.c_str(), embedded_mib);
  } else {
    SMART_INFO("%s: %d memory blades inside this process (shm, %" PRIu64 " MiB each)", program.c_str(),
               embedded_count, embedded_mib);
  }
}

BenchBlades::~BenchBlades() = default;

void BenchBlades::connect(Initiator& initiator, int qps) const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    initiator.connect(static_cast<node_t>(i), servers_[i].hostname, servers_[i].port, qps, servers_[i].pool_id);
  }
}

double BenchBlades::resident_mib() const {
  uint64_t bytes = 0;
  for (const auto& blade : embedded_) bytes += blade->target().resident_bytes();
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace smart
