// Setup side of the shm provider: the device, regions, queue pairs and
// completion queues. The memfd hand-over to clients is in shm_handover.cc.
#include "smart/transport/shm/shm_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "smart/logging.h"
#include "smart/status.h"
#include "smart/task.h"
#include "smart/transport/shm/shm_internal.h"

namespace smart::shm {

namespace {

uint32_t RandomU32() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint32_t>(NowNs() * 2654435761u);
  return v;
}

constexpr const char* kShmemHugePages = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
// Pools below this size fit the TLB's reach well enough not to mention it.
constexpr size_t kHugePageHintBytes = 64ull << 20;

}  // namespace

// Says once per process when MADV_HUGEPAGE cannot take effect on shared
// memory, so that random access to a large pool takes a TLB miss per 4 KiB
// page. Only reads the setting: changing it is the administrator's call.
void HintHugePages(size_t bytes) {
  static std::atomic<bool> said{false};
  if (bytes < kHugePageHintBytes || said.load(std::memory_order_relaxed)) return;
  const int fd = open(kShmemHugePages, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[128] = {};
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return;
  const std::string setting(buf, static_cast<size_t>(n));
  if (setting.find("[never]") == std::string::npos && setting.find("[deny]") == std::string::npos) return;
  if (said.exchange(true)) return;
  SMART_INFO("shm: pool on 4 KiB pages (a TLB miss per random access); 2 MiB pages: echo advise > %s",
             kShmemHugePages);
}


ShmRegion::ShmRegion(ShmDevice* device, char* addr, size_t length, int memfd)
    : device_(device), memfd_(memfd), sealed_(memfd >= 0 && PoolSealed(memfd)) {
  addr_ = addr;
  length_ = length;
  lkey_ = device->register_local(addr, length);
  rkey_ = memfd >= 0 ? (RandomU32() | 1u) : lkey_;
}


void ShmPeerMemory::guard_session(uint64_t word_addr, uint32_t rkey, uint64_t current) {
  for (const MappedRegion& r : regions_) {
    if (r.rkey != rkey || word_addr < r.remote_addr || word_addr % 8 != 0 || r.length < 8 ||
        word_addr - r.remote_addr > r.length - 8) {
      continue;
    }
    session_word_ = reinterpret_cast<const uint64_t*>(r.local + (word_addr - r.remote_addr));
    session_current_ = current;
    return;
  }
  throw Error("shm transport: the session word at 0x" + [&] {
    char buf[24];
    snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(word_addr));
    return std::string(buf);
  }() + " lies in no region of the memory blade");
}

ShmPeerMemory::~ShmPeerMemory() {
  for (MappedRegion& r : regions_) {
    if (r.local != nullptr) munmap(r.local, r.length);
  }
}

ShmDevice::ShmDevice(const SmartConfig& config)
    : allowed_uids_(config.auth.allow_uids),
      latency_ns_(config.shm.latency_ns),
      latency_cycles_(config.shm.latency_ns == 0
                          ? 0
                          : static_cast<uint64_t>(static_cast<double>(config.shm.latency_ns) * CyclesPerNanosecond())) {
  if (config.shm.nic_model.enabled) {
    nic_ = std::make_unique<NicModel>(config.shm.nic_model, CyclesPerNanosecond(), latency_cycles_);
  }
}

ShmDevice::~ShmDevice() {
  if (fd_server_.joinable()) {
    char c = 'q';
    ssize_t ignored = write(stop_pipe_[1], &c, 1);
    (void)ignored;
    fd_server_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (!socket_path_.empty()) {
    unlink(socket_path_.c_str());
    rmdir(socket_path_.substr(0, socket_path_.rfind('/')).c_str());
  }
  if (stop_pipe_[0] >= 0) close(stop_pipe_[0]);
  if (stop_pipe_[1] >= 0) close(stop_pipe_[1]);
}

std::string ShmDevice::description() const {
  std::string text = "shm (same-host software RDMA, completion latency " + std::to_string(latency_ns_) + " ns";
  if (nic_) text += "; " + nic_->description();
  return text + ")";
}

uint32_t ShmDevice::register_local(char* addr, uint64_t length) {
  std::lock_guard<std::mutex> lock(register_mutex_);
  for (uint32_t i = 0; i < kMaxLocalRegions; ++i) {
    LocalRegion& r = local_regions_[i];
    if (r.lkey.load(std::memory_order_relaxed) == 0) {
      r.addr = addr;
      r.length = length;
      const uint32_t key = ((RandomU32() & 0x7fff) + 1) << 16 | i;
      r.lkey.store(key, std::memory_order_release);
      return key;
    }
  }
  throw Error("shm transport: more than " + std::to_string(kMaxLocalRegions) + " registered memory regions");
}

bool ShmDevice::local_registered(const char* addr, uint64_t length) const {
  std::lock_guard<std::mutex> lock(register_mutex_);
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  for (const LocalRegion& r : local_regions_) {
    if (r.lkey.load(std::memory_order_relaxed) == 0) continue;
    const uint64_t base = reinterpret_cast<uint64_t>(r.addr);
    if (a >= base && length <= r.length && a - base <= r.length - length) return true;
  }
  return false;
}

void ShmDevice::unregister_local(uint32_t lkey) {
  std::lock_guard<std::mutex> lock(register_mutex_);
  const uint32_t index = lkey & 0xffff;
  if (index < kMaxLocalRegions && local_regions_[index].lkey.load() == lkey) {
    local_regions_[index].lkey.store(0, std::memory_order_release);
  }
}

std::unique_ptr<MemoryRegion> ShmDevice::allocate_shared_region(size_t bytes) {
  if (bytes == 0) throw Error("shm transport: cannot allocate an empty region");
  const int fd = memfd_create("smart-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw Error(Errno("shm transport: memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string message = Errno("shm transport: sizing the pool memfd");
    close(fd);
    throw Error(message + " (" + std::to_string(bytes >> 20) + " MiB)");
  }
  // Clients get this descriptor: none of them may shrink the pool under the
  // blade and the other clients (SIGBUS) or grow it.
  if (!SealPool(fd)) {
    const std::string message = Errno("shm transport: sealing the pool memfd against shrinking and growing");
    close(fd);
    throw Error(message);
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    const std::string message = Errno("shm transport: mapping the pool");
    close(fd);
    throw Error(message);
  }
  // Huge pages cut TLB misses on random access; they take effect where
  // /sys/kernel/mm/transparent_hugepage/shmem_enabled allows (advise).
  madvise(addr, bytes, MADV_HUGEPAGE);
  HintHugePages(bytes);
  return std::make_unique<ShmRegion>(this, static_cast<char*>(addr), bytes, fd);
}

std::unique_ptr<MemoryRegion> ShmDevice::adopt_shared_region(void* addr, size_t length, int fd) {
  if (addr == nullptr || length == 0 || fd < 0) {
    if (addr != nullptr) munmap(addr, length);
    if (fd >= 0) close(fd);
    throw Error("shm transport: a shared region needs a mapping and its descriptor");
  }
  return std::make_unique<ShmRegion>(this, static_cast<char*>(addr), length, fd);
}

std::unique_ptr<MemoryRegion> ShmDevice::register_memory(void* addr, size_t length) {
  if (addr == nullptr || length == 0) throw Error("shm transport: cannot register an empty buffer");
  return std::make_unique<ShmRegion>(this, static_cast<char*>(addr), length, -1);
}

std::unique_ptr<CompletionQueue> ShmDevice::create_cq(int depth, ThreadDomain*, bool concurrent) {
  if (depth < 1) throw Error("shm transport: completion queue depth must be positive");
  return std::make_unique<ShmCompletionQueue>(depth, latency_cycles_, concurrent, nic_ != nullptr);
}

namespace {
class ShmThreadDomain final : public ThreadDomain {};
}  // namespace

std::unique_ptr<ThreadDomain> ShmDevice::create_thread_domain() {
  // Nothing is shared between queue pairs here, so every domain is private.
  return std::make_unique<ShmThreadDomain>();
}

std::unique_ptr<QueuePair> ShmDevice::create_qp(const QueuePairOptions& options) {
  if (options.cq == nullptr) throw Error("shm transport: a queue pair needs a completion queue");
  auto* cq = dynamic_cast<ShmCompletionQueue*>(options.cq);
  if (cq == nullptr) throw Error("shm transport: the completion queue belongs to another transport");
  if (options.concurrent && !cq->concurrent()) {
    throw Error("shm transport: a queue pair shared by threads needs a completion queue created concurrent");
  }
  if (options.max_send_wr < 1 || options.max_sge < 1) {
    throw Error("shm transport: max_send_wr and max_sge must be positive");
  }
  if (options.max_send_wr > ShmQueuePair::kMaxSendWr) {
    throw Error("shm transport: max_send_wr " + std::to_string(options.max_send_wr) + " is above the provider's " +
                std::to_string(ShmQueuePair::kMaxSendWr));
  }
  return std::make_unique<ShmQueuePair>(this, options, next_qp_num_.fetch_add(1));
}

}  // namespace smart::shm

namespace smart {
std::unique_ptr<Device> OpenShmDevice(const SmartConfig& config) { return std::make_unique<shm::ShmDevice>(config); }
}  // namespace smart
