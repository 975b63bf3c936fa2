// A counter on a memory blade, incremented with one-sided fetch-and-add by
// THREADS threads x CORO coroutines; at the end the counter must equal the
// number of increments every coroutine was told succeeded.
//
//   remote_counter [THREADS CORO INCREMENTS [HOST:PORT]]
//
// Without HOST:PORT the program starts a memory blade inside itself (the
// shm transport: no RDMA NIC needed). With one, it uses that blade, e.g. a
// hashtable_backend started on another machine, over verbs.
#include <smart/config.h>
#include <smart/embedded_blade.h>
#include <smart/initiator.h>
#include <smart/task.h>

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
    std::fprintf(stderr, "remote_counter: argument %d must be a number in 1..1000000, got \"%s\"\n", i, argv[i]);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = ArgOr(argc, argv, 1, 2);
  const int coros = ArgOr(argc, argv, 2, 8);
  const int increments = ArgOr(argc, argv, 3, 1000);
  try {
    // Defaults of every key; transport "auto" picks verbs when the host has
    // an RDMA device, shm otherwise. SmartConfig::Load() reads a file instead.
    smart::SmartConfig config;
    std::unique_ptr<smart::EmbeddedMemoryBlade> blade;
    std::string host = "127.0.0.1";
    int port = 0;
    if (argc > 4) {
      const std::string where = argv[4];
      const size_t colon = where.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "remote_counter: expected HOST:PORT, got \"%s\"\n", where.c_str());
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

    // One 8-byte word on memory node 0, zeroed by one WRITE.
    smart::GlobalAddress counter;
    smart::Status s = initiator.alloc_memory(0, 8, &counter);
    if (!s.ok()) throw smart::Error("alloc_memory: " + s.ToString());
    auto* word = static_cast<uint64_t*>(initiator.alloc_cache(8));
    *word = 0;
    s = initiator.write(word, counter, 8);
    if (!s.ok()) throw smart::Error("write: " + s.ToString());
    // Each thread that posts holds one of the `threads` queue-pair slots
    // until it calls release_thread(); give main's back to the workers.
    initiator.release_thread();

    std::atomic<uint64_t> acknowledged{0}, failed{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        smart::TaskPool pool;
        for (int c = 0; c < coros; ++c) {
          pool.spawn([&] {
            // Each coroutine's own buffer for the value FAA returns.
            auto* old = static_cast<uint64_t*>(initiator.alloc_cache(8));
            for (int i = 0; i < increments; ++i) {
              // kSync parks this coroutine until the completion arrives; the
              // thread's other coroutines run meanwhile.
              smart::Status r = initiator.fetch_and_add(old, counter, 1, smart::Option::kSync);
              if (r.ok()) {
                acknowledged.fetch_add(1);
              } else if (failed.fetch_add(1) == 0) {
                std::fprintf(stderr, "remote_counter: the first failure: %s\n", r.ToString().c_str());
              }
            }
          });
        }
        pool.run();
        initiator.release_thread();
      });
    }
    for (std::thread& w : workers) w.join();

    s = initiator.read(word, counter, 8);
    if (!s.ok()) throw smart::Error("read: " + s.ToString());
    std::printf("remote_counter: %d threads x %d coroutines: counter = %llu, acknowledged increments = %llu, "
                "failed = %llu\n",
                threads, coros, static_cast<unsigned long long>(*word),
                static_cast<unsigned long long>(acknowledged.load()), static_cast<unsigned long long>(failed.load()));
    return *word == acknowledged.load() && failed.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remote_counter: %s\n", e.what());
    return 1;
  }
}
