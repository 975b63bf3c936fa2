// Per-session access on a memory blade: a type 2 memory window over the
// pool for each client queue pair. A window is bound to one queue pair, so
// its rkey is useless on any other (a key that leaks from one client opens
// nothing for another), and deallocating it revokes the key at once, which
// the blade does when the session ends. The pool's own registration then
// grants no remote access at all.
#include <errno.h>
#include <poll.h>

#include <chrono>
#include <cstring>

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
// completion there is a fault of its own.
void AwaitBind(ibv_cq* cq, const std::string& device) {
  const auto deadline = std::chrono::steady_clock::now() + kBindTimeout;
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) throw Error("verbs transport: binding a memory window on " + device + ": " + VerbError("ibv_poll_cq", -n));
    if (n == 1) {
      if (wc.wr_id != kBindWrId) {
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
      throw Error("verbs transport: binding a memory window on " + device + " did not complete in " +
                  std::to_string(kBindTimeout.count()) + " s");
    }
    poll(nullptr, 0, 0);  // yield the core; a bind takes microseconds
  }
}

}  // namespace

std::string VerbsDevice::restrict_to_grants() {
  if (!memory_windows_wanted_) return "infiniband.memory_windows is false";
  if ((device_attr_.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0) {
    return context_->name + " has no type 2B memory windows";
  }
  // The capability bit is a claim; allocating one is the proof.
  errno = 0;
  ibv_mw* probe = ibv_alloc_mw(context_->pd, IBV_MW_TYPE_2);
  if (probe == nullptr) return VerbError("ibv_alloc_mw", ErrnoOr(EOPNOTSUPP)) + " on " + context_->name;
  const int rc = ibv_dealloc_mw(probe);
  if (rc != 0) SMART_WARN("verbs transport: ibv_dealloc_mw: %s", strerror(rc < 0 ? -rc : rc));
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
  errno = 0;
  ibv_mw* mw = ibv_alloc_mw(context_->pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    throw Error("verbs transport: allocating a memory window on " + context_->name + " failed: " +
                VerbError("ibv_alloc_mw", ErrnoOr(ENOMEM)) + " (the device may be out of windows: lower max_clients)");
  }
  // The window owns the key from here; on any failure below it is freed.
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  auto window = std::make_unique<VerbsWindow>(context_, mw, rkey);
  ibv_send_wr wr{};
  wr.wr_id = kBindWrId;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = pool->mr();
  wr.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(pool->mr()->addr);
  wr.bind_mw.bind_info.length = pool->mr()->length;
  wr.bind_mw.bind_info.mw_access_flags = kWindowAccess;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(target->qp(), &wr, &bad);
  if (rc != 0) {
    throw Error("verbs transport: binding a memory window on " + context_->name + " failed: " +
                VerbError("ibv_post_send", rc < 0 ? -rc : rc));
  }
  AwaitBind(target->qp()->send_cq, context_->name);
  return window;
}

}  // namespace smart::verbs
