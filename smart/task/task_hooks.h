// The scheduler as the framework's hot paths see it (the initiator's post
// and completion paths): the calling task's id, and wait and notify for a
// caller known to be on the pool's thread. The scheduler's internals stay in
// task_internal.h, which only smart/task includes.
#pragma once

#include "smart/task.h"

namespace smart::task_hooks {

namespace detail {
extern thread_local constinit int current_task_id;
extern thread_local constinit TaskPool* current_pool;
}  // namespace detail

// Id of the running task (0: the thread's own context).
inline int CurrentTaskId() { return detail::current_task_id; }
// The pool running on this thread, or nullptr.
inline TaskPool* CurrentPool() { return detail::current_pool; }
// this_task::wait() for a caller known to run inside a task.
void WaitInTask();
// this_task::notify() for a caller on the pool's thread (task or poller).
void Notify(int task_id);

}  // namespace smart::task_hooks
