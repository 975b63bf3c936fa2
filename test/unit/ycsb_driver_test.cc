// The YCSB driver against an in-memory store: what it counts, what it
// refuses, and that --verify catches a wrong value.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "smart/bench/ycsb_driver.h"

namespace smart {
namespace {

// A locked std::map; `corrupt` makes every read of one key return another
// key's value, `fail_after` makes operations fail after that many calls.
class MapStore : public KvStore {
 public:
  std::string name() const override { return "MapStore"; }
  Status search(std::string_view key, std::string* value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++calls_ > fail_after) return Status::Internal("store broke");
    std::string k(key);
    if (k == corrupt && map_.size() > 1) k = map_.begin()->first == k ? std::next(map_.begin())->first : map_.begin()->first;
    auto it = map_.find(k);
    if (it == map_.end()) return Status::NotFound("absent");
    *value = it->second;
    return Status::OK();
  }
  Status insert(std::string_view key, std::string_view value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++calls_ > fail_after) return Status::Internal("store broke");
    map_[std::string(key)] = std::string(value);
    return Status::OK();
  }
  Status load(std::string_view key, std::string_view value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++loaded_[std::string(key)];
    }
    return insert(key, value);
  }
  Status load_batch(const std::string_view* keys, const std::string_view* values, size_t count) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++batches_[count];
    }
    return KvStore::load_batch(keys, values, count);
  }
  size_t preferred_load_batch() const override { return preferred_batch; }
  size_t preferred_batch = 1;
  // Calls of load_batch by their key count.
  std::map<size_t, int> batches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }
  Status update(std::string_view key, std::string_view value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return Status::NotFound("absent");
    it->second = std::string(value);
    return Status::OK();
  }
  Status read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return Status::NotFound("absent");
    modify(&it->second);
    return Status::OK();
  }
  Status remove(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.erase(std::string(key)) ? Status::OK() : Status::NotFound("absent");
  }
  bool supports_scan() const override { return scans; }
  Status scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    out->clear();
    for (auto it = map_.lower_bound(std::string(start)); it != map_.end() && out->size() < count; ++it) {
      out->push_back(*it);
    }
    scanned_ += out->size();
    return Status::OK();
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }
  // Keys given to load() and how often each was.
  std::map<std::string, int> loaded() {
    std::lock_guard<std::mutex> lock(mutex_);
    return loaded_;
  }
  uint64_t scanned() {
    std::lock_guard<std::mutex> lock(mutex_);
    return scanned_;
  }

  std::string corrupt;
  uint64_t fail_after = UINT64_MAX;
  bool scans = false;  // offers scan

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> map_;
  std::map<std::string, int> loaded_;
  std::map<size_t, int> batches_;
  uint64_t calls_ = 0;
  uint64_t scanned_ = 0;
};

YcsbOptions Small(const std::string& dataset) {
  YcsbOptions o;
  o.dataset = dataset;
  o.max_key = 1000;
  o.duration = 0.2;
  o.threads = 2;
  o.coros = 2;
  o.progress = false;
  return o;
}

TEST(YcsbDriver, LoadsEveryKeyAndCountsOnlySuccesses) {
  MapStore store;
  YcsbOptions o = Small("ycsb-a");
  YcsbLoad(store, o);
  EXPECT_EQ(store.size(), 1000u);
  const YcsbResult r = YcsbRun(store, o);
  EXPECT_GT(r.succeeded, 0u);
  EXPECT_EQ(r.not_found, 0u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.latency.count(), r.succeeded);
}

// A sole loader loads through KvStore::load, whose promise is that no key
// is loaded twice at once: every key goes to load() exactly once. Without
// sole_loader the load uses insert().
TEST(YcsbDriver, ASoleLoaderGivesEachKeyToLoadOnce) {
  MapStore shared;
  YcsbOptions o = Small("ycsb-c");
  o.threads = 3;
  o.coros = 5;
  YcsbLoad(shared, o);
  EXPECT_EQ(shared.size(), 1000u);
  EXPECT_TRUE(shared.loaded().empty());

  MapStore sole;
  o.sole_loader = true;
  YcsbLoad(sole, o);
  EXPECT_EQ(sole.size(), 1000u);
  const std::map<std::string, int> loaded = sole.loaded();
  EXPECT_EQ(loaded.size(), 1000u);
  for (const auto& [key, times] : loaded) EXPECT_EQ(times, 1) << key;
}

// A sole loader's task hands its keys over in batches of load_batch (the
// last one shorter), each key with its own value: a verified run over the
// loaded store reads no wrong value. A batch of 1 is load().
TEST(YcsbDriver, ASoleLoaderLoadsInBatchesEachKeyWithItsValue) {
  YcsbOptions o = Small("ycsb-c");
  o.threads = 2;
  o.coros = 3;
  o.sole_loader = true;
  o.verify = true;
  o.load_batch = 7;
  MapStore store;
  YcsbLoad(store, o);
  EXPECT_EQ(store.size(), 1000u);
  const std::map<std::string, int> loaded = store.loaded();
  EXPECT_EQ(loaded.size(), 1000u);
  for (const auto& [key, times] : loaded) EXPECT_EQ(times, 1) << key;
  const std::map<size_t, int> batches = store.batches();
  int calls = 0;
  size_t keys = 0;
  for (const auto& [size, n] : batches) {
    EXPECT_GE(size, 1u);
    EXPECT_LE(size, 7u);
    calls += n;
    keys += size * static_cast<size_t>(n);
  }
  EXPECT_EQ(keys, 1000u);
  // 6 tasks of 166 or 167 keys: 24 batches each, the last one short.
  EXPECT_EQ(calls, 6 * 24);
  EXPECT_EQ(batches.count(7) ? batches.at(7) : 0, 6 * 23);
  const YcsbResult r = YcsbRun(store, o);
  EXPECT_GT(r.succeeded, 0u);
  EXPECT_EQ(r.wrong_values, 0u);
  EXPECT_EQ(r.failed, 0u) << r.first_failure;

  MapStore single;
  o.load_batch = 1;
  YcsbLoad(single, o);
  EXPECT_EQ(single.size(), 1000u);
  EXPECT_TRUE(single.batches().empty());
  o.load_batch = 65;
  EXPECT_THROW(CheckYcsbOptions(o, single), Error);

  // 0: the store's own batch; a store without one (1) loads one by one.
  o.load_batch = 0;
  MapStore plain;
  YcsbLoad(plain, o);
  EXPECT_EQ(plain.size(), 1000u);
  EXPECT_TRUE(plain.batches().empty());
  MapStore batching;
  batching.preferred_batch = 4;
  YcsbLoad(batching, o);
  EXPECT_EQ(batching.size(), 1000u);
  const std::map<size_t, int> fours = batching.batches();
  ASSERT_FALSE(fours.empty());
  EXPECT_EQ(fours.rbegin()->first, 4u);
}

TEST(YcsbDriver, IdleTimeBoundsTheOperationsOfEachCoroutine) {
  MapStore store;
  YcsbOptions o = Small("ycsb-c");
  YcsbLoad(store, o);
  o.idle_ns = 20000000;  // 20 ms after each operation
  const YcsbResult r = YcsbRun(store, o);
  // Each of the 4 coroutines does one operation, then one more per 20 ms
  // of the run at most, however fast the machine.
  const double per_task = 1 + r.seconds / 0.020;
  EXPECT_GT(r.succeeded, 0u);
  EXPECT_LE(static_cast<double>(r.succeeded), 4 * (per_task + 1)) << r.seconds << " s";
}

TEST(YcsbDriver, ScansCountTheKeysTheyReturned) {
  MapStore store;
  store.scans = true;
  YcsbOptions o = Small("ycsb-e");
  YcsbLoad(store, o);
  const YcsbResult r = YcsbRun(store, o);
  EXPECT_GT(r.succeeded, 0u);
  EXPECT_EQ(r.failed, 0u);
  // Inserts of ycsb-e return no keys; every key the store handed out counts.
  EXPECT_EQ(r.scanned_keys, store.scanned());
  EXPECT_GT(r.scans, r.succeeded * 9 / 10);  // 95% of ycsb-e's operations
  EXPECT_LT(r.scans, r.succeeded);
  EXPECT_GT(r.scanned_keys, r.scans);  // scans of 1-100 keys, most of them several
}

TEST(YcsbDriver, MissesAreCountedApartAndNotAsThroughput) {
  MapStore store;  // nothing loaded: every read misses
  const YcsbResult r = YcsbRun(store, Small("ycsb-c"));
  EXPECT_EQ(r.succeeded, 0u);
  EXPECT_GT(r.not_found, 0u);
  EXPECT_EQ(r.mops(), 0);
  EXPECT_EQ(r.latency.count(), 0u);
}

TEST(YcsbDriver, VerifyCatchesAValueThatIsNotTheKeys) {
  MapStore store;
  YcsbOptions o = Small("ycsb-c");
  o.zipf = 0.99;  // key 0 is the hottest (without rehash_key)
  o.verify = true;
  YcsbLoad(store, o);
  store.corrupt = "00000000";
  const YcsbResult r = YcsbRun(store, o);
  EXPECT_GT(r.wrong_values, 0u);
  EXPECT_EQ(r.failed, r.wrong_values);
  EXPECT_NE(r.first_failure.find("00000000"), std::string::npos) << r.first_failure;
  // Without verify the same run counts them as successes.
  o.verify = false;
  EXPECT_EQ(YcsbRun(store, o).wrong_values, 0u);
}

TEST(YcsbDriver, AFailureStopsTheRunAndIsReported) {
  MapStore store;
  YcsbOptions o = Small("ycsb-c");
  YcsbLoad(store, o);
  store.fail_after = 1000 + 500;
  const YcsbResult r = YcsbRun(store, o);
  EXPECT_GE(r.failed, 1u);
  EXPECT_NE(r.first_failure.find("store broke"), std::string::npos) << r.first_failure;
}

TEST(YcsbDriver, BadOptionsAreRefusedNamingTheValue) {
  MapStore store;
  auto refused = [&](YcsbOptions o, const std::string& word) {
    try {
      CheckYcsbOptions(o, store);
      ADD_FAILURE() << "accepted options that should mention " << word;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  YcsbOptions o = Small("ycsb-c");
  EXPECT_NO_THROW(CheckYcsbOptions(o, store));
  o.max_key = 0;
  refused(o, "max_key");
  o = Small("ycsb-c");
  o.duration = -3;
  refused(o, "duration");
  o = Small("ycsb-c");
  o.value_length = 0;
  refused(o, "value_length");
  o = Small("ycsb-c");
  o.key_length = 3;
  o.max_key = 100000;
  refused(o, "key_length 3");
  o = Small("ycsb-e");
  refused(o, "scan");
  o = Small("ycsb-q");
  refused(o, "ycsb-q");
  o = Small("ycsb-c");
  o.zipf = 1;
  refused(o, "zipfian");
  o = Small("ycsb-c");
  o.threads = 0;
  refused(o, "NR_THREAD");
}

TEST(YcsbDriver, ThroughputHasThreeSignificantDigits) {
  EXPECT_EQ(FormatSignificant(1.2849), "1.28");
  EXPECT_EQ(FormatSignificant(12.849), "12.8");
  EXPECT_EQ(FormatSignificant(128.49), "128");
  EXPECT_EQ(FormatSignificant(0.012849), "0.0128");
  EXPECT_EQ(FormatSignificant(0.00012849), "0.000128");
}

}  // namespace
}  // namespace smart
