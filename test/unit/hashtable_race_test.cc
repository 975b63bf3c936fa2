// SMART-HT under contention, checked against the writers' logs
// (writer_log.h): many tasks on a few keys (uniform and zipf) insert,
// update, delete and read while the table grows under them, with every
// second or third CAS delayed (fault injection) so that the windows between
// a read and the CAS that depends on it stay open.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "hash_table.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/task.h"
#include "test_util.h"
#include "writer_log.h"

namespace smart::hashtable {
namespace {

using smart::testing::CheckLogs;
using smart::testing::WriterLog;

// Keys 0..n-1 drawn uniformly or with a zipf law (theta 0.99: the first key
// takes about a fifth of the draws among 24).
class KeyChooser {
 public:
  KeyChooser(int n, bool zipf) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      sum += zipf ? 1.0 / std::pow(i + 1, 0.99) : 1.0;
      cdf_.push_back(sum);
    }
    for (double& c : cdf_) c /= sum;
  }
  int next(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int>(std::min<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
                                             cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
};

class HashTableRaceTest : public ::testing::Test {
 protected:
  void Open(uint64_t expected_keys, const std::string& faults, uint64_t latency_ns = 0) {
    config_ = smart::testing::TestConfig();
    config_.faults = ParseFaultRules(faults);
    config_.shm.latency_ns = latency_ns;
    initiator_ = std::make_unique<Initiator>(config_);
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 64);
    initiator_->connect(0, blade_->host(), blade_->port(), 8);
    options_.expected_keys = expected_keys;
    table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options_);
  }
  void TearDown() override { InstallFaultRules({}); }

  // fn(worker) on `threads` threads x `tasks` tasks.
  void RunTasks(int threads, int tasks, const std::function<void(int)>& fn) {
    RunThreads(threads, false, [&](int t) {
      TaskPool pool;
      for (int k = 0; k < tasks; ++k) pool.spawn([&, t, k] { fn(t * tasks + k); });
      pool.run();
    });
  }

  // Every worker draws keys among `hot_keys` and inserts, updates, deletes
  // or reads them (`ops` each), logging what it did; every fourth step it
  // also inserts a key of its own, so that the table splits under the
  // writers. Then the final state is read into the logs and checked.
  void ContendAndCheck(int hot_keys, bool zipf, int ops) {
    constexpr int kThreads = 2, kTasks = 4, kWorkers = kThreads * kTasks;
    const KeyChooser chooser(hot_keys, zipf);
    std::vector<WriterLog> logs(kWorkers + 1);
    std::map<std::string, std::string> initial;
    for (int k = 0; k < hot_keys; k += 2) {
      initial[Hot(k)] = "initial";
      ASSERT_TRUE(table_->insert(Hot(k), "initial").ok());
    }
    std::vector<int> own_keys(kWorkers, 0);
    RunTasks(kThreads, kTasks, [&](int w) {
      std::mt19937_64 rng(1000 + w);
      WriterLog& log = logs[w];
      for (int n = 0; n < ops; ++n) {
        const std::string key = Hot(chooser.next(rng));
        const int what = static_cast<int>(rng() % 100);
        // i: written by an insert, u: by an update (for the check's report).
        const std::string value = "w" + std::to_string(w) + "." + std::to_string(n) + (what < 20 ? "i" : "u");
        const uint64_t start = WriterLog::begin();
        if (what < 20) {
          ASSERT_TRUE(table_->insert(key, value).ok()) << key;
          log.wrote(key, value, start);
        } else if (what < 55) {
          const Status s = table_->update(key, value);
          ASSERT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
          if (s.ok()) log.wrote(key, value, start);
          else log.read(key, false, "", start);
        } else if (what < 70) {
          const Status s = table_->remove(key);
          ASSERT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
          if (s.ok()) log.removed(key, start);
          else log.read(key, false, "", start);
        } else {
          std::string found;
          const Status s = table_->search(key, &found);
          ASSERT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
          log.read(key, s.ok(), found, start);
        }
        if (n % 4 == 0) {
          const std::string own = Own(w, own_keys[w]++);
          ASSERT_TRUE(table_->insert(own, own).ok()) << own;
        }
      }
    });
    // The final state, read after every writer returned, must agree too.
    WriterLog& last = logs[kWorkers];
    for (int k = 0; k < hot_keys; ++k) {
      std::string found;
      const uint64_t start = WriterLog::begin();
      const Status s = table_->search(Hot(k), &found);
      ASSERT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
      last.read(Hot(k), s.ok(), found, start);
      int copies = 0;
      ASSERT_TRUE(table_->count_copies(Hot(k), &copies).ok());
      EXPECT_EQ(copies, s.ok() ? 1 : 0) << Hot(k);
    }
    std::vector<const WriterLog*> all;
    for (const WriterLog& l : logs) all.push_back(&l);
    const std::string problems = CheckLogs(all, initial);
    EXPECT_TRUE(problems.empty()) << problems;
    // Every key a worker inserted alone is there once, with its value.
    for (int w = 0; w < kWorkers; ++w) {
      for (int i = 0; i < own_keys[w]; ++i) {
        std::string found;
        ASSERT_TRUE(table_->search(Own(w, i), &found).ok()) << Own(w, i);
        ASSERT_EQ(found, Own(w, i));
        int copies = 0;
        ASSERT_TRUE(table_->count_copies(Own(w, i), &copies).ok());
        ASSERT_EQ(copies, 1) << Own(w, i);
      }
    }
    // The table grew under the writers, and their CASes met each other.
    EXPECT_GT(table_->stats().splits, 0u);
    EXPECT_GT(table_->stats().cas_failures, 0u);
  }

  // Runs fn as a task of a thread of its own, and waits for it.
  void OnOtherThread(const std::function<void()>& fn) {
    std::thread t([&] {
      {
        TaskPool pool;
        pool.spawn(fn);
        pool.run();
      }
      initiator_->release_thread();
    });
    t.join();
  }

  // Inserts `key` ("late") in a task of a thread of its own, while another
  // thread inserts it too ("early") between the late insert's read, which
  // found the key absent, and its CAS: two copies in different slots. Then
  // runs claimed(early_is_lowest) in the late insert's task, before it
  // removes the duplicate. Returns false when the inserts met in one slot.
  bool RaceTwoInserts(const std::string& key, const std::function<void(bool)>& claimed) {
    std::thread::id inserter;
    bool before_cas = false, after_cas = false;
    HashTable::Location early{};
    SetFaultPointHook("ht.insert.claiming", [&] {
      if (std::this_thread::get_id() != inserter || before_cas) return;
      before_cas = true;
      OnOtherThread([&] {
        ASSERT_TRUE(table_->insert(key, "early").ok());
        ASSERT_TRUE(table_->locate(key, &early).ok());
      });
    });
    SetFaultPointHook("ht.insert.claimed", [&] {
      if (std::this_thread::get_id() != inserter || after_cas) return;
      after_cas = true;
      int copies = 0;
      HashTable::Location lowest{};
      ASSERT_TRUE(table_->count_copies(key, &copies).ok());
      ASSERT_TRUE(table_->locate(key, &lowest).ok());
      if (copies == 2) claimed(lowest.slot == early.slot);
      else after_cas = false;
    });
    RunTasks(1, 1, [&](int) {
      inserter = std::this_thread::get_id();
      EXPECT_TRUE(table_->insert(key, "late").ok()) << key;
      inserter = std::thread::id();
    });
    SetFaultPointHook("ht.insert.claiming", nullptr);
    SetFaultPointHook("ht.insert.claimed", nullptr);
    EXPECT_TRUE(before_cas) << key << ": the late insert never reached its CAS";
    return after_cas;
  }

  static std::string Hot(int k) { return "hot" + std::to_string(k); }
  static std::string Own(int w, int i) { return "own" + std::to_string(w) + "." + std::to_string(i); }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
  TableOptions options_;
  std::unique_ptr<HashTable> table_;
};

TEST_F(HashTableRaceTest, UniformWritersOnTwentyFourKeysAgreeWithTheirLogs) {
  options_.spread_inserts_for_tests = true;
  Open(300, "delay=20us@cas#3+");
  ContendAndCheck(24, false, 3000);
}

TEST_F(HashTableRaceTest, ZipfWritersOnTwentyFourKeysAgreeWithTheirLogs) {
  options_.spread_inserts_for_tests = true;
  Open(300, "delay=20us@cas#3+");
  ContendAndCheck(24, true, 3000);
}

// Two inserts of an absent key race into different slots; the one whose
// copy is not at the lowest address removes it as a duplicate after its
// CAS. An update that starts after the other insert returned, and lands in
// that doomed copy (through the thread's cache of the slot it just
// claimed), would be lost with it: the update must act on the lowest copy,
// so that after both inserts a read returns the update's value or the late
// insert's, never the value of the insert that returned before the update
// began.
TEST_F(HashTableRaceTest, AnUpdateNeverLandsInACopyItsInserterWillRemove) {
  options_.spread_inserts_for_tests = true;
  options_.speculative_lookup = true;
  Open(300, "");
  int seen = 0;
  for (int k = 0; k < 64 && seen < 4; ++k) {
    const std::string key = "race" + std::to_string(k);
    bool scenario = false;
    Status updated = Status::OK();
    // The early copy is the lower one, so the late copy is doomed; an
    // update of the late insert's thread begins now.
    RaceTwoInserts(key, [&](bool early_is_lowest) {
      scenario = early_is_lowest;
      if (scenario) updated = table_->update(key, "update");
    });
    if (!scenario) continue;
    ++seen;
    ASSERT_TRUE(updated.ok()) << key << ": " << updated.ToString();
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    EXPECT_EQ(copies, 1) << key;
    std::string found;
    ASSERT_TRUE(table_->search(key, &found).ok()) << key;
    EXPECT_NE(found, "early") << key << ": the acknowledged update was lost with the duplicate it landed in";
    EXPECT_TRUE(found == "update" || found == "late") << key << ": read " << found;
  }
  EXPECT_GT(seen, 0) << "no key left the early insert's copy below the late one's";
}

// Two copies of a key: the late insert's, lowest, and the early insert's,
// which returned first and holds a value the late copy supersedes. An
// update then changes the lowest copy, and a delete removes both. While the
// delete has removed one copy and not the other, a reader must not see the
// early value again: a delete removes the lowest copy last.
TEST_F(HashTableRaceTest, ADeleteNeverBringsBackAValueAnUpdateReplaced) {
  options_.spread_inserts_for_tests = true;
  Open(300, "");
  int seen = 0;
  for (int k = 0; k < 64 && seen < 4; ++k) {
    const std::string key = "race" + std::to_string(k);
    std::string between;
    bool deleted_between = false;
    Status deleted = Status::OK();
    const bool raced = RaceTwoInserts(key, [&](bool early_is_lowest) {
      if (early_is_lowest) return;
      ASSERT_TRUE(table_->update(key, "update").ok()) << key;
      std::thread::id deleter;
      SetFaultPointHook("ht.remove.duplicate_removed", [&] {
        if (std::this_thread::get_id() != deleter || deleted_between) return;
        deleted_between = true;
        const Status s = table_->search(key, &between);
        if (s.code() == Status::Code::kNotFound) between = "(absent)";
        else ASSERT_TRUE(s.ok()) << s.ToString();
      });
      OnOtherThread([&] {
        deleter = std::this_thread::get_id();
        deleted = table_->remove(key);
      });
      SetFaultPointHook("ht.remove.duplicate_removed", nullptr);
    });
    if (!raced || !deleted_between) continue;
    ++seen;
    ASSERT_TRUE(deleted.ok()) << key << ": " << deleted.ToString();
    EXPECT_NE(between, "early") << key << ": halfway through the delete, a reader saw the value the update replaced";
    EXPECT_TRUE(between == "update" || between == "(absent)") << key << ": read " << between;
    std::string found;
    EXPECT_EQ(table_->search(key, &found).code(), Status::Code::kNotFound) << key << ": read " << found;
  }
  EXPECT_GT(seen, 0) << "no key left the late insert's copy below the early one's";
}

// Each task updates keys only it writes and reads every update back while
// the others' inserts split the table: a slot frozen (or moved) by a split
// between the update's read and its CAS must make the update try again, so
// the read-back always finds the value just acknowledged.
TEST_F(HashTableRaceTest, UpdatesThatMeetASplitAreReadBack) {
  // Small subtables split often; every other CAS waits, so a split's
  // freeze spans many of the others' updates, each between its read of the
  // slot and its CAS.
  Open(64, "delay=20us@cas#2+");
  constexpr int kThreads = 3, kTasks = 4, kOwned = 4, kRounds = 4000;
  for (int w = 0; w < kThreads * kTasks; ++w) {
    for (int k = 0; k < kOwned; ++k) ASSERT_TRUE(table_->insert(Hot(w * kOwned + k), "start").ok());
  }
  RunTasks(kThreads, kTasks, [&](int w) {
    for (int n = 0; n < kRounds; ++n) {
      const std::string key = Hot(w * kOwned + n % kOwned);
      const std::string value = "w" + std::to_string(w) + "." + std::to_string(n);
      ASSERT_TRUE(table_->update(key, value).ok()) << key;
      std::string found;
      ASSERT_TRUE(table_->search(key, &found).ok()) << key;
      ASSERT_EQ(found, value) << key << ": the acknowledged update was lost";
      ASSERT_TRUE(table_->insert(Own(w, n), "x").ok());
    }
  });
  EXPECT_GT(table_->stats().splits, 0u);
}

// Tasks of one thread share its copy of the directory, refreshing it while
// other tasks of the thread split and other threads double the directory;
// with completions that take 2 us, three threads of eight tasks insert
// until the directory has doubled several times, and every key must then
// be found with its value.
TEST_F(HashTableRaceTest, TasksSharingADirectoryCopyWhileOthersSplitLoseNoKey) {
  Open(300, "", 2000);
  constexpr int kThreads = 3, kTasks = 8, kKeys = 9000;
  RunTasks(kThreads, kTasks, [&](int w) {
    for (int i = w; i < kKeys; i += kThreads * kTasks) {
      ASSERT_TRUE(table_->insert(Own(0, i), Own(0, i)).ok()) << i;
    }
  });
  uint64_t slots = 0;
  int depth = 0;
  ASSERT_TRUE(table_->capacity(0, &slots, &depth).ok());
  EXPECT_GT(depth, 4);
  for (int i = 0; i < kKeys; ++i) {
    std::string found;
    ASSERT_TRUE(table_->search(Own(0, i), &found).ok()) << i;
    ASSERT_EQ(found, Own(0, i));
  }
}

}  // namespace
}  // namespace smart::hashtable
