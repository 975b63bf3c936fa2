// The verbs provider: rdma-core's libibverbs on any RDMA device (mlx5 on
// real hardware, rxe or siw anywhere). Work requests and completions pass
// through untouched; the data path (verbs_datapath.cc) is one call into the
// provider per post and per poll.
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "smart/transport.h"

namespace smart::verbs {

// The opened device context and its protection domain. Every resource keeps
// a reference, so the context outlives whatever was created on it, whatever
// order the owners release them in.
struct Context {
  ~Context();
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;  // device name, e.g. "mlx5_0" or "rxe0"
};

// A pool that only windows open to peers grants no remote access itself:
// its rkey, guessed or leaked, reaches nothing.
constexpr int kGrantsOnlyAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

// Registered memory. A pool owns its mapping (`mapping`, `mapped_bytes`);
// a local buffer (nullptr) only its registration.
class VerbsRegion final : public MemoryRegion {
 public:
  VerbsRegion(std::shared_ptr<Context> context, ibv_mr* mr, void* mapping, size_t mapped_bytes);
  ~VerbsRegion() override;
  ibv_mr* mr() const { return mr_; }

 private:
  std::shared_ptr<Context> context_;
  ibv_mr* mr_;
  void* mapping_;
  size_t mapped_bytes_;
};

class VerbsCompletionQueue final : public CompletionQueue {
 public:
  VerbsCompletionQueue(std::shared_ptr<Context> context, ibv_cq* cq) : context_(std::move(context)), cq_(cq) {}
  ~VerbsCompletionQueue() override;
  int poll(int max_entries, ibv_wc* wc) override;
  ibv_cq* cq() const { return cq_; }

 private:
  std::shared_ptr<Context> context_;
  ibv_cq* cq_;
};

// A thread domain wrapped in a parent domain: queue pairs and completion
// queues created on it get a doorbell register of their own and no lock.
class VerbsThreadDomain final : public ThreadDomain {
 public:
  VerbsThreadDomain(std::shared_ptr<Context> context, ibv_td* td, ibv_pd* parent)
      : context_(std::move(context)), td_(td), parent_(parent) {}
  ~VerbsThreadDomain() override;
  ibv_pd* parent() const { return parent_; }

 private:
  std::shared_ptr<Context> context_;
  ibv_td* td_;
  ibv_pd* parent_;
};

// The NIC reaches a peer's memory by address and rkey alone: nothing to map.
class VerbsPeerMemory final : public PeerMemory {};

// What connect() needs from the device, fixed when the device is opened.
struct PathSettings {
  uint8_t port = 1;
  bool use_grh = false;  // RoCE always; InfiniBand only when gid_idx is set
  int gid_index = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t max_rd_atomic = 16;       // requester: reads and atomics in flight
  uint8_t max_dest_rd_atomic = 16;  // responder: the same, as the target of a peer
};

class VerbsQueuePair final : public QueuePair {
 public:
  VerbsQueuePair(std::shared_ptr<Context> context, const PathSettings* path, ibv_qp* qp, int max_inline);
  ~VerbsQueuePair() override;
  ibv_qp* qp() const { return qp_; }
  QueuePairEndpoint endpoint() const override;
  void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) override;
  int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) override;
  int max_inline_data() const override { return max_inline_; }

 private:
  std::shared_ptr<Context> context_;
  const PathSettings* path_;  // owned by the device, which outlives its queue pairs' connect()
  ibv_qp* qp_;
  int max_inline_;
  uint32_t psn_;
  std::shared_ptr<PeerMemory> peer_;
};

class VerbsDevice final : public Device {
 public:
  explicit VerbsDevice(const SmartConfig& config);
  ~VerbsDevice() override;

  TransportKind kind() const override { return TransportKind::kVerbs; }
  std::string description() const override;
  std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) override;
  std::unique_ptr<MemoryRegion> adopt_shared_region(void* addr, size_t length, int fd) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t length) override;
  std::unique_ptr<CompletionQueue> create_cq(int depth, ThreadDomain* domain, bool concurrent) override;
  std::unique_ptr<ThreadDomain> create_thread_domain() override;
  std::unique_ptr<QueuePair> create_qp(const QueuePairOptions& options) override;
  std::string restrict_to_grants() override;
  std::unique_ptr<AccessGrant> grant_access(const MemoryRegion& region, QueuePair& qp) override;
  std::string export_regions(const std::vector<const MemoryRegion*>& regions) override;
  std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>& regions,
                                              const std::string& exported) override;

 private:
  void open(const SmartConfig& config);
  void choose_gid(int configured);

  std::shared_ptr<Context> context_;
  ibv_device_attr device_attr_{};
  ibv_port_attr port_attr_{};
  std::string driver_;
  PathSettings path_;
  bool memory_windows_wanted_ = true;  // infiniband.memory_windows
  // restrict_to_grants() succeeded: pools are registered for window binding
  // only, with no remote access of their own.
  bool grants_only_ = false;
  std::string doorbell_note_;  // why the doorbell mode differs from the configured one, if it does
  std::atomic<bool> thread_domains_refused_{false};
  mutable std::mutex note_mutex_;
};

// Name of the kernel driver behind `device` ("mlx5_core", "rdma_rxe", "siw",
// ...), or "" when it cannot be told.
std::string DriverName(ibv_device* device);

// Helpers shared by the provider's files.

// "ibv_reg_mr: Cannot allocate memory": a verb's name and errno.
inline std::string VerbError(const char* verb, int error) { return std::string(verb) + ": " + strerror(error); }

// Providers differ: some set errno and return NULL, some return a positive
// or negative errno value.
inline int ErrnoOr(int fallback) { return errno != 0 ? errno : fallback; }

inline std::string GidString(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

inline bool IsZero(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

}  // namespace smart::verbs
