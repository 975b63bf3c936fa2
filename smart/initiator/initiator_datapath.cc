// Initiator data path: queue a request into the task's batch, post the
// batch with one doorbell under the thread's credit, wait for completions,
// and the poller that turns completions into task wake-ups. Shared
// doorbells and full send queues are in initiator_doorbells.cc, failed
// requests and lanes in initiator_failures.cc.
#include <cerrno>
#include <cstring>

#include "smart/fault_injection.h"
#include "smart/initiator/initiator_impl.h"
#include "smart/logging.h"
#include "smart/task/task_hooks.h"

namespace smart {

namespace {

const char* OpcodeVerb(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ:
      return "READ";
    case IBV_WR_RDMA_WRITE:
      return "WRITE";
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return "CAS";
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return "FAA";
    default:
      return "request";
  }
}

}  // namespace

SMART_COLD TaskContext* Initiator::Impl::create_task_context(ThreadState* ts, int task) {
  auto created = std::make_unique<TaskContext>();
  created->scratch = static_cast<uint64_t*>(cache_alloc(64));
  created->wr_id_base = EncodeWrId(task, ts->thread_id, 0, 0);
  memset(created->wr, 0, sizeof(created->wr));
  memset(created->sge, 0, sizeof(created->sge));
  ts->tasks[task] = std::move(created);
  return ts->tasks[task].get();
}

SMART_COLD Status Initiator::Impl::resolve_lane(ThreadState* ts, node_t node) {
  // Requests waiting for a doorbell go out on the queue pairs they were made for.
  flush_all(ts);
  Lane& lane = ts->lanes[node];
  std::lock_guard<std::mutex> lock(mutex);
  Connection* c = node < connections.size() ? connections[node].get() : nullptr;
  if (c == nullptr) {
    lane.ready = false;
    return Status::InvalidArgument("memory node " + std::to_string(node) + " is not connected");
  }
  int index = ts->slot;
  if (index >= c->qp_count) {
    if (!shared_qps) {
      return Status::InvalidArgument(
          "thread " + std::to_string(ts->thread_id) + " needs queue pair " + std::to_string(index) + " of " +
          c->name() + ", which was connected with " + std::to_string(c->qp_count) +
          " queue pair(s): connect with one per thread, or turn on experimental.qp_sharing");
    }
    index %= c->qp_count;
  }
  if (lane.connection != c) {
    lane.posted = 0;
    lane.acked.store(0);
    lane.failure = Status();
    lane.failure_is_flush = false;
  }
  lane.connection = c;
  lane.qp = c->qps[index].get();
  lane.max_inline = lane.qp->max_inline_data();
  for (int i = 0; i < kMemoryRegions; ++i) {
    lane.base[i] = c->regions[i].valid ? c->regions[i].addr : 0;
    lane.length[i] = c->regions[i].valid ? c->regions[i].length : 0;
    lane.rkey[i] = c->regions[i].rkey;
  }
  if (!c->window_rkeys.empty()) lane.rkey[kMainMemoryRegion] = c->window_rkeys[index];
  CompletionQueue* cq = config.thread_aware_alloc.shared_cq ? slots[index].cq.get() : c->private_cqs[index].get();
  bool known = false;
  for (CompletionQueue* q : ts->cqs) known = known || q == cq;
  if (!known) ts->cqs.push_back(cq);
  lane.generation = generation.load();
  lane.ready = true;
  return Status::OK();
}

namespace {

enum class RequestProblem { kNode, kRegion, kRange, kLocal, kAlignment };

// Error messages are built out of line so the hot path stays small.
[[gnu::noinline, gnu::cold]] Status RequestError(RequestProblem problem, ibv_wr_opcode opcode, uint64_t raw_remote,
                                                 size_t length, uint64_t region_length) {
  const GlobalAddress remote(raw_remote);
  const std::string op = OpcodeVerb(opcode);
  switch (problem) {
    case RequestProblem::kNode:
      return Status::InvalidArgument("remote address " + remote.to_string() + ": node is not below max_nodes");
    case RequestProblem::kRegion:
      return Status::InvalidArgument("remote address " + remote.to_string() + ": memory region " +
                                     std::to_string(remote.mr_id) + " does not exist on that memory blade");
    case RequestProblem::kRange:
      if (length == 0) return Status::InvalidArgument(op + " of 0 bytes at " + remote.to_string() + ": nothing to transfer");
      return Status::InvalidArgument(op + " of " + std::to_string(length) + " bytes at " + remote.to_string() +
                                     " leaves the memory blade's region of " + std::to_string(region_length) +
                                     " bytes");
    case RequestProblem::kLocal:
      return Status::InvalidArgument(op + " of " + std::to_string(length) +
                                     " bytes: the local buffer is not inside the registered cache; allocate it "
                                     "with Initiator::alloc_cache()");
    case RequestProblem::kAlignment:
      return Status::InvalidArgument(op + " at " + remote.to_string() + ": atomics need an 8-byte aligned address");
  }
  return Status::Internal("unknown request problem");
}

}  // namespace

SMART_HOT_INLINE Status Initiator::Impl::add_request(ibv_wr_opcode opcode, void* local, GlobalAddress remote, size_t length,
                                    uint64_t compare_add, uint64_t swap, Option option) {
  ThreadState* ts = state();
  // The fields by shifts of the one word: the compiler then keeps that word
  // alone for the error path instead of packing the bit-fields again.
  const uint64_t raw = remote.raw;
  const uint64_t offset = raw & ((uint64_t{1} << 48) - 1);
  const node_t node = static_cast<node_t>(raw >> 56);
  if (__builtin_expect(node >= ts->lane_count, 0)) return RequestError(RequestProblem::kNode, opcode, raw, length, 0);
  Lane& lane = ts->lanes[node];
  if (__builtin_expect(!lane.ready || lane.generation != generation.load(std::memory_order_relaxed), 0)) {
    Status s = resolve_lane(ts, node);
    if (!s.ok()) return s;
  }
  const unsigned mr = static_cast<unsigned>(raw >> 48) & 0xff;
  if (__builtin_expect(mr >= kMemoryRegions || lane.length[mr] == 0, 0)) {
    return RequestError(RequestProblem::kRegion, opcode, raw, length, 0);
  }
  // The region is not empty (above), so length - 1 >= its length catches a
  // length of 0 (it wraps) and one longer than the region alike.
  const uint64_t region_length = lane.length[mr];
  if (__builtin_expect(length - 1 >= region_length || offset > region_length - length, 0)) {
    return RequestError(RequestProblem::kRange, opcode, raw, length, region_length);
  }
  // A buffer below the cache wraps to an offset above its size.
  const uint64_t in_cache = reinterpret_cast<uintptr_t>(local) - reinterpret_cast<uintptr_t>(cache_base);
  if (__builtin_expect(in_cache > cache_size || length > cache_size - in_cache, 0)) {
    return RequestError(RequestProblem::kLocal, opcode, raw, length, 0);
  }
  const bool atomic = opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  if (__builtin_expect(atomic && (offset & 7), 0)) {
    return RequestError(RequestProblem::kAlignment, opcode, raw, length, 0);
  }
  if (__builtin_expect(!lane.failure.ok(), 0)) return lane.failure;

  const int task = task_hooks::CurrentTaskId();
  TaskContext* t = task_context(ts, task);
  if (t->count > 0 && (t->node != node || t->count == kMaxBatchSize)) {
    // A batch goes to one memory blade through one doorbell.
    Status s = post(ts, t, task);
    if (!s.ok()) return s;
  }
  // The task's last requests may still wait for a doorbell in its wr[],
  // which the new request is about to reuse.
  if (__builtin_expect(t->coalesced, 0)) wait_for_flush(ts, t, task);
  const int i = t->count++;
  t->node = node;
  ibv_sge& sge = t->sge[i];
  sge.addr = reinterpret_cast<uint64_t>(local);
  sge.length = static_cast<uint32_t>(length);
  sge.lkey = cache_lkey;
  ibv_send_wr& wr = t->wr[i];
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = 0;
  const uint64_t address = lane.base[mr] + offset;
  if (atomic) {
    wr.wr.atomic.remote_addr = address;
    wr.wr.atomic.rkey = lane.rkey[mr];
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
  } else {
    wr.wr.rdma.remote_addr = address;
    wr.wr.rdma.rkey = lane.rkey[mr];
    if (opcode == IBV_WR_RDMA_WRITE && length <= static_cast<size_t>(lane.max_inline)) {
      wr.send_flags = IBV_SEND_INLINE;
    }
  }
  if (option == Option::kSync) return wait_for(ts, t, task);
  if (option == Option::kPost) return post(ts, t, task);
  return Status::OK();
}

// Waits until the thread's credit admits `n` more work requests. A batch
// larger than the bound still goes out once nothing else is in flight.
// Tasks waiting for credit are served in the order they asked for it once
// the first in line has waited kCreditPatienceCycles: until then others
// may go ahead of it. A task whose request just completed used to take the
// freed credit again at once, every time, and starve the rest (on
// Soft-RoCE the tail of latency was 15x its median); strict order from the
// start costs a task switch per request on shm, where credit frees up
// within nanoseconds. The thread's own context (task 0) cannot wait in
// line; it polls and goes ahead.
SMART_COLD void Initiator::Impl::wait_for_credit(ThreadState* ts, TaskContext* t, int task, int n) {
  for (;;) {
    const int inflight = ts->inflight.load(std::memory_order_relaxed);
    const bool fits = inflight == 0 || inflight + n <= ts->bound.load(std::memory_order_relaxed);
    const bool first = ts->credit_waiters.empty() || ts->credit_waiters.front() == task;
    if (fits && (first || task == 0 || Cycles() - ts->credit_front_since < kCreditPatienceCycles)) break;
    if (task != 0) {
      attach_poller(ts);
      if (!t->credit_waiting) {
        if (ts->credit_waiters.empty()) ts->credit_front_since = Cycles();
        ts->credit_waiters.push_back(task);
        t->credit_waiting = true;
      }
      task_hooks::WaitInTask();
    } else {
      poll(ts);
    }
  }
  if (t->credit_waiting) {
    const bool was_first = ts->credit_waiters.front() == task;
    for (auto it = ts->credit_waiters.begin(); it != ts->credit_waiters.end(); ++it) {
      if (*it == task) {
        ts->credit_waiters.erase(it);
        break;
      }
    }
    t->credit_waiting = false;
    if (!ts->credit_waiters.empty()) {
      if (was_first) ts->credit_front_since = Cycles();
      // The next in line checks for itself once this task has posted.
      task_hooks::Notify(ts->credit_waiters.front());
    }
  }
}

SMART_COLD Status Initiator::Impl::add_target(ThreadState* ts, TaskContext* t, int task, node_t node, uint64_t seq) {
  // Too many memory blades in flight for one task: settle them first.
  Status s = wait_for(ts, t, task);
  t->targets[t->target_count++] = {node, seq};
  return s;
}

SMART_HOT_INLINE Status Initiator::Impl::post(ThreadState* ts, TaskContext* t, int task) {
  const int n = t->count;
  if (n == 0) return Status::OK();
  const node_t node = t->node;
  Lane& lane = ts->lanes[node];
  if (__builtin_expect(!lane.failure.ok(), 0)) {
    t->count = 0;
    return lane.failure;
  }
  // Credit: at most `bound` work requests in flight per thread.
  if (!shared_qps) {
    const int inflight = ts->inflight.load(std::memory_order_relaxed);
    if (__builtin_expect((inflight != 0 && inflight + n > ts->bound.load(std::memory_order_relaxed)) ||
                             !ts->credit_waiters.empty(),
                         0)) {
      wait_for_credit(ts, t, task, n);
    }
  }
  const uint64_t base = t->wr_id_base | EncodeWrId(0, 0, node, 0);
  for (int i = 0; i < n - 1; ++i) {
    t->wr[i].wr_id = base;
    t->wr[i].next = &t->wr[i + 1];
  }
  ibv_send_wr& last = t->wr[n - 1];
  last.wr_id = base | static_cast<uint32_t>(n);
  last.send_flags |= IBV_SEND_SIGNALED;
  last.next = nullptr;
  if (coalesce && task != 0) {
    defer_post(ts, t, node);
  } else {
    // Requests already waiting for this lane's doorbell go first: each
    // target's sequence number counts requests in the order they go out.
    if (__builtin_expect(lane.pending_head != nullptr, 0)) {
      flush_lane(ts, node);
      if (!lane.failure.ok()) {
        t->count = 0;
        return lane.failure;
      }
    }
    ibv_send_wr* bad = nullptr;
    FaultPoint("initiator.doorbell");
    int rc = lane.qp->post_send(&t->wr[0], &bad);
    if (__builtin_expect(rc == ENOMEM, 0)) rc = retry_post(ts, lane, bad != nullptr ? bad : &t->wr[0], task);
    t->count = 0;
    if (__builtin_expect(rc != 0, 0)) return post_error(lane, n, rc);
  }
  const uint64_t posted = lane.posted + static_cast<uint64_t>(n);
  lane.posted = posted;
  if (shared_qps) {
    ts->inflight.fetch_add(n, std::memory_order_relaxed);
  } else {
    ts->inflight.store(ts->inflight.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  const int targets = t->target_count;
  for (int k = 0; k < targets; ++k) {
    if (t->targets[k].node == node) {
      t->targets[k].seq = posted;
      return Status::OK();
    }
  }
  if (__builtin_expect(targets == kMaxSyncTargets, 0)) return add_target(ts, t, task, node, posted);
  t->targets[targets] = {node, posted};
  t->target_count = targets + 1;
  return Status::OK();
}

namespace {

// True when `holds` is true of every memory blade the task posted to. Most
// waits are for one memory blade: no loop for them.
template <typename Predicate>
SMART_HOT_INLINE bool EveryTarget(const ThreadState* ts, const TaskContext* t, Predicate holds) {
  const int targets = t->target_count;
  if (__builtin_expect(targets == 1, 1)) return holds(ts->lanes[t->targets[0].node], t->targets[0].seq);
  for (int k = 0; k < targets; ++k) {
    if (!holds(ts->lanes[t->targets[k].node], t->targets[k].seq)) return false;
  }
  return true;
}

// True when every memory blade the task posted to acknowledged its last
// request, or failed.
SMART_HOT_INLINE bool Satisfied(const ThreadState* ts, const TaskContext* t) {
  return EveryTarget(ts, t, [](const Lane& lane, uint64_t seq) {
    return lane.acked.load(std::memory_order_relaxed) >= seq || !lane.failure.ok();
  });
}

// True when none of the memory blades the task posted to has failed.
SMART_HOT_INLINE bool NoTargetFailed(const ThreadState* ts, const TaskContext* t) {
  return EveryTarget(ts, t, [](const Lane& lane, uint64_t) { return lane.failure.ok(); });
}

}  // namespace

SMART_HOT_INLINE Status Initiator::Impl::wait_for(ThreadState* ts, TaskContext* t, int task) {
  Status posted = post(ts, t, task);
  if (t->target_count > 0) {
    if (task != 0) {
      attach_poller(ts);
      t->waiting = true;
      while (!Satisfied(ts, t)) task_hooks::WaitInTask();
      t->waiting = false;
    } else {
      while (!Satisfied(ts, t)) poll(ts);
    }
  }
  // Fast path: no error and every target reached (a lane that failed before
  // acknowledging a target makes the slow path report it).
  if (__builtin_expect(t->error.ok() && posted.ok() && NoTargetFailed(ts, t), 1)) {
    t->target_count = 0;
    return Status::OK();
  }
  return wait_failed(ts, t, posted);
}

SMART_HOT_INLINE void Initiator::Impl::handle_completion(ThreadState* ts, const ibv_wc& wc) {
  const uint64_t wr_id = wc.wr_id;
  const int task = static_cast<int>(wr_id >> 56);
  const int thread = static_cast<int>((wr_id >> 48) & 0xff);
  const node_t node = static_cast<node_t>((wr_id >> 32) & 0xffff);
  const uint32_t count = static_cast<uint32_t>(wr_id);
  if (__builtin_expect(thread != ts->thread_id, 0)) {
    handle_foreign_completion(wc);
    return;
  }
  Lane& lane = ts->lanes[node];
  if (__builtin_expect(wc.status != IBV_WC_SUCCESS, 0)) handle_failed_completion(ts, lane, wc, task);
  if (shared_qps) {
    // Other threads polling the shared queue pair's completion queue credit
    // this thread's counters at the same time (handle_foreign_completion):
    // every update is atomic, or one of theirs could be lost and a task
    // would wait for an acknowledgement that never comes.
    lane.acked.fetch_add(count, std::memory_order_relaxed);
    ts->inflight.fetch_sub(static_cast<int>(count), std::memory_order_relaxed);
    ts->completed.fetch_add(count, std::memory_order_relaxed);
  } else {
    lane.acked.store(lane.acked.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
    ts->inflight.store(ts->inflight.load(std::memory_order_relaxed) - static_cast<int>(count),
                       std::memory_order_relaxed);
    ts->completed.store(ts->completed.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
  }
  if (count != 0 && task != 0) {
    TaskContext* t = ts->tasks[task].get();
    if (t != nullptr && t->waiting && Satisfied(ts, t)) task_hooks::Notify(task);
  }
}

SMART_COLD static void ReportPollError(int n) {
  SMART_ERROR("polling a completion queue failed: %s", strerror(-n));
}

int Initiator::Impl::poll(ThreadState* ts) {
  // No task of the thread is runnable (or the thread itself polls): the
  // requests that wait for a doorbell go out now.
  flush_all(ts);
  ibv_wc wc[kMaxBatchSize];
  int total = 0;
  for (CompletionQueue* cq : ts->cqs) {
    const int n = cq->poll(kMaxBatchSize, wc);
    if (__builtin_expect(n < 0, 0)) {
      ReportPollError(n);
      continue;
    }
    for (int i = 0; i < n; ++i) handle_completion(ts, wc[i]);
    total += n;
  }
  if (__builtin_expect(shared_qps, 0) && ts->remote_progress.exchange(false, std::memory_order_acquire)) {
    drain_foreign(ts);
    ++total;
  }
  if (__builtin_expect(!ts->credit_waiters.empty(), 0) &&
      ts->inflight.load(std::memory_order_relaxed) < ts->bound.load(std::memory_order_relaxed)) {
    task_hooks::Notify(ts->credit_waiters.front());
  }
  return total;
}

int ThreadPoller::poll() { return state_->impl->poll(state_); }

bool ThreadPoller::pending() const {
  return state_->inflight.load(std::memory_order_relaxed) > 0 || state_->impl->shared_qps;
}

// ---------------------------------------------------------------------------
// Public entry points

Status Initiator::read(void* local, GlobalAddress remote, size_t length, Option option) {
  return impl_->add_request(IBV_WR_RDMA_READ, local, remote, length, 0, 0, option);
}

Status Initiator::write(const void* local, GlobalAddress remote, size_t length, Option option) {
  return impl_->add_request(IBV_WR_RDMA_WRITE, const_cast<void*>(local), remote, length, 0, 0, option);
}

Status Initiator::compare_and_swap(uint64_t* local, GlobalAddress remote, uint64_t expected, uint64_t desired,
                                   Option option) {
  return impl_->add_request(IBV_WR_ATOMIC_CMP_AND_SWP, local, remote, 8, expected, desired, option);
}

Status Initiator::fetch_and_add(uint64_t* local, GlobalAddress remote, uint64_t add, Option option) {
  return impl_->add_request(IBV_WR_ATOMIC_FETCH_AND_ADD, local, remote, 8, add, 0, option);
}

Status Initiator::post_request() {
  ThreadState* ts = impl_->state();
  const int task = task_hooks::CurrentTaskId();
  Status s = impl_->post(ts, impl_->task_context(ts, task), task);
  // Asked for by name: the doorbell rings now.
  impl_->flush_all(ts);
  return s;
}

Status Initiator::sync() {
  ThreadState* ts = impl_->state();
  const int task = task_hooks::CurrentTaskId();
  return impl_->wait_for(ts, impl_->task_context(ts, task), task);
}

int Initiator::poll_once() { return impl_->poll(impl_->state()); }

}  // namespace smart
