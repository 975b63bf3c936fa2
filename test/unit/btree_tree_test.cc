// SMART-BT operations against memory blades inside the test process (shm):
// single calls, splits over several levels, scans, and threads x tasks
// checked against the exact final state.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "btree.h"
#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart::btree {
namespace {

class BTreeTest : public ::testing::Test {
 protected:
  void Open(int nodes = 1, bool speculative = false) {
    config_ = smart::testing::TestConfig();
    initiator_ = std::make_unique<Initiator>(config_);
    for (int i = 0; i < nodes; ++i) {
      blades_.push_back(std::make_unique<EmbeddedMemoryBlade>(config_, 64));
      initiator_->connect(static_cast<node_t>(i), blades_.back()->host(), blades_.back()->port(), 8);
    }
    options_.speculative_lookup = speculative;
    options_.speculative_cache_entries = 1024;
    options_.reclaim_grace_ns = 100000;
    tree_ = std::make_unique<BTree>(*initiator_, config_, nodes, options_);
  }

  // fn(worker) on `threads` threads x `tasks` tasks.
  void RunTasks(int threads, int tasks, const std::function<void(int)>& fn) {
    RunThreads(threads, false, [&](int t) {
      TaskPool pool;
      for (int k = 0; k < tasks; ++k) pool.spawn([&, t, k] { fn(t * tasks + k); });
      pool.run();
    });
  }

  static std::string Value(uint64_t k) { return "v" + std::to_string(k % 10000000); }

  void ExpectLeavesHold(uint64_t keys) {
    uint64_t counted = 0;
    Status s = tree_->check_leaves(&counted);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(counted, keys);
  }

  SmartConfig config_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> blades_;
  std::unique_ptr<Initiator> initiator_;
  TreeOptions options_;
  std::unique_ptr<BTree> tree_;
};

TEST_F(BTreeTest, SearchInsertUpdateUpsertModifyRemove) {
  Open();
  std::string value;
  EXPECT_EQ(tree_->search(7, &value).code(), Status::Code::kNotFound);
  ASSERT_TRUE(tree_->insert(7, "seven").ok());
  ASSERT_TRUE(tree_->search(7, &value).ok());
  EXPECT_EQ(value, "seven");
  ASSERT_TRUE(tree_->insert(7, "SEVEN").ok());  // upsert
  ASSERT_TRUE(tree_->search(7, &value).ok());
  EXPECT_EQ(value, "SEVEN");
  ASSERT_TRUE(tree_->update(7, std::string(300, 'x')).ok());  // into a block
  ASSERT_TRUE(tree_->search(7, &value).ok());
  EXPECT_EQ(value, std::string(300, 'x'));
  EXPECT_EQ(tree_->update(8, "eight").code(), Status::Code::kNotFound);
  EXPECT_EQ(tree_->search(8, &value).code(), Status::Code::kNotFound);
  ASSERT_TRUE(tree_->read_modify_write(7, [](std::string* v) { *v = "rmw" + v->substr(0, 2); }).ok());
  ASSERT_TRUE(tree_->search(7, &value).ok());
  EXPECT_EQ(value, "rmwxx");
  EXPECT_EQ(tree_->read_modify_write(9, [](std::string*) {}).code(), Status::Code::kNotFound);
  ASSERT_TRUE(tree_->remove(7).ok());
  EXPECT_EQ(tree_->search(7, &value).code(), Status::Code::kNotFound);
  EXPECT_EQ(tree_->remove(7).code(), Status::Code::kNotFound);
  // Keys at both ends of the range.
  ASSERT_TRUE(tree_->insert(0, "min").ok());
  ASSERT_TRUE(tree_->insert(UINT64_MAX, "max").ok());
  ASSERT_TRUE(tree_->search(UINT64_MAX, &value).ok());
  EXPECT_EQ(value, "max");
  ASSERT_TRUE(tree_->search(0, &value).ok());
  EXPECT_EQ(value, "min");
  EXPECT_EQ(tree_->insert(1, std::string(5000, 'v')).code(), Status::Code::kInvalidArgument);
  ExpectLeavesHold(2);
}

TEST_F(BTreeTest, SplitsGrowSeveralLevelsAndScansStayOrdered) {
  Open();
  // 6000 keys spread over the whole 64-bit range, inserted out of order.
  std::map<uint64_t, std::string> expected;
  for (uint64_t i = 0; i < 6000; ++i) {
    const uint64_t k = (i * 0x9e3779b97f4a7c15ull) ^ (i << 7);
    expected[k] = Value(k);
    ASSERT_TRUE(tree_->insert(k, Value(k)).ok()) << i;
  }
  int height = 0;
  ASSERT_TRUE(tree_->height(&height).ok());
  EXPECT_GE(height, 3);
  const TreeStats st = tree_->stats();
  EXPECT_GT(st.leaf_splits, 100u);
  EXPECT_GT(st.internal_splits, 0u);
  EXPECT_GE(st.root_changes, 2u);
  ExpectLeavesHold(expected.size());
  std::string value;
  for (const auto& [k, v] : expected) {
    ASSERT_TRUE(tree_->search(k, &value).ok()) << k;
    ASSERT_EQ(value, v);
  }
  // A scan from every 97th key returns the next keys in order.
  std::vector<std::pair<uint64_t, std::string>> out;
  int checked = 0;
  for (auto it = expected.begin(); it != expected.end(); std::advance(it, std::min<size_t>(97, std::distance(it, expected.end())))) {
    const uint64_t start = it->first == 0 ? 0 : it->first - 1;
    ASSERT_TRUE(tree_->scan(start, 100, &out).ok());
    auto want = expected.lower_bound(start);
    for (const auto& [k, v] : out) {
      ASSERT_NE(want, expected.end());
      ASSERT_EQ(k, want->first);
      ASSERT_EQ(v, want->second);
      ++want;
    }
    EXPECT_EQ(out.size(), std::min<size_t>(100, std::distance(expected.lower_bound(start), expected.end())));
    ++checked;
  }
  EXPECT_GT(checked, 50);
  ASSERT_TRUE(tree_->scan(0, 100000, &out).ok());
  EXPECT_EQ(out.size(), expected.size());
}

TEST_F(BTreeTest, DeletedKeysStayDeletedAndTheirEntriesAreReused) {
  Open();
  for (uint64_t k = 0; k < 2000; ++k) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  const uint64_t splits = tree_->stats().leaf_splits;
  for (int round = 0; round < 5; ++round) {
    for (uint64_t k = 0; k < 2000; k += 2) ASSERT_TRUE(tree_->remove(k).ok()) << k;
    std::string value;
    for (uint64_t k = 0; k < 2000; ++k) {
      Status s = tree_->search(k, &value);
      if (k % 2 == 0) {
        ASSERT_EQ(s.code(), Status::Code::kNotFound) << k;
      } else {
        ASSERT_TRUE(s.ok()) << k;
      }
    }
    for (uint64_t k = 0; k < 2000; k += 2) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  }
  // Reinserting into the freed entries needed no new leaves.
  EXPECT_EQ(tree_->stats().leaf_splits, splits);
  ExpectLeavesHold(2000);
}

TEST_F(BTreeTest, ConcurrentDisjointAndOverlappingInsertsLoseNothing) {
  Open();
  constexpr uint64_t kKeys = 8000;
  // Each of 16 workers inserts every 16th key, and also all keys of a
  // shared range (every worker writes them: one copy must remain).
  RunTasks(2, 8, [&](int worker) {
    for (uint64_t k = static_cast<uint64_t>(worker); k < kKeys; k += 16) {
      ASSERT_TRUE(tree_->insert(k * 1000003, Value(k)).ok()) << k;
    }
    for (uint64_t k = 0; k < 200; ++k) {
      ASSERT_TRUE(tree_->insert(k * 1000003 + 1, "w" + std::to_string(worker)).ok());
    }
  });
  ExpectLeavesHold(kKeys + 200);
  std::string value;
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(tree_->search(k * 1000003, &value).ok()) << k;
    ASSERT_EQ(value, Value(k));
  }
  for (uint64_t k = 0; k < 200; ++k) {
    ASSERT_TRUE(tree_->search(k * 1000003 + 1, &value).ok());
    EXPECT_EQ(value[0], 'w');
  }
  int height = 0;
  ASSERT_TRUE(tree_->height(&height).ok());
  EXPECT_GE(height, 3);
}

TEST_F(BTreeTest, ConcurrentUpdatesAndReadModifyWritesEndExact) {
  Open(1, true);
  constexpr uint64_t kKeys = 64;
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_TRUE(tree_->insert(k, "0").ok());
  // 16 workers add 1 to every key 100 times: each key ends at 1600.
  RunTasks(2, 8, [&](int) {
    for (int round = 0; round < 100; ++round) {
      for (uint64_t k = 0; k < kKeys; ++k) {
        ASSERT_TRUE(tree_->read_modify_write(k, [](std::string* v) { *v = std::to_string(std::stoull(*v) + 1); }).ok());
      }
    }
  });
  std::string value;
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(tree_->search(k, &value).ok());
    EXPECT_EQ(value, "1600") << k;
  }
  const TreeStats st = tree_->stats();
  EXPECT_GT(st.handovers, 0u);  // HOCL passed locks between local tasks
  // Long values in blocks under concurrent updates: every read is whole.
  std::atomic<bool> bad{false};
  RunTasks(2, 4, [&](int worker) {
    std::string v;
    for (int round = 0; round < 300; ++round) {
      const uint64_t k = static_cast<uint64_t>(round) % 8;
      if (worker % 2 == 0) {
        ASSERT_TRUE(tree_->update(k, std::string(100 + worker, static_cast<char>('a' + round % 26))).ok());
      } else {
        ASSERT_TRUE(tree_->search(k, &v).ok());
        if (v.size() > 8 && v.find_first_not_of(v[0]) != std::string::npos) bad = true;
      }
    }
  });
  EXPECT_FALSE(bad.load());
}

TEST_F(BTreeTest, WithoutHoclEveryTaskTakesTheRemoteLockAndUpdatesStayExact) {
  options_.hocl = false;
  Open();
  for (uint64_t k = 0; k < 8; ++k) ASSERT_TRUE(tree_->insert(k, "0").ok());
  RunTasks(2, 4, [&](int) {
    for (int round = 0; round < 50; ++round) {
      for (uint64_t k = 0; k < 8; ++k) {
        ASSERT_TRUE(tree_->read_modify_write(k, [](std::string* v) { *v = std::to_string(std::stoull(*v) + 1); }).ok());
      }
    }
  });
  std::string value;
  for (uint64_t k = 0; k < 8; ++k) {
    ASSERT_TRUE(tree_->search(k, &value).ok());
    EXPECT_EQ(value, "400") << k;
  }
  EXPECT_EQ(tree_->stats().handovers, 0u);
  EXPECT_GT(tree_->stats().lock_retries, 0u);  // tasks met at the remote word
}

TEST_F(BTreeTest, ScansDuringSplitsAreSortedWithoutDuplicatesAndSeeStableKeys) {
  Open();
  // Even keys are present throughout; writers insert odd keys meanwhile,
  // splitting leaves under the scans.
  for (uint64_t k = 0; k < 4000; k += 2) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  std::atomic<int> writers_done{0};
  std::atomic<int> scanners_started{0};
  std::atomic<uint64_t> scans{0};
  RunTasks(2, 4, [&](int worker) {
    if (worker < 4) {
      // The scanners run on the other thread: wait until they run, so the
      // splits happen under their scans however the threads start.
      while (scanners_started.load() < 4) this_task::yield();
      for (uint64_t k = 1 + 2 * static_cast<uint64_t>(worker); k < 4000; k += 8) {
        ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
      }
      writers_done.fetch_add(1);
      return;
    }
    std::vector<std::pair<uint64_t, std::string>> out;
    uint64_t start = static_cast<uint64_t>(worker) * 97;
    scanners_started.fetch_add(1);
    do {
      start = (start + 331) % 3800;
      ASSERT_TRUE(tree_->scan(start, 100, &out).ok());
      ASSERT_EQ(out.size(), 100u);
      uint64_t even = start + (start % 2);
      for (size_t i = 0; i < out.size(); ++i) {
        if (i > 0) ASSERT_LT(out[i - 1].first, out[i].first) << "unsorted or duplicate";
        ASSERT_GE(out[i].first, start);
        ASSERT_EQ(out[i].second, Value(out[i].first));
        if (out[i].first % 2 == 0) {
          ASSERT_EQ(out[i].first, even) << "an even key present throughout was skipped";
          even += 2;
        }
      }
      scans.fetch_add(1);
    } while (writers_done.load() < 4);
  });
  EXPECT_GE(scans.load(), 4u);
  ExpectLeavesHold(4000);
}

TEST_F(BTreeTest, SpeculativeLookupReadsOneLineAndNoticesMoves) {
  Open(1, true);
  for (uint64_t k = 0; k < 40; ++k) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  std::string value;
  ASSERT_TRUE(tree_->search(5, &value).ok());
  const uint64_t rt = tree_->stats().round_trips;
  ASSERT_TRUE(tree_->search(5, &value).ok());
  EXPECT_EQ(value, Value(5));
  EXPECT_EQ(tree_->stats().round_trips, rt + 1);
  EXPECT_GE(tree_->stats().speculative_hits, 1u);
  // Splits move keys: the cached line no longer holds them.
  for (uint64_t k = 40; k < 400; ++k) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  for (uint64_t k = 0; k < 400; ++k) {
    ASSERT_TRUE(tree_->search(k, &value).ok());
    ASSERT_EQ(value, Value(k));
  }
  // Another client (its own caches) deletes a key this one cached.
  BTree other(*initiator_, config_, 1, options_);
  std::thread remover([&] { ASSERT_TRUE(other.remove(5).ok()); });
  remover.join();
  EXPECT_EQ(tree_->search(5, &value).code(), Status::Code::kNotFound);
}

// An update of an 8-byte value with a free lock and no split: the lock CAS
// with the leaf READ, then the line's write-back with the release CAS (2
// round trips); without command combination the release waits for the
// write (3).
TEST_F(BTreeTest, AnUpdateTakesTwoRoundTripsAndThreeWithoutCommandCombination) {
  for (const bool combine : {true, false}) {
    tree_.reset();
    initiator_.reset();
    blades_.clear();
    options_.combine_commands = combine;
    Open();
    // Two levels: the leaf's parent is a level-1 page, which the index
    // cache holds after the search.
    for (uint64_t k = 0; k < 400; ++k) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
    std::string value;
    ASSERT_TRUE(tree_->search(7, &value).ok());
    const uint64_t rt = tree_->stats().round_trips;
    ASSERT_TRUE(tree_->update(7, Value(70)).ok());
    EXPECT_EQ(tree_->stats().round_trips - rt, combine ? 2u : 3u) << (combine ? "combined" : "not combined");
    ASSERT_TRUE(tree_->search(7, &value).ok());
    EXPECT_EQ(value, Value(70));
  }
}

TEST_F(BTreeTest, TwoBladesHoldPagesAndLocks) {
  Open(2);
  const uint64_t chunks0 = blades_[0]->target().super_chunk()->alloc_chunk;
  const uint64_t chunks1 = blades_[1]->target().super_chunk()->alloc_chunk;
  RunTasks(2, 4, [&](int worker) {
    for (uint64_t k = static_cast<uint64_t>(worker); k < 5000; k += 8) ASSERT_TRUE(tree_->insert(k, Value(k)).ok());
  });
  ExpectLeavesHold(5000);
  EXPECT_GT(blades_[0]->target().super_chunk()->alloc_chunk, chunks0);
  EXPECT_GT(blades_[1]->target().super_chunk()->alloc_chunk, chunks1);
  // A second client attaches to the same tree.
  BTree again(*initiator_, config_, 2, options_);
  std::string value;
  ASSERT_TRUE(again.search(4321, &value).ok());
  EXPECT_EQ(value, Value(4321));
}

TEST_F(BTreeTest, IndexCacheOfOnePageIsStillCorrect) {
  options_.index_cache_pages = 1;
  Open();
  RunTasks(2, 4, [&](int worker) {
    for (uint64_t k = static_cast<uint64_t>(worker); k < 3000; k += 8) ASSERT_TRUE(tree_->insert(k * 7, Value(k)).ok());
  });
  std::string value;
  for (uint64_t k = 0; k < 3000; ++k) {
    ASSERT_TRUE(tree_->search(k * 7, &value).ok()) << k;
    ASSERT_EQ(value, Value(k));
  }
  EXPECT_GT(tree_->stats().cache_invalidations + tree_->stats().cache_hits, 0u);
}

}  // namespace
}  // namespace smart::btree
