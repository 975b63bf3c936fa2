// The transport contract: one small, batch-oriented interface with two
// providers, `verbs` (rdma-core) and `shm` (same-host software RDMA). Work
// requests and completions are rdma-core's own ibv_send_wr / ibv_wc, so the
// verbs provider passes them through untouched.
//
// Threading: a queue pair and a completion queue are used by one thread at a
// time unless they were created with `concurrent` set.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"

namespace smart {

enum class TransportKind : uint8_t { kVerbs = 1, kShm = 2 };
const char* TransportKindName(TransportKind kind);

// A memory region as a peer sees it: base address, length and remote key.
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  bool valid = false;
};

// What a peer needs to connect its queue pair to one of ours.
struct QueuePairEndpoint {
  uint32_t qp_num = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
};

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  void* addr() const { return addr_; }
  size_t length() const { return length_; }
  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  RemoteRegion remote() const { return RemoteRegion{reinterpret_cast<uint64_t>(addr_), length_, rkey_, true}; }

 protected:
  void* addr_ = nullptr;
  size_t length_ = 0;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Writes up to `max_entries` completions into `wc`; returns how many, or a
  // negative errno value.
  virtual int poll(int max_entries, ibv_wc* wc) = 0;
};

// A peer's memory made reachable from this process. Shared by the queue
// pairs connected to that peer.
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;
  // The peer is gone: work requests posted from now on complete with
  // IBV_WC_RETRY_EXC_ERR, as a NIC's would once its retries ran out.
  virtual void mark_failed() {}
};

// A doorbell domain: queue pairs created in different domains never share a
// doorbell register or a lock.
class ThreadDomain {
 public:
  virtual ~ThreadDomain() = default;
};

struct QueuePairOptions {
  CompletionQueue* cq = nullptr;      // send and receive completions
  ThreadDomain* domain = nullptr;     // nullptr: the provider's default
  int max_send_wr = 256;
  int max_recv_wr = 1;
  int max_sge = 1;
  int max_inline_data = 64;
  bool concurrent = false;            // posted to by several threads
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual QueuePairEndpoint endpoint() const = 0;
  // Moves the queue pair to ready-to-send against `remote`. `peer` is the
  // memory the queue pair will address (nullptr on a memory blade). Throws.
  virtual void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) = 0;
  // Posts a linked list of work requests with one doorbell. Returns 0, or an
  // errno value with *bad_wr set to the first request not posted.
  virtual int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) = 0;
  // Largest inline payload the queue pair accepts.
  virtual int max_inline_data() const = 0;
};

class Device {
 public:
  // Opens the transport named by config.transport; `auto` takes verbs when an
  // RDMA device is present and shm otherwise, and says which. Throws.
  static std::unique_ptr<Device> Open(const SmartConfig& config);

  virtual ~Device() = default;
  virtual TransportKind kind() const = 0;
  virtual std::string description() const = 0;

  // Zeroed memory meant for peers to access: a memory blade's pool.
  virtual std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) = 0;
  // A memory blade's pool that the caller mapped shared from `fd` (huge
  // pages, a file, a devdax device): the region takes over the mapping and
  // the descriptor (unmaps and closes them), on success or when it throws.
  virtual std::unique_ptr<MemoryRegion> adopt_shared_region(void* addr, size_t length, int fd) = 0;
  // Registers local memory (all access rights). Throws.
  virtual std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t length) = 0;
  virtual std::unique_ptr<CompletionQueue> create_cq(int depth, ThreadDomain* domain, bool concurrent) = 0;
  // A new doorbell domain, or nullptr when the provider cannot give one.
  virtual std::unique_ptr<ThreadDomain> create_thread_domain() = 0;
  virtual std::unique_ptr<QueuePair> create_qp(const QueuePairOptions& options) = 0;

  // Memory blade: opaque data a client needs, besides address and rkey, to
  // reach `regions` (the shm provider hands out its memfds). One per client.
  virtual std::string export_regions(const std::vector<const MemoryRegion*>& regions) = 0;
  // Compute blade: makes a peer's regions reachable. Throws.
  virtual std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>& regions,
                                                      const std::string& exported) = 0;
};

// Opens the shm provider directly (tests, embedded memory blades).
std::unique_ptr<Device> OpenShmDevice(const SmartConfig& config);
// Opens the verbs provider directly. Throws when no device can be opened.
std::unique_ptr<Device> OpenVerbsDevice(const SmartConfig& config);
// Number of RDMA devices libibverbs lists (0 when none or on error).
int CountRdmaDevices();

}  // namespace smart
