#include <infiniband/verbs.h>

#include <mutex>

#include "smart/logging.h"
#include "smart/status.h"
#include "smart/transport.h"
#include "fault/fault_internal.h"

namespace smart {

static std::unique_ptr<Device> OpenDevice(const SmartConfig& config);

const char* TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kVerbs:
      return "verbs";
    case TransportKind::kShm:
      return "shm";
  }
  return "unknown";
}

int CountRdmaDevices() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return 0;
  ibv_free_device_list(list);
  return count;
}

std::unique_ptr<Device> Device::Open(const SmartConfig& config) {
  if (!config.faults.empty()) {
    InstallFaultRules(config.faults);
    std::unique_ptr<Device> inner = OpenDevice(config);
    return HasWorkRequestFaults() ? fault_internal::WrapDevice(std::move(inner)) : std::move(inner);
  }
  return OpenDevice(config);
}

static std::unique_ptr<Device> OpenDevice(const SmartConfig& config) {
  switch (config.transport) {
    case TransportChoice::kShm:
      return OpenShmDevice(config);
    case TransportChoice::kVerbs:
      return OpenVerbsDevice(config);
    case TransportChoice::kAuto:
      break;
  }
  static std::once_flag logged;
  if (CountRdmaDevices() > 0) {
    std::call_once(logged, [] { SMART_INFO("transport: verbs (an RDMA device is present; \"transport\": \"auto\")"); });
    return OpenVerbsDevice(config);
  }
  std::call_once(logged, [] {
    SMART_INFO("transport: shm (no RDMA device found; \"transport\": \"auto\"; same-host memory blades only)");
  });
  return OpenShmDevice(config);
}

}  // namespace smart
