/// @file
/// Coroutine runtime: a per-thread scheduler running tasks on Boost.Context
/// fibers with fixed-size, guard-paged stacks. Cooperative and lock-free: a
/// task only runs on the thread that spawned it, and wait/notify/yield only
/// reach tasks of the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "smart/common.h"

namespace smart {

/// Dense id of the calling thread, 0..kMaxThreads-1, assigned on first call
/// and released when the thread exits. Throws smart::Error if more than
/// kMaxThreads threads hold an id at once.
int ThreadId();

/// Pins the calling thread to `core` (modulo the online cores); returns false
/// and leaves the thread unpinned if the OS refuses.
bool BindCore(int core);

/// Work the scheduler runs between rounds of tasks, e.g. draining a
/// completion queue and notifying the tasks whose requests completed.
class CompletionPoller {
 public:
  virtual ~CompletionPoller() = default;
  /// Returns the number of events handled (0 when idle).
  virtual int poll() = 0;
  /// True while events are still expected (work requests in flight). Lets the
  /// scheduler tell a deadlock (every task waits, nothing pending) from a wait.
  virtual bool pending() const = 0;
};

/// Opt-in crash report: from this call on, a task that overflows its stack
/// (touches its guard page) ends the process with a message that names the
/// overflow instead of a bare segmentation fault. It installs a
/// process-wide SIGSEGV handler (which hands any other fault to the handler
/// installed before it) and an alternate signal stack in each thread that
/// runs a TaskPool, so a library user's own handlers are left alone unless
/// the program asks. The framework's benches and backends turn it on.
void EnableStackOverflowReports();

/// Stack size and task limit of a TaskPool.
struct TaskPoolOptions {
  size_t stack_size = 64 * 1024;  ///< bytes, rounded up to pages; plus a guard page
  int max_tasks = kMaxTasksPerThread - 1;  ///< tasks alive at once
};

/// The calling thread's scheduler: its tasks and the pollers between rounds.
class TaskPool {
 public:
  /// A pool for the calling thread.
  explicit TaskPool(const TaskPoolOptions& options = {});
  /// Frees the task stacks. Precondition: run() returned (or was never called).
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  /// Adds a task that starts at the next round. Precondition: called on the
  /// pool's thread. Throws smart::Error when max_tasks tasks are alive.
  void spawn(std::function<void()> fn);

  /// Runs rounds until every task has finished. Each round resumes the tasks
  /// that are runnable, in FIFO order, then calls every attached poller.
  /// An exception escaping a task stops the pool and is rethrown here.
  void run();

  /// Adds `poller` to the work done between rounds (once; later calls with the
  /// same poller are ignored).
  void attach_poller(CompletionPoller* poller);

  /// Tasks spawned and not finished.
  int alive_tasks() const;
  /// Unique for the life of the process (addresses can be reused).
  uint64_t serial() const { return serial_; }
  /// Pool run by the calling thread right now, or nullptr.
  static TaskPool* Current();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  uint64_t serial_;
};

namespace this_task {
/// Id of the running task, 1..max_tasks; 0 outside a task.
int id();
/// True when called inside a task of a running pool.
bool in_task();
/// Throws smart::Error naming `what` when called inside a task. For calls
/// that make blocking round trips of their own (opening a store): inside a
/// task they would poll completions that belong to the thread's tasks.
void require_outside(const char* what);
/// Moves the running task to the back of the run queue.
void yield();
/// Parks the running task until notify(id) is called for it. A notification
/// that arrives while the task is not waiting is remembered, so callers wait
/// in a loop that re-checks their condition. Outside a task: returns at once.
void wait();
/// Makes task `task_id` of this thread runnable (no effect on id 0).
void notify(int task_id);
}  // namespace this_task

/// Reads the time-stamp counter (inline: hot paths stamp every retired
/// block and every backoff with it); CyclesPerNanosecond() is its rate.
inline uint64_t Cycles() { return __builtin_ia32_rdtsc(); }
/// TSC cycles per nanosecond, measured once per process.
double CyclesPerNanosecond();

}  // namespace smart
