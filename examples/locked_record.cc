// A record on a memory blade, updated under the framework's leased remote
// lock by THREADS threads x CORO coroutines. An update is a plain READ, a
// local change and a WRITE, so only the lock keeps two of them from losing
// one another's change; at the end the record's counter must equal the
// number of updates that were acknowledged.
//
//   locked_record [THREADS CORO UPDATES [HOST:PORT]]
//
// Without HOST:PORT the program starts a memory blade inside itself (shm);
// with one, it uses that blade, e.g. a hashtable_backend on another host.
#include <smart/config.h>
#include <smart/embedded_blade.h>
#include <smart/initiator.h>
#include <smart/remote_lock.h>
#include <smart/task.h>
#include <smart/throttle.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

int ArgOr(int argc, char** argv, int i, int fallback) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const long v = std::strtol(argv[i], &end, 10);
  if (*end != '\0' || v < 1 || v > 1000000) {
    std::fprintf(stderr, "locked_record: argument %d must be a number in 1..1000000, got \"%s\"\n", i, argv[i]);
    std::exit(2);
  }
  return static_cast<int>(v);
}

// The record: the lock word, then the counter and a check word that must
// always be the counter's complement (a torn update would break it).
constexpr uint64_t kLockOffset = 0;
constexpr uint64_t kCounterOffset = 8;
constexpr uint64_t kRecordBytes = 24;

}  // namespace

int main(int argc, char** argv) {
  const int threads = ArgOr(argc, argv, 1, 2);
  const int coros = ArgOr(argc, argv, 2, 4);
  const int updates = ArgOr(argc, argv, 3, 200);
  try {
    smart::SmartConfig config;
    std::unique_ptr<smart::EmbeddedMemoryBlade> blade;
    std::string host = "127.0.0.1";
    int port = 0;
    if (argc > 4) {
      const std::string where = argv[4];
      const size_t colon = where.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "locked_record: expected HOST:PORT, got \"%s\"\n", where.c_str());
        return 2;
      }
      host = where.substr(0, colon);
      port = std::atoi(where.c_str() + colon + 1);
    } else {
      blade = std::make_unique<smart::EmbeddedMemoryBlade>(config, 64);  // 64 MiB
      port = blade->port();
    }
    smart::Initiator initiator(config);
    initiator.connect(0, host, port, threads);

    // The record, zeroed: a free lock, counter 0, check word ~0.
    smart::GlobalAddress record;
    smart::Status s = initiator.alloc_memory(0, kRecordBytes, &record);
    if (!s.ok()) throw smart::Error("alloc_memory: " + s.ToString());
    auto* image = static_cast<uint64_t*>(initiator.alloc_cache(kRecordBytes));
    image[0] = smart::kLockFree;
    image[1] = 0;
    image[2] = ~uint64_t{0};
    s = initiator.write(image, record, kRecordBytes);
    if (!s.ok()) throw smart::Error("write: " + s.ToString());
    initiator.release_thread();  // main's queue pair goes to the workers

    std::atomic<uint64_t> acknowledged{0}, failed{0}, take_overs{0};
    auto fail = [&](const char* what, const smart::Status& r) {
      if (failed.fetch_add(1) == 0) std::fprintf(stderr, "locked_record: %s: %s\n", what, r.ToString().c_str());
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        smart::Backoff backoff(config);  // conflict avoidance of this thread
        smart::TaskPool pool;
        for (int c = 0; c < coros; ++c) {
          pool.spawn([&] {
            // Built inside the task: the lock's owner is this thread and task.
            auto* scratch = static_cast<uint64_t*>(initiator.alloc_cache(16));
            auto* buffer = static_cast<uint64_t*>(initiator.alloc_cache(16));
            smart::RemoteLock lock(initiator, record + kLockOffset, scratch);
            for (int i = 0; i < updates; ++i) {
              smart::BackoffGuard guard(backoff);
              smart::LockAcquireInfo info;
              smart::Status r = lock.acquire(&info, &guard);
              if (!r.ok()) {
                fail("acquire", r);
                continue;
              }
              if (info.took_over) take_overs.fetch_add(1);
              r = initiator.read(buffer, record + kCounterOffset, 16);
              if (r.ok()) {
                buffer[0] += 1;
                buffer[1] = ~buffer[0];
                smart::this_task::yield();  // let the other tasks try their luck
                r = lock.renew_if_due();    // still ours before the write?
              }
              if (r.ok()) r = initiator.write(buffer, record + kCounterOffset, 16);
              const smart::Status released = lock.release();
              if (r.ok()) r = released;
              if (r.ok()) {
                acknowledged.fetch_add(1);
              } else {
                fail("update", r);
              }
            }
          });
        }
        pool.run();
        initiator.release_thread();
      });
    }
    for (std::thread& w : workers) w.join();

    s = initiator.read(image, record, kRecordBytes);
    if (!s.ok()) throw smart::Error("read: " + s.ToString());
    const bool consistent = image[2] == ~image[1] && image[0] == smart::kLockFree;
    std::printf("locked_record: %d threads x %d coroutines: counter = %llu, acknowledged updates = %llu, "
                "failed = %llu, take-overs = %llu, record %s\n",
                threads, coros, static_cast<unsigned long long>(image[1]),
                static_cast<unsigned long long>(acknowledged.load()),
                static_cast<unsigned long long>(failed.load()),
                static_cast<unsigned long long>(take_overs.load()), consistent ? "consistent" : "TORN");
    return image[1] == acknowledged.load() && failed.load() == 0 && consistent ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "locked_record: %s\n", e.what());
    return 1;
  }
}
