// Opening the verbs device: choosing the device, port and GID, the doorbell
// mode, and describing what was chosen.
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "smart/common.h"
#include "smart/logging.h"
#include "smart/status.h"
#include "smart/transport/verbs/verbs_transport.h"

namespace smart::verbs {

namespace {

bool IsIpv4Mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

ibv_mtu MtuEnum(int bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return IBV_MTU_1024;
  }
}

int MtuBytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

}  // namespace

std::string DriverName(ibv_device* device) {
  // /sys/class/infiniband/<dev>/device/driver names the PCI driver of a
  // hardware device; software devices have none and are told by name.
  char link[PATH_MAX];
  const std::string path = std::string(device->ibdev_path) + "/device/driver";
  const ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  if (n > 0) {
    link[n] = '\0';
    const char* base = strrchr(link, '/');
    return base != nullptr ? base + 1 : link;
  }
  const std::string name = ibv_get_device_name(device);
  if (name.rfind("rxe", 0) == 0) return "rdma_rxe";
  if (name.rfind("siw", 0) == 0) return "siw";
  if (name.rfind("mlx5", 0) == 0) return "mlx5_core";
  return "";
}

// ---------------------------------------------------------------------------
// Opening the device

VerbsDevice::VerbsDevice(const SmartConfig& config) : context_(std::make_shared<Context>()) { open(config); }

VerbsDevice::~VerbsDevice() = default;

void VerbsDevice::open(const SmartConfig& config) {
  memory_windows_wanted_ = config.infiniband.memory_windows;
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    throw Error("verbs transport: " + VerbError("ibv_get_device_list", ErrnoOr(ENOSYS)) +
                " (is rdma-core installed and the RDMA kernel modules loaded? without them, use \"transport\": \"shm\")");
  }
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < count; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + std::string(name);
    if (chosen == nullptr && (config.infiniband.name.empty() || config.infiniband.name == name)) chosen = list[i];
  }
  if (chosen == nullptr) {
    ibv_free_device_list(list);
    if (count == 0) {
      throw Error("verbs transport: no RDMA device found (ibv_devices lists none); load a driver, add a Soft-RoCE "
                  "device (rdma link add rxe0 type rxe netdev IFACE), or use \"transport\": \"shm\"");
    }
    throw Error("verbs transport: no RDMA device named \"" + config.infiniband.name +
                "\" (infiniband.name); present: " + names);
  }
  context_->name = ibv_get_device_name(chosen);
  driver_ = DriverName(chosen);
  const bool is_mlx5 = driver_ == "mlx5_core";
  const bool is_rxe = driver_ == "rdma_rxe";

  // The uuar mode sizes mlx5's doorbell pool through the environment, which
  // the provider reads when the context is opened.
  DoorbellMode mode = config.use_thread_aware_alloc ? config.thread_aware_alloc.doorbell : DoorbellMode::kShared;
  if (mode == DoorbellMode::kUuar) {
    if (!is_mlx5) {
      doorbell_note_ = "doorbell mode uuar needs an mlx5 device, " + context_->name + " is driven by " +
                       (driver_.empty() ? std::string("an unknown driver") : driver_);
      SMART_WARN("verbs transport: %s; mode in effect: shared", doorbell_note_.c_str());
    } else {
      // The library does not change the process's environment: the
      // program sets these (ExportProviderEnvironment, or its user).
      const int total = config.thread_aware_alloc.total_uuar;
      const int low_latency = total - config.thread_aware_alloc.shared_uuar;
      const char* total_env = getenv("MLX5_TOTAL_UUARS");
      const char* low_latency_env = getenv("MLX5_NUM_LOW_LAT_UUARS");
      const char* preload = getenv("LD_PRELOAD");
      if (total_env == nullptr || low_latency_env == nullptr) {
        SMART_WARN("verbs transport: doorbell mode uuar, but MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS are not both "
                   "set, so the provider keeps its default doorbells; set MLX5_TOTAL_UUARS=%d "
                   "MLX5_NUM_LOW_LAT_UUARS=%d in the environment, or call smart::ExportProviderEnvironment(config) "
                   "before connecting; mode in effect: uuar",
                   total, low_latency);
      } else if (preload == nullptr || strstr(preload, "libmlx5") == nullptr) {
        SMART_WARN("verbs transport: doorbell mode uuar with MLX5_TOTAL_UUARS=%s MLX5_NUM_LOW_LAT_UUARS=%s, but no "
                   "patched libmlx5 is preloaded: the stock provider keeps at most 12 shared doorbells "
                   "(patch/guide.md; or use doorbell mode thread_domain); mode in effect: uuar",
                   total_env, low_latency_env);
      } else {
        SMART_INFO("verbs transport: doorbell mode uuar: MLX5_TOTAL_UUARS=%s MLX5_NUM_LOW_LAT_UUARS=%s", total_env,
                   low_latency_env);
      }
    }
  }

  errno = 0;
  context_->context = ibv_open_device(chosen);
  ibv_free_device_list(list);
  if (context_->context == nullptr) {
    throw Error("verbs transport: opening " + context_->name + " failed: " +
                VerbError("ibv_open_device", ErrnoOr(ENODEV)) +
                " (permissions on /dev/infiniband/uverbs*? with uuar mode: lower thread_aware_alloc.total_uuar)");
  }
  int rc = ibv_query_device(context_->context, &device_attr_);
  if (rc != 0) throw Error("verbs transport: " + VerbError("ibv_query_device", rc < 0 ? -rc : rc) + " on " + context_->name);
  const int port = config.infiniband.port;
  if (port < 1 || port > device_attr_.phys_port_cnt) {
    throw Error("verbs transport: infiniband.port is " + std::to_string(port) + ", but " + context_->name + " has " +
                std::to_string(device_attr_.phys_port_cnt) + " port(s), numbered from 1");
  }
  path_.port = static_cast<uint8_t>(port);
  rc = ibv_query_port(context_->context, path_.port, &port_attr_);
  if (rc != 0) {
    throw Error("verbs transport: " + VerbError("ibv_query_port", rc < 0 ? -rc : rc) + " on " + context_->name +
                " port " + std::to_string(port));
  }
  if (port_attr_.state != IBV_PORT_ACTIVE) {
    throw Error("verbs transport: " + context_->name + " port " + std::to_string(port) + " is " +
                ibv_port_state_str(port_attr_.state) + ", not ACTIVE: check the link (ibv_devinfo)");
  }
  if (device_attr_.atomic_cap == IBV_ATOMIC_NONE) {
    SMART_WARN("verbs transport: %s does not support RDMA atomics: CAS and FAA will fail", context_->name.c_str());
  }
  errno = 0;
  context_->pd = ibv_alloc_pd(context_->context);
  if (context_->pd == nullptr) {
    throw Error("verbs transport: " + VerbError("ibv_alloc_pd", ErrnoOr(ENOMEM)) + " on " + context_->name);
  }

  choose_gid(config.infiniband.gid_idx);

  path_.lid = port_attr_.lid;
  const ibv_mtu wanted = MtuEnum(config.qp_param.path_mtu);
  path_.mtu = std::min(wanted, port_attr_.active_mtu);
  path_.timeout = static_cast<uint8_t>(config.qp_param.timeout);
  path_.retry_cnt = static_cast<uint8_t>(config.qp_param.retry_cnt);
  path_.rnr_retry = static_cast<uint8_t>(config.qp_param.rnr_retry);
  if (is_rxe && path_.retry_cnt >= 7) {
    // rxe takes retry_cnt 7 as "retry forever", as rnr_retry 7 is; a memory
    // blade that died would then hang its clients instead of failing them.
    static std::once_flag logged;
    std::call_once(logged, [] {
      SMART_INFO("verbs transport: qp_param.retry_cnt 7 means retry forever on rxe; using 6 so that a dead memory "
                 "blade fails requests instead of hanging them");
    });
    path_.retry_cnt = 6;
  }
  // Reads and atomics in flight per queue pair: as many as the device takes
  // (16 on mlx5, 128 on rxe); perftest does the same.
  path_.max_rd_atomic = static_cast<uint8_t>(std::clamp(device_attr_.max_qp_init_rd_atom, 1, 255));
  path_.max_dest_rd_atomic = static_cast<uint8_t>(std::clamp(device_attr_.max_qp_rd_atom, 1, 255));
}

void VerbsDevice::choose_gid(int configured) {
  const bool ethernet = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (configured >= 0) {
    if (configured >= port_attr_.gid_tbl_len) {
      throw Error("verbs transport: infiniband.gid_idx " + std::to_string(configured) + " is beyond the " +
                  std::to_string(port_attr_.gid_tbl_len) + " GIDs of " + context_->name + " port " +
                  std::to_string(path_.port));
    }
    const int rc = ibv_query_gid(context_->context, path_.port, configured, &path_.gid);
    if (rc != 0) {
      throw Error("verbs transport: " + VerbError("ibv_query_gid", rc < 0 ? -rc : rc) + " for infiniband.gid_idx " +
                  std::to_string(configured) + " on " + context_->name);
    }
    if (IsZero(path_.gid.raw, sizeof(path_.gid.raw))) {
      throw Error("verbs transport: GID index " + std::to_string(configured) + " of " + context_->name + " port " +
                  std::to_string(path_.port) + " is empty; pick a populated one (show_gids, or leave "
                  "infiniband.gid_idx at -1 to choose automatically)");
    }
    path_.gid_index = configured;
    path_.use_grh = true;
    return;
  }
  if (!ethernet) {
    // InfiniBand: route by LID, no GRH, as a fabric with a subnet manager expects.
    path_.use_grh = false;
    memset(path_.gid.raw, 0, sizeof(path_.gid.raw));
    ibv_query_gid(context_->context, path_.port, 0, &path_.gid);  // informational only
    return;
  }
  // RoCE: prefer a RoCE v2 GID holding an IPv4 address (routable, and what
  // a RoCE v2 fabric expects), then any RoCE v2 GID, then any populated one.
  int best = -1, best_rank = 0;
  ibv_gid best_gid{};
  const char* best_type = "";
  for (int i = 0; i < port_attr_.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context_->context, path_.port, static_cast<uint32_t>(i), &entry, 0) != 0) continue;
    ibv_gid gid;
    memcpy(gid.raw, entry.gid.raw, sizeof(gid.raw));
    if (IsZero(gid.raw, sizeof(gid.raw))) continue;
    const bool v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
    const int rank = v2 && IsIpv4Mapped(gid) ? 3 : v2 ? 2 : 1;
    if (rank > best_rank) {
      best = i;
      best_rank = rank;
      best_gid = gid;
      best_type = v2 ? "RoCE v2" : entry.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
    }
  }
  if (best < 0) {
    throw Error("verbs transport: " + context_->name + " port " + std::to_string(path_.port) +
                " has no populated GID: give its network interface an IP address, or set infiniband.gid_idx");
  }
  path_.gid_index = best;
  path_.gid = best_gid;
  path_.use_grh = true;
  SMART_INFO("verbs transport: infiniband.gid_idx unset; using GID index %d of %s port %u (%s, %s)", best,
             context_->name.c_str(), path_.port, GidString(best_gid).c_str(), best_type);
}

std::string VerbsDevice::description() const {
  std::string text = "verbs " + context_->name + " port " + std::to_string(path_.port) + " (" +
                     (port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") + ", ";
  if (path_.use_grh) {
    text += "GID " + std::to_string(path_.gid_index) + " " + GidString(path_.gid);
  } else {
    text += "LID " + std::to_string(path_.lid);
  }
  text += ", MTU " + std::to_string(MtuBytes(path_.mtu)) + ")";
  std::lock_guard<std::mutex> lock(note_mutex_);
  if (!doorbell_note_.empty()) text += " [" + doorbell_note_ + "]";
  return text;
}

}  // namespace smart::verbs

namespace smart {
std::unique_ptr<Device> OpenVerbsDevice(const SmartConfig& config) {
  return std::make_unique<verbs::VerbsDevice>(config);
}
}  // namespace smart
