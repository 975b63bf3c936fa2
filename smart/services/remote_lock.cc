#include "smart/remote_lock.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "smart/task.h"
#include "smart/throttle.h"

namespace smart {

namespace {

constexpr uint64_t kSlotMask = 0x3ff;
constexpr int kIncarnationShift = 10;
constexpr int kThreadShift = 24;
constexpr int kTaskShift = 32;

// Waits about `ns` without holding up the thread's other tasks.
void Pause(uint64_t ns) {
  if (this_task::in_task()) {
    const uint64_t until = MonotonicNs() + ns;
    do {
      this_task::yield();
    } while (MonotonicNs() < until);
  } else {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
  }
}

}  // namespace

uint64_t MonotonicNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

uint64_t EncodeLockWord(const LockOwner& o) {
  return (uint64_t{o.session.slot} & kSlotMask) |
         ((uint64_t{o.session.incarnation} & kSessionIncarnationMask) << kIncarnationShift) |
         (uint64_t{o.thread} << kThreadShift) | (uint64_t{o.task} << kTaskShift) |
         ((uint64_t{o.lease} & kLockLeaseMask) << kLockLeaseShift);
}

LockOwner DecodeLockWord(uint64_t word) {
  LockOwner o;
  o.session.slot = static_cast<uint16_t>(word & kSlotMask);
  o.session.incarnation = static_cast<uint16_t>((word >> kIncarnationShift) & kSessionIncarnationMask);
  o.thread = static_cast<uint8_t>(word >> kThreadShift);
  o.task = static_cast<uint8_t>(word >> kTaskShift);
  o.lease = static_cast<uint32_t>((word >> kLockLeaseShift) & kLockLeaseMask);
  return o;
}

bool IsHeldLockWord(uint64_t word) {
  const uint64_t slot = word & kSlotMask;
  return word != kLockFree && (word >> 63) == 0 && slot != 0 && slot < static_cast<uint64_t>(kMaxSessions);
}

std::string DescribeLockWord(uint64_t word) {
  if (word == kLockFree) return "free";
  if (!IsHeldLockWord(word)) {
    char buf[64];
    snprintf(buf, sizeof(buf), "not a lock word (0x%016llx)", static_cast<unsigned long long>(word));
    return buf;
  }
  const LockOwner o = DecodeLockWord(word);
  return "session " + std::to_string(o.session.slot) + " (incarnation " + std::to_string(o.session.incarnation) +
         "), thread " + std::to_string(o.thread) + ", task " + std::to_string(o.task) + ", lease " +
         std::to_string(o.lease);
}

namespace {

uint64_t WithLease(uint64_t word, uint32_t lease) {
  return (word & ~(kLockLeaseMask << kLockLeaseShift)) | ((uint64_t{lease} & kLockLeaseMask) << kLockLeaseShift);
}

uint32_t LeaseOf(uint64_t word) { return static_cast<uint32_t>((word >> kLockLeaseShift) & kLockLeaseMask); }

uint32_t RandomLease() {
  std::random_device random;
  return static_cast<uint32_t>(random()) & kLockLeaseMask;
}

}  // namespace

uint64_t NextLease(uint64_t word) { return WithLease(word, LeaseOf(word) + 1); }

// ---------------------------------------------------------------------------
// The fence

Status FenceSession(Initiator& initiator, node_t node, SessionId session, uint64_t* scratch,
                    const LeaseOptions& options, bool* ended) {
  *ended = false;
  if (options.fence == FenceMode::kNever || session.slot == 0 || session.slot >= kMaxSessions) return Status::OK();
  const bool soft = initiator.transport() != TransportKind::kVerbs;
  if (options.fence == FenceMode::kWhereHard && soft) return Status::OK();
  const SessionId own = initiator.session(node);
  if (own.slot == session.slot && own.incarnation == session.incarnation) return Status::OK();
  const GlobalAddress session_word(node, SessionWordAddress(session.slot));
  const uint64_t current = kSessionAliveBit | session.incarnation;
  const uint64_t deadline = MonotonicNs() + options.fence_wait_ns;
  for (;;) {
    Status s = initiator.read(scratch, session_word, 8, Option::kSync);
    if (!s.ok()) return s;
    const uint64_t word = scratch[0];
    if ((word & kSessionAliveBit) == 0 || (word & kSessionIncarnationMask) != session.incarnation) {
      *ended = true;  // ended: by the fence, or on its own meanwhile
      break;
    }
    if ((word & kSessionFenceBit) == 0) {
      // The expected value is the whole word, so the bit can only land on
      // this very session; a lost race (or a broken connection) shows in the
      // next read.
      s = initiator.compare_and_swap(scratch, session_word, current, current | kSessionFenceBit, Option::kSync);
      (void)s;
    }
    if (MonotonicNs() >= deadline) {
      char why[160];
      snprintf(why, sizeof(why), "memory node %d did not end session %d (incarnation %d) within %.1f s of the fence "
               "request", static_cast<int>(node), session.slot, session.incarnation,
               static_cast<double>(options.fence_wait_ns) / 1e9);
      return Status::TimedOut(why);
    }
    Pause(500000);  // the blade looks every few milliseconds
  }
  if (soft) {
    // Said once per process, where it happens: what the shm fence does not cover.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      SMART_WARN("remote lock: fenced session %d on memory node %d over shm: the blade ended it, and that client's "
                 "own provider refuses its writes and atomics from now on; shm has no hard fence, so a write the "
                 "client was already copying when it stopped can still land (docs/security.md, \"Fencing\")",
                 session.slot, static_cast<int>(node));
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// LeaseWatch

LeaseWatch::LeaseWatch(Initiator& initiator, node_t node, uint64_t* scratch, const LeaseOptions& options)
    : initiator_(initiator), node_(node), scratch_(scratch), options_(options) {}

uint64_t LeaseWatch::unchanged_ns() const { return seen_ ? MonotonicNs() - since_ns_ : 0; }

uint64_t LeaseWatch::since_observed_ns() const { return seen_ ? MonotonicNs() - observed_ns_ : 0; }

Status LeaseWatch::session_alive(uint64_t word, bool* alive) {
  const LockOwner o = DecodeLockWord(word);
  Status s = initiator_.read(scratch_, GlobalAddress(node_, SessionWordAddress(o.session.slot)), 8, Option::kSync);
  if (!s.ok()) return s;
  const uint64_t session = scratch_[0];
  *alive = (session & kSessionAliveBit) != 0 && (session & kSessionIncarnationMask) == o.session.incarnation;
  return Status::OK();
}

void LeaseWatch::fence(uint64_t word) {
  fenced_ = false;
  if (!IsHeldLockWord(word)) return;
  const Status s = FenceSession(initiator_, node_, DecodeLockWord(word).session, scratch_, options_, &fenced_);
  if (!s.ok()) {
    SMART_WARN("remote lock: cannot fence %s on memory node %d: %s; holding the lock unfenced",
               DescribeLockWord(word).c_str(), static_cast<int>(node_), s.ToString().c_str());
  }
}

Status LeaseWatch::observe(uint64_t observed, bool* dead) {
  *dead = false;
  by_session_ = false;
  const uint64_t now = MonotonicNs();
  // Looked away for more than half a lease: the word may have moved and
  // come back meanwhile, so its stand-still starts over.
  const bool looked_away = seen_ && now - observed_ns_ > options_.lease_ns / 2;
  observed_ns_ = now;
  const bool changed = !seen_ || observed != last_ || looked_away;
  if (changed) {
    seen_ = true;
    last_ = observed;
    since_ns_ = now;
  } else if (now - since_ns_ >= options_.lease_ns) {
    *dead = true;
    return Status::OK();
  }
  if (!IsHeldLockWord(observed)) return Status::OK();
  if (!changed && now - last_check_ns_ < options_.session_check_ns) return Status::OK();
  last_check_ns_ = now;
  bool alive = true;
  Status s = session_alive(observed, &alive);
  if (!s.ok()) return s;
  if (!alive) {
    *dead = true;
    by_session_ = true;
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// RemoteLock

LockOwner RemoteLock::Owner(Initiator& initiator, node_t node) {
  LockOwner o;
  o.session = initiator.session(node);
  o.thread = static_cast<uint8_t>(ThreadId());
  o.task = static_cast<uint8_t>(this_task::id());
  return o;
}

RemoteLock::RemoteLock(Initiator& initiator, GlobalAddress word, uint64_t* scratch, const LeaseOptions& options)
    : RemoteLock(initiator, word, scratch, Owner(initiator, static_cast<node_t>(word.node)), options) {}

RemoteLock::RemoteLock(Initiator& initiator, GlobalAddress word, uint64_t* scratch, const LockOwner& owner,
                       const LeaseOptions& options)
    : initiator_(initiator),
      address_(word),
      scratch_(scratch),
      options_(options),
      mine_(EncodeLockWord(LockOwner{owner.session, owner.thread, owner.task, 0})),
      next_lease_(RandomLease()),
      watch_(initiator, static_cast<node_t>(word.node), scratch + 1, options) {}

Status RemoteLock::cas(uint64_t expected, uint64_t desired, uint64_t* old) {
  Status s = initiator_.compare_and_swap(scratch_, address_, expected, desired, Option::kSync);
  if (s.ok()) *old = scratch_[0];
  return s;
}

Status RemoteLock::try_acquire(bool* acquired, LockAcquireInfo* info) {
  *acquired = false;
  if (held_) return Status::InvalidArgument("remote lock at " + address_.to_string() + " is already held by this task");
  if ((mine_ & kSlotMask) == 0) {
    return Status::InvalidArgument("remote lock at " + address_.to_string() + ": this client has no session on memory node " +
                                   std::to_string(address_.node));
  }
  const uint64_t desired = WithLease(mine_, next_lease_);
  uint64_t old;
  Status s = cas(kLockFree, desired, &old);
  if (!s.ok()) return s;
  last_seen_ = old;
  if (old >> 63) return Status::OK();
  if (old == kLockFree) {
    *acquired = true;
    word_ = desired;
    next_lease_ = LeaseOf(desired) + 1;
    held_ = true;
    renewed_ns_ = MonotonicNs();
    return Status::OK();
  }
  bool dead = false;
  s = watch_.observe(old, &dead);
  if (!s.ok() || !dead) return s;
  // The holder is gone: take the word over from exactly what it left, so
  // that of several waiters only one succeeds.
  uint64_t again;
  s = cas(old, desired, &again);
  if (!s.ok()) return s;
  if (again != old) {
    last_seen_ = again;
    if (again >> 63) return Status::OK();
    bool ignored;
    return watch_.observe(again, &ignored);
  }
  // Ours now: the old holder can no longer renew. By lease, it may be alive
  // and about to write; it is fenced before this task writes anything.
  const bool by_session = watch_.by_session();
  if (!by_session) watch_.fence(old);
  *acquired = true;
  word_ = desired;
  next_lease_ = LeaseOf(desired) + 1;
  held_ = true;
  renewed_ns_ = MonotonicNs();
  if (info != nullptr) {
    info->took_over = true;
    info->previous = old;
    info->by_session = by_session;
    info->fenced = !by_session && watch_.fenced();
  }
  return Status::OK();
}

Status RemoteLock::acquire(LockAcquireInfo* info, BackoffGuard* guard) {
  const uint64_t start = MonotonicNs();
  uint64_t pause_ns = 1000;
  const uint64_t max_pause_ns = std::max<uint64_t>(1000, std::min<uint64_t>(1000000, options_.lease_ns / 16));
  for (;;) {
    bool acquired = false;
    Status s = try_acquire(&acquired, info);
    if (!s.ok()) return s;
    if (acquired || (last_seen_ >> 63)) {
      if (info != nullptr) info->waited_ns = MonotonicNs() - start;
      return Status::OK();
    }
    const uint64_t waited = MonotonicNs() - start;
    if (options_.max_wait_ns != 0 && waited >= options_.max_wait_ns) {
      return Status::TimedOut("waited " + std::to_string(waited / 1000000) + " ms for the lock at " +
                              address_.to_string() + ", held by a live " + DescribeLockWord(last_seen_));
    }
    FaultPoint("lock.acquire.wait");
    if (guard != nullptr) guard->retry_task();
    Pause(pause_ns);
    pause_ns = std::min(pause_ns * 2, max_pause_ns);
  }
}

Status RemoteLock::renew() {
  if (!held_) return Status::LockLost("remote lock at " + address_.to_string() + " is not held");
  const uint64_t next = NextLease(word_);
  uint64_t old;
  Status s = cas(word_, next, &old);
  if (!s.ok()) return s;
  next_lease_ = LeaseOf(next) + 1;
  if (old != word_) {
    held_ = false;
    return Status::LockLost("remote lock at " + address_.to_string() + " was taken over (now " + DescribeLockWord(old) +
                            "); this holder's lease had expired");
  }
  word_ = next;
  renewed_ns_ = MonotonicNs();
  return Status::OK();
}

Status RemoteLock::renew_if_due() {
  if (held_ && MonotonicNs() - renewed_ns_ < options_.lease_ns / 4) return Status::OK();
  return renew();
}

Status RemoteLock::release() {
  if (!held_) return Status::LockLost("remote lock at " + address_.to_string() + " is not held");
  held_ = false;
  uint64_t old;
  Status s = cas(word_, kLockFree, &old);
  if (!s.ok()) return s;
  if (old != word_) {
    return Status::LockLost("remote lock at " + address_.to_string() + " was taken over before its release (now " +
                            DescribeLockWord(old) + ")");
  }
  return Status::OK();
}

}  // namespace smart
