/// @file
/// Per-thread state: one T per thread that uses it, indexed by the
/// framework's dense thread id (ThreadId()), each on its own cache lines so
/// that threads never share a line. No lock on the data path.
///
/// get() builds the calling thread's T on first use (with `make`, on the
/// calling thread); a thread only ever touches its own T through get().
/// for_each() visits every T built so far; call it when the threads that use
/// them are quiet (e.g. to sum statistics after a run), since it reads other
/// threads' state.
///
/// Fast path: each thread remembers, per type T, the instance it called
/// get() on last and the T it got, so a thread that keeps using one instance
/// (the common case: one table, one tree per thread) gets its T with one
/// thread-local compare and no ThreadId() look-up. The remembered instance
/// is named by an id that no other instance ever gets, not by its address:
/// an instance built where a destroyed one was is a different instance, and
/// its threads start from the slow path instead of reaching the old T. A
/// thread that alternates between instances takes the slow path (ThreadId()
/// and the slot) at each switch.
///
/// A T belongs to a thread id, not to a thread: when a thread exits, its id
/// (and so its T, with whatever it holds) goes to the next thread that asks
/// for an id. That suits state meant to be reused, such as queue pairs,
/// buffers and caches; state that must start fresh per thread needs a reset.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "smart/common.h"
#include "smart/task.h"

namespace smart {

/// Adds every counter of `more` into `*total`: for statistics kept per
/// thread (in a PerThread) and summed when asked for. `Counters` is a
/// struct whose every member is a uint64_t counter.
template <typename Counters>
void AddCounters(Counters* total, const Counters& more) {
  static_assert(std::is_trivially_copyable_v<Counters> && std::is_standard_layout_v<Counters>,
                "AddCounters: a plain struct of counters");
  static_assert(sizeof(Counters) % sizeof(uint64_t) == 0 && alignof(Counters) == alignof(uint64_t),
                "AddCounters: every member a uint64_t");
  constexpr size_t kCount = sizeof(Counters) / sizeof(uint64_t);
  uint64_t sum[kCount], add[kCount];
  std::memcpy(sum, total, sizeof(sum));
  std::memcpy(add, &more, sizeof(add));
  for (size_t i = 0; i < kCount; ++i) sum[i] += add[i];
  std::memcpy(total, sum, sizeof(sum));
}

/// One T per thread (see the file's description). T may be incomplete where
/// a PerThread<T> member is declared; it must be complete where the
/// PerThread is built, used and destroyed.
template <typename T>
class PerThread {
 public:
  /// Builds the calling thread's T on its first get(). A lambda capturing
  /// the owner can build T from the owner's configuration.
  using Factory = std::function<std::unique_ptr<T>()>;

  /// `make` builds each thread's T on its first get().
  explicit PerThread(Factory make = [] { return std::make_unique<T>(); })
      : make_(std::move(make)),
        slots_(new Slot[kMaxThreads]),
        id_(next_id_.fetch_add(1, std::memory_order_relaxed)) {}
  /// Destroys every T built.
  ~PerThread() {
    for (int i = 0; i < kMaxThreads; ++i) delete slots_[i].value.load(std::memory_order_relaxed);
  }
  PerThread(const PerThread&) = delete;
  PerThread& operator=(const PerThread&) = delete;

  /// The calling thread's T. Throws smart::Error when more than kMaxThreads
  /// threads hold a thread id (ThreadId()), or when the factory returns
  /// nothing.
  T& get() {
    Last& last = last_;
    if (__builtin_expect(last.instance == id_, 1)) return *last.value;
    return get_slow();
  }

  /// Calls `fn(T&)` on every T built so far (threads quiet).
  template <typename Fn>
  void for_each(Fn&& fn) {
    for (int i = 0; i < kMaxThreads; ++i) {
      if (T* value = slots_[i].value.load(std::memory_order_acquire)) fn(*value);
    }
  }

  /// Calls `fn(const T&)` on every T built so far (threads quiet).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (int i = 0; i < kMaxThreads; ++i) {
      if (const T* value = slots_[i].value.load(std::memory_order_acquire)) fn(*value);
    }
  }

  /// The sum of `fn(const T&)` over every T built so far (threads quiet):
  /// of numbers, or of structs of counters (AddCounters).
  template <typename Fn>
  auto sum_of(Fn&& fn) const {
    using Sum = std::decay_t<decltype(fn(std::declval<const T&>()))>;
    Sum total{};
    for_each([&](const T& value) {
      if constexpr (std::is_arithmetic_v<Sum>) {
        total += fn(value);
      } else {
        AddCounters(&total, fn(value));
      }
    });
    return total;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<T*> value{nullptr};
  };
  // The instance this thread called get() on last (0: none) and its T.
  struct Last {
    uint64_t instance = 0;
    T* value = nullptr;
  };

  // Out of line, so that get() stays small enough to inline into every
  // caller's data path.
  [[gnu::noinline]] T& get_slow() {
    Slot& slot = slots_[ThreadId()];
    T* value = slot.value.load(std::memory_order_acquire);
    if (value == nullptr) value = build(slot);
    Last& last = last_;
    last.instance = id_;
    last.value = value;
    return *value;
  }

  T* build(Slot& slot) {
    std::unique_ptr<T> made = make_();
    if (!made) throw Error("PerThread: the factory returned nothing");
    T* value = made.release();
    // Release: for_each on another thread (after the threads are quiet)
    // sees the T fully built.
    slot.value.store(value, std::memory_order_release);
    return value;
  }

  // Ids start at 1 and are never reused (64 bits do not wrap).
  inline static std::atomic<uint64_t> next_id_{1};
  // Constant-initialized and trivially destroyed: read without a TLS guard.
  inline static thread_local Last last_;

  Factory make_;
  std::unique_ptr<Slot[]> slots_;
  const uint64_t id_;
};

}  // namespace smart
