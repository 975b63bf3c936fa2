// The scheduler as the framework's hot paths see it (the initiator's post
// and completion paths): the calling task's id, and wait and notify for a
// caller known to be on the pool's thread. They are inline on the switching
// core (task_switch.h) so that the switch happens in the caller's frame; the
// rest of the scheduler stays in task_internal.h, which only smart/task
// includes.
#pragma once

#include "smart/task.h"
#include "smart/task/task_switch.h"

namespace smart::task_hooks {

// Id of the running task (0: the thread's own context).
inline int CurrentTaskId() { return detail::current_task_id; }
// The pool running on this thread, or nullptr.
inline TaskPool* CurrentPool() { return detail::current_pool; }

// this_task::wait() for a caller known to run inside a task.
inline void WaitInTask() {
  SwitchCore* core = detail::current_core;
  Task& task = core->tasks[detail::current_task_id];
  if (task.notified) {
    task.notified = false;
    return;
  }
  task.state = TaskState::kBlocked;
  core->schedule_from_task();
  task.notified = false;
}

// this_task::notify() for a caller on the pool's thread (task or poller).
inline void Notify(int task_id) {
  SwitchCore* core = detail::current_core;
  if (task_id <= 0 || core == nullptr || task_id >= core->task_limit) return;
  Task& task = core->tasks[task_id];
  if (task.state == TaskState::kBlocked) {
    task.state = TaskState::kRunnable;
    core->run_queue.push(task_id);
  } else if (task.state != TaskState::kFree) {
    task.notified = true;
  }
}

}  // namespace smart::task_hooks
