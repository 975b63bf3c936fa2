// The YCSB driver (include/smart/bench/ycsb_driver.h).
#include "smart/bench/ycsb_driver.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "smart/common.h"
#include "smart/task.h"
#include "smart/bench/ycsb.h"

namespace smart {

namespace {

// With `verify`, a value starts with its key id (8 bytes, or as many as the
// value has), scrambled so that neighbouring keys differ in every byte.
uint64_t Tag(uint64_t id) { return id * 0x9e3779b97f4a7c15ull ^ 0x5bd1e9955bd1e995ull; }

void FormatVerifiedValue(ycsb::Random& random, uint64_t id, int width, char* out) {
  ycsb::FormatValue(random, width, out);
  const uint64_t tag = Tag(id);
  memcpy(out, &tag, std::min<size_t>(8, static_cast<size_t>(width)));
}

bool HoldsKey(std::string_view value, uint64_t id, int width) {
  if (value.size() != static_cast<size_t>(width)) return false;
  const uint64_t tag = Tag(id);
  return memcmp(value.data(), &tag, std::min<size_t>(8, value.size())) == 0;
}

struct Worker {
  uint64_t succeeded = 0, not_found = 0, failed = 0, wrong = 0, scans = 0, scanned_keys = 0;
  std::string first_failure;
  Histogram latency;
};

}  // namespace

void CheckYcsbOptions(const YcsbOptions& o, const KvStore& store) {
  const ycsb::Workload w = ycsb::GetWorkload(o.dataset);  // throws for an unknown name
  if (w.scan > 0 && !store.supports_scan()) {
    throw Error("dataset " + o.dataset + " needs scan, which " + store.name() + " does not offer (it has no key order)");
  }
  if (o.max_key == 0) throw Error("max_key must be at least 1, got 0");
  if (!(o.duration > 0) || o.duration > 1e6) {
    throw Error("duration must be above 0 seconds (and at most 1e6), got " + std::to_string(o.duration));
  }
  if (o.key_length < 1 || o.key_length > 255) {
    throw Error("key_length must be within 1..255, got " + std::to_string(o.key_length));
  }
  if (o.value_length < 1 || o.value_length > 3072) {
    throw Error("value_length must be within 1..3072, got " + std::to_string(o.value_length));
  }
  long double room = 1;
  for (int i = 0; i < o.key_length && room <= 1e20L; ++i) room *= 10;
  if (room < static_cast<long double>(o.max_key)) {
    throw Error("key_length " + std::to_string(o.key_length) + " has room for " +
                std::to_string(static_cast<uint64_t>(room)) + " distinct keys, fewer than max_key " +
                std::to_string(o.max_key) + ": raise key_length or lower max_key");
  }
  if (o.load_batch < 0 || o.load_batch > kMaxLoadBatch) {
    throw Error("the load batch must be within 0.." + std::to_string(kMaxLoadBatch) +
                " keys (0: the store's choice), got " + std::to_string(o.load_batch));
  }
  if (!(o.zipf >= 0 && o.zipf < 1)) throw Error("the zipfian constant must be in [0, 1), got " + std::to_string(o.zipf));
  if (o.threads < 1 || o.threads > kMaxThreads - 2) {
    throw Error("NR_THREAD must be within 1.." + std::to_string(kMaxThreads - 2) + ", got " + std::to_string(o.threads));
  }
  if (o.coros < 1 || o.coros > kMaxTasksPerThread - 1) {
    throw Error("NR_CORO must be within 1.." + std::to_string(kMaxTasksPerThread - 1) + ", got " + std::to_string(o.coros));
  }
}

double YcsbLoad(KvStore& store, const YcsbOptions& o) {
  std::atomic<uint64_t> loaded{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mutex;
  const uint64_t start = NowNs();
  uint64_t end = 0;
  auto key_id = [&](uint64_t id) { return o.rehash_key ? ycsb::PermuteKey(id, o.max_key) : id; };
  std::thread loader([&] {
    RunThreads(o.threads, true, [&](int t) {
      TaskPool pool(TaskPoolOptions{64 * 1024, o.coros});
      for (int k = 0; k < o.coros; ++k) {
        pool.spawn([&, t, k] {
          // A sole loader hands its keys over load_batch at a time.
          const size_t batch = !o.sole_loader       ? 1
                               : o.load_batch > 0 ? static_cast<size_t>(o.load_batch)
                                                  : std::clamp<size_t>(store.preferred_load_batch(), 1, kMaxLoadBatch);
          const size_t kl = static_cast<size_t>(o.key_length), vl = static_cast<size_t>(o.value_length);
          std::vector<char> keys(batch * kl), values(batch * vl);
          std::vector<std::string_view> ks(batch), vs(batch);
          ycsb::Random random(static_cast<uint64_t>(t) * 7919 + static_cast<uint64_t>(k) + 1);
          const uint64_t step = static_cast<uint64_t>(o.threads) * static_cast<uint64_t>(o.coros);
          uint64_t local = 0;
          uint64_t id = static_cast<uint64_t>(t) * static_cast<uint64_t>(o.coros) + static_cast<uint64_t>(k);
          while (id < o.max_key && !failed.load(std::memory_order_relaxed)) {
            size_t n = 0;
            for (; n < batch && id < o.max_key; ++n, id += step) {
              const uint64_t kid = key_id(id);
              ycsb::FormatKey(kid, o.key_length, &keys[n * kl]);
              FormatVerifiedValue(random, kid, o.value_length, &values[n * vl]);
              ks[n] = std::string_view(&keys[n * kl], kl);
              vs[n] = std::string_view(&values[n * vl], vl);
            }
            Status s = batch > 1           ? store.load_batch(ks.data(), vs.data(), n)
                       : o.sole_loader ? store.load(ks[0], vs[0])
                                       : store.insert(ks[0], vs[0]);
            if (!s.ok()) {
              std::lock_guard<std::mutex> lock(error_mutex);
              if (!failed.exchange(true)) {
                error = (n == 1 ? "inserting key " + std::string(ks[0])
                                : "loading keys " + std::string(ks[0]) + " .. " + std::string(ks[n - 1])) +
                        ": " + s.ToString();
              }
              return;
            }
            local += n;
            if (local >= 256) {
              loaded.fetch_add(local, std::memory_order_relaxed);
              local = 0;
            }
          }
          loaded.fetch_add(local, std::memory_order_relaxed);
        });
      }
      pool.run();
    });
    // Timed here: the progress loop below only looks every 50 ms.
    end = NowNs();
  });
  {
    std::unique_ptr<Progress> progress;
    if (o.progress) progress = std::make_unique<Progress>("loading " + std::to_string(o.max_key) + " keys", o.max_key);
    while (loaded.load() < o.max_key && !failed.load() && !TerminationRequested()) {
      if (progress) progress->update(loaded.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    loader.join();
    if (progress) {
      progress->update(loaded.load());
      progress->finish();
    }
  }
  if (failed) throw Error("loading keys failed: " + error);
  if (loaded.load() < o.max_key) throw Error("loading keys was interrupted");
  return static_cast<double>(end - start) / 1e9;
}

YcsbResult YcsbRun(KvStore& store, const YcsbOptions& o) {
  const ycsb::Workload workload = ycsb::GetWorkload(o.dataset);
  const ycsb::ZipfianParams zipf(o.max_key, o.zipf);
  std::atomic<uint64_t> insert_counter{o.max_key};
  std::vector<Worker> workers(static_cast<size_t>(o.threads) * static_cast<size_t>(o.coros));
  RunControl control(o.threads);
  std::atomic<bool> stop_on_error{false};
  const double cycles_per_ns = CyclesPerNanosecond();
  const uint64_t retries_before = store.retries();
  auto key_id = [&](uint64_t id) { return o.rehash_key ? ycsb::PermuteKey(id, o.max_key) : id; };
  std::thread runner([&] {
    RunThreads(o.threads, true, [&](int t) {
      TaskPool pool(TaskPoolOptions{64 * 1024, o.coros});
      for (int k = 0; k < o.coros; ++k) {
        pool.spawn([&, t, k] {
          Worker& w = workers[static_cast<size_t>(t) * static_cast<size_t>(o.coros) + static_cast<size_t>(k)];
          ycsb::OperationGenerator generator(workload, zipf, &insert_counter,
                                             (Cycles() << 8) ^ (static_cast<uint64_t>(t) << 16) ^ static_cast<uint64_t>(k));
          ycsb::Random random(static_cast<uint64_t>(t) * 131 + static_cast<uint64_t>(k) + 17);
          char key[256], value[4096];
          std::string out;
          uint64_t kid = 0;
          // Read-modify-write changes the last byte, so a verified value
          // keeps its key in front.
          const auto modify = [&](std::string* v) {
            if (!v->empty()) v->back() = static_cast<char>(33 + (v->back() - 33 + 1) % 94);
          };
          std::vector<std::pair<std::string, std::string>> scanned;
          control.ready_and_wait();
          bool first = true;
          while (!control.stopped()) {
            if (!first) {
              IdleTask(o.idle_ns, control);
              if (control.stopped()) break;  // no operation after the measured window
            }
            first = false;
            const ycsb::Operation op = generator.next();
            kid = key_id(op.key);
            ycsb::FormatKey(kid, o.key_length, key);
            const std::string_view k_view(key, o.key_length);
            const uint64_t begin = Cycles();
            Status s;
            bool check_value = false;
            switch (op.type) {
              case ycsb::OpType::kRead:
                s = store.search(k_view, &out);
                check_value = true;
                break;
              case ycsb::OpType::kUpdate:
                FormatVerifiedValue(random, kid, o.value_length, value);
                s = store.update(k_view, std::string_view(value, o.value_length));
                break;
              case ycsb::OpType::kInsert:
                FormatVerifiedValue(random, kid, o.value_length, value);
                s = store.insert(k_view, std::string_view(value, o.value_length));
                break;
              case ycsb::OpType::kReadModifyWrite:
                s = store.read_modify_write(k_view, modify);
                break;
              case ycsb::OpType::kScan:
                s = store.scan(k_view, 1 + random.next() % 100, &scanned);
                if (s.ok()) {
                  ++w.scans;
                  w.scanned_keys += scanned.size();
                }
                break;
            }
            const uint64_t ns = static_cast<uint64_t>(static_cast<double>(Cycles() - begin) / cycles_per_ns);
            if (s.ok()) {
              if (o.verify && check_value && !HoldsKey(out, kid, o.value_length)) {
                ++w.failed;
                ++w.wrong;
                if (w.first_failure.empty()) {
                  w.first_failure = "key " + std::string(k_view) + " read a value that is not its own";
                }
                continue;
              }
              ++w.succeeded;
              w.latency.record(ns);
            } else if (s.code() == Status::Code::kNotFound) {
              ++w.not_found;
            } else {
              ++w.failed;
              if (w.first_failure.empty()) w.first_failure = "key " + std::string(k_view) + ": " + s.ToString();
              stop_on_error.store(true);
              control.stop();
              break;
            }
          }
        });
      }
      pool.run();
    });
  });
  YcsbResult r;
  r.seconds = control.run_for(o.duration, &stop_on_error);
  runner.join();
  for (Worker& w : workers) {
    r.succeeded += w.succeeded;
    r.not_found += w.not_found;
    r.failed += w.failed;
    r.wrong_values += w.wrong;
    r.scans += w.scans;
    r.scanned_keys += w.scanned_keys;
    if (r.first_failure.empty() && !w.first_failure.empty()) r.first_failure = w.first_failure;
    r.latency.merge(w.latency);
  }
  r.retries = store.retries() - retries_before;
  return r;
}

}  // namespace smart
