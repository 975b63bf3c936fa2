// The scheduler's switching core: each task's state, the run queue, the
// pollers and the switch from one task to the next. It is inline so that
// the framework's hot paths which wait (the initiator's post and completion
// paths, through task_hooks.h) switch inside their own frame: a task resumes
// with the return-address predictor out of step, so each function return
// between the switch and the caller's code costs a mispredict (calling an
// out-of-line wait cost the hash table's YCSB-C 2.7%). Spawning, stacks and
// error handling stay in task_internal.h, which only smart/task includes.
#pragma once

#include <boost/context/fiber.hpp>
#include <functional>
#include <vector>

#include "smart/task.h"
#include "smart/task/fiber_sanitizer.h"

namespace smart {

enum class TaskState : uint8_t { kFree, kRunnable, kRunning, kBlocked, kFinished };

struct Task {
  boost::context::fiber fiber;
  std::function<void()> fn;
  TaskState state = TaskState::kFree;
  bool notified = false;
  [[no_unique_address]] fiber_sanitizer::FiberState san;  // empty unless sanitized
};

// Fixed-capacity FIFO of task ids (a task is queued at most once).
class RunQueue {
 public:
  void init(size_t capacity) {
    size_t size = 1;
    while (size < capacity) size <<= 1;
    slots_.assign(size, 0);
    mask_ = size - 1;
    head_ = tail_ = 0;
  }
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  void push(int id) { slots_[tail_++ & mask_] = id; }
  int pop() { return slots_[head_++ & mask_]; }

 private:
  std::vector<int> slots_;
  size_t mask_ = 0;
  size_t head_ = 0;
  size_t tail_ = 0;
};

// Tasks hand the CPU directly to the next runnable task (one context
// switch). A task that blocks with nothing runnable first runs the pollers
// itself, so a task whose completion is already there continues without any
// switch; only when nothing is runnable does control go back to the thread's
// own context (task 0), which polls until something is.
struct SwitchCore {
  std::vector<Task> tasks;  // index 0 is the thread's own context
  int task_limit = 0;       // tasks.size(), without a division on every notify
  RunQueue run_queue;
  std::vector<CompletionPoller*> pollers;
  int switching_from = 0;  // the context that made the last switch

  // Runs `next` (the calling context resumes when something switches back).
  void switch_to(int next);
  // Stores the continuation of the context that just switched to us.
  void take_over(boost::context::fiber&& from);
  // Tells the sanitizers (if any) that context `self` has the CPU again.
  void after_switch(void* asan_save, int self) {
    fiber_sanitizer::AfterSwitch(asan_save, &tasks[switching_from].san);
    if (tasks[switching_from].state == TaskState::kFinished) fiber_sanitizer::TakeOverFromFinished(tasks[self].san);
  }
  // Frees a finished task's id (out of line, in task_pool.cc).
  void reclaim(int id);
  // The running task gives up the CPU (it is queued or blocked already).
  void schedule_from_task() {
    if (run_queue.empty()) poll_all(nullptr);
    switch_to(run_queue.empty() ? 0 : run_queue.pop());
  }
  int poll_all(bool* pending) {
    int events = 0;
    for (CompletionPoller* p : pollers) {
      events += p->poll();
      if (pending != nullptr && p->pending()) *pending = true;
    }
    return events;
  }
};

// The library is position-independent code, where a thread-local defaults
// to the general dynamic model: each access is a call to __tls_get_addr as
// far as the compiler knows (the linker rewrites it later), so registers are
// spilled around it. These are read on every wait and wake; the initial-exec
// model makes each one a load at a fixed offset from the thread pointer (the
// library must then be loaded with the program, not dlopen'ed late, unless
// the C library's spare static TLS holds them: a few dozen bytes).
#define SMART_HOT_TLS __attribute__((tls_model("initial-exec")))

namespace task_hooks::detail {
extern thread_local constinit SMART_HOT_TLS int current_task_id;
extern thread_local constinit SMART_HOT_TLS TaskPool* current_pool;
extern thread_local constinit SMART_HOT_TLS SwitchCore* current_core;
}  // namespace task_hooks::detail

inline void SwitchCore::take_over(boost::context::fiber&& from) {
  const int from_id = switching_from;
  // A swap: the handle it replaces (empty, as resuming a fiber empties
  // its handle) goes out with `from`, without the move's extra checks.
  tasks[from_id].fiber.swap(from);
  if (__builtin_expect(tasks[from_id].state == TaskState::kFinished, 0)) reclaim(from_id);
}

inline void SwitchCore::switch_to(int next) {
  const int self = task_hooks::detail::current_task_id;
  tasks[next].state = TaskState::kRunning;
  if (next == self) return;
  switching_from = self;
  task_hooks::detail::current_task_id = next;
  void* asan_save = nullptr;
  fiber_sanitizer::BeforeSwitch(&asan_save, tasks[next].san);
  boost::context::fiber from = std::move(tasks[next].fiber).resume();
  after_switch(asan_save, self);
  take_over(std::move(from));
}

}  // namespace smart
