// Initiator failures: the error a failed completion stands for, a lane that
// failed and the tasks it wakes, completions another thread polled for this
// one (shared queue pairs), and what a task's wait returns after a failure.
#include <poll.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "smart/initiator/initiator_impl.h"
#include "smart/task/task_hooks.h"

namespace smart {

SMART_COLD Status Initiator::Impl::wait_failed(ThreadState* ts, TaskContext* t, const Status& posted) {
  if (t->error.ok() && posted.ok()) {
    // A broken queue pair flushes its requests; a target it never reached
    // counts as failed.
    for (int k = 0; k < t->target_count; ++k) {
      const Lane& lane = ts->lanes[t->targets[k].node];
      if (!lane.failure.ok() && lane.acked.load(std::memory_order_relaxed) < t->targets[k].seq) {
        t->target_count = 0;
        return lane.failure;
      }
    }
    t->target_count = 0;
    return Status::OK();
  }
  Status result = t->error.ok() ? posted : t->error;
  t->error = Status();
  t->target_count = 0;
  return result;
}

SMART_COLD Status Initiator::Impl::failure_status(const ibv_wc& wc, const Connection* connection) const {
  const std::string where = connection != nullptr ? connection->name() : std::string("a memory node");
  const std::string what = std::string(ibv_wc_status_str(wc.status)) + " (status " + std::to_string(wc.status) +
                           ", vendor error 0x" + [&] {
                             char buf[16];
                             snprintf(buf, sizeof(buf), "%x", wc.vendor_err);
                             return std::string(buf);
                           }() + ")";
  // shm: the session word says whether the blade ended this session (a
  // fence, most likely), whichever way the failure showed first.
  if (wc.status != IBV_WC_SUCCESS && connection != nullptr && connection->peer != nullptr &&
      connection->peer->session_ended()) {
    return Status::PeerFailed("work request to " + where + " failed: " + what +
                              ": the memory blade ended this client's session, or another client asked it to "
                              "(fenced: a lock of this client was taken over past its lease); the request was not "
                              "carried out");
  }
  switch (wc.status) {
    case IBV_WC_REM_ACCESS_ERR:
      // With memory windows, a blade that dies or ends this session revokes
      // them before its queue pairs go: the requests in flight then meet a
      // dead key, not a silent peer. Its TCP connection closing tells the
      // two apart (allow it a moment to arrive).
      if (connection != nullptr && !connection->window_rkeys.empty() && connection->tcp_fd >= 0) {
        pollfd pfd{connection->tcp_fd, POLLRDHUP, 0};
        if (::poll(&pfd, 1, 200) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP)) != 0) {
          std::string message = "work request to " + where + " failed: " + what;
          message.append(": the memory blade ended this client's session (its connection closed, and its memory "
                         "windows went with it)");
          return Status::PeerFailed(message);
        }
      }
      return Status::RemoteAccess("work request to " + where + " failed: " + what);
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return Status::PeerFailed("work request to " + where + " failed: " + what +
                                ": the memory blade does not answer (dead or unreachable)");
    case IBV_WC_WR_FLUSH_ERR:
      return Status::PeerFailed("work request to " + where +
                                " was flushed: the queue pair broke after an earlier failure");
    default:
      return Status::WorkRequestError("work request to " + where + " failed: " + what);
  }
}

SMART_COLD void Initiator::Impl::wake_all(ThreadState* ts) {
  for (size_t task = 1; task < ts->tasks.size(); ++task) {
    TaskContext* t = ts->tasks[task].get();
    if (t != nullptr && (t->waiting || t->credit_waiting)) task_hooks::Notify(static_cast<int>(task));
  }
}

SMART_COLD void Initiator::Impl::handle_foreign_completion(const ibv_wc& wc) {
  // A queue pair shared with another thread: credit that thread.
  const int thread = static_cast<int>((wc.wr_id >> 48) & 0xff);
  const node_t node = static_cast<node_t>((wc.wr_id >> 32) & 0xffff);
  const uint32_t count = static_cast<uint32_t>(wc.wr_id);
  std::lock_guard<std::mutex> lock(mutex);
  ThreadState* owner = states[thread].get();
  if (owner == nullptr || node >= owner->lanes.size()) return;
  owner->lanes[node].acked.fetch_add(count, std::memory_order_relaxed);
  owner->inflight.fetch_sub(static_cast<int>(count), std::memory_order_relaxed);
  owner->completed.fetch_add(count, std::memory_order_relaxed);
  if (wc.status != IBV_WC_SUCCESS) {
    std::lock_guard<std::mutex> failure_lock(owner->foreign_mutex);
    owner->foreign_failures.emplace_back(node, failure_status(wc, owner->lanes[node].connection));
  }
  owner->remote_progress.store(true, std::memory_order_release);
}

SMART_COLD void Initiator::Impl::handle_failed_completion(ThreadState* ts, Lane& lane, const ibv_wc& wc, int task) {
  Status failure = failure_status(wc, lane.connection);
  // Keep the root cause: a flush only stands in until the error behind it.
  if (lane.failure.ok() || (lane.failure_is_flush && wc.status != IBV_WC_WR_FLUSH_ERR)) {
    lane.failure = failure;
    lane.failure_is_flush = wc.status == IBV_WC_WR_FLUSH_ERR;
  }
  // The task gets the root cause when the lane knows it: a flushed request
  // only says that an earlier one broke the queue pair.
  TaskContext* t = task < static_cast<int>(ts->tasks.size()) ? ts->tasks[task].get() : nullptr;
  if (t != nullptr && t->error.ok()) t->error = lane.failure;
  wake_all(ts);
}

SMART_COLD void Initiator::Impl::drain_foreign(ThreadState* ts) {
  std::vector<std::pair<node_t, Status>> failures;
  {
    std::lock_guard<std::mutex> lock(ts->foreign_mutex);
    failures.swap(ts->foreign_failures);
  }
  for (auto& f : failures) {
    if (ts->lanes[f.first].failure.ok()) ts->lanes[f.first].failure = f.second;
  }
  wake_all(ts);
}

}  // namespace smart
