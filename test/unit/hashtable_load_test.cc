// SMART-HT's batched load (HashTable::load_batch): keys that share round
// trips end up exactly once with their own value, through splits, over
// several shards, over keys already in the table, with a key given twice,
// with blocks too big to share the load area, and when another client takes
// a key's slot between the batch's bucket reads and its CAS.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hash_table.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/target.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart::hashtable {
namespace {

class HashTableLoadTest : public ::testing::Test {
 protected:
  void Open(uint64_t expected_keys, bool speculative = false, int shards = 1) {
    config_ = smart::testing::TestConfig();
    initiator_ = std::make_unique<Initiator>(config_);
    for (int i = 0; i < shards; ++i) {
      blades_.push_back(std::make_unique<EmbeddedMemoryBlade>(config_, 64));
      initiator_->connect(static_cast<node_t>(i), blades_.back()->host(), blades_.back()->port(), 8);
    }
    TableOptions options;
    options.expected_keys = expected_keys;
    options.speculative_lookup = speculative;
    options.speculative_cache_entries = 1024;
    options.reclaim_grace_ns = 1000000;
    table_ = std::make_unique<HashTable>(*initiator_, config_, shards, options);
  }
  void TearDown() override { SetFaultPointHook("ht.load.claiming", nullptr); }

  // fn(worker) on `threads` threads x `tasks` tasks.
  void RunTasks(int threads, int tasks, const std::function<void(int)>& fn) {
    RunThreads(threads, false, [&](int t) {
      TaskPool pool;
      for (int k = 0; k < tasks; ++k) pool.spawn([&, t, k] { fn(t * tasks + k); });
      pool.run();
    });
  }

  // Loads keys[i] = values[i] in batches of `batch` from one task.
  Status LoadAll(const std::vector<std::string>& keys, const std::vector<std::string>& values, size_t batch) {
    Status result;
    RunTasks(1, 1, [&](int) {
      for (size_t i = 0; i < keys.size() && result.ok(); i += batch) {
        std::vector<std::string_view> k, v;
        for (size_t j = i; j < keys.size() && j < i + batch; ++j) {
          k.push_back(keys[j]);
          v.push_back(values[j]);
        }
        result = table_->load_batch(k.data(), v.data(), k.size());
      }
    });
    return result;
  }

  // Every key once, with its value.
  void ExpectLoaded(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
    std::string value;
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(table_->search(keys[i], &value).ok()) << keys[i];
      ASSERT_EQ(value, values[i]) << keys[i];
      int copies = 0;
      ASSERT_TRUE(table_->count_copies(keys[i], &copies).ok()) << keys[i];
      ASSERT_EQ(copies, 1) << keys[i];
    }
  }

  static std::string Key(int i) { return "key" + std::to_string(i); }

  SmartConfig config_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> blades_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<HashTable> table_;
};

TEST_F(HashTableLoadTest, BatchesOfDistinctKeysLeaveEachOnceThroughSplits) {
  Open(300, /*speculative=*/true);
  constexpr int kKeys = 12000;
  RunTasks(2, 4, [&](int worker) {
    for (int i = worker; i < kKeys; i += 8 * 8) {
      std::string keys[8], values[8];
      std::string_view k[8], v[8];
      int n = 0;
      for (int j = i; j < kKeys && n < 8; j += 8, ++n) {
        keys[n] = Key(j);
        values[n] = "v" + keys[n];
        k[n] = keys[n];
        v[n] = values[n];
      }
      ASSERT_TRUE(table_->load_batch(k, v, static_cast<size_t>(n)).ok()) << i;
    }
  });
  const TableStats st = table_->stats();
  EXPECT_GT(st.splits, 0u);
  // Most keys were settled by their batch; the rest (splits, taken slots)
  // went alone.
  EXPECT_GT(st.loads_batched, static_cast<uint64_t>(kKeys) / 2);
  std::vector<std::string> keys, values;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(Key(i));
    values.push_back("v" + Key(i));
  }
  ExpectLoaded(keys, values);
  // A loaded key is an ordinary key, also through the speculative cache.
  std::string value;
  RunTasks(1, 1, [&](int) {
    ASSERT_TRUE(table_->update(Key(7), "new").ok());
    ASSERT_TRUE(table_->search(Key(7), &value).ok());
  });
  EXPECT_EQ(value, "new");
}

TEST_F(HashTableLoadTest, ABatchSpreadsItsKeysOverTheShards) {
  Open(1000, false, 3);
  std::vector<std::string> keys, values;
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(Key(i));
    values.push_back("s" + std::to_string(i));
  }
  ASSERT_TRUE(LoadAll(keys, values, 24).ok());
  EXPECT_GT(table_->stats().loads_batched, 1500u);
  ExpectLoaded(keys, values);
}

// A key already in the table has a slot that names it: the batch leaves it
// to a load of its own, which replaces the value (no second copy).
TEST_F(HashTableLoadTest, LoadingKeysAgainReplacesTheirValues) {
  Open(4000);
  std::vector<std::string> keys, first, second;
  for (int i = 0; i < 2000; ++i) {
    keys.push_back(Key(i));
    first.push_back("first" + std::to_string(i));
    second.push_back("second" + std::to_string(i));
  }
  ASSERT_TRUE(LoadAll(keys, first, 8).ok());
  const uint64_t batched = table_->stats().loads_batched;
  EXPECT_GT(batched, 1000u);
  ASSERT_TRUE(LoadAll(keys, second, 8).ok());
  EXPECT_EQ(table_->stats().loads_batched, batched) << "a batch claimed a second slot for a key it already held";
  ExpectLoaded(keys, second);
}

TEST_F(HashTableLoadTest, AKeyGivenTwiceInOneBatchKeepsItsLaterValue) {
  Open(1000);
  const std::vector<std::string> keys = {"a", "b", "a", "c", "a", "b"};
  const std::vector<std::string> values = {"a1", "b1", "a2", "c1", "a3", "b2"};
  ASSERT_TRUE(LoadAll(keys, values, keys.size()).ok());
  ExpectLoaded({"a", "b", "c"}, {"a3", "b2", "c1"});
  // The first "r" has no room left in the batch's block area and goes
  // alone; the second, small, would fit: it must still go after the first.
  const std::vector<std::string> big = {"p", "q", "r", "r"};
  const std::vector<std::string> big_values = {std::string(3500, 'p'), std::string(3500, 'q'),
                                               std::string(3500, 'r'), "r2"};
  ASSERT_TRUE(LoadAll(big, big_values, big.size()).ok());
  ExpectLoaded({"p", "q", "r"}, {big_values[0], big_values[1], "r2"});
}

// Blocks that do not fit the load area beside the others go alone; a key
// that fits no block fails with an error that says so, after the keys
// before it were loaded.
TEST_F(HashTableLoadTest, BigBlocksGoAloneAndAnOversizedKeyIsAnError) {
  Open(1000);
  std::vector<std::string> keys, values;
  for (int i = 0; i < 8; ++i) {
    keys.push_back(Key(i));
    values.push_back(std::string(3000, static_cast<char>('a' + i)));
  }
  ASSERT_TRUE(LoadAll(keys, values, 8).ok());
  const uint64_t batched = table_->stats().loads_batched;
  EXPECT_GT(batched, 0u);
  EXPECT_LT(batched, 8u);
  ExpectLoaded(keys, values);

  const std::vector<std::string> mixed = {"small", std::string(2000, 'k'), "after"};
  const std::vector<std::string> mixed_values = {"s", std::string(3000, 'v'), "t"};
  const Status s = LoadAll(mixed, mixed_values, 3);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.ToString().find("do not fit in a block"), std::string::npos) << s.ToString();
  ExpectLoaded({"small"}, {"s"});
}

// Another client inserts the batch's first key between the batch's bucket
// reads and its CAS, into the very slot the batch chose: the CAS loses, and
// the key is loaded alone over the other client's copy.
TEST_F(HashTableLoadTest, AKeyWhoseSlotWasTakenBeforeTheCasIsLoadedAlone) {
  Open(1000);
  bool raced = false;
  SetFaultPointHook("ht.load.claiming", [&] {
    if (raced) return;
    raced = true;
    std::thread other([&] {
      {
        TaskPool pool;
        pool.spawn([&] { ASSERT_TRUE(table_->insert(Key(0), "early").ok()); });
        pool.run();
      }
      initiator_->release_thread();
    });
    other.join();
  });
  std::vector<std::string> keys, values;
  for (int i = 0; i < 8; ++i) {
    keys.push_back(Key(i));
    values.push_back("late" + std::to_string(i));
  }
  ASSERT_TRUE(LoadAll(keys, values, 8).ok());
  SetFaultPointHook("ht.load.claiming", nullptr);
  ASSERT_TRUE(raced);
  const TableStats st = table_->stats();
  EXPECT_GE(st.cas_failures, 1u);
  EXPECT_EQ(st.loads_batched, 7u);
  ExpectLoaded(keys, values);
}

}  // namespace
}  // namespace smart::hashtable
