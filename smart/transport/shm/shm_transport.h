// Same-host software RDMA. A memory blade's pool is a memfd handed to each
// client over a Unix socket after the TCP handshake; the initiator carries
// out its own work requests on the mapping (memcpy and 8-byte atomics), so
// the memory blade's CPU does nothing, as with a NIC.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "smart/transport.h"

namespace smart::shm {

class ShmDevice;

struct MappedRegion {
  uint64_t remote_addr = 0;  // address the peer advertised
  uint64_t length = 0;
  uint32_t rkey = 0;
  char* local = nullptr;  // where this process mapped it
};

class ShmPeerMemory final : public PeerMemory {
 public:
  ~ShmPeerMemory() override;
  void mark_failed() override { failed_.store(true, std::memory_order_release); }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::atomic<bool>* failed_flag() const { return &failed_; }

  // Translates a peer address; nullptr when the rkey is unknown or the range
  // leaves the region.
  char* translate(uint64_t addr, uint64_t length, uint32_t rkey) const {
    for (const MappedRegion& r : regions_) {
      if (r.rkey == rkey) {
        if (addr < r.remote_addr || length > r.length || addr - r.remote_addr > r.length - length) return nullptr;
        return r.local + (addr - r.remote_addr);
      }
    }
    return nullptr;
  }

  std::vector<MappedRegion> regions_;

 private:
  std::atomic<bool> failed_{false};
};

struct LocalRegion {
  std::atomic<uint32_t> lkey{0};  // 0: free slot
  char* addr = nullptr;
  uint64_t length = 0;
};

class ShmCompletionQueue;

class ShmQueuePair final : public QueuePair {
 public:
  ShmQueuePair(ShmDevice* device, const QueuePairOptions& options, uint32_t qp_num);
  QueuePairEndpoint endpoint() const override;
  void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) override;
  int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) override;
  int max_inline_data() const override { return options_.max_inline_data; }

  // Called by the completion queue, under its lock when it is concurrent,
  // when it hands out a completion that retires `count` send-queue slots.
  void retire(uint32_t count) { outstanding_ -= static_cast<int>(count); }
  uint32_t qp_num() const { return qp_num_; }

 private:
  int post_locked(ibv_send_wr* wr, ibv_send_wr** bad_wr);
  [[gnu::noinline]] int post_concurrent(ibv_send_wr* wr, ibv_send_wr** bad_wr);
  ibv_wc_status execute(const ibv_send_wr& wr, uint32_t* byte_len);
  [[gnu::noinline]] ibv_wc_status execute_general(const ibv_send_wr& wr, uint32_t* byte_len);
  // A peer address in this process; nullptr when the rkey is unknown or the
  // range leaves the region.
  char* translate(uint64_t addr, uint64_t length, uint32_t rkey) const {
    for (int i = 0; i < region_count_; ++i) {
      const MappedRegion& r = regions_[i];
      if (r.rkey == rkey) {
        if (addr < r.remote_addr || length > r.length || addr - r.remote_addr > r.length - length) return nullptr;
        return r.local + (addr - r.remote_addr);
      }
    }
    return nullptr;
  }
  static constexpr int kMaxPeerRegions = 4;

  ShmDevice* device_;
  QueuePairOptions options_;
  ShmCompletionQueue* cq_;
  uint32_t qp_num_;
  std::shared_ptr<ShmPeerMemory> peer_;
  MappedRegion regions_[kMaxPeerRegions];
  int region_count_ = 0;
  const std::atomic<bool>* peer_failed_ = nullptr;
  bool connected_ = false;
  bool connected_to_peer_ = false;  // connected, with peer memory to address
  bool error_state_ = false;
  uint32_t unsignaled_ = 0;
  int outstanding_ = 0;  // posted work requests not yet retired
};

class ShmCompletionQueue final : public CompletionQueue {
 public:
  ShmCompletionQueue(int depth, uint64_t latency_cycles, bool concurrent);
  int poll(int max_entries, ibv_wc* wc) override;

  // Queues a completion; the caller checked free_slots(). Called with
  // mutex() held when concurrent.
  void push(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t byte_len, ShmQueuePair* qp,
            uint32_t retired);
  size_t free_slots() const { return mask_ + 1 - (tail_ - head_); }
  bool concurrent() const { return concurrent_; }
  std::mutex& mutex() { return mutex_; }

 private:
  struct Entry {
    uint64_t wr_id;
    ShmQueuePair* qp;
    uint64_t ready_cycles;
    uint32_t byte_len;
    uint32_t retired;
    uint8_t status;
    uint8_t opcode;
  };
  int poll_unlocked(int max_entries, ibv_wc* wc);

  std::vector<Entry> ring_;
  uint64_t mask_;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  uint64_t latency_cycles_;
  bool concurrent_;
  std::mutex mutex_;
};

class ShmDevice final : public Device {
 public:
  explicit ShmDevice(const SmartConfig& config);
  ~ShmDevice() override;

  TransportKind kind() const override { return TransportKind::kShm; }
  std::string description() const override;
  std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t length) override;
  std::unique_ptr<CompletionQueue> create_cq(int depth, ThreadDomain* domain, bool concurrent) override;
  std::unique_ptr<ThreadDomain> create_thread_domain() override;
  std::unique_ptr<QueuePair> create_qp(const QueuePairOptions& options) override;
  std::string export_regions(const std::vector<const MemoryRegion*>& regions) override;
  std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>& regions,
                                              const std::string& exported) override;

  // Local memory lookup for the data path: nullptr unless [addr, addr+len)
  // lies in the region registered under `lkey`.
  char* local_translate(uint64_t addr, uint64_t length, uint32_t lkey) const {
    const uint32_t index = lkey & 0xffff;
    if (index >= kMaxLocalRegions) return nullptr;
    const LocalRegion& r = local_regions_[index];
    if (r.lkey.load(std::memory_order_acquire) != lkey) return nullptr;
    const uint64_t base = reinterpret_cast<uint64_t>(r.addr);
    if (addr < base || length > r.length || addr - base > r.length - length) return nullptr;
    return reinterpret_cast<char*>(addr);
  }

  uint64_t latency_cycles() const { return latency_cycles_; }

  static constexpr uint32_t kMaxLocalRegions = 4096;

  // Called by region destructors.
  void unregister_local(uint32_t lkey);

 private:
  friend class ShmRegion;
  uint32_t register_local(char* addr, uint64_t length);
  void serve_fds();

  uint64_t latency_ns_;
  uint64_t latency_cycles_;
  LocalRegion local_regions_[kMaxLocalRegions];
  std::mutex register_mutex_;
  std::atomic<uint32_t> next_qp_num_{1};

  // Memory-blade side: a Unix socket handing out memfds to clients that
  // present a token from their TCP handshake.
  struct PendingExport {
    std::vector<int> fds;  // not owned
    std::vector<uint64_t> lengths;
    uint64_t expires_ns;
  };
  std::mutex export_mutex_;
  std::map<std::string, PendingExport> pending_exports_;  // token -> regions
  std::string socket_name_;  // abstract namespace, without the leading NUL
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread fd_server_;
};

}  // namespace smart::shm
