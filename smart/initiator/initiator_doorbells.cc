// Initiator posting beyond the simple case: a send queue without room, and
// doorbells shared by a thread's tasks (coalesce_posts): the chain of
// waiting requests per memory blade, its flush, and a task waiting for its
// own requests to leave the chain.
#include <cerrno>
#include <chrono>
#include <cstring>

#include "smart/fault_injection.h"
#include "smart/initiator/initiator_impl.h"
#include "smart/task/task_hooks.h"

namespace smart {

SMART_COLD int Initiator::Impl::retry_post(ThreadState* ts, Lane& lane, ibv_send_wr* first, int task) {
  // The send queue is full (queue pairs shared between threads): make room
  // by polling, for at most the connection timeout. A provider may have
  // taken the head of the list before it ran out of room; only the rest
  // (from the request it reported as not posted) is posted again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.connect_timeout_ms);
  int rc = ENOMEM;
  while (rc == ENOMEM && std::chrono::steady_clock::now() < deadline) {
    if (task != 0) {
      this_task::yield();
    } else {
      poll(ts);
    }
    ibv_send_wr* bad = nullptr;
    rc = lane.qp->post_send(first, &bad);
    if (rc == ENOMEM && bad != nullptr) first = bad;
  }
  return rc;
}

SMART_COLD Status Initiator::Impl::post_error(const Lane& lane, int n, int rc) const {
  return Status::WorkRequestError("posting " + std::to_string(n) + " work request(s) to " + lane.connection->name() +
                                  " failed: " + strerror(rc));
}

// Out of line: the shm path, which does not coalesce, keeps a smaller post.
[[gnu::noinline]] void Initiator::Impl::defer_post(ThreadState* ts, TaskContext* t, node_t node) {
  // Behind the next doorbell of this lane: rung when no task of the thread
  // is runnable (the poller flushes first), when the chain is long, or
  // before anything posts to the lane directly.
  Lane& lane = ts->lanes[node];
  const int n = t->count;
  if (lane.pending_tail != nullptr) {
    lane.pending_tail->next = &t->wr[0];
  } else {
    lane.pending_head = &t->wr[0];
  }
  lane.pending_tail = &t->wr[n - 1];
  lane.pending += n;
  if (!lane.pending_listed) {
    lane.pending_listed = true;
    ts->pending_lanes.push_back(node);
    // The pool's scheduler rings it: its poller must know this thread.
    attach_poller(ts);
  }
  if (!t->coalesced) {
    t->coalesced = true;
    ts->coalesced_tasks.push_back(t);
  }
  t->count = 0;
  if (__builtin_expect(lane.pending >= kMaxCoalescedRequests, 0)) flush_lane(ts, node);
}

SMART_COLD void Initiator::Impl::flush_lane(ThreadState* ts, node_t node) {
  Lane& lane = ts->lanes[node];
  if (lane.pending_head == nullptr) return;
  int rc = 0;
  if (lane.failure.ok()) {
    ibv_send_wr* bad = nullptr;
    FaultPoint("initiator.doorbell");
    rc = lane.qp->post_send(lane.pending_head, &bad);
    if (rc == ENOMEM) {
      // No room in the send queue (completions not polled yet): the
      // requests from the one the provider refused on wait for the next
      // flush, for at most the connection timeout.
      if (bad != nullptr) lane.pending_head = bad;
      int left = 0;
      for (ibv_send_wr* wr = lane.pending_head; wr != nullptr; wr = wr->next) ++left;
      lane.pending = left;
      const uint64_t now = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count());
      if (lane.send_queue_full_since == 0) lane.send_queue_full_since = now;
      if (now - lane.send_queue_full_since < static_cast<uint64_t>(config.connect_timeout_ms) * 1000000) return;
    }
    if (rc != 0) {
      lane.failure = post_error(lane, lane.pending, rc);
      lane.failure_is_flush = false;
    }
  }
  // Posted, or dropped with the lane failed (their tasks see the failure).
  lane.pending_head = lane.pending_tail = nullptr;
  lane.pending = 0;
  lane.send_queue_full_since = 0;
  if (rc != 0) wake_all(ts);
}

SMART_COLD void Initiator::Impl::flush_pending(ThreadState* ts) {
  std::vector<node_t>& lanes = ts->pending_lanes;
  for (size_t i = 0; i < lanes.size();) {
    Lane& lane = ts->lanes[lanes[i]];
    flush_lane(ts, lanes[i]);
    if (lane.pending_head == nullptr) {
      lane.pending_listed = false;
      lanes[i] = lanes.back();
      lanes.pop_back();
    } else {
      ++i;
    }
  }
  if (lanes.empty()) {
    for (TaskContext* t : ts->coalesced_tasks) t->coalesced = false;
    ts->coalesced_tasks.clear();
  }
}

SMART_COLD void Initiator::Impl::wait_for_flush(ThreadState* ts, TaskContext* t, int task) {
  flush_pending(ts);
  while (t->coalesced) {
    // A send queue without room: let completions in, then try again.
    if (task != 0) {
      this_task::yield();
    } else {
      poll(ts);
    }
    flush_pending(ts);
  }
}

}  // namespace smart
