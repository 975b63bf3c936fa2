/// @file
/// The transport contract: one small, batch-oriented interface with two
/// providers, `verbs` (rdma-core) and `shm` (same-host software RDMA). Work
/// requests and completions are rdma-core's own ibv_send_wr / ibv_wc, so the
/// verbs provider passes them through untouched.
///
/// Threading: a queue pair and a completion queue are used by one thread at a
/// time unless they were created with `concurrent` set.
///
/// Not installed: the framework, its providers and its tests use it; a
/// program built on the installed library sees TransportKind only
/// (smart/transport_kind.h), and no rdma-core header.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"
#include "smart/transport_kind.h"

namespace smart {

/// A memory region as a peer sees it: base address, length and remote key.
struct RemoteRegion {
  uint64_t addr = 0;  ///< virtual address of the region at the peer
  uint64_t length = 0;  ///< bytes
  uint32_t rkey = 0;  ///< remote key
  bool valid = false;  ///< false for a region the peer does not have
};

/// What a peer needs to connect its queue pair to one of ours.
struct QueuePairEndpoint {
  uint32_t qp_num = 0;  ///< queue pair number
  uint32_t psn = 0;  ///< first packet sequence number
  uint16_t lid = 0;  ///< local identifier (InfiniBand)
  uint8_t gid[16] = {};  ///< global identifier (RoCE)
};

/// Memory registered with a Device.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  /// Start of the region in this process.
  void* addr() const { return addr_; }
  /// Bytes.
  size_t length() const { return length_; }
  /// Local key for work requests.
  uint32_t lkey() const { return lkey_; }
  /// Remote key peers use.
  uint32_t rkey() const { return rkey_; }
  /// The region as a peer addresses it.
  RemoteRegion remote() const { return RemoteRegion{reinterpret_cast<uint64_t>(addr_), length_, rkey_, true}; }

 protected:
  void* addr_ = nullptr;  ///< set by the provider
  size_t length_ = 0;  ///< set by the provider
  uint32_t lkey_ = 0;  ///< set by the provider
  uint32_t rkey_ = 0;  ///< set by the provider
};

/// A memory blade's grant of a region to one client queue pair: a remote
/// key that only that queue pair can use (a type 2 memory window on verbs).
/// Destroying the grant revokes the key.
class AccessGrant {
 public:
  virtual ~AccessGrant() = default;
  /// The remote key the client puts in work requests on that queue pair.
  uint32_t rkey() const { return rkey_; }

 protected:
  uint32_t rkey_ = 0;  ///< set by the provider
};

/// Where completions of work requests arrive.
class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  /// Writes up to `max_entries` completions into `wc`; returns how many, or a
  /// negative errno value.
  virtual int poll(int max_entries, ibv_wc* wc) = 0;
};

/// A peer's memory made reachable from this process. Shared by the queue
/// pairs connected to that peer.
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;
  /// The peer is gone: work requests posted from now on complete with
  /// IBV_WC_RETRY_EXC_ERR, as a NIC's would once its retries ran out.
  virtual void mark_failed() {}
  /// The session this client holds on the peer: the 8-byte word at peer
  /// address `word_addr` (key `rkey`) holds `current` while the session is
  /// current, and changes when the peer ends it or another client asks for
  /// it to be fenced. Call before connecting queue pairs to this peer. A
  /// provider the peer can fence at its own end (verbs: the blade destroys
  /// the session's queue pairs) ignores it; one the peer cannot (shm, whose
  /// clients map the pool) checks the word right before it carries out each
  /// WRITE or atomic, and fails the request with IBV_WC_REM_ACCESS_ERR,
  /// without touching the peer's memory, once the word changed.
  virtual void guard_session(uint64_t word_addr, uint32_t rkey, uint64_t current) {
    (void)word_addr;
    (void)rkey;
    (void)current;
  }
  /// True once the guarded session's word changed (shm; always false where
  /// guard_session does nothing): the reason a request failed.
  virtual bool session_ended() const { return false; }
};

/// A doorbell domain: queue pairs created in different domains never share a
/// doorbell register or a lock.
class ThreadDomain {
 public:
  virtual ~ThreadDomain() = default;
};

/// How create_qp builds a queue pair.
struct QueuePairOptions {
  CompletionQueue* cq = nullptr;      ///< send and receive completions
  ThreadDomain* domain = nullptr;     ///< nullptr: the provider's default
  int max_send_wr = 256;  ///< send queue depth
  int max_recv_wr = 1;  ///< receive queue depth
  int max_sge = 1;  ///< scatter-gather entries per work request
  int max_inline_data = 64;  ///< largest inline payload asked for
  bool concurrent = false;            ///< posted to by several threads
};

/// A reliable-connected queue pair.
class QueuePair {
 public:
  virtual ~QueuePair() = default;
  /// What the peer needs to connect to this queue pair.
  virtual QueuePairEndpoint endpoint() const = 0;
  /// Moves the queue pair to ready-to-send against `remote`. `peer` is the
  /// memory the queue pair will address (nullptr on a memory blade). Throws.
  virtual void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) = 0;
  /// Posts a linked list of work requests with one doorbell. Returns 0, or an
  /// errno value with *bad_wr set to the first request not posted.
  virtual int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) = 0;
  /// Largest inline payload the queue pair accepts.
  virtual int max_inline_data() const = 0;
};

/// An opened transport: registers memory and creates queues.
class Device {
 public:
  /// Opens the transport named by config.transport; `auto` takes verbs when an
  /// RDMA device is present and shm otherwise, and says which. Throws.
  static std::unique_ptr<Device> Open(const SmartConfig& config);

  virtual ~Device() = default;
  /// Which provider this is.
  virtual TransportKind kind() const = 0;
  /// The provider and device, for messages.
  virtual std::string description() const = 0;

  /// Zeroed memory meant for peers to access: a memory blade's pool.
  virtual std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) = 0;
  /// A memory blade's pool that the caller mapped shared from `fd` (huge
  /// pages, a file, a devdax device): the region takes over the mapping and
  /// the descriptor (unmaps and closes them), on success or when it throws.
  virtual std::unique_ptr<MemoryRegion> adopt_shared_region(void* addr, size_t length, int fd) = 0;
  /// Registers local memory for this process's own requests (their source,
  /// and where READs and atomics land); no peer may reach it. Throws.
  virtual std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t length) = 0;
  /// A completion queue of `depth` entries in `domain` (nullptr: the default); `concurrent` when several threads poll it. Throws.
  virtual std::unique_ptr<CompletionQueue> create_cq(int depth, ThreadDomain* domain, bool concurrent) = 0;
  /// A new doorbell domain, or nullptr when the provider cannot give one.
  virtual std::unique_ptr<ThreadDomain> create_thread_domain() = 0;
  /// A queue pair per `options`. Throws.
  virtual std::unique_ptr<QueuePair> create_qp(const QueuePairOptions& options) = 0;

  /// Memory blade, before its pool is allocated or adopted: asks that the
  /// pool be reachable only through grants (grant_access), one per client
  /// queue pair. Returns "" when it will be; otherwise why not, and the pool
  /// is reachable from any queue pair with its region's rkey.
  virtual std::string restrict_to_grants() { return "the transport has no memory windows"; }
  /// Memory blade: a key to `region` (the pool) that only `qp`, connected,
  /// can use; nullptr when restrict_to_grants() did not return "". Throws.
  virtual std::unique_ptr<AccessGrant> grant_access(const MemoryRegion& region, QueuePair& qp) {
    (void)region;
    (void)qp;
    return nullptr;
  }
  /// Memory blade: opaque data a client needs, besides address and rkey, to
  /// reach `regions` (the shm provider hands out its memfds). One per client.
  virtual std::string export_regions(const std::vector<const MemoryRegion*>& regions) = 0;
  /// Compute blade: makes a peer's regions reachable. Throws.
  virtual std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>& regions,
                                                      const std::string& exported) = 0;
};

/// Opens the shm provider directly (tests, embedded memory blades).
std::unique_ptr<Device> OpenShmDevice(const SmartConfig& config);
/// Opens the verbs provider directly. Throws when no device can be opened.
std::unique_ptr<Device> OpenVerbsDevice(const SmartConfig& config);
/// Number of RDMA devices libibverbs lists (0 when none or on error).
int CountRdmaDevices();

}  // namespace smart
