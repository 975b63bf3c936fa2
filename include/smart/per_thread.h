/// @file
/// Per-thread state: one T per thread that uses it, indexed by the
/// framework's dense thread id (ThreadId()), each on its own cache lines so
/// that threads never share a line. The data path reaches its T with one
/// thread-id look-up and no lock.
///
/// get() builds the calling thread's T on first use (with `make`); a thread
/// only ever touches its own T through get(). for_each() visits every T built
/// so far; call it when the threads that use them are quiet (e.g. to sum
/// statistics after a run), since it reads other threads' state.
///
/// A T belongs to a thread id, not to a thread: when a thread exits, its id
/// (and so its T, with whatever it holds) goes to the next thread that asks
/// for an id. That suits state meant to be reused, such as queue pairs,
/// buffers and caches; state that must start fresh per thread needs a reset.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "smart/common.h"
#include "smart/task.h"

namespace smart {

template <typename T>
/// One T per thread (see the file's description).
class PerThread {
 public:
  using Factory = std::function<std::unique_ptr<T>()>;  ///< builds a thread's T

  /// `make` builds each thread's T on its first get().
  explicit PerThread(Factory make = [] { return std::make_unique<T>(); })
      : make_(std::move(make)), slots_(new Slot[kMaxThreads]) {}
  /// Destroys every T built.
  ~PerThread() {
    for (int i = 0; i < kMaxThreads; ++i) delete slots_[i].value.load(std::memory_order_relaxed);
  }
  PerThread(const PerThread&) = delete;
  PerThread& operator=(const PerThread&) = delete;

  /// The calling thread's T. Throws smart::Error when more than kMaxThreads
  /// threads hold a thread id (ThreadId()).
  T& get() {
    Slot& slot = slots_[ThreadId()];
    T* value = slot.value.load(std::memory_order_acquire);
    if (__builtin_expect(value == nullptr, 0)) value = build(slot);
    return *value;
  }

  /// Calls `fn` on every T built so far (threads quiet).
  void for_each(const std::function<void(T&)>& fn) {
    for (int i = 0; i < kMaxThreads; ++i) {
      if (T* value = slots_[i].value.load(std::memory_order_acquire)) fn(*value);
    }
  }

 private:
  struct alignas(64) Slot {
    std::atomic<T*> value{nullptr};
  };

  T* build(Slot& slot) {
    std::unique_ptr<T> made = make_();
    if (!made) throw Error("PerThread: the factory returned nothing");
    T* value = made.release();
    slot.value.store(value, std::memory_order_release);
    return value;
  }

  Factory make_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace smart
