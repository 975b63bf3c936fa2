// integration_client: the compute-blade side of the multi-process tests. Each
// subcommand connects to a running memory blade, does its work with
// threads x coroutines, checks the outcome itself and exits 0 only when it
// holds. A failure prints what was expected and what was found.
//
//   integration_client setup-counter --server H:P --root R
//   integration_client counter --server H:P --root R --mode faa|cas -t N -c M -k K
//   integration_client check-counter --server H:P --root R --expect V
//   integration_client shadow --server H:P -t N -c M -k K [--first-region R]
//   integration_client bad-access --server H:P
//   integration_client hammer --server H:P -t N -c M   (until an error; for dead-peer tests)
//   integration_client lock-hold --server H:P --root R [--lease-ms L] [--scribble-root S]
//       takes the lock word in root entry R, says "holding", renews it until
//       killed (writing its pid into root S's counter before each renewal);
//       exits 3 with "lock lost" if another client took it over
//   integration_client lock-take --server H:P --root R [--lease-ms L] [--max-wait-ms W] [--expect took-over|free]
//       takes the lock, prints how long it waited and why it got it
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/status.h"
#include "smart/task.h"
#include "smart/throttle.h"

namespace {

using namespace smart;

struct Options {
  std::string server = "127.0.0.1:12345";
  int threads = 2;
  int coros = 4;
  uint64_t iterations = 1000;
  int root = 0;
  std::string mode = "faa";
  uint64_t expect = 0;
  uint64_t seed = 1;
  uint64_t first_region = 0;
  uint64_t lease_ms = 2000;
  int scribble_root = -1;  // lock-hold: the counter it writes its pid into before each renewal
  uint64_t max_wait_ms = 60000;
  std::string expect_lock = "took-over";
};

// Splits HOST:PORT; throws with the offending text.
void ParseServer(const std::string& server, std::string* host, int* port) {
  const size_t colon = server.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == server.size()) {
    throw Error("--server: expected HOST:PORT, got '" + server + "'");
  }
  *host = server.substr(0, colon);
  try {
    size_t used = 0;
    *port = std::stoi(server.substr(colon + 1), &used);
    if (used != server.size() - colon - 1 || *port < 1 || *port > 65535) throw std::invalid_argument("range");
  } catch (const std::exception&) {
    throw Error("--server: port must be a number in 1..65535, got '" + server.substr(colon + 1) + "'");
  }
}

// Collects the first failure of any task of any thread.
class FailureLog {
 public:
  void report(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_.empty()) first_ = what;
    failed_.store(true);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::string& first() const { return first_; }

 private:
  std::mutex mutex_;
  std::string first_;
  std::atomic<bool> failed_{false};
};

// Runs `body(thread, task)` on opts.threads threads with opts.coros tasks each.
template <typename Body>
void RunTasks(const Options& opts, Body body) {
  RunThreads(opts.threads, false, [&](int thread) {
    TaskPool pool(TaskPoolOptions{64 * 1024, opts.coros});
    for (int task = 0; task < opts.coros; ++task) pool.spawn([&, thread, task] { body(thread, task); });
    pool.run();
  });
}

struct Session {
  explicit Session(const Options& opts) : config(SmartConfig::Load()), initiator(config) {
    std::string host;
    int port = 0;
    ParseServer(opts.server, &host, &port);
    initiator.connect(0, host, port, opts.threads + 1);
  }
  SmartConfig config;
  Initiator initiator;
};

uint64_t* CacheWord(Initiator& initiator) {
  auto* p = static_cast<uint64_t*>(initiator.alloc_cache(64));
  if (p == nullptr) throw Error("initiator cache exhausted; raise initiator_cache_size");
  return p;
}

GlobalAddress CounterAddress(Initiator& initiator, int root) {
  uint64_t value = 0;
  Status s = initiator.get_root_entry(0, root, &value);
  if (!s.ok()) throw Error("get_root_entry(" + std::to_string(root) + "): " + s.ToString());
  if (value == 0) throw Error("root entry " + std::to_string(root) + " is empty: run setup-counter first");
  return GlobalAddress(value);
}

int SetupCounter(const Options& opts) {
  Session session(opts);
  GlobalAddress addr;
  Status s = session.initiator.alloc_memory(0, 8, &addr);
  if (!s.ok()) throw Error("alloc_memory: " + s.ToString());
  uint64_t* zero = CacheWord(session.initiator);
  *zero = 0;
  s = session.initiator.write(zero, addr, 8);
  if (!s.ok()) throw Error("write: " + s.ToString());
  s = session.initiator.set_root_entry(0, opts.root, addr.raw);
  if (!s.ok()) throw Error("set_root_entry: " + s.ToString());
  printf("counter at %s in root entry %d\n", addr.to_string().c_str(), opts.root);
  return 0;
}

// Every task adds 1 to the shared counter `iterations` times, by FAA or by a
// CAS loop that re-reads the value it lost against.
int Counter(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  const GlobalAddress counter = CounterAddress(initiator, opts.root);
  FailureLog failures;
  std::atomic<uint64_t> retries{0};
  RunTasks(opts, [&](int, int) {
    thread_local std::unique_ptr<Backoff> backoff;
    if (!backoff) backoff = std::make_unique<Backoff>(session.config);
    uint64_t* word = CacheWord(initiator);
    uint64_t guess = 0;
    for (uint64_t i = 0; i < opts.iterations && !failures.failed(); ++i) {
      Status s;
      if (opts.mode == "faa") {
        s = initiator.fetch_and_add(word, counter, 1);
      } else {
        BackoffGuard guard(*backoff);
        for (;;) {
          s = initiator.compare_and_swap(word, counter, guess, guess + 1);
          if (!s.ok() || *word == guess) break;
          guess = *word;  // lost the race: the CAS returned the current value
          retries.fetch_add(1, std::memory_order_relaxed);
          guard.retry_task();
        }
        guess += 1;
      }
      if (!s.ok()) failures.report(opts.mode + " on " + counter.to_string() + ": " + s.ToString());
    }
  });
  if (failures.failed()) {
    fprintf(stderr, "integration_client: %s\n", failures.first().c_str());
    return 1;
  }
  printf("counter: %d threads x %d tasks x %" PRIu64 " %s done, %" PRIu64 " CAS retries\n", opts.threads, opts.coros,
         opts.iterations, opts.mode.c_str(), retries.load());
  return 0;
}

int CheckCounter(const Options& opts) {
  Session session(opts);
  const GlobalAddress counter = CounterAddress(session.initiator, opts.root);
  uint64_t* word = CacheWord(session.initiator);
  Status s = session.initiator.read(word, counter, 8);
  if (!s.ok()) throw Error("read: " + s.ToString());
  if (*word != opts.expect) {
    fprintf(stderr, "integration_client: counter is %" PRIu64 ", expected %" PRIu64 "\n", *word, opts.expect);
    return 1;
  }
  printf("counter is %" PRIu64 " as expected\n", *word);
  return 0;
}

// Random reads and writes of random length and alignment into regions
// private to each task, checked against a local shadow copy: every read must
// return exactly what the shadow holds. Writes are batched behind one
// doorbell now and then to exercise kNone/kPost/sync.
int Shadow(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  constexpr uint64_t kRegion = 64 * 1024;
  constexpr uint64_t kMaxLength = 4096;
  const uint64_t tasks = static_cast<uint64_t>(opts.threads) * static_cast<uint64_t>(opts.coros);
  if ((opts.first_region + tasks + 1) * kRegion > initiator.remote_capacity(0)) throw Error("the memory blade is too small for the test");
  FailureLog failures;
  std::atomic<uint64_t> reads{0}, writes{0}, bytes_checked{0};
  RunTasks(opts, [&](int thread, int task) {
    const uint64_t index = static_cast<uint64_t>(thread) * static_cast<uint64_t>(opts.coros) + static_cast<uint64_t>(task);
    // Chunk 0 holds the super chunk: regions start one region in.
    const GlobalAddress base(0, (opts.first_region + index + 1) * kRegion);
    std::vector<uint8_t> shadow(kRegion, 0);
    auto* write_buffer = static_cast<uint8_t*>(initiator.alloc_cache(kMaxLength * 4));
    auto* read_buffer = static_cast<uint8_t*>(initiator.alloc_cache(kRegion));
    if (write_buffer == nullptr || read_buffer == nullptr) {
      failures.report("initiator cache exhausted; raise initiator_cache_size");
      return;
    }
    std::mt19937_64 rng(opts.seed * 7919 + index);
    auto check = [&](uint64_t offset, uint64_t length) {
      if (memcmp(read_buffer, shadow.data() + offset, length) == 0) return true;
      uint64_t at = 0;
      while (read_buffer[at] == shadow[offset + at]) ++at;
      char what[256];
      snprintf(what, sizeof(what),
               "task %" PRIu64 ": read of %" PRIu64 " bytes at +%" PRIu64 " differs at byte %" PRIu64
               ": got 0x%02x, shadow holds 0x%02x",
               index, length, offset, offset + at, read_buffer[at], shadow[offset + at]);
      failures.report(what);
      return false;
    };
    // The region starts zeroed on a fresh memory blade; write it once so the
    // shadow holds regardless of what an earlier client left there.
    memset(read_buffer, 0, kRegion);
    Status s = initiator.write(read_buffer, base, kRegion);
    if (!s.ok()) failures.report("initial write: " + s.ToString());
    for (uint64_t i = 0; i < opts.iterations && !failures.failed(); ++i) {
      const uint64_t length = 1 + rng() % kMaxLength;
      const uint64_t offset = rng() % (kRegion - length + 1);
      if (rng() % 2 == 0) {
        // One to four writes behind one doorbell (the slices may overlap:
        // they must land in post order).
        const int batch = 1 + static_cast<int>(rng() % 4);
        for (int b = 0; b < batch && !failures.failed(); ++b) {
          const uint64_t len = 1 + rng() % kMaxLength;
          const uint64_t off = rng() % (kRegion - len + 1);
          uint8_t* src = write_buffer + static_cast<uint64_t>(b) * kMaxLength;
          for (uint64_t j = 0; j < len; ++j) src[j] = static_cast<uint8_t>(rng());
          memcpy(shadow.data() + off, src, len);
          s = initiator.write(src, base + off, len, b + 1 == batch ? Option::kSync : Option::kNone);
          if (!s.ok()) failures.report("write: " + s.ToString());
          writes.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        s = initiator.read(read_buffer, base + offset, length);
        if (!s.ok()) {
          failures.report("read: " + s.ToString());
          break;
        }
        reads.fetch_add(1, std::memory_order_relaxed);
        if (!check(offset, length)) break;
        bytes_checked.fetch_add(length, std::memory_order_relaxed);
      }
    }
    if (failures.failed()) return;
    // Final pass: the whole region, in one read.
    s = initiator.read(read_buffer, base, kRegion);
    if (!s.ok()) {
      failures.report("final read: " + s.ToString());
      return;
    }
    if (check(0, kRegion)) bytes_checked.fetch_add(kRegion, std::memory_order_relaxed);
  });
  if (failures.failed()) {
    fprintf(stderr, "integration_client: %s\n", failures.first().c_str());
    return 1;
  }
  printf("shadow: %" PRIu64 " reads and %" PRIu64 " writes by %" PRIu64 " tasks, %" PRIu64
         " bytes checked, all equal to the shadow copy\n",
         reads.load(), writes.load(), tasks, bytes_checked.load());
  return 0;
}

// Accesses outside the memory blade's pool must fail with a remote access
// error, and the thread that got it must keep failing cleanly, not crash.
int BadAccess(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  const uint64_t capacity = initiator.remote_capacity(0);
  uint64_t* word = CacheWord(initiator);
  Status s = initiator.read(word, GlobalAddress(0, 0), 8);
  if (!s.ok()) throw Error("an in-bounds read failed: " + s.ToString());
  s = initiator.read(word, GlobalAddress(0, capacity - 4), 8);
  if (s.ok()) {
    fprintf(stderr, "integration_client: a read straddling the end of the pool succeeded\n");
    return 1;
  }
  // The initiator knows the pool's size and rejects the request before
  // posting it; a request that reaches the blade completes with a remote
  // access error instead and breaks the queue pair, as on a NIC.
  if (s.code() == Status::Code::kInvalidArgument) {
    printf("out-of-bounds read rejected before posting: %s\n", s.ToString().c_str());
    if (s.message().find("leaves the memory blade's region") == std::string::npos) {
      fprintf(stderr, "integration_client: the error does not say the access leaves the region\n");
      return 1;
    }
    Status next = initiator.read(word, GlobalAddress(0, 0), 8);
    if (!next.ok()) {
      fprintf(stderr, "integration_client: a rejected request broke the queue pair: %s\n", next.ToString().c_str());
      return 1;
    }
    return 0;
  }
  if (s.code() != Status::Code::kRemoteAccess) {
    fprintf(stderr, "integration_client: expected a remote access error, got %s\n", s.ToString().c_str());
    return 1;
  }
  printf("out-of-bounds read: %s\n", s.ToString().c_str());
  Status again = initiator.read(word, GlobalAddress(0, 0), 8);
  if (again.ok()) {
    fprintf(stderr, "integration_client: the queue pair kept working after an access error\n");
    return 1;
  }
  printf("next request on the broken queue pair: %s\n", again.ToString().c_str());
  return 0;
}

// FAA on the counter until something fails; exits 1 with the error. Used
// with a memory blade that gets killed in the middle.
int Hammer(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  const GlobalAddress counter = CounterAddress(initiator, opts.root);
  FailureLog failures;
  std::atomic<uint64_t> done{0};
  printf("hammering %s\n", counter.to_string().c_str());
  fflush(stdout);
  RunTasks(opts, [&](int, int) {
    uint64_t* word = CacheWord(initiator);
    while (!failures.failed()) {
      Status s = initiator.fetch_and_add(word, counter, 1);
      if (!s.ok()) {
        failures.report(s.ToString());
        return;
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
  });
  fprintf(stderr, "integration_client: after %" PRIu64 " operations: %s\n", done.load(), failures.first().c_str());
  return 1;
}

LeaseOptions LeaseFor(const Options& opts) {
  LeaseOptions lease;
  lease.lease_ns = opts.lease_ms * 1000000;
  lease.max_wait_ns = opts.max_wait_ms * 1000000;
  return lease;
}

// Holds the lock and renews it until the process is killed. A holder that
// was paused past its lease finds the lock lost at its next renewal and
// stops without writing anything more.
int LockHold(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  RemoteLock lock(initiator, CounterAddress(initiator, opts.root), CacheWord(initiator), LeaseFor(opts));
  Status s = lock.acquire();
  if (!s.ok()) throw Error("acquire: " + s.ToString());
  printf("holding as %s\n", DescribeLockWord(lock.word()).c_str());
  fflush(stdout);
  uint64_t* mark = CacheWord(initiator);
  const GlobalAddress scribble = opts.scribble_root >= 0 ? CounterAddress(initiator, opts.scribble_root) : GlobalAddress();
  for (;;) {
    // The write a critical section makes; a holder paused here and taken
    // over makes it late (fenced, it fails instead).
    if (opts.scribble_root >= 0) {
      *mark = static_cast<uint64_t>(getpid());
      s = initiator.write(mark, scribble, 8);
      if (!s.ok()) throw Error("write: " + s.ToString());
    }
    s = lock.renew();
    if (s.code() == Status::Code::kLockLost) {
      printf("lock lost: %s\n", s.message().c_str());
      return 3;
    }
    if (!s.ok()) throw Error("renew: " + s.ToString());
    std::this_thread::sleep_for(std::chrono::nanoseconds(LeaseFor(opts).lease_ns / 8));
  }
}

int LockTake(const Options& opts) {
  Session session(opts);
  Initiator& initiator = session.initiator;
  RemoteLock lock(initiator, CounterAddress(initiator, opts.root), CacheWord(initiator), LeaseFor(opts));
  LockAcquireInfo info;
  Status s = lock.acquire(&info);
  if (!s.ok()) throw Error("acquire: " + s.ToString());
  const char* why = !info.took_over    ? "free"
                    : info.by_session ? "holder's session ended"
                    : info.fenced     ? "holder's lease expired, its session fenced"
                                      : "holder's lease expired";
  printf("acquired after %.3f s (%s; previous %s)\n", static_cast<double>(info.waited_ns) / 1e9, why,
         DescribeLockWord(info.previous).c_str());
  s = lock.release();
  if (!s.ok()) throw Error("release: " + s.ToString());
  const bool want_takeover = opts.expect_lock == "took-over";
  if (info.took_over != want_takeover) {
    fprintf(stderr, "integration_client: expected the lock to be %s, but it was %s\n", opts.expect_lock.c_str(),
            info.took_over ? "taken over" : "free");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"integration_client: checks a running memory blade end to end"};
  app.require_subcommand(1);
  Options opts;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--server", opts.server, "memory blade HOST:PORT")->required();
    sub->add_option("--root", opts.root, "root entry that holds the counter")->check(CLI::Range(0, kMaxRootEntries - 1));
    sub->add_option("-t,--threads", opts.threads, "threads")->check(CLI::Range(1, 64));
    sub->add_option("-c,--coros", opts.coros, "coroutines per thread")->check(CLI::Range(1, 64));
    sub->add_option("-k,--iterations", opts.iterations, "operations per coroutine")->check(CLI::Range(1, 100000000));
    sub->add_option("--seed", opts.seed, "random seed");
  };
  CLI::App* setup = app.add_subcommand("setup-counter", "allocate a zeroed counter and publish it in a root entry");
  CLI::App* counter = app.add_subcommand("counter", "increment the counter by FAA or CAS from every task");
  counter->add_option("--mode", opts.mode, "faa or cas")->check(CLI::IsMember({"faa", "cas"}));
  CLI::App* check = app.add_subcommand("check-counter", "compare the counter with an expected value");
  check->add_option("--expect", opts.expect, "expected value")->required();
  CLI::App* shadow = app.add_subcommand("shadow", "random reads and writes checked against a shadow copy");
  shadow->add_option("--first-region", opts.first_region, "index of this process's first 64 KiB region");
  CLI::App* bad = app.add_subcommand("bad-access", "an out-of-bounds read fails cleanly");
  CLI::App* hammer = app.add_subcommand("hammer", "FAA until an error (for dead-peer tests)");
  CLI::App* hold = app.add_subcommand("lock-hold", "take the lock in the root entry and renew it until killed");
  CLI::App* take = app.add_subcommand("lock-take", "take the lock in the root entry and say how it was had");
  for (CLI::App* sub : {hold, take}) {
    sub->add_option("--lease-ms", opts.lease_ms, "lease of the lock")->check(CLI::Range(1, 3600000));
    sub->add_option("--max-wait-ms", opts.max_wait_ms, "longest wait for a live holder before failing")
        ->check(CLI::Range(1, 3600000));
  }
  take->add_option("--expect", opts.expect_lock, "took-over or free")->check(CLI::IsMember({"took-over", "free"}));
  hold->add_option("--scribble-root", opts.scribble_root,
                   "root entry of a counter (setup-counter) the holder writes its pid into before each renewal")
      ->check(CLI::Range(0, kMaxRootEntries - 1));
  for (CLI::App* sub : {setup, counter, check, shadow, bad, hammer, hold, take}) add_common(sub);
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  try {
    if (*setup) return SetupCounter(opts);
    if (*counter) return Counter(opts);
    if (*check) return CheckCounter(opts);
    if (*shadow) return Shadow(opts);
    if (*bad) return BadAccess(opts);
    if (*hammer) return Hammer(opts);
    if (*hold) return LockHold(opts);
    if (*take) return LockTake(opts);
  } catch (const std::exception& e) {
    fprintf(stderr, "integration_client: %s\n", e.what());
    return 1;
  }
  return 2;
}
