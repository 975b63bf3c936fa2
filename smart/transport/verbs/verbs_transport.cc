// Setup side of the verbs provider: opening the device and choosing the GID,
// doorbell mode selection, memory registration, completion queues, queue
// pairs and their RESET -> INIT -> RTR -> RTS transitions.
#include "smart/transport/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "smart/common.h"
#include "smart/logging.h"
#include "smart/status.h"

namespace smart::verbs {

namespace {

// "ibv_reg_mr: Cannot allocate memory": a verb's name and errno.
std::string VerbError(const char* verb, int error) { return std::string(verb) + ": " + strerror(error); }

// Providers differ: some set errno and return NULL, some return a positive
// or negative errno value.
int ErrnoOr(int fallback) { return errno != 0 ? errno : fallback; }

std::string GidString(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

bool IsIpv4Mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

bool IsZero(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
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

uint32_t RandomPsn() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint32_t>(getpid()) * 2654435761u;
  return v & 0xffffff;
}

constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

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

Context::~Context() {
  if (pd != nullptr) {
    const int rc = ibv_dealloc_pd(pd);
    if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_pd on %s: %s", name.c_str(), strerror(rc < 0 ? -rc : rc));
  }
  if (context != nullptr && ibv_close_device(context) != 0) {
    SMART_WARN("verbs transport: ibv_close_device on %s: %s", name.c_str(), strerror(ErrnoOr(EIO)));
  }
}

// ---------------------------------------------------------------------------
// Memory regions

namespace {

class VerbsRegion final : public MemoryRegion {
 public:
  // `mapping` and `mapped_bytes` describe memory this region owns (a pool);
  // nullptr when it only registers the caller's memory.
  VerbsRegion(std::shared_ptr<Context> context, ibv_mr* mr, void* mapping, size_t mapped_bytes)
      : context_(std::move(context)), mr_(mr), mapping_(mapping), mapped_bytes_(mapped_bytes) {
    addr_ = mr->addr;
    length_ = mr->length;
    lkey_ = mr->lkey;
    rkey_ = mr->rkey;
  }
  ~VerbsRegion() override {
    const int rc = ibv_dereg_mr(mr_);
    if (rc != 0) SMART_WARN("verbs transport: ibv_dereg_mr: %s", strerror(rc < 0 ? -rc : rc));
    if (mapping_ != nullptr) munmap(mapping_, mapped_bytes_);
  }

 private:
  std::shared_ptr<Context> context_;
  ibv_mr* mr_;
  void* mapping_;
  size_t mapped_bytes_;
};

ibv_mr* RegisterOrThrow(const Context& context, void* addr, size_t length, const char* what) {
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(context.pd, addr, length, kAllAccess);
  if (mr != nullptr) return mr;
  const int error = ErrnoOr(ENOMEM);
  std::string hint;
  if (error == ENOMEM || error == EPERM || error == EFAULT) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      hint = "; the locked-memory limit is " + std::to_string(limit.rlim_cur >> 10) +
             " KiB: raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf)";
    } else {
      hint = "; the device may be out of translation resources, or the machine out of memory";
    }
  }
  throw Error("verbs transport: registering " + std::string(what) + " of " + std::to_string(length >> 20) +
              " MiB on " + context.name + " failed: " + VerbError("ibv_reg_mr", error) + hint);
}

}  // namespace

std::unique_ptr<MemoryRegion> VerbsDevice::allocate_shared_region(size_t bytes) {
  if (bytes == 0) throw Error("verbs transport: cannot allocate an empty region");
  // 2 MiB pages keep the NIC's address translation small; reserved huge
  // pages are optional, so say once which kind the pool got.
  const size_t rounded = (bytes + kHugePageSize - 1) / kHugePageSize * kHugePageSize;
  void* addr = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  size_t mapped = rounded;
  if (addr != MAP_FAILED) {
    SMART_INFO("verbs transport: memory pool of %zu MiB on 2 MiB huge pages", rounded >> 20);
  } else {
    const int huge_error = errno;
    addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) {
      throw Error("verbs transport: cannot map a memory pool of " + std::to_string(bytes >> 20) +
                  " MiB: mmap: " + strerror(errno));
    }
    mapped = bytes;
    madvise(addr, bytes, MADV_HUGEPAGE);
    SMART_INFO("verbs transport: memory pool of %zu MiB on normal pages (huge pages unavailable: mmap MAP_HUGETLB: "
               "%s; reserve them with /proc/sys/vm/nr_hugepages)",
               bytes >> 20, strerror(huge_error));
  }
  try {
    ibv_mr* mr = RegisterOrThrow(*context_, addr, bytes, "the memory pool");
    return std::make_unique<VerbsRegion>(context_, mr, addr, mapped);
  } catch (...) {
    munmap(addr, mapped);
    throw;
  }
}

std::unique_ptr<MemoryRegion> VerbsDevice::adopt_shared_region(void* addr, size_t length, int fd) {
  // The NIC reaches the pool through its registration; the descriptor is
  // not needed once mapped.
  if (fd >= 0) close(fd);
  if (addr == nullptr || length == 0) throw Error("verbs transport: cannot adopt an empty region");
  try {
    ibv_mr* mr = RegisterOrThrow(*context_, addr, length, "the memory pool");
    return std::make_unique<VerbsRegion>(context_, mr, addr, length);
  } catch (...) {
    munmap(addr, length);
    throw;
  }
}

std::unique_ptr<MemoryRegion> VerbsDevice::register_memory(void* addr, size_t length) {
  if (addr == nullptr || length == 0) throw Error("verbs transport: cannot register an empty buffer");
  ibv_mr* mr = RegisterOrThrow(*context_, addr, length, "a local buffer");
  return std::make_unique<VerbsRegion>(context_, mr, nullptr, 0);
}

// ---------------------------------------------------------------------------
// Completion queues and thread domains

VerbsCompletionQueue::~VerbsCompletionQueue() {
  const int rc = ibv_destroy_cq(cq_);
  if (rc != 0) SMART_WARN("verbs transport: ibv_destroy_cq: %s", strerror(rc < 0 ? -rc : rc));
}

VerbsThreadDomain::~VerbsThreadDomain() {
  int rc = ibv_dealloc_pd(parent_);
  if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_pd (parent domain): %s", strerror(rc < 0 ? -rc : rc));
  rc = ibv_dealloc_td(td_);
  if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_td: %s", strerror(rc < 0 ? -rc : rc));
}

std::unique_ptr<CompletionQueue> VerbsDevice::create_cq(int depth, ThreadDomain* domain, bool concurrent) {
  if (depth < 1) throw Error("verbs transport: completion queue depth must be positive");
  if (depth > device_attr_.max_cqe) {
    throw Error("verbs transport: qp_param.max_cqe_size " + std::to_string(depth) + " exceeds the " +
                std::to_string(device_attr_.max_cqe) + " completions a queue of " + context_->name +
                " can hold; lower it");
  }
  // A completion queue polled by one thread needs no lock: ask for that, on
  // the thread's parent domain when it has one. Providers that cannot take
  // the hint get a plain completion queue.
  if (!concurrent) {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = static_cast<uint32_t>(depth);
    attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    if (auto* td = dynamic_cast<VerbsThreadDomain*>(domain)) {
      attr.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
      attr.parent_domain = td->parent();
    }
    errno = 0;
    ibv_cq_ex* cq = ibv_create_cq_ex(context_->context, &attr);
    if (cq != nullptr) return std::make_unique<VerbsCompletionQueue>(context_, ibv_cq_ex_to_cq(cq));
  }
  errno = 0;
  ibv_cq* cq = ibv_create_cq(context_->context, depth, nullptr, nullptr, 0);
  if (cq == nullptr) {
    throw Error("verbs transport: creating a completion queue of " + std::to_string(depth) + " entries on " +
                context_->name + " failed: " + VerbError("ibv_create_cq", ErrnoOr(ENOMEM)));
  }
  return std::make_unique<VerbsCompletionQueue>(context_, cq);
}

std::unique_ptr<ThreadDomain> VerbsDevice::create_thread_domain() {
  // A device that refused once refuses again: do not ask per thread.
  if (thread_domains_refused_.load()) return nullptr;
  ibv_td_init_attr td_attr{};
  errno = 0;
  ibv_td* td = ibv_alloc_td(context_->context, &td_attr);
  if (td == nullptr) {
    const int error = ErrnoOr(EOPNOTSUPP);
    std::lock_guard<std::mutex> lock(note_mutex_);
    doorbell_note_ = VerbError("ibv_alloc_td", error);
    thread_domains_refused_.store(true);
    return nullptr;
  }
  ibv_parent_domain_init_attr parent_attr{};
  parent_attr.pd = context_->pd;
  parent_attr.td = td;
  errno = 0;
  ibv_pd* parent = ibv_alloc_parent_domain(context_->context, &parent_attr);
  if (parent == nullptr) {
    const int error = ErrnoOr(EOPNOTSUPP);
    const int rc = ibv_dealloc_td(td);
    if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_td: %s", strerror(rc < 0 ? -rc : rc));
    std::lock_guard<std::mutex> lock(note_mutex_);
    doorbell_note_ = VerbError("ibv_alloc_parent_domain", error);
    thread_domains_refused_.store(true);
    return nullptr;
  }
  return std::make_unique<VerbsThreadDomain>(context_, td, parent);
}

// ---------------------------------------------------------------------------
// Queue pairs

std::unique_ptr<QueuePair> VerbsDevice::create_qp(const QueuePairOptions& options) {
  auto* cq = dynamic_cast<VerbsCompletionQueue*>(options.cq);
  if (cq == nullptr) throw Error("verbs transport: a queue pair needs a completion queue of the verbs transport");
  if (options.max_send_wr < 1 || options.max_sge < 1 || options.max_inline_data < 0) {
    throw Error("verbs transport: max_send_wr and max_sge must be positive, max_inline_data not negative");
  }
  if (options.max_send_wr > device_attr_.max_qp_wr) {
    throw Error("verbs transport: qp_param.max_wqe_size " + std::to_string(options.max_send_wr) + " exceeds the " +
                std::to_string(device_attr_.max_qp_wr) + " work requests a queue pair of " + context_->name +
                " can hold; lower it");
  }
  if (options.max_sge > device_attr_.max_sge) {
    throw Error("verbs transport: qp_param.max_sge_size " + std::to_string(options.max_sge) + " exceeds " +
                context_->name + "'s limit of " + std::to_string(device_attr_.max_sge) + "; lower it");
  }
  // A queue pair several threads post to must keep the provider's lock, so
  // it cannot live in one thread's domain.
  auto* td = options.concurrent ? nullptr : dynamic_cast<VerbsThreadDomain*>(options.domain);
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.send_cq = cq->cq();
  attr.recv_cq = cq->cq();
  attr.cap.max_send_wr = static_cast<uint32_t>(options.max_send_wr);
  attr.cap.max_recv_wr = static_cast<uint32_t>(std::max(options.max_recv_wr, 1));
  attr.cap.max_send_sge = static_cast<uint32_t>(options.max_sge);
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = static_cast<uint32_t>(options.max_inline_data);
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = td != nullptr ? td->parent() : context_->pd;
  errno = 0;
  ibv_qp* qp = ibv_create_qp_ex(context_->context, &attr);
  if (qp == nullptr) {
    const int error = ErrnoOr(EINVAL);
    std::string hint;
    if (error == EINVAL && options.max_inline_data > 0) {
      hint = "; qp_param.max_inline_data (" + std::to_string(options.max_inline_data) +
             ") may exceed what the device can inline: lower it";
    } else if (error == ENOMEM) {
      hint = "; the device is out of queue pairs or memory";
    }
    throw Error("verbs transport: creating an RC queue pair (" + std::to_string(options.max_send_wr) +
                " send requests, " + std::to_string(options.max_inline_data) + " inline bytes) on " + context_->name +
                " failed: " + VerbError("ibv_create_qp_ex", error) + hint);
  }
  auto created =
      std::make_unique<VerbsQueuePair>(context_, &path_, qp, static_cast<int>(attr.cap.max_inline_data));
  // RESET -> INIT now, so connect() only has the peer-dependent steps left.
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = path_.port;
  init.qp_access_flags = kAllAccess;
  const int rc = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    throw Error("verbs transport: moving a queue pair to INIT on " + context_->name + " port " +
                std::to_string(path_.port) + " failed: " + VerbError("ibv_modify_qp", rc < 0 ? -rc : rc));
  }
  return created;
}

VerbsQueuePair::VerbsQueuePair(std::shared_ptr<Context> context, const PathSettings* path, ibv_qp* qp,
                               int max_inline)
    : context_(std::move(context)), path_(path), qp_(qp), max_inline_(max_inline), psn_(RandomPsn()) {}

VerbsQueuePair::~VerbsQueuePair() {
  const int rc = ibv_destroy_qp(qp_);
  if (rc != 0) SMART_WARN("verbs transport: ibv_destroy_qp: %s", strerror(rc < 0 ? -rc : rc));
}

QueuePairEndpoint VerbsQueuePair::endpoint() const {
  QueuePairEndpoint ep;
  ep.qp_num = qp_->qp_num;
  ep.psn = psn_;
  ep.lid = path_->lid;
  memcpy(ep.gid, path_->gid.raw, sizeof(ep.gid));
  return ep;
}

void VerbsQueuePair::connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) {
  if (path_->use_grh && IsZero(remote.gid, sizeof(remote.gid))) {
    throw Error("verbs transport: the peer sent no GID, but " + context_->name +
                " routes by GID (RoCE, or infiniband.gid_idx set): is the peer on the verbs transport?");
  }
  if (!path_->use_grh && remote.lid == 0) {
    throw Error("verbs transport: the peer sent LID 0 on an InfiniBand port: is its port up and managed by a "
                "subnet manager? (set infiniband.gid_idx to route by GID instead)");
  }
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = path_->mtu;
  rtr.dest_qp_num = remote.qp_num;
  rtr.rq_psn = remote.psn & 0xffffff;
  rtr.max_dest_rd_atomic = path_->max_dest_rd_atomic;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.port_num = path_->port;
  rtr.ah_attr.dlid = remote.lid;
  rtr.ah_attr.sl = 0;
  rtr.ah_attr.src_path_bits = 0;
  if (path_->use_grh) {
    rtr.ah_attr.is_global = 1;
    memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(path_->gid_index);
    rtr.ah_attr.grh.hop_limit = 64;
    rtr.ah_attr.grh.traffic_class = 0;
    rtr.ah_attr.grh.flow_label = 0;
  }
  int rc = ibv_modify_qp(qp_, &rtr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    ibv_gid gid;
    memcpy(gid.raw, remote.gid, sizeof(gid.raw));
    throw Error("verbs transport: moving queue pair " + std::to_string(qp_->qp_num) + " to RTR against peer qp " +
                std::to_string(remote.qp_num) + " (lid " + std::to_string(remote.lid) + ", gid " + GidString(gid) +
                ") failed: " + VerbError("ibv_modify_qp", rc < 0 ? -rc : rc) +
                "; check infiniband.port and infiniband.gid_idx on both sides");
  }
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = path_->timeout;
  rts.retry_cnt = path_->retry_cnt;
  rts.rnr_retry = path_->rnr_retry;
  rts.sq_psn = psn_;
  rts.max_rd_atomic = path_->max_rd_atomic;
  rc = ibv_modify_qp(qp_, &rts,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    throw Error("verbs transport: moving queue pair " + std::to_string(qp_->qp_num) + " to RTS failed: " +
                VerbError("ibv_modify_qp", rc < 0 ? -rc : rc) + " (timeout " + std::to_string(path_->timeout) +
                ", retry_cnt " + std::to_string(path_->retry_cnt) + ", max_rd_atomic " +
                std::to_string(path_->max_rd_atomic) + ")");
  }
  peer_ = std::move(peer);
}

// ---------------------------------------------------------------------------
// Regions as peers see them

std::string VerbsDevice::export_regions(const std::vector<const MemoryRegion*>&) {
  // Address and rkey in the handshake are all a NIC needs.
  return std::string();
}

std::shared_ptr<PeerMemory> VerbsDevice::import_regions(const std::vector<RemoteRegion>& regions,
                                                         const std::string& exported) {
  if (!exported.empty()) {
    throw Error("verbs transport: the memory blade sent " + std::to_string(exported.size()) +
                " bytes of shared-memory details: it runs another transport; set \"transport\" alike on both");
  }
  bool any = false;
  for (const RemoteRegion& r : regions) any = any || (r.valid && r.length > 0);
  if (!any) throw Error("verbs transport: the memory blade advertised no memory region");
  return std::make_shared<VerbsPeerMemory>();
}

// ---------------------------------------------------------------------------
// Opening the device

VerbsDevice::VerbsDevice(const SmartConfig& config) : context_(std::make_shared<Context>()) { open(config); }

VerbsDevice::~VerbsDevice() = default;

void VerbsDevice::open(const SmartConfig& config) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    throw Error("verbs transport: " + VerbError("ibv_get_device_list", ErrnoOr(ENOSYS)) +
                " (is rdma-core installed and the RDMA kernel modules loaded?)");
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
      const int total = config.thread_aware_alloc.total_uuar;
      const int low_latency = total - config.thread_aware_alloc.shared_uuar;
      setenv("MLX5_TOTAL_UUARS", std::to_string(total).c_str(), 1);
      setenv("MLX5_NUM_LOW_LAT_UUARS", std::to_string(low_latency).c_str(), 1);
      const char* preload = getenv("LD_PRELOAD");
      if (preload == nullptr || strstr(preload, "libmlx5") == nullptr) {
        SMART_WARN("verbs transport: doorbell mode uuar with MLX5_TOTAL_UUARS=%d MLX5_NUM_LOW_LAT_UUARS=%d, but no "
                   "patched libmlx5 is preloaded: the stock provider keeps at most 12 shared doorbells "
                   "(patch/guide.md; or use doorbell mode thread_domain); mode in effect: uuar",
                   total, low_latency);
      } else {
        SMART_INFO("verbs transport: doorbell mode uuar: MLX5_TOTAL_UUARS=%d MLX5_NUM_LOW_LAT_UUARS=%d", total,
                   low_latency);
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
