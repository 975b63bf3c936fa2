#include "smart/task/stack_guard.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "smart/task.h"

namespace smart {

namespace {

constexpr int kMaxGuards = kMaxThreads * kMaxTasksPerThread;

struct GuardEntry {
  std::atomic<uintptr_t> base{0};
  size_t guard_size = 0;
  size_t stack_size = 0;
};

GuardEntry g_guards[kMaxGuards];
std::atomic<int> g_guard_high{0};
struct sigaction g_previous_action;
std::once_flag g_install_once;

void OnSegv(int sig, siginfo_t* info, void* ucontext) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const int high = g_guard_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    const uintptr_t base = g_guards[i].base.load(std::memory_order_acquire);
    if (base != 0 && addr >= base && addr < base + g_guards[i].guard_size) {
      char buf[200];
      const int n = snprintf(buf, sizeof(buf),
                             "smart: coroutine stack overflow in task %d (stack of %zu bytes): "
                             "raise TaskPoolOptions::stack_size\n",
                             this_task::id(), g_guards[i].stack_size);
      if (n > 0) {
        ssize_t ignored = write(STDERR_FILENO, buf, static_cast<size_t>(n));
        (void)ignored;
      }
      signal(SIGSEGV, SIG_DFL);
      return;  // the access faults again and the process dies with SIGSEGV
    }
  }
  // Not ours: hand over to whatever was installed before.
  if (g_previous_action.sa_flags & SA_SIGINFO) {
    if (g_previous_action.sa_sigaction != nullptr) {
      g_previous_action.sa_sigaction(sig, info, ucontext);
      return;
    }
  } else if (g_previous_action.sa_handler != SIG_DFL && g_previous_action.sa_handler != SIG_IGN) {
    g_previous_action.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}

struct AltStack {
  void* memory = nullptr;
  ~AltStack() {
    if (memory == nullptr) return;
    stack_t disable{};
    disable.ss_flags = SS_DISABLE;
    sigaltstack(&disable, nullptr);
    free(memory);
  }
};
thread_local AltStack tls_alt_stack;

}  // namespace

void RegisterGuardPage(void* guard, size_t guard_size, size_t stack_size) {
  for (int i = 0; i < kMaxGuards; ++i) {
    uintptr_t expected = 0;
    if (g_guards[i].base.load(std::memory_order_relaxed) == 0) {
      g_guards[i].guard_size = guard_size;
      g_guards[i].stack_size = stack_size;
      if (g_guards[i].base.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(guard))) {
        int high = g_guard_high.load();
        while (high < i + 1 && !g_guard_high.compare_exchange_weak(high, i + 1)) {
        }
        return;
      }
    }
  }
  // Registry full: the guard page still stops the overflow, only the message
  // is lost.
}

void UnregisterGuardPage(void* guard) {
  const int high = g_guard_high.load();
  for (int i = 0; i < high; ++i) {
    if (g_guards[i].base.load() == reinterpret_cast<uintptr_t>(guard)) {
      g_guards[i].base.store(0);
      return;
    }
  }
}

void EnsureAltStackForThisThread() {
  std::call_once(g_install_once, [] {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_action);
  });
  if (tls_alt_stack.memory != nullptr) return;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // one exists
  const size_t size = 64 * 1024;
  tls_alt_stack.memory = malloc(size);
  if (tls_alt_stack.memory == nullptr) return;
  stack_t alt{};
  alt.ss_sp = tls_alt_stack.memory;
  alt.ss_size = size;
  alt.ss_flags = 0;
  sigaltstack(&alt, nullptr);
}

}  // namespace smart
