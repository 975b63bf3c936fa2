// The scheduler's internals that only smart/task uses: spawning, stacks and
// errors. The switching core, which the framework's hot paths inline, is in
// task_switch.h.
#pragma once

#include <exception>
#include <memory>
#include <vector>

#include "smart/task.h"
#include "smart/task/task_hooks.h"

namespace smart {

struct StackCache;

// A pool's whole state: the switching core (task_switch.h) and what only
// spawning and running need.
struct TaskPool::Impl : SwitchCore {
  TaskPoolOptions options;
  std::unique_ptr<StackCache> stacks;
  std::vector<int> free_ids;
  std::exception_ptr error;
  int alive = 0;
  bool running = false;
};

namespace internal {

using task_hooks::detail::current_pool;
using task_hooks::detail::current_task_id;
using task_hooks::detail::current_core;

}  // namespace internal

}  // namespace smart
