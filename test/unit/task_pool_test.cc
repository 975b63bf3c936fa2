#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/context/detail/fcontext.hpp>

#include "smart/status.h"
#include "smart/task.h"

#if SMART_RETURNING_SWITCH
extern "C" void smart_task_jump();
#endif

namespace smart {
namespace {

TEST(TaskPool, RunsEveryTaskToCompletion) {
  TaskPool pool;
  int done = 0;
  for (int i = 0; i < 10; ++i) pool.spawn([&] { ++done; });
  EXPECT_EQ(pool.alive_tasks(), 10);
  pool.run();
  EXPECT_EQ(done, 10);
  EXPECT_EQ(pool.alive_tasks(), 0);
}

TEST(TaskPool, TaskIdsAreDistinctAndNonZero) {
  TaskPool pool;
  std::vector<int> ids;
  for (int i = 0; i < 5; ++i) pool.spawn([&] { ids.push_back(this_task::id()); });
  EXPECT_EQ(this_task::id(), 0);
  pool.run();
  ASSERT_EQ(ids.size(), 5u);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
  EXPECT_GT(ids.front(), 0);
}

TEST(TaskPool, YieldInterleavesTasksInFifoOrder) {
  TaskPool pool;
  std::vector<int> order;
  for (int t = 0; t < 3; ++t) {
    pool.spawn([&, t] {
      for (int i = 0; i < 3; ++i) {
        order.push_back(t);
        this_task::yield();
      }
    });
  }
  pool.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
}

TEST(TaskPool, WaitBlocksUntilNotified) {
  TaskPool pool;
  std::vector<std::string> log;
  int waiter = 0;
  pool.spawn([&] {
    waiter = this_task::id();
    log.push_back("wait");
    this_task::wait();
    log.push_back("woken");
  });
  pool.spawn([&] {
    this_task::yield();
    this_task::yield();
    log.push_back("notify");
    this_task::notify(waiter);
  });
  pool.run();
  EXPECT_EQ(log, (std::vector<std::string>{"wait", "notify", "woken"}));
}

TEST(TaskPool, NotificationBeforeWaitIsNotLost) {
  TaskPool pool;
  bool finished = false;
  pool.spawn([&] {
    this_task::notify(this_task::id());  // arrives while running
    this_task::wait();                   // returns at once
    finished = true;
  });
  pool.run();
  EXPECT_TRUE(finished);
}

TEST(TaskPool, ExceptionInTaskIsRethrownByRun) {
  TaskPool pool;
  pool.spawn([] { throw std::runtime_error("boom"); });
  pool.spawn([] {
    for (;;) this_task::yield();  // never ends by itself: run() must unwind it
  });
  EXPECT_THROW(
      {
        try {
          pool.run();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "boom");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(pool.alive_tasks(), 0);
  // The pool is usable again.
  int done = 0;
  pool.spawn([&] { ++done; });
  pool.run();
  EXPECT_EQ(done, 1);
}

TEST(TaskPool, UnfinishedTasksAreUnwoundOnDestruction) {
  struct Flag {
    bool* destroyed;
    ~Flag() { *destroyed = true; }
  };
  bool destroyed = false;
  {
    TaskPool pool;
    pool.spawn([&] {
      Flag flag{&destroyed};
      throw std::runtime_error("stop");
    });
    pool.spawn([&] {
      Flag flag{&destroyed};
      for (;;) this_task::yield();
    });
    EXPECT_THROW(pool.run(), std::runtime_error);
  }
  EXPECT_TRUE(destroyed);
}

TEST(TaskPool, DeadlockIsReportedInsteadOfHanging) {
  TaskPool pool;
  pool.spawn([] { this_task::wait(); });
  try {
    pool.run();
    FAIL() << "expected a deadlock error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
}

TEST(TaskPool, TooManyTasksIsAClearError) {
  TaskPool pool(TaskPoolOptions{64 * 1024, 2});
  pool.spawn([] {});
  pool.spawn([] {});
  try {
    pool.spawn([] {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot spawn more than 2"), std::string::npos) << e.what();
  }
  pool.run();
}

TEST(TaskPool, RejectsOutOfRangeOptions) {
  EXPECT_THROW(TaskPool(TaskPoolOptions{64 * 1024, 0}), Error);
  EXPECT_THROW(TaskPool(TaskPoolOptions{64 * 1024, kMaxTasksPerThread}), Error);
  EXPECT_THROW(TaskPool(TaskPoolOptions{1024, 4}), Error);
}

TEST(TaskPool, ManyTasksEachCompleteAfterManySwitches) {
  TaskPool pool(TaskPoolOptions{32 * 1024, 200});
  uint64_t sum = 0;
  for (int t = 0; t < 200; ++t) {
    pool.spawn([&] {
      for (int i = 0; i < 100; ++i) {
        ++sum;
        this_task::yield();
      }
    });
  }
  pool.run();
  EXPECT_EQ(sum, 200u * 100u);
}

// Deep recursion on purpose: the guard page must turn the overflow into a
// message naming it.
int Recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  return depth > 1000000 ? frame[0] : Recurse(depth + 1) + frame[0];
}

TEST(TaskPoolDeathTest, StackOverflowIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EnableStackOverflowReports();
        TaskPool pool(TaskPoolOptions{16 * 1024, 1});
        pool.spawn([] { Recurse(0); });
        pool.run();
      },
      "coroutine stack overflow");
}

// Without EnableStackOverflowReports() the library takes no signal: the
// program's SIGSEGV disposition is what it was.
TEST(TaskPool, LeavesTheProcessSignalHandlersAloneUnlessAsked) {
  struct sigaction before {}, after {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &before), 0);
  {
    TaskPool pool;
    pool.spawn([] { this_task::yield(); });
    pool.run();
  }
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &after), 0);
  EXPECT_EQ(reinterpret_cast<void*>(after.sa_sigaction), reinterpret_cast<void*>(before.sa_sigaction))
      << "running a TaskPool installed a SIGSEGV handler";
}

// A poller that has work in flight and no event until `flag` is set or its
// deadline passes; then it wakes task `task`.
class FlagPoller : public CompletionPoller {
 public:
  FlagPoller(const std::atomic<bool>& flag, std::chrono::steady_clock::time_point deadline)
      : flag_(flag), deadline_(deadline) {}
  int task = 0;
  int poll() override {
    if (woken_ || (!flag_.load() && std::chrono::steady_clock::now() < deadline_)) return 0;
    woken_ = true;
    this_task::notify(task);
    return 1;
  }
  bool pending() const override { return !woken_; }

 private:
  const std::atomic<bool>& flag_;
  const std::chrono::steady_clock::time_point deadline_;
  bool woken_ = false;
};

// A thread whose tasks all wait on something slow offers its core: two
// real-time FIFO threads on one core (a FIFO thread keeps its core until it
// blocks or yields), the first polling for a flag that only the second
// sets. Without the offer the second never runs and the first gives up at
// its deadline.
TEST(TaskPool, AThreadWithNothingToRunOffersItsCoreToTheThreadItWaitsFor) {
  std::mutex mutex;
  std::condition_variable changed;
  bool setter_ready = false, waiter_polling = false, refused = false;
  std::atomic<bool> flag{false};
  bool seen = false;
  // Makes the calling thread FIFO on core 0; the OS may refuse (no
  // CAP_SYS_NICE), and then the test skips.
  auto real_time = [&] {
    sched_param fifo{};
    fifo.sched_priority = 1;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0 &&
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) == 0) {
      return true;
    }
    std::lock_guard<std::mutex> lock(mutex);
    refused = true;
    changed.notify_all();
    return false;
  };
  // The setter: real-time first, then blocked until the waiter polls.
  std::thread setter([&] {
    if (!real_time()) return;
    std::unique_lock<std::mutex> lock(mutex);
    setter_ready = true;
    changed.notify_all();
    changed.wait(lock, [&] { return waiter_polling; });
    flag = true;
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return setter_ready || refused; });
  }
  std::thread waiter([&] {
    if (!real_time()) return;
    TaskPool pool;
    FlagPoller poller(flag, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    pool.attach_poller(&poller);
    pool.spawn([&] {
      poller.task = this_task::id();
      {
        // Wakes the setter, which waits for this core.
        std::lock_guard<std::mutex> lock(mutex);
        waiter_polling = true;
        changed.notify_all();
      }
      while (poller.pending()) this_task::wait();
      seen = flag.load();
    });
    pool.run();
    std::lock_guard<std::mutex> lock(mutex);
    waiter_polling = true;  // the setter ends even if the waiter never polled
    changed.notify_all();
  });
  waiter.join();
  setter.join();
  if (refused) GTEST_SKIP() << "this process may not run real-time FIFO threads";
  EXPECT_TRUE(seen) << "the waiting thread kept its core; the thread it waited for never ran";
}

TEST(ThreadId, DenseAndReleasedWhenThreadsExit) {
  const int mine = ThreadId();
  EXPECT_EQ(ThreadId(), mine);  // stable
  int first = -1;
  std::thread([&] { first = ThreadId(); }).join();
  EXPECT_NE(first, mine);
  int second = -1;
  std::thread([&] { second = ThreadId(); }).join();
  EXPECT_EQ(second, first);  // the exited thread's id is reused
}

TEST(ThreadId, MoreThanTheLimitIsAClearError) {
  // Hold ids in many threads at once until one is refused.
  std::vector<std::thread> threads;
  std::atomic<bool> release{false};
  std::atomic<int> refused{0};
  std::atomic<int> started{0};
  std::string message;
  std::mutex mutex;
  for (int i = 0; i < kMaxThreads + 4; ++i) {
    threads.emplace_back([&] {
      try {
        ThreadId();
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mutex);
        message = e.what();
        refused.fetch_add(1);
      }
      started.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  while (started.load() < kMaxThreads + 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  release.store(true);
  for (auto& t : threads) t.join();
  EXPECT_GE(refused.load(), 4);
  EXPECT_NE(message.find("more than 256 threads"), std::string::npos) << message;
}

// Stacks are page-aligned; each task's top is offset within the page so
// that the tasks' frames, which run the same code at the same depth, do not
// all land in the same sets of the L1 cache.
TEST(TaskPool, TaskFramesSitAtDifferentOffsetsInTheirPages) {
  TaskPool pool(TaskPoolOptions{64 * 1024, 8});
  std::vector<uintptr_t> offsets;
  for (int i = 0; i < 8; ++i) {
    pool.spawn([&] { offsets.push_back(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) % 4096); });
  }
  pool.run();
  ASSERT_EQ(offsets.size(), 8u);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(std::unique(offsets.begin(), offsets.end()), offsets.end())
      << "two of eight tasks have their frames at the same offset in a page";
}

// With SMART_RETURNING_SWITCH the fibers' switch is the framework's own
// (smart/task/fcontext_jump_x86_64.S); every test above runs on it.
TEST(TaskPool, SwitchesThroughTheReturningJump) {
#if SMART_RETURNING_SWITCH
  // Read back through volatiles: a compiler may take two distinct functions
  // to have distinct addresses and fold the comparison.
  volatile uintptr_t boost_jump = reinterpret_cast<uintptr_t>(&boost::context::detail::jump_fcontext);
  volatile uintptr_t own_jump = reinterpret_cast<uintptr_t>(&smart_task_jump);
  const uintptr_t linked = boost_jump, ours = own_jump;
  EXPECT_EQ(linked, ours) << "Boost.Context's own jump_fcontext was linked";
#else
  GTEST_SKIP() << "built without SMART_RETURNING_SWITCH: Boost.Context's own switch";
#endif
}

}  // namespace
}  // namespace smart
