// Tells AddressSanitizer and ThreadSanitizer about the scheduler's stack
// switches. Without it ASan takes a task's stack for a corrupt thread stack
// (false reports after an exception, stale poison on a recycled stack) and
// TSan keeps one shadow call stack for every task of a thread. Everything here
// compiles to nothing unless the translation unit is built with one of the
// two sanitizers, so the Release switch path is unchanged.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define SMART_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMART_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SMART_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SMART_TSAN 1
#endif
#endif

#if defined(SMART_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(SMART_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace smart::fiber_sanitizer {

// What the sanitizers know of one context (a task or the thread's own).
struct FiberState {
#if defined(SMART_ASAN)
  const void* stack_bottom = nullptr;  // lowest usable byte of the stack
  size_t stack_size = 0;
#endif
#if defined(SMART_TSAN)
  void* tsan_fiber = nullptr;
#endif
};

// Protocol, for a switch from context A to context B:
//   A: BeforeSwitch(&save, B)     ... the jump ...     A (later): AfterSwitch(save, &from)
// where `from` is the state of whichever context switched back to A. A context
// that runs for the first time calls AfterSwitch(nullptr, &from) on entry; a
// context that ends calls BeforeFinalSwitch(B) (its fake stack is freed).
// TSan is told at the switch, ASan around it (it needs the new stack's bounds
// before and the old one's after).

inline void BeforeSwitch([[maybe_unused]] void** asan_save, [[maybe_unused]] const FiberState& to) {
#if defined(SMART_ASAN)
  __sanitizer_start_switch_fiber(asan_save, to.stack_bottom, to.stack_size);
#endif
#if defined(SMART_TSAN)
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
}

inline void AfterSwitch([[maybe_unused]] void* asan_save, [[maybe_unused]] FiberState* from) {
#if defined(SMART_ASAN)
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(asan_save, &bottom, &size);
  if (from != nullptr) {
    from->stack_bottom = bottom;
    from->stack_size = size;
  }
#endif
}

// The ending context's last switch. TSan's identity is handed over by the
// context that takes the CPU (TakeOverFromFinished), because code of the
// ending task still runs (and returns from its frames) after this call.
inline void BeforeFinalSwitch([[maybe_unused]] const FiberState& to) {
#if defined(SMART_ASAN)
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom, to.stack_size);
#endif
}

// Called by a context that got the CPU from one that ended.
inline void TakeOverFromFinished([[maybe_unused]] FiberState& self) {
#if defined(SMART_TSAN)
  __tsan_switch_to_fiber(self.tsan_fiber, 0);
#endif
}

// A new task's stack (usable part).
inline void SetStack([[maybe_unused]] FiberState* state, [[maybe_unused]] void* bottom,
                     [[maybe_unused]] size_t size) {
#if defined(SMART_ASAN)
  // A stack handed out again may hold the poison of frames that were unwound
  // without ASan seeing it.
  __asan_unpoison_memory_region(bottom, size);
  state->stack_bottom = bottom;
  state->stack_size = size;
#endif
}

// The thread's own context, before it first switches to a task.
inline void SetThreadContext([[maybe_unused]] FiberState* state) {
#if defined(SMART_TSAN)
  state->tsan_fiber = __tsan_get_current_fiber();
#endif
}

inline void CreateTaskFiber([[maybe_unused]] FiberState* state) {
#if defined(SMART_TSAN)
  if (state->tsan_fiber == nullptr) state->tsan_fiber = __tsan_create_fiber(0);
#endif
}

// After the task's context is gone (never while it runs).
inline void DestroyTaskFiber([[maybe_unused]] FiberState* state) {
#if defined(SMART_TSAN)
  if (state->tsan_fiber != nullptr) __tsan_destroy_fiber(state->tsan_fiber);
  state->tsan_fiber = nullptr;
#endif
}

// Creating a task's fiber already runs its entry function's first lines on
// the new stack (and comes back); `create` does that. TSan is told, so that
// the entry's frame lands on the task's shadow stack, not the creator's
// (where one stale frame per spawn would pile up).
template <typename Create>
inline void CreateOnItsStack([[maybe_unused]] const FiberState& task, Create&& create) {
#if defined(SMART_TSAN)
  void* self = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(task.tsan_fiber, 0);
#endif
  create();
#if defined(SMART_TSAN)
  __tsan_switch_to_fiber(self, 0);
#endif
}

// Destroying an unfinished task's fiber switches to its stack to unwind it
// and comes back; `destroy` does that. Both sanitizers are told of the round
// trip.
template <typename Destroy>
inline void UnwindOnItsStack([[maybe_unused]] const FiberState& task, Destroy&& destroy) {
#if defined(SMART_TSAN)
  void* self = __tsan_get_current_fiber();
  if (task.tsan_fiber != nullptr) __tsan_switch_to_fiber(task.tsan_fiber, 0);
#endif
#if defined(SMART_ASAN)
  void* save = nullptr;
  const bool known = task.stack_bottom != nullptr;
  if (known) __sanitizer_start_switch_fiber(&save, task.stack_bottom, task.stack_size);
#endif
  destroy();
#if defined(SMART_ASAN)
  if (known) {
    // ASan now takes the task's stack for the current one; the bounds it
    // returns are ours, so switch "back" to them.
    const void* bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(save, &bottom, &size);
    void* again = nullptr;
    __sanitizer_start_switch_fiber(&again, bottom, size);
    __sanitizer_finish_switch_fiber(again, nullptr, nullptr);
  }
#endif
#if defined(SMART_TSAN)
  __tsan_switch_to_fiber(self, 0);
#endif
}

}  // namespace smart::fiber_sanitizer
