// SMART-BT page locks: a global lock table in every memory blade's memory,
// one 8-byte word per hash of a page address, holding the framework's lock
// word (owner session, thread, task, lease: include/smart/remote_lock.h), and
// HOCL in front of it: a local lock per word in each thread, so that the
// thread's tasks queue locally (parked, in FIFO order) and the remote word
// is handed from one local holder to the next (at most kMaxHandovers times
// in a row) without a release and a CAS.
//
// Round trips: taking a free lock is one doorbell holding the CAS and the
// page READ; releasing it is one doorbell holding the write-back and the
// release CAS. The READ that follows a CAS on the same queue pair runs after
// it at the blade, so the page it returns is the one the lock protects.
//
// A holder that died: LeaseWatch tells the waiter (the blade saw the
// session close, or the word stood still for a lease); the waiter takes the
// word over by CAS from exactly the value it saw. Every page write is one
// work request of a whole page or line, so there is nothing to finish.
#include "smart/fault_injection.h"
#include "tree_internal.h"

namespace smart::btree {

namespace {

// Waits for the turn on `local` (the calling thread's). False outside a
// task when another context of the thread holds it (it could never pass).
bool TakeTurn(BTree::ThreadContext& tc, LocalLock* local) {
  if (!local->held) {
    local->held = true;
    return true;
  }
  const int task = this_task::id();
  if (task == 0) return false;
  tc.next_waiter[task] = -1;
  tc.granted[task] = false;
  if (local->tail < 0) {
    local->head = static_cast<int16_t>(task);
  } else {
    tc.next_waiter[local->tail] = static_cast<int16_t>(task);
  }
  local->tail = static_cast<int16_t>(task);
  while (!tc.granted[task]) this_task::wait();
  return true;
}

// Passes the turn to the first waiter, or frees it.
void PassTurn(BTree::ThreadContext& tc, LocalLock* local) {
  const int next = local->head;
  if (next < 0) {
    local->held = false;
    return;
  }
  local->head = tc.next_waiter[next];
  if (local->head < 0) local->tail = -1;
  tc.granted[next] = true;
  this_task::notify(next);
}

}  // namespace

Status Ops::lock_and_read(GlobalAddress page, char* buf, BackoffGuard& guard, RetryBound& bound, PageLock* lock) {
  const node_t node = static_cast<node_t>(page.node);
  lock->page = page;
  lock->word = tree_.lock_tables_[node] + 8 * static_cast<uint64_t>(LockIndex(page));
  lock->local = nullptr;
  lock->held = false;
  if (options_.hocl) {
    LocalLock* local = &tc_.local_lock(node, LockIndex(page));
    if (!TakeTurn(tc_, local)) {
      return Status::Internal("B+tree: a page lock is held by this thread outside a task and asked for again");
    }
    lock->local = local;
    if (local->word != 0) {
      // Handed over: the remote word is ours already.
      lock->value = local->word;
      lock->renewed_ns = local->renewed_ns;
      lock->held = true;
      ++tc_.stats.handovers;
      Status s = in_.read(buf, page, kPageSize, Option::kNone);
      if (s.ok()) s = sync();
      if (!s.ok()) unlock(lock);
      return s;
    }
  }
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  auto give_up_local = [&] {
    if (lock->local != nullptr) PassTurn(tc_, lock->local);
    lock->local = nullptr;
  };
  LockOwner owner;
  owner.session = tc_.sessions[node];
  owner.thread = static_cast<uint8_t>(ThreadId());
  owner.task = static_cast<uint8_t>(this_task::id());
  const uint64_t mine = EncodeLockWord(owner);
  LeaseWatch watch(in_, node, tb->words + 8, options_.lease);
  uint64_t expected = kLockFree;
  for (;;) {
    s = in_.compare_and_swap(tb->words, lock->word, expected, mine, Option::kNone);
    if (s.ok()) s = in_.read(buf, page, kPageSize, Option::kNone);
    if (s.ok()) s = sync();
    if (!s.ok()) {
      give_up_local();
      return s;
    }
    const uint64_t old = tb->words[0];
    if (old == expected) {
      if (expected != kLockFree) ++tc_.stats.lock_takeovers;
      break;
    }
    ++tc_.stats.lock_retries;
    bool dead = false;
    s = watch.observe(old, &dead);
    if (!s.ok()) {
      give_up_local();
      return s;
    }
    if (dead) {
      // Take the word over from exactly what the dead holder left.
      expected = old;
      continue;
    }
    expected = kLockFree;
    bound.why = "a page lock stays held by a live client";
    if (!bound.next()) {
      give_up_local();
      return bound.status();
    }
    guard.retry_task();
  }
  lock->value = mine;
  lock->held = true;
  lock->renewed_ns = MonotonicNs();
  if (lock->local != nullptr) {
    lock->local->word = mine;
    lock->local->handovers = 0;
    lock->local->renewed_ns = lock->renewed_ns;
  }
  FaultPoint("bt.lock.taken");
  return Status::OK();
}

Status Ops::write_and_unlock(PageLock* lock, const void* src, GlobalAddress dst, size_t length) {
  if (!lock->held) return Status::Internal("B+tree: releasing a page lock that is not held");
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  LocalLock* local = lock->local;
  lock->held = false;
  // A holder that took longer than a quarter of the lease renews before it
  // writes: a stopped holder whose lease ran out learns it here and writes
  // nothing (the word was taken over).
  if (length > 0 && MonotonicNs() - lock->renewed_ns > options_.lease.lease_ns / 4) {
    const uint64_t next = NextLease(lock->value);
    s = in_.compare_and_swap(tb->words, lock->word, lock->value, next, Option::kNone);
    if (s.ok()) s = sync();
    if (s.ok() && tb->words[0] != lock->value) {
      s = Status::LockLost("B+tree: the lock of page " + lock->page.to_string() + " was taken over (now " +
                           DescribeLockWord(tb->words[0]) + "); this client was slower than the lease");
    }
    if (!s.ok()) {
      if (local != nullptr) {
        local->word = 0;
        local->handovers = 0;
        PassTurn(tc_, local);
      }
      return s;
    }
    lock->value = next;
    lock->renewed_ns = MonotonicNs();
    if (local != nullptr) {
      local->word = next;
      local->renewed_ns = lock->renewed_ns;
    }
  }
  if (local != nullptr) {
    if (local->head >= 0 && local->handovers < kMaxHandovers) {
      if (length > 0) {
        s = in_.write(src, dst, length, Option::kNone);
        if (s.ok()) s = sync();
      }
      ++local->handovers;
      if (!s.ok()) {
        // The write failed: release the word remotely rather than hand it
        // over (best effort; the connection to the blade may be gone).
        (void)in_.compare_and_swap(tb->words, lock->word, lock->value, kLockFree, Option::kSync);
        local->word = 0;
        local->handovers = 0;
      }
      PassTurn(tc_, local);
      return s;
    }
  }
  if (length > 0) s = in_.write(src, dst, length, Option::kNone);
  if (s.ok()) s = in_.compare_and_swap(tb->words, lock->word, lock->value, kLockFree, Option::kNone);
  if (s.ok()) s = sync();
  if (s.ok() && tb->words[0] != lock->value) {
    s = Status::LockLost("B+tree: the lock of page " + lock->page.to_string() + " was taken over before its release (now " +
                         DescribeLockWord(tb->words[0]) + ")");
  }
  if (local != nullptr) {
    local->word = 0;
    local->handovers = 0;
    PassTurn(tc_, local);
  }
  return s;
}

}  // namespace smart::btree
