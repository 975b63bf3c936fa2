// The fault-injecting transport: a Device whose queue pairs count the work
// requests posted through them and apply SMART_FAULTS' work-request rules
// before handing the list to the wrapped transport. A failed request gets
// an rkey that names no region, so the wrapped transport itself completes
// it with a remote access error, as a NIC does.
#include "fault_internal.h"

#include <vector>

#include "smart/status.h"

namespace smart::fault_internal {

namespace {

class FaultQueuePair : public QueuePair {
 public:
  explicit FaultQueuePair(std::unique_ptr<QueuePair> inner) : inner_(std::move(inner)) {}
  QueuePairEndpoint endpoint() const override { return inner_->endpoint(); }
  void connect(const QueuePairEndpoint& remote, std::shared_ptr<PeerMemory> peer) override {
    inner_->connect(remote, std::move(peer));
  }
  int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) override {
    std::vector<FaultRule> after;  // posted: rules, carried out once the list is posted
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
      FaultRule fire;
      if (!HitRequest(w->opcode, &fire)) continue;
      if (fire.after_post) {
        after.push_back(fire);
      } else if (fire.action == FaultAction::kFail) {
        if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
          w->wr.atomic.rkey ^= 0x5a5a5a5au;
        } else {
          w->wr.rdma.rkey ^= 0x5a5a5a5au;
        }
      } else {
        Perform(fire);
      }
    }
    const int rc = inner_->post_send(wr, bad_wr);
    for (const FaultRule& fire : after) Perform(fire);
    return rc;
  }
  int max_inline_data() const override { return inner_->max_inline_data(); }
  QueuePair& inner() { return *inner_; }

 private:
  std::unique_ptr<QueuePair> inner_;
};

class FaultDevice : public Device {
 public:
  explicit FaultDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {}
  TransportKind kind() const override { return inner_->kind(); }
  std::string description() const override { return inner_->description() + " (with fault injection)"; }
  std::unique_ptr<MemoryRegion> allocate_shared_region(size_t bytes) override {
    return inner_->allocate_shared_region(bytes);
  }
  std::unique_ptr<MemoryRegion> adopt_shared_region(void* addr, size_t length, int fd) override {
    return inner_->adopt_shared_region(addr, length, fd);
  }
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t length) override {
    return inner_->register_memory(addr, length);
  }
  std::unique_ptr<CompletionQueue> create_cq(int depth, ThreadDomain* domain, bool concurrent) override {
    return inner_->create_cq(depth, domain, concurrent);
  }
  std::unique_ptr<ThreadDomain> create_thread_domain() override { return inner_->create_thread_domain(); }
  std::unique_ptr<QueuePair> create_qp(const QueuePairOptions& options) override {
    return std::make_unique<FaultQueuePair>(inner_->create_qp(options));
  }
  std::string restrict_to_grants() override { return inner_->restrict_to_grants(); }
  std::unique_ptr<AccessGrant> grant_access(const MemoryRegion& region, QueuePair& qp) override {
    // Every queue pair of this device is one of ours: the grant binds the
    // wrapped one, which carries the requests.
    auto* ours = dynamic_cast<FaultQueuePair*>(&qp);
    if (ours == nullptr) throw Error("fault injection: a grant for a queue pair this device did not create");
    return inner_->grant_access(region, ours->inner());
  }
  std::string export_regions(const std::vector<const MemoryRegion*>& regions) override {
    return inner_->export_regions(regions);
  }
  std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>& regions,
                                              const std::string& exported) override {
    return inner_->import_regions(regions, exported);
  }

 private:
  std::unique_ptr<Device> inner_;
};

}  // namespace

std::unique_ptr<Device> WrapDevice(std::unique_ptr<Device> inner) {
  return std::make_unique<FaultDevice>(std::move(inner));
}

}  // namespace smart::fault_internal
