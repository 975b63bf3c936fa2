// Per-session access on a memory blade: a type 2 memory window over the
// pool for each client queue pair. A window is bound to one queue pair, so
// its rkey is useless on any other (a key that leaks from one client opens
// nothing for another), and deallocating it revokes the key at once, which
// the blade does when the session ends. The pool's own registration then
// grants no remote access at all.
#include <errno.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "smart/logging.h"
#include "smart/status.h"
#include "smart/transport/verbs/verbs_transport.h"

namespace smart::verbs {

namespace {

constexpr int kWindowAccess = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
// A bind is carried out by the device alone; this bounds a device that
// never completes it.
constexpr auto kBindTimeout = std::chrono::seconds(5);
constexpr uint64_t kBindWrId = 0x4d57'4249'4e44'0000ull;  // "MWBIND"

class VerbsWindow final : public AccessGrant {
 public:
  VerbsWindow(std::shared_ptr<Context> context, ibv_mw* mw, uint32_t rkey) : context_(std::move(context)), mw_(mw) {
    rkey_ = rkey;
  }
  ~VerbsWindow() override {
    // Deallocating a bound window invalidates it: requests carrying its key
    // complete with a remote access error from now on.
    const int rc = ibv_dealloc_mw(mw_);
    if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_mw: %s", strerror(rc < 0 ? -rc : rc));
  }

 private:
  std::shared_ptr<Context> context_;
  ibv_mw* mw_;
};

// Waits for the bind's completion on the queue pair's send queue. The
// memory blade's session queue pairs carry nothing else, so any other
// completion there is a fault of its own. On a timeout the queue pair goes to
// the error state and the bind is drained, so that the window is never freed
// under a bind still queued. Throws.
void AwaitBind(ibv_qp* qp, const std::string& device) {
  const auto deadline = std::chrono::steady_clock::now() + kBindTimeout;
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(qp->send_cq, 1, &wc);
    if (n < 0) throw Error("verbs transport: binding a memory window on " + device + ": " + VerbError("ibv_poll_cq", -n));
    if (n == 1) {
      if (wc.wr_id != kBindWrId || (wc.status == IBV_WC_SUCCESS && wc.opcode != IBV_WC_BIND_MW)) {
        throw Error("verbs transport: binding a memory window on " + device + ": an unexpected completion (" +
                    ibv_wc_status_str(wc.status) + ") on the session's queue");
      }
      if (wc.status != IBV_WC_SUCCESS) {
        throw Error("verbs transport: binding a memory window on " + device + " failed: " +
                    ibv_wc_status_str(wc.status) +
                    " (set infiniband.memory_windows to false on the memory blade to serve every client with the "
                    "pool's rkey)");
      }
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ibv_qp_attr error{};
      error.qp_state = IBV_QPS_ERR;
      if (ibv_modify_qp(qp, &error, IBV_QP_STATE) == 0) {
        const auto drain_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (ibv_poll_cq(qp->send_cq, 1, &wc) == 0 && std::chrono::steady_clock::now() < drain_until) {
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      }
      throw Error("verbs transport: binding a memory window on " + device + " did not complete in " +
                  std::to_string(kBindTimeout.count()) + " s");
    }
    // A bind takes the device microseconds; sleeping leaves the core to
    // the device (rxe binds in a kernel thread).
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Binds `mw` over all of `mr` on `qp` with `rkey`. Throws.
void BindWindow(ibv_qp* qp, ibv_mw* mw, ibv_mr* mr, uint32_t rkey, const std::string& device) {
  ibv_send_wr wr{};
  wr.wr_id = kBindWrId;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = mr;
  wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(mr->addr);
  wr.bind_mw.bind_info.length = mr->length;
  wr.bind_mw.bind_info.mw_access_flags = kWindowAccess;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, &wr, &bad);
  if (rc != 0) {
    throw Error("verbs transport: binding a memory window on " + device + " failed: " +
                VerbError("ibv_post_send", rc < 0 ? -rc : rc));
  }
  AwaitBind(qp, device);
}

}  // namespace

std::string VerbsDevice::restrict_to_grants() {
  if (!memory_windows_wanted_) return "infiniband.memory_windows is false";
  if ((device_attr_.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0) {
    return context_->name + " has no type 2B memory windows";
  }
  // The capability bit is a claim; binding one is the proof. A queue pair
  // connected to itself carries the probe's bind, over a page registered as
  // the pool will be.
  try {
    auto page = std::make_unique<char[]>(4096);
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(context_->pd, page.get(), 4096, kGrantsOnlyAccess);
    if (mr == nullptr) return VerbError("ibv_reg_mr with IBV_ACCESS_MW_BIND", ErrnoOr(EOPNOTSUPP)) + " on " + context_->name;
    struct Cleanup {
      ibv_mr* mr;
      ibv_mw* mw = nullptr;
      ~Cleanup() {
        if (mw != nullptr) ibv_dealloc_mw(mw);
        ibv_dereg_mr(mr);
      }
    } cleanup{mr};
    std::unique_ptr<CompletionQueue> cq = create_cq(4, nullptr, false);
    QueuePairOptions options;
    options.cq = cq.get();
    options.max_send_wr = 1;
    options.max_inline_data = 0;
    std::unique_ptr<QueuePair> qp = create_qp(options);
    qp->connect(qp->endpoint(), nullptr);
    errno = 0;
    cleanup.mw = ibv_alloc_mw(context_->pd, IBV_MW_TYPE_2);
    if (cleanup.mw == nullptr) return VerbError("ibv_alloc_mw", ErrnoOr(EOPNOTSUPP)) + " on " + context_->name;
    BindWindow(static_cast<VerbsQueuePair*>(qp.get())->qp(), cleanup.mw, mr, ibv_inc_rkey(cleanup.mw->rkey),
               context_->name);
    // The window goes before its queue pair (Cleanup runs last).
    ibv_dealloc_mw(cleanup.mw);
    cleanup.mw = nullptr;
  } catch (const Error& e) {
    return std::string("a probe window could not be bound: ") + e.what();
  }
  grants_only_ = true;
  return std::string();
}

std::unique_ptr<AccessGrant> VerbsDevice::grant_access(const MemoryRegion& region, QueuePair& qp) {
  if (!grants_only_) return nullptr;
  const auto* pool = dynamic_cast<const VerbsRegion*>(&region);
  auto* target = dynamic_cast<VerbsQueuePair*>(&qp);
  if (pool == nullptr || target == nullptr) {
    throw Error("verbs transport: a memory window needs a region and a queue pair of the verbs transport");
  }
  // A window and the queue pair that binds it share a protection domain;
  // a memory blade's queue pairs live in the device's own.
  if (target->qp()->pd != context_->pd) {
    throw Error("verbs transport: a memory window needs a queue pair in the device's protection domain (not a "
                "thread domain)");
  }
  errno = 0;
  ibv_mw* mw = ibv_alloc_mw(context_->pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    throw Error("verbs transport: allocating a memory window on " + context_->name + " failed: " +
                VerbError("ibv_alloc_mw", ErrnoOr(ENOMEM)) + " (the device may be out of windows: lower max_clients)");
  }
  // The window owns the key from here; on any failure below it is freed.
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  auto window = std::make_unique<VerbsWindow>(context_, mw, rkey);
  BindWindow(target->qp(), mw, pool->mr(), rkey, context_->name);
  return window;
}

}  // namespace smart::verbs
