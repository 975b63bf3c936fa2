// Setup side of the verbs provider: memory registration, completion queues
// and thread domains, queue pairs and their RESET -> INIT -> RTR -> RTS
// transitions (opening the device: verbs_device.cc).
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

uint32_t RandomPsn() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint32_t>(getpid()) * 2654435761u;
  return v & 0xffffff;
}

constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

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

ibv_mr* RegisterOrThrow(const Context& context, void* addr, size_t length, const char* what, int access) {
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(context.pd, addr, length, access);
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

VerbsRegion::VerbsRegion(std::shared_ptr<Context> context, ibv_mr* mr, void* mapping, size_t mapped_bytes)
    : context_(std::move(context)), mr_(mr), mapping_(mapping), mapped_bytes_(mapped_bytes) {
  addr_ = mr->addr;
  length_ = mr->length;
  lkey_ = mr->lkey;
  rkey_ = mr->rkey;
}

VerbsRegion::~VerbsRegion() {
  const int rc = ibv_dereg_mr(mr_);
  if (rc != 0) SMART_WARN("verbs transport: ibv_dereg_mr: %s", strerror(rc < 0 ? -rc : rc));
  if (mapping_ != nullptr) munmap(mapping_, mapped_bytes_);
}

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
    const int access = grants_only_ ? kGrantsOnlyAccess : kAllAccess;
    ibv_mr* mr = RegisterOrThrow(*context_, addr, bytes, "the memory pool", access);
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
    const int access = grants_only_ ? kGrantsOnlyAccess : kAllAccess;
    ibv_mr* mr = RegisterOrThrow(*context_, addr, length, "the memory pool", access);
    return std::make_unique<VerbsRegion>(context_, mr, addr, length);
  } catch (...) {
    munmap(addr, length);
    throw;
  }
}

std::unique_ptr<MemoryRegion> VerbsDevice::register_memory(void* addr, size_t length) {
  if (addr == nullptr || length == 0) throw Error("verbs transport: cannot register an empty buffer");
  // Only this process's own requests use it (their source, or where READs
  // and atomics land): no rkey that reaches it is worth anything to a peer.
  ibv_mr* mr = RegisterOrThrow(*context_, addr, length, "a local buffer", IBV_ACCESS_LOCAL_WRITE);
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

}  // namespace smart::verbs
