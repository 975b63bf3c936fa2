// Same-host software RDMA. A memory blade's pool is a memfd handed to each
// client over a Unix socket after the TCP handshake; the initiator carries
// out its own work requests on the mapping (memcpy and 8-byte atomics), so
// the memory blade's CPU does nothing, as with a NIC.
//
// Like a NIC, the provider works asynchronously: post_send validates and
// translates each request, prefetches the lines it will touch and queues it
// on the completion ring; polling carries the requests out, in post order,
// just before it hands out their completions. While one task waits, the
// next ones post and prefetch, so the poller copies from lines that are
// already arriving instead of taking one cache or TLB miss at a time.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "smart/transport.h"
#include "smart/transport/shm/nic_model.h"
#include "smart/util/peer_text.h"

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
  void guard_session(uint64_t word_addr, uint32_t rkey, uint64_t current) override;
  bool session_ended() const override {
    return session_word_ != nullptr && __atomic_load_n(session_word_, __ATOMIC_ACQUIRE) != session_current_;
  }
  // The session word in this process's mapping (nullptr: unguarded) and the
  // value it holds while the session is current.
  const uint64_t* session_word() const { return session_word_; }
  uint64_t session_current() const { return session_current_; }

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
  const uint64_t* session_word_ = nullptr;
  uint64_t session_current_ = 0;
};

struct LocalRegion {
  std::atomic<uint32_t> lkey{0};  // 0: free slot
  char* addr = nullptr;
  uint64_t length = 0;
};

class ShmCompletionQueue;
class ShmQueuePair;

// What carrying out a queued request does.
enum class RingAction : uint8_t {
  kRead,          // local <- remote
  kWrite,         // remote <- local (inline: local is the captured payload)
  kCompareSwap,   // 8-byte CAS on remote, old value to local
  kFetchAdd,      // 8-byte FAA on remote, old value to local
  kReadScatter,   // remote -> the ScatterEntry list at local
  kWriteGather,   // the ScatterEntry list at local -> remote
};

// One piece of a request with several scatter entries, kept by its queue pair.
struct ScatterEntry {
  char* addr;
  uint64_t length;
};

// A posted work request on the completion ring: everything needed to carry
// it out (translated and checked at post time) and the completion it gives.
// One cache line.
struct alignas(64) RingEntry {
  uint64_t wr_id;
  ShmQueuePair* qp;        // nullptr once its queue pair was destroyed
  uint64_t ready_cycles;   // 0 without a modelled latency or NIC
  char* remote;            // in the peer's mapping
  char* local;             // registered memory, captured inline data, or a ScatterEntry list
  union {
    struct {
      uint64_t compare_add;
      uint64_t swap;
    } atomic;
    char inline_data[16];  // small inline payloads, captured at post time
    uint64_t scatter_count;
  } u;
  uint32_t byte_len;
  uint16_t retired;        // send-queue slots its completion retires; 0: no completion
  uint8_t status;          // ibv_wc_status; only IBV_WC_SUCCESS is carried out
  RingAction action;
};
static_assert(sizeof(RingEntry) == 64, "a ring entry is one cache line");

class ShmQueuePair final : public QueuePair {
 public:
  ShmQueuePair(ShmDevice* device, const QueuePairOptions& options, uint32_t qp_num);
  // Carries out the requests still queued, so that none posted is lost;
  // their completions are dropped, as ibv_destroy_qp removes a queue pair's
  // entries from its completion queue.
  ~ShmQueuePair() override;
  QueuePairEndpoint endpoint() const override;
  void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) override;
  int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) override;
  int max_inline_data() const override { return options_.max_inline_data; }

  // Called by the completion queue, under its lock when it is concurrent,
  // when it hands out a completion that retires `count` send-queue slots.
  void retire(uint32_t count) { outstanding_ -= static_cast<int>(count); }
  uint32_t qp_num() const { return qp_num_; }
  // Whether a queued request's local memory is still registered (cold).
  bool local_still_valid(const RingEntry& e) const;
  // The soft fence (PeerMemory::guard_session): false once this queue
  // pair's session word no longer holds its session, i.e. the memory blade
  // ended the session or another client asked for it to be fenced. Then the
  // queue pair goes to the error state: what is posted later is flushed.
  bool session_current() {
    if (session_word_ == nullptr) return true;
    if (__builtin_expect(__atomic_load_n(session_word_, __ATOMIC_ACQUIRE) == session_current_, 1)) return true;
    error_state_ = true;
    return false;
  }

  // Largest send queue: a completion's retired count fits RingEntry::retired.
  static constexpr int kMaxSendWr = 65535;

 private:
  int post_locked(ibv_send_wr* wr, ibv_send_wr** bad_wr);
  // Queues one validated request at the k-th free ring entry.
  void queue(ibv_send_wr* w, uint64_t k, uint64_t ready);
  // With the NIC model: rings the doorbell and admits `count` requests;
  // the cycle their completions are ready.
  [[gnu::noinline]] uint64_t modelled_ready(int count);
  [[gnu::noinline]] int post_concurrent(ibv_send_wr* wr, ibv_send_wr** bad_wr);
  // Checks and translates one request into `e` (action, remote, local,
  // byte_len, u) and prefetches its lines; the status it would complete with.
  ibv_wc_status prepare(const ibv_send_wr& wr, RingEntry* e);
  [[gnu::noinline]] ibv_wc_status prepare_general(const ibv_send_wr& wr, RingEntry* e);
  // Room for one request's inline payload or scatter list, reused after
  // max_send_wr requests: by then the send queue has retired it.
  char* side_slot() {
    char* slot = side_.data() + side_next_ * side_stride_;
    if (++side_next_ == static_cast<uint32_t>(options_.max_send_wr)) side_next_ = 0;
    return slot;
  }
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
  NicModel* nic_ = nullptr;           // shm.nic_model, when enabled
  NicDoorbell* doorbell_ = nullptr;  // a shared doorbell of the model; nullptr: its own
  std::shared_ptr<ShmPeerMemory> peer_;
  MappedRegion regions_[kMaxPeerRegions];
  int region_count_ = 0;
  const std::atomic<bool>* peer_failed_ = nullptr;
  // The soft fence's word (nullptr: none) and the value it holds while the
  // session is current; read when a WRITE or atomic is carried out.
  const uint64_t* session_word_ = nullptr;
  uint64_t session_current_ = 0;
  bool connected_ = false;
  bool connected_to_peer_ = false;  // connected, with peer memory to address
  // connected_to_peer_, one scatter entry allowed and no NIC model: a lone
  // READ or WRITE needs no list walk before it is queued.
  bool lone_post_ = false;
  bool error_state_ = false;
  uint32_t unsignaled_ = 0;
  int outstanding_ = 0;  // posted work requests not yet retired
  // Inline payloads above RingEntry::u.inline_data and scatter lists.
  std::vector<char> side_;
  size_t side_stride_ = 0;
  uint32_t side_next_ = 0;
};

class ShmCompletionQueue final : public CompletionQueue {
 public:
  // `timed`: completions carry a ready time even without a latency (the
  // NIC model's device time).
  ShmCompletionQueue(int depth, uint64_t latency_cycles, bool concurrent, bool timed);
  // Carries out queued requests in post order, each just before the
  // completion it belongs to is handed out (unsignaled ones with the next
  // entry polled after them).
  int poll(int max_entries, ibv_wc* wc) override;
  // The ring entry at `index` found its queue pair's session fenced (the
  // soft fence): a WRITE or atomic is not carried out and completes with a
  // remote access error, and so does the next completion of its queue pair
  // when it was unsignaled; a scatter READ is carried out.
  [[gnu::noinline]] void refuse(uint64_t index);

  // The ring holds every posted request until it is carried out, so a post
  // needs a free slot per request. Called with mutex() held when concurrent.
  size_t free_slots() const { return mask_ + 1 - (tail_ - head_); }
  // The k-th entry after the tail; publish(count) makes entries visible.
  RingEntry* next_entry(uint64_t k) { return &ring_[(tail_ + k) & mask_]; }
  void publish(uint64_t count) { tail_ += count; }
  uint64_t ready_cycles() const;
  bool concurrent() const { return concurrent_; }
  std::mutex& mutex() { return mutex_; }
  // Carries out the queued requests of a queue pair being destroyed and
  // drops their completions. Called with mutex() held when concurrent.
  void drain_queue_pair(ShmQueuePair* qp);

 private:
  int poll_unlocked(int max_entries, ibv_wc* wc);

  std::vector<RingEntry> ring_;
  uint64_t mask_;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  uint64_t latency_cycles_;
  bool timed_;  // completions carry a ready time (latency or NIC model)
  bool concurrent_;
  std::mutex mutex_;
};

// Seals a pool's memfd so that no process holding it can shrink or grow it
// (F_SEAL_SHRINK, F_SEAL_GROW), nor change the seals (F_SEAL_SEAL); it stays
// writable. The memfd must have been created with MFD_ALLOW_SEALING. False,
// with errno, where the kernel cannot (hugetlb memfds before Linux 4.16).
bool SealPool(int fd);
// Whether a pool descriptor is sealed as SealPool seals it: false for files
// and devices, which any holder of a writable descriptor can truncate.
bool PoolSealed(int fd);

// The client's half of the memfd hand-over: presents the token in
// `exported` (ShmDevice::export_regions) at the blade's socket and receives
// each region's descriptor and length. Throws smart::Error naming why the
// blade refused. Used by ShmDevice::import_regions; the caller owns the fds.
struct ReceivedRegions {
  std::vector<int> fds;
  std::vector<uint64_t> lengths;
};
ReceivedRegions ReceiveRegions(const std::string& exported);

class ShmDevice final : public Device {
 public:
  explicit ShmDevice(const SmartConfig& config);
  ~ShmDevice() override;

  TransportKind kind() const override { return TransportKind::kShm; }
  std::string description() const override;
  std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) override;
  std::unique_ptr<MemoryRegion> adopt_shared_region(void* addr, size_t length, int fd) override;
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
  // shm.nic_model, or nullptr when it is off.
  NicModel* nic() const { return nic_.get(); }
  // Whether [addr, addr+length) still lies in one registered region (cold:
  // a scan, for requests carried out when their queue pair is destroyed).
  bool local_registered(const char* addr, uint64_t length) const;

  static constexpr uint32_t kMaxLocalRegions = 4096;

  // Called by region destructors.
  void unregister_local(uint32_t lkey);

 private:
  friend class ShmRegion;
  uint32_t register_local(char* addr, uint64_t length);
  void serve_fds();
  // Answers one peer of the memfd socket whose user may map the pool: its
  // regions, if `token` (kTokenBytes; nullptr: none came) is a pending
  // export's, else a refusal.
  void hand_over(int client, const ucred& cred, const char* token);
  // Whether a peer running as `uid` may map the pool (SO_PEERCRED).
  bool user_allowed(uint32_t uid) const;

  std::vector<uint32_t> allowed_uids_;  // auth.allow_uids, besides our own uid
  // Refusals on the memfd socket, logged at most once a second.
  LogRateLimit refused_user_log_;
  LogRateLimit refused_unsealed_log_;
  LogRateLimit dropped_peer_log_;

  uint64_t latency_ns_;
  uint64_t latency_cycles_;
  std::unique_ptr<NicModel> nic_;
  LocalRegion local_regions_[kMaxLocalRegions];
  mutable std::mutex register_mutex_;
  std::atomic<uint32_t> next_qp_num_{1};

  // Memory-blade side: a Unix socket handing out memfds to clients that
  // present a token from their TCP handshake.
  struct PendingExport {
    std::vector<int> fds;  // not owned
    std::vector<uint64_t> lengths;
    uint64_t expires_ns;
    // Every region's descriptor is sealed against shrinking and growing
    // (PoolSealed); only such pools go to users other than the blade's.
    bool sealed = true;
  };
  std::mutex export_mutex_;
  std::map<std::string, PendingExport> pending_exports_;  // token -> regions
  std::string socket_path_;  // in a directory of its own, removed with the device
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread fd_server_;
};

}  // namespace smart::shm
