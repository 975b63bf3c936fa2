// SMART-BT page locks: a global lock table in every memory blade's memory,
// one 8-byte word per hash of a page address, holding the framework's lock
// word (owner session, thread, task, lease: include/smart/remote_lock.h), and
// HOCL in front of it: a local lock per word shared by the client's
// threads, so that its tasks queue locally (parked, in FIFO order; see
// PassTurn for a waiter of another thread, which may not run) and the
// remote word is handed from one local holder to the next (at most
// kMaxHandovers times in a row) without a release and a CAS.
//
// Round trips: taking a free lock is one doorbell holding the CAS and the
// page READ; releasing it is one doorbell holding the write-back and the
// release CAS. The READ that follows a CAS on the same queue pair runs after
// it at the blade, so the page it returns is the one the lock protects.
//
// A holder that died or stopped: LeaseWatch tells the waiter (the blade saw
// the session close, or the word stood still for a lease); the waiter takes
// the word over by CAS from exactly the value it saw. Every page write is
// one work request of a whole page or line, so there is nothing to finish.
// A take-over by lease fences the old holder's session (FenceSession,
// through LeaseWatch::fence) before the new holder writes, and reads the
// page again after the fence. A word of this client's own session is never
// taken by lease: the client knows whether one of its tasks holds it.
#include <immintrin.h>
#include <sched.h>

#include "smart/fault_injection.h"
#include "tree_internal.h"

namespace smart::btree {

namespace {

// Lease counters between two acquisitions of one thread (ThreadContext::
// next_lock_lease).
constexpr uint32_t kLeaseStride = 64;

// Spins on a taken guard before yielding the core (GuardLock).
constexpr int kGuardSpins = 100;

// The guard of a local lock's queue: held for a few instructions, but its
// holder may be descheduled inside them (more threads than cores), so a
// waiter that spun a while gives its core away instead of spinning out the
// holder's absence.
class GuardLock {
 public:
  explicit GuardLock(LocalLock* local) : local_(local) {
    for (int spins = 0; local_->guard.exchange(true, std::memory_order_acquire); ++spins) {
      if (spins < kGuardSpins) {
        _mm_pause();
      } else {
        sched_yield();
      }
    }
  }
  ~GuardLock() { local_->guard.store(false, std::memory_order_release); }

 private:
  LocalLock* local_;
};

// What a queued waiter is told (LocalLocks::granted).
constexpr uint8_t kWaiting = 0;  // still queued
constexpr uint8_t kTurn = 1;     // the turn is yours (handed over directly)
constexpr uint8_t kCompete = 2;  // the turn is free: take it if nobody did first

// Queues the calling task on `local` (at the head when it lost a turn it
// was called to), with the guard held.
void Enqueue(BTree::LocalLocks& all, LocalLock* local, int me, bool first) {
  all.granted[me].store(kWaiting, std::memory_order_relaxed);
  if (first) {
    all.next[me] = local->head;
    local->head = me;
    if (local->tail < 0) local->tail = me;
    return;
  }
  all.next[me] = -1;
  if (local->tail < 0) {
    local->head = me;
  } else {
    all.next[local->tail] = me;
  }
  local->tail = me;
}

// Takes waiter `me` out of the queue of `local`, with the guard held (it
// is queued: nobody told it anything yet).
void Unlink(BTree::LocalLocks& all, LocalLock* local, int me) {
  int before = -1;
  for (int w = local->head; w != me; w = all.next[w]) before = w;
  if (before < 0) {
    local->head = all.next[me];
  } else {
    all.next[before] = all.next[me];
  }
  if (local->tail == me) local->tail = before;
}

// Takes the turn on `local` if it is free, with the guard held.
bool TakeIfFree(LocalLock* local) {
  if (local->held.load(std::memory_order_relaxed)) return false;
  local->held.store(true, std::memory_order_relaxed);
  return true;
}

// Waits for the turn on `local`, parked (inside a task) or spinning
// (outside one, where nothing else of the thread runs). A waiter called to
// compete for a freed turn takes it if it is still free, else queues again
// at the head. A parked waiter that finds the turn free (its thread's
// LockWaker looks between rounds) takes it without waiting to be told, so
// that a free turn never waits for a thread the OS does not run.
void TakeTurn(BTree::LocalLocks& all, BTree::ThreadContext& tc, LocalLock* local) {
  const int task = this_task::id();
  const int me = ThreadId() * kMaxTasksPerThread + task;
  for (bool called = false;; called = true) {
    {
      GuardLock g(local);
      if (TakeIfFree(local)) return;
      Enqueue(all, local, me, called);
    }
    FaultPoint("bt.lock.queued");
    const bool parks = task != 0;
    if (parks) {
      TaskPool* pool = TaskPool::Current();
      if (tc.waker.pool_serial != pool->serial()) {
        pool->attach_poller(&tc.waker);
        tc.waker.pool_serial = pool->serial();
      }
      tc.waker.park(task, local);
    }
    uint8_t told;
    bool taken = false;
    while ((told = all.granted[me].load(std::memory_order_acquire)) == kWaiting) {
      if (!local->held.load(std::memory_order_relaxed)) {
        GuardLock g(local);
        // Still queued (told nothing: PassTurn tells under the guard).
        if (all.granted[me].load(std::memory_order_relaxed) == kWaiting && TakeIfFree(local)) {
          Unlink(all, local, me);
          taken = true;
          break;
        }
        continue;
      }
      if (parks) {
        this_task::wait();
      } else {
        _mm_pause();
      }
    }
    if (parks) tc.waker.unpark(task);
    if (taken) return;
    if (told == kTurn) return;
  }
}

bool HasWaiters(LocalLock* local) {
  GuardLock g(local);
  return local->head >= 0;
}

// Ends the calling task's turn. The first waiter gets it directly when it
// is a task of this thread (which runs now); a waiter of another thread is
// called to compete for it instead, and the turn is freed: that thread may
// be off its core (more threads than cores, a stopped process), and a turn
// handed to it would stall the lock, and everyone queued behind, until the
// OS runs it again (a lock convoy). Meanwhile any running task may take
// the free turn, a newcomer or a parked waiter whose thread looks; the
// called waiter takes it if still free, else queues again at the head.
void PassTurn(BTree::LocalLocks& all, LocalLock* local) {
  int next;
  {
    GuardLock g(local);
    next = local->head;
    if (next < 0) {
      local->held.store(false, std::memory_order_relaxed);
      return;
    }
    local->head = all.next[next];
    if (local->head < 0) local->tail = -1;
    const bool mine = next / kMaxTasksPerThread == ThreadId();
    if (!mine) local->held.store(false, std::memory_order_relaxed);
    all.granted[next].store(mine ? kTurn : kCompete, std::memory_order_release);
  }
  const int thread = next / kMaxTasksPerThread, task = next % kMaxTasksPerThread;
  if (thread == ThreadId()) {
    this_task::notify(task);
  } else {
    all.mailboxes[thread].bits[task / 64].fetch_or(uint64_t{1} << (task % 64), std::memory_order_release);
  }
}

}  // namespace

void LockWaker::park(int task, LocalLock* local) {
  waiting_on[task] = local;
  parked_tasks.push_back(task);
}

void LockWaker::unpark(int task) {
  waiting_on[task] = nullptr;
  for (size_t i = 0; i < parked_tasks.size(); ++i) {
    if (parked_tasks[i] != task) continue;
    parked_tasks[i] = parked_tasks.back();
    parked_tasks.pop_back();
    return;
  }
}

int LockWaker::poll() {
  int woken = 0;
  if (mailbox == nullptr) return 0;
  for (auto& word : mailbox->bits) {
    if (word.load(std::memory_order_relaxed) == 0) continue;
    uint64_t bits = word.exchange(0, std::memory_order_acquire);
    while (bits != 0) {
      this_task::notify(64 * static_cast<int>(&word - mailbox->bits) + __builtin_ctzll(bits));
      bits &= bits - 1;
      ++woken;
    }
  }
  // Parked waiters whose turn is free (its holder called a waiter of a
  // thread that may not run) look again.
  for (const int task : parked_tasks) {
    if (!waiting_on[task]->held.load(std::memory_order_relaxed)) {
      this_task::notify(task);
      ++woken;
    }
  }
  return woken;
}

bool Ops::held_by_this_client(uint64_t word, node_t node, GlobalAddress page) const {
  const LockOwner owner = DecodeLockWord(word);
  const int task = owner.thread * kMaxTasksPerThread + owner.task;
  BTree::LocalLocks& all = *tree_.local_locks_;
  return all.held[task].load(std::memory_order_acquire) == word ||
         all.at(node, LockIndex(page)).word.load(std::memory_order_acquire) == word;
}

void Ops::forget_held(PageLock* lock) {
  if (lock->announced == nullptr) return;
  lock->announced->store(0, std::memory_order_release);
  lock->announced = nullptr;
}

Status Ops::lock_and_read(GlobalAddress page, char* buf, BackoffGuard& guard, RetryBound& bound, PageLock* lock) {
  const node_t node = static_cast<node_t>(page.node);
  lock->page = page;
  lock->word = tree_.lock_tables_[node] + 8 * static_cast<uint64_t>(LockIndex(page));
  lock->local = nullptr;
  lock->announced = nullptr;
  lock->held = false;
  if (options_.hocl) {
    LocalLock* local = &tree_.local_locks_->at(node, LockIndex(page));
    TakeTurn(*tree_.local_locks_, tc_, local);
    lock->local = local;
    if (local->word != 0) {
      // Handed over: the remote word is ours already.
      lock->value = local->word;
      lock->renewed_ns = local->renewed_ns;
      lock->held = true;
      ++tc_.stats.handovers;
      Status s = in_.read(buf, page, kPageSize, Option::kNone);
      if (s.ok()) s = sync();
      // The read's error is what the caller sees; an unlock that fails too
      // leaves the lock to its lease.
      if (!s.ok()) (void)unlock(lock);
      return s;
    }
  }
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  auto give_up = [&] {
    forget_held(lock);
    if (lock->local != nullptr) PassTurn(*tree_.local_locks_, lock->local);
    lock->local = nullptr;
  };
  LockOwner owner;
  owner.session = tc_.sessions[node];
  owner.thread = static_cast<uint8_t>(ThreadId());
  owner.task = static_cast<uint8_t>(this_task::id());
  // Room for kLeaseStride - 1 renewals before the thread's next acquisition.
  owner.lease = tc_.next_lock_lease;
  tc_.next_lock_lease += kLeaseStride;
  const uint64_t mine = EncodeLockWord(owner);
  // Announced before the CAS can land: from then on another task of this
  // client that finds `mine` in the word knows it is held.
  lock->announced = &tree_.local_locks_->held[owner.thread * kMaxTasksPerThread + owner.task];
  lock->announced->store(mine, std::memory_order_release);
  LeaseWatch watch(in_, node, tb->words + 8, options_.lease);
  uint64_t expected = kLockFree;
  bool fence = false;  // the CAS from `expected` takes a word over by lease
  for (;;) {
    s = in_.compare_and_swap(tb->words, lock->word, expected, mine, Option::kNone);
    if (s.ok()) s = in_.read(buf, page, kPageSize, Option::kNone);
    if (s.ok()) s = sync();
    if (!s.ok()) {
      give_up();
      return s;
    }
    const uint64_t old = tb->words[0];
    if (old == expected) {
      if (expected != kLockFree) ++tc_.stats.lock_takeovers;
      break;
    }
    ++tc_.stats.lock_retries;
    bool dead = false;
    const LockOwner holder = DecodeLockWord(old);
    if (IsHeldLockWord(old) && holder.session.slot == owner.session.slot &&
        holder.session.incarnation == owner.session.incarnation) {
      // A word of this client's own session. Its holder cannot be fenced
      // (FenceSession ends the whole session, this client's too), and
      // needs no lease to be judged: this client knows whether one of its
      // tasks holds the word. One that does is live, however long it takes
      // (a thread the OS does not run, a task that does not yield); one that
      // nobody holds was left by a release that failed, and its task
      // finished every request it posted before it forgot the word.
      dead = !held_by_this_client(old, node, page);
      fence = false;
    } else {
      s = watch.observe(old, &dead);
      if (!s.ok()) {
        give_up();
        return s;
      }
      // A holder whose session ended can write nothing more; one whose
      // lease ran out may be only stopped, with its write to come.
      fence = dead && !watch.by_session();
    }
    if (dead) {
      // Take the word over from exactly what the dead holder left.
      expected = old;
      continue;
    }
    expected = kLockFree;
    bound.why = "a page lock stays held by a live client";
    if (!bound.next()) {
      give_up();
      return bound.status();
    }
    if (lock->local != nullptr) {
      // HOCL already queues this client's tasks: the one task that asks
      // the blade retries at once (counted, not suspended), as upstream's
      // HOCL does; an exponential backoff here only stalls the queue.
      guard.retry_task(false);
      this_task::yield();
    } else {
      guard.retry_task();
    }
  }
  lock->value = mine;
  lock->held = true;
  lock->renewed_ns = MonotonicNs();
  if (lock->local != nullptr) {
    lock->local->word.store(mine, std::memory_order_release);
    lock->local->handovers = 0;
    lock->local->renewed_ns = lock->renewed_ns;
  }
  if (expected != kLockFree && fence) {
    // Taken over by lease: the old holder may be stopped between its lease
    // check and its write, or with its write posted. Its session ends
    // before this task writes anything (the framework's one fence), and the
    // page is read again: the READ that rode with the CAS ran before the
    // fence, and the old holder may have written after it.
    FaultPoint("bt.lock.taken_over");
    watch.fence(expected);
    if (watch.fenced()) ++tc_.stats.holders_fenced;
    s = in_.read(buf, page, kPageSize, Option::kNone);
    if (s.ok()) s = sync();
    if (!s.ok()) {
      (void)unlock(lock);
      return s;
    }
  }
  FaultPoint("bt.lock.taken");
  return Status::OK();
}

Status Ops::write_and_unlock(PageLock* lock, const void* src, GlobalAddress dst, size_t length,
                             const WritePoints& points) {
  if (!lock->held) return Status::Internal("B+tree: releasing a page lock that is not held");
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  LocalLock* local = lock->local;
  lock->held = false;
  auto end_remote = [&] {
    if (local == nullptr) return;
    local->word.store(0, std::memory_order_release);
    local->handovers = 0;
  };
  auto finish = [&](Status result) {
    forget_held(lock);
    if (local != nullptr) PassTurn(*tree_.local_locks_, local);
    return result;
  };
  // A holder that took longer than a quarter of the lease renews before it
  // writes: a stopped holder whose lease ran out learns it here and writes
  // nothing (the word was taken over). One stopped after this check is
  // fenced by its taker before the taker writes.
  if (length > 0 && MonotonicNs() - lock->renewed_ns > options_.lease.lease_ns / 4) {
    const uint64_t next = NextLease(lock->value);
    // Announced before the CAS can land (held_by_this_client).
    if (local != nullptr) {
      local->word.store(next, std::memory_order_release);
    } else {
      lock->announced->store(next, std::memory_order_release);  // taken by this task's CAS: no hand-overs
    }
    s = in_.compare_and_swap(tb->words, lock->word, lock->value, next, Option::kNone);
    if (s.ok()) s = sync();
    if (s.ok() && tb->words[0] != lock->value) {
      s = Status::LockLost("B+tree: the lock of page " + lock->page.to_string() + " was taken over (now " +
                           DescribeLockWord(tb->words[0]) + "); this client was slower than the lease and wrote nothing");
    }
    if (!s.ok()) {
      // Nothing was written: the operation did not take effect.
      end_remote();
      return finish(s);
    }
    lock->value = next;
    lock->renewed_ns = MonotonicNs();
    if (local != nullptr) local->renewed_ns = lock->renewed_ns;
  }
  if (length > 0) FaultPoint(points.checked);
  auto unknown = [&](const Status& failed) {
    ++tc_.stats.writes_unknown;
    return Status::OutcomeUnknown("B+tree: the write of " + std::to_string(length) + " bytes to page " +
                                  lock->page.to_string() + " may or may not have landed: " + failed.ToString());
  };
  if (local != nullptr && local->handovers < kMaxHandovers && HasWaiters(local)) {
    if (length > 0) {
      s = in_.write(src, dst, length, Option::kPost);
      FaultPoint(points.posted);
      if (s.ok()) s = sync();
    }
    ++local->handovers;
    if (!s.ok()) {
      if (length > 0) s = unknown(s);
      // The write failed: release the word remotely rather than hand it
      // over (best effort; the connection to the blade may be gone).
      (void)in_.compare_and_swap(tb->words, lock->word, lock->value, kLockFree, Option::kSync);
      end_remote();
    }
    return finish(s);
  }
  bool written = false;  // the write's completion was seen, successful
  if (length > 0 && !options_.combine_commands) {
    s = in_.write(src, dst, length, Option::kPost);
    FaultPoint(points.posted);
    if (s.ok()) s = sync();
    if (!s.ok()) {
      end_remote();
      return finish(unknown(s));
    }
    written = true;
  } else if (length > 0) {
    s = in_.write(src, dst, length, Option::kNone);
  }
  if (s.ok()) s = in_.compare_and_swap(tb->words, lock->word, lock->value, kLockFree, Option::kPost);
  if (length > 0 && !written) FaultPoint(points.posted);
  if (s.ok()) s = sync();
  end_remote();
  if (length > 0 && !written) {
    // The write and the release went in one doorbell: a failure may be
    // either's, and sync() reports only the first.
    if (!s.ok()) return finish(unknown(s));
    written = true;
  }
  if (written) {
    // The write completed while this task held the lock: a taker fences
    // before it reads and writes the page, so the write is in what it
    // reads. A release that then fails or finds the word taken over leaves
    // the word to its lease, and the operation took effect.
    return finish(Status::OK());
  }
  if (s.ok() && tb->words[0] != lock->value) {
    s = Status::LockLost("B+tree: the lock of page " + lock->page.to_string() + " was taken over before its release (now " +
                         DescribeLockWord(tb->words[0]) + ")");
  }
  return finish(s);
}

}  // namespace smart::btree
