#include <sched.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "smart/status.h"
#include "smart/task.h"

namespace smart {

namespace {

std::atomic<bool> g_thread_slots[kMaxThreads];

struct ThreadSlot {
  int id = -1;
  ~ThreadSlot() {
    if (id >= 0) g_thread_slots[id].store(false, std::memory_order_release);
  }
};
thread_local ThreadSlot tls_slot;

}  // namespace

int ThreadId() {
  if (tls_slot.id >= 0) return tls_slot.id;
  for (int i = 0; i < kMaxThreads; ++i) {
    bool expected = false;
    if (!g_thread_slots[i].load(std::memory_order_relaxed) &&
        g_thread_slots[i].compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      tls_slot.id = i;
      return i;
    }
  }
  throw Error("more than " + std::to_string(kMaxThreads) +
              " threads use the framework at once (thread ids are 8 bits in a work request id)");
}

bool BindCore(int core) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online <= 0 || core < 0) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core % online, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

double CyclesPerNanosecond() {
  static const double rate = [] {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto t1 = clock::now();
    const uint64_t c1 = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return ns > 0 ? static_cast<double>(c1 - c0) / ns : 1.0;
  }();
  return rate;
}

}  // namespace smart
