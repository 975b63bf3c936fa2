// A read-only lookup table on a memory blade, read with speculative lookup.
// The table is open addressing with linear probing, 16-byte slots (key,
// value), key 0 for an empty slot. A full lookup READs the probe sequence
// slot by slot. Each thread also caches guesses (key -> slot) in a small
// direct-mapped array indexed by the key alone, so keys share entries: a
// lookup with a guess READs that slot and checks its key; a hit costs one
// round trip, a mismatch falls back to the full lookup and fixes the guess.
// Every value read is checked; a wrong one or a failed READ exits 1.
//
//   lookup_table [THREADS CORO LOOKUPS [HOST:PORT]]
#include <smart/config.h>
#include <smart/embedded_blade.h>
#include <smart/initiator.h>
#include <smart/task.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int ArgOr(int argc, char** argv, int i, int fallback) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const long v = std::strtol(argv[i], &end, 10);
  if (*end != '\0' || v < 1 || v > 1000000) {
    std::fprintf(stderr, "lookup_table: argument %d must be a number in 1..1000000, got \"%s\"\n", i, argv[i]);
    std::exit(2);
  }
  return static_cast<int>(v);
}

constexpr uint64_t kKeys = 1000;             // keys 1..kKeys are present
constexpr uint64_t kSlots = 2048;            // a power of two
constexpr uint64_t kCacheEntries = 256;      // fewer than the keys: guesses collide
uint64_t Home(uint64_t key) { return (key * 0x9e3779b97f4a7c15ull) >> 53; }  // 0..kSlots-1
uint64_t ValueOf(uint64_t key) { return key * 0x2545f4914f6cdd1dull ^ 0x5eed; }

}  // namespace

int main(int argc, char** argv) {
  const int threads = ArgOr(argc, argv, 1, 2);
  const int coros = ArgOr(argc, argv, 2, 4);
  const int lookups = ArgOr(argc, argv, 3, 1000);
  try {
    smart::SmartConfig config;
    std::unique_ptr<smart::EmbeddedMemoryBlade> blade;
    std::string host = "127.0.0.1";
    int port = 0;
    if (argc > 4) {
      const std::string where = argv[4];
      const size_t colon = where.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "lookup_table: expected HOST:PORT, got \"%s\"\n", where.c_str());
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

    // Build the table locally and write it with one WRITE.
    smart::GlobalAddress table;
    smart::Status s = initiator.alloc_memory(0, kSlots * 16, &table);
    if (!s.ok()) throw smart::Error("alloc_memory: " + s.ToString());
    auto* image = static_cast<uint64_t*>(initiator.alloc_cache(kSlots * 16));
    std::fill(image, image + 2 * kSlots, 0);
    for (uint64_t key = 1; key <= kKeys; ++key) {
      uint64_t slot = Home(key);
      while (image[2 * slot] != 0) slot = (slot + 1) % kSlots;
      image[2 * slot] = key;
      image[2 * slot + 1] = ValueOf(key);
    }
    s = initiator.write(image, table, kSlots * 16);
    if (!s.ok()) throw smart::Error("write: " + s.ToString());
    initiator.release_thread();

    struct {
      std::atomic<uint64_t> hits{0}, mismatches{0}, cold{0}, absent{0}, wrong{0}, failed{0};
    } n;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::vector<uint64_t> guess(kCacheEntries, ~uint64_t{0});  // this thread's cache
        smart::TaskPool pool;
        for (int c = 0; c < coros; ++c) {
          pool.spawn([&, c] {
            auto* slot_buf = static_cast<uint64_t*>(initiator.alloc_cache(16));
            std::mt19937_64 random(1 + t * 1000 + c);
            std::uniform_real_distribution<double> uniform(0.0, 1.0);
            for (int i = 0; i < lookups; ++i) {
              // 80% from 100 hot keys, the rest from all keys and 100 absent ones.
              const uint64_t range = uniform(random) < 0.8 ? 100 : kKeys + 100;
              const uint64_t key = 1 + random() % range;
              uint64_t& cached = guess[key % kCacheEntries];
              smart::Status r;
              bool found = false;
              if (cached != ~uint64_t{0}) {  // speculative: one READ of the guessed slot
                r = initiator.read(slot_buf, table + cached * 16, 16);
                found = r.ok() && slot_buf[0] == key;
                if (r.ok()) (found ? n.hits : n.mismatches).fetch_add(1);
              } else {
                n.cold.fetch_add(1);
              }
              // The full lookup: the probe sequence, one slot per READ.
              for (uint64_t probe = 0; r.ok() && !found && probe < kSlots; ++probe) {
                const uint64_t slot = (Home(key) + probe) % kSlots;
                r = initiator.read(slot_buf, table + slot * 16, 16);
                if (!r.ok() || slot_buf[0] == 0) break;  // an empty slot ends the sequence
                if (slot_buf[0] == key) {
                  found = true;
                  cached = slot;
                }
              }
              if (!r.ok()) {
                if (n.failed.fetch_add(1) == 0) std::fprintf(stderr, "lookup_table: %s\n", r.ToString().c_str());
              } else if (found != (key <= kKeys) || (found && slot_buf[1] != ValueOf(key))) {
                n.wrong.fetch_add(1);
              } else if (!found) {
                n.absent.fetch_add(1);
              }
            }
          });
        }
        pool.run();
        initiator.release_thread();
      });
    }
    for (std::thread& w : workers) w.join();
    const uint64_t total = static_cast<uint64_t>(threads) * coros * lookups;
    auto u = [](const std::atomic<uint64_t>& a) { return static_cast<unsigned long long>(a.load()); };
    std::printf("lookup_table: %d threads x %d coroutines: lookups = %llu, speculative hits = %llu, mismatches = %llu, "
                "cold = %llu, absent = %llu, wrong = %llu, failed = %llu\n",
                threads, coros, static_cast<unsigned long long>(total), u(n.hits), u(n.mismatches), u(n.cold),
                u(n.absent), u(n.wrong), u(n.failed));
    return n.hits + n.mismatches + n.cold == total && n.wrong == 0 && n.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lookup_table: %s\n", e.what());
    return 1;
  }
}
