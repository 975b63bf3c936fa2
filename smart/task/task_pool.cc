// Cooperative scheduler on Boost.Context fibers with guard-paged stacks.
// Tasks switch directly to one another (see TaskPool::Impl); the thread's own
// context runs the pollers only while no task is runnable.
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "smart/logging.h"
#include "smart/status.h"
#include "smart/task.h"
#include "smart/task/stack_guard.h"
#include "smart/task/task_internal.h"

namespace smart {

namespace ctx = boost::context;

// Empty scheduler rounds in a row after which a thread yields its core
// (TaskPool::run): tens of microseconds of polling.
constexpr uint32_t kYieldAfterEmptyRounds = 512;

namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

// Stacks with a PROT_NONE guard page below them, recycled through a cache
// owned by the pool so that spawning a task rarely calls mmap.
struct StackCache {
  size_t usable = 0;  // bytes above the guard page
  uint32_t next_color = 0;
  std::vector<void*> free_bases;
  std::vector<void*> all_bases;  // for the overflow handler and cleanup

  ~StackCache() {
    for (void* base : all_bases) munmap(base, usable + PageSize());
  }
};

namespace {

// Stack tops are spread over this many offsets of kStackColorBytes (one
// 4 KiB page in all).
constexpr uint32_t kStackColors = 8;
constexpr size_t kStackColorBytes = 512;

class GuardedStackAllocator {
 public:
  GuardedStackAllocator(StackCache* cache, [[maybe_unused]] fiber_sanitizer::FiberState* task) : cache_(cache) {
#if defined(SMART_ASAN)
    task_ = task;
#endif
  }

  ctx::stack_context allocate() {
    const size_t total = cache_->usable + PageSize();
    void* base;
    if (!cache_->free_bases.empty()) {
      base = cache_->free_bases.back();
      cache_->free_bases.pop_back();
    } else {
      base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      if (mprotect(base, PageSize(), PROT_NONE) != 0) {
        munmap(base, total);
        throw std::bad_alloc();
      }
      cache_->all_bases.push_back(base);
      RegisterGuardPage(base, PageSize(), cache_->usable);
    }
#if defined(SMART_ASAN)
    fiber_sanitizer::SetStack(task_, static_cast<char*>(base) + PageSize(), cache_->usable);
#endif
    // Every stack is page-aligned, so without an offset the tasks' hot
    // frames (the same call chain at the same depth) all fall in the same
    // few sets of a 4 KiB-indexed L1 cache and evict each other at every
    // switch. Each stack's top moves down by its own multiple of 512 bytes.
    const size_t color = (cache_->next_color++ % kStackColors) * kStackColorBytes;
    ctx::stack_context sctx;
    sctx.size = total - color;
    sctx.sp = static_cast<char*>(base) + total - color;
    return sctx;
  }

  void deallocate(ctx::stack_context& sctx) noexcept {
    cache_->free_bases.push_back(static_cast<char*>(sctx.sp) - sctx.size);
  }

 private:
  StackCache* cache_;
#if defined(SMART_ASAN)
  fiber_sanitizer::FiberState* task_;  // where ASan learns the stack's bounds
#endif
};

// Destroys an unfinished task's fiber: Boost.Context unwinds it on its own
// stack first (its destructors run).
void UnwindTask(Task& task) {
  if (task.fiber) fiber_sanitizer::UnwindOnItsStack(task.san, [&task] { task.fiber = ctx::fiber(); });
  fiber_sanitizer::DestroyTaskFiber(&task.san);
}

}  // namespace

namespace task_hooks::detail {
constinit thread_local SMART_HOT_TLS int current_task_id = 0;
constinit thread_local SMART_HOT_TLS TaskPool* current_pool = nullptr;
constinit thread_local SMART_HOT_TLS SwitchCore* current_core = nullptr;
}  // namespace task_hooks::detail

using internal::current_core;
using internal::current_pool;
using internal::current_task_id;

// Every SwitchCore is the base of a pool's Impl.
void SwitchCore::reclaim(int id) {
  auto* im = static_cast<TaskPool::Impl*>(this);
  Task& task = tasks[id];
  task.state = TaskState::kFree;
  task.notified = false;
  fiber_sanitizer::DestroyTaskFiber(&task.san);
  im->free_ids.push_back(id);
  --im->alive;
}

namespace {
std::atomic<uint64_t> g_pool_serial{1};
}

TaskPool::TaskPool(const TaskPoolOptions& options)
    : impl_(std::make_unique<Impl>()), serial_(g_pool_serial.fetch_add(1)) {
  if (options.max_tasks < 1 || options.max_tasks > kMaxTasksPerThread - 1) {
    throw Error("TaskPool: max_tasks must be within 1.." + std::to_string(kMaxTasksPerThread - 1) +
                " (task ids are 8 bits and 0 is the thread itself), got " + std::to_string(options.max_tasks));
  }
  if (options.stack_size < 16 * 1024) {
    throw Error("TaskPool: stack_size must be at least 16 KiB, got " + std::to_string(options.stack_size));
  }
  impl_->options = options;
  const size_t page = PageSize();
  impl_->stacks = std::make_unique<StackCache>();
  size_t stack_size = options.stack_size;
#if defined(SMART_ASAN)
  stack_size *= 4;  // ASan's redzones make frames up to a few times larger
#endif
  impl_->stacks->usable = (stack_size + page - 1) / page * page;
  impl_->tasks.resize(options.max_tasks + 1);
  impl_->task_limit = static_cast<int>(impl_->tasks.size());
  for (int id = options.max_tasks; id >= 1; --id) impl_->free_ids.push_back(id);
  impl_->run_queue.init(options.max_tasks + 1);
}

TaskPool::~TaskPool() {
  // Unfinished fibers are unwound here (their destructors run), before the
  // stacks they live on are unmapped.
  impl_->tasks[0].fiber = ctx::fiber();
  for (int id = 1; id < static_cast<int>(impl_->tasks.size()); ++id) UnwindTask(impl_->tasks[id]);
  for (void* base : impl_->stacks->all_bases) UnregisterGuardPage(base);
}

void TaskPool::spawn(std::function<void()> fn) {
  Impl& im = *impl_;
  if (im.free_ids.empty()) {
    throw Error("TaskPool: cannot spawn more than " + std::to_string(im.options.max_tasks) +
                " tasks in one thread (raise TaskPoolOptions::max_tasks, at most " +
                std::to_string(kMaxTasksPerThread - 1) + ")");
  }
  const int id = im.free_ids.back();
  im.free_ids.pop_back();
  Task& task = im.tasks[id];
  task.fn = std::move(fn);
  task.notified = false;
  Impl* impl = &im;
  auto entry = [impl, id](ctx::fiber&& from) {
    impl->after_switch(nullptr, id);
    impl->take_over(std::move(from));
    Task& self = impl->tasks[id];
    try {
      self.fn();
    } catch (const ctx::detail::forced_unwind&) {
      throw;
    } catch (...) {
      if (!impl->error) impl->error = std::current_exception();
    }
    self.fn = nullptr;
    self.state = TaskState::kFinished;
    // Hand over to the next runnable task, or to the thread's context when
    // none is (or on error).
    int next = 0;
    if (!impl->error && !impl->run_queue.empty()) next = impl->run_queue.pop();
    impl->switching_from = id;
    internal::current_task_id = next;
    impl->tasks[next].state = TaskState::kRunning;
    fiber_sanitizer::BeforeFinalSwitch(impl->tasks[next].san);
    return std::move(impl->tasks[next].fiber);
  };
  fiber_sanitizer::CreateTaskFiber(&task.san);
  fiber_sanitizer::CreateOnItsStack(task.san, [&] {
    task.fiber = ctx::fiber(std::allocator_arg, GuardedStackAllocator(im.stacks.get(), &task.san), std::move(entry));
  });
  task.state = TaskState::kRunnable;
  im.run_queue.push(id);
  ++im.alive;
}

void TaskPool::attach_poller(CompletionPoller* poller) {
  for (CompletionPoller* p : impl_->pollers) {
    if (p == poller) return;
  }
  impl_->pollers.push_back(poller);
}

int TaskPool::alive_tasks() const { return impl_->alive; }

TaskPool* TaskPool::Current() { return current_pool; }

namespace {
std::atomic<bool> g_stack_overflow_reports{false};
}  // namespace

void EnableStackOverflowReports() {
  g_stack_overflow_reports.store(true);
  EnsureAltStackForThisThread();
}

void TaskPool::run() {
  Impl& im = *impl_;
  if (im.running) throw Error("TaskPool::run: the pool is already running");
  if (current_pool != nullptr) throw Error("TaskPool::run: another pool is running on this thread");
  if (g_stack_overflow_reports.load(std::memory_order_relaxed)) EnsureAltStackForThisThread();
  im.running = true;
  current_pool = this;
  current_core = &im;
  current_task_id = 0;
  fiber_sanitizer::SetThreadContext(&im.tasks[0].san);
  uint64_t idle_rounds = 0;
  uint32_t empty_rounds = 0;
  while (im.alive > 0 && !im.error) {
    if (!im.run_queue.empty()) {
      im.switch_to(im.run_queue.pop());  // returns when a task hands back
      continue;
    }
    bool pending = false;
    const int events = im.poll_all(&pending);
    if (im.run_queue.empty() && events == 0 && im.alive > 0) {
      // Every task waits; unless a poller still expects completions nothing
      // can ever wake them.
      if (!pending && ++idle_rounds > 1000) {
        im.error = std::make_exception_ptr(
            Error("TaskPool: deadlock: " + std::to_string(im.alive) +
                  " task(s) wait and no poller has work in flight that could wake them"));
      }
      // A thread that found nothing to do for this many rounds in a row
      // waits on something slow, often another thread (a lock it holds):
      // it offers its core, so that with more threads than cores the one
      // it waits for is not kept off a core by this one's polling.
      if (++empty_rounds >= kYieldAfterEmptyRounds) {
        empty_rounds = 0;
        sched_yield();
      }
    } else {
      idle_rounds = 0;
      empty_rounds = 0;
    }
  }
  // A last call: requests that a finished task left waiting for a doorbell
  // (an initiator's coalesced posts) go out.
  im.poll_all(nullptr);
  current_pool = nullptr;
  current_core = nullptr;
  im.running = false;
  if (im.error) {
    std::exception_ptr e = std::exchange(im.error, nullptr);
    // Remaining tasks are unwound so that the pool can be destroyed or reused.
    for (int id = 1; id < static_cast<int>(im.tasks.size()); ++id) {
      Task& task = im.tasks[id];
      if (task.state != TaskState::kFree) {
        UnwindTask(task);
        task.fn = nullptr;
        task.state = TaskState::kFree;
        task.notified = false;
        im.free_ids.push_back(id);
      }
    }
    im.alive = 0;
    im.run_queue.init(im.options.max_tasks + 1);
    std::rethrow_exception(e);
  }
}

namespace this_task {

int id() { return current_task_id; }

bool in_task() { return current_task_id != 0; }

void require_outside(const char* what) {
  if (current_task_id == 0) return;
  throw Error(std::string(what) + ": call outside a task (it makes blocking round trips; this is task " +
              std::to_string(current_task_id) + " of a running pool)");
}

void yield() {
  if (current_task_id == 0) {
    sched_yield();
    return;
  }
  SwitchCore* core = current_core;
  core->tasks[current_task_id].state = TaskState::kRunnable;
  core->run_queue.push(current_task_id);
  core->poll_all(nullptr);  // yield loops must let completions in
  core->switch_to(core->run_queue.pop());
}

void wait() {
  if (current_task_id == 0) return;
  task_hooks::WaitInTask();
}

void notify(int task_id) { task_hooks::Notify(task_id); }

}  // namespace this_task

}  // namespace smart
