// The fixture of the SMART-HT tests that hold a client inside one of its
// windows (a fault point's hook keeps the task there while others run):
// hashtable_stopped_test.cc and hashtable_duplicates_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart::hashtable {

class HashTableStoppedTest : public ::testing::Test {
 protected:
  void Open() {
    config_ = smart::testing::TestConfig();
    initiator_ = std::make_unique<Initiator>(config_);
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 64);
    initiator_->connect(0, blade_->host(), blade_->port(), 8);
    table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options_);
  }
  void SetUp() override {
    options_.expected_keys = 300;
    options_.speculative_cache_entries = 1024;
  }
  void TearDown() override { InstallFaultRules({}); }

  // Runs fn as the one task of a thread of its own (a client of `in`,
  // by default this test's), and waits for it.
  void OnOtherThread(const std::function<void()>& fn, Initiator* in = nullptr) {
    std::thread t([&] {
      {
        TaskPool pool;
        pool.spawn(fn);
        pool.run();
      }
      (in != nullptr ? in : initiator_.get())->release_thread();
    });
    t.join();
  }

  // Runs fn as the one task of a thread of its own; `inside` is that
  // thread's id while it runs (hooks compare it to act only there).
  void RunHeld(std::thread::id* inside, const std::function<void()>& fn) {
    std::thread t([&] {
      *inside = std::this_thread::get_id();
      {
        TaskPool pool;
        pool.spawn(fn);
        pool.run();
      }
      *inside = std::thread::id();
      initiator_->release_thread();
    });
    t.join();
  }

  // Another client has the memory blade end this client's session, as the
  // fence of a lock take-over does: this client's later requests are
  // refused by its own provider (shm's soft fence), after their post.
  void EndThisClientsSession() {
    Initiator other(config_);
    other.connect(0, blade_->host(), blade_->port(), 2);
    OnOtherThread(
        [&] {
          auto* scratch = static_cast<uint64_t*>(other.alloc_cache(8));
          bool ended = false;
          ASSERT_TRUE(FenceSession(other, 0, initiator_->session(0), scratch, LeaseOptions{}, &ended).ok());
          ASSERT_TRUE(ended);
        },
        &other);
  }

  // Runs `op` in a task held at fault point `point` while another client
  // has the memory blade end this client's session, as the fence of a lock
  // take-over does: the slot CAS the operation then posts is refused by
  // this client's own provider (shm's soft fence), after the post.
  Status FencedAt(const char* point, const std::function<Status()>& op) {
    std::thread::id holder;
    bool fenced = false;
    SetFaultPointHook(point, [&] {
      if (std::this_thread::get_id() != holder || fenced) return;
      fenced = true;
      EndThisClientsSession();
    });
    Status s;
    RunHeld(&holder, [&] { s = op(); });
    SetFaultPointHook(point, nullptr);
    EXPECT_TRUE(fenced) << "the operation never reached " << point;
    return s;
  }

  // The value of `key` as another client reads it ("(absent)" when absent).
  // Call outside a task: it opens the table.
  std::string ReadByAnotherClient(const std::string& key) {
    std::string value;
    Initiator other(config_);
    other.connect(0, blade_->host(), blade_->port(), 2);
    HashTable table(other, config_, 1, options_);
    OnOtherThread(
        [&] {
          const Status s = table.search(key, &value);
          if (s.code() == Status::Code::kNotFound) {
            value = "(absent)";
          } else {
            EXPECT_TRUE(s.ok()) << s.ToString();
          }
        },
        &other);
    return value;
  }

  // The value of `key` as this client reads it on a thread of its own
  // ("(absent)" when absent); unlike ReadByAnotherClient, callable inside a
  // task (a fault point's hook).
  std::string SearchOnOtherThread(const std::string& key) {
    std::string value;
    OnOtherThread([&] {
      const Status s = table_->search(key, &value);
      if (s.code() == Status::Code::kNotFound) {
        value = "(absent)";
      } else {
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    });
    return value;
  }

  // Inserts `key` ("late") in a thread of its own, held after its read of
  // the buckets (the key absent) and before its claim, while another thread
  // inserts it and updates it ("early", the copy Y) and the late insert's
  // thread caches Y with a search. Once the late insert has claimed its slot X, and when X
  // lies below Y (from then on X holds the key's value, until the late
  // insert removes Y), runs `claimed` in the late insert's task, whose
  // speculative cache still names Y. Returns false when X lies above Y.
  bool LateLowerCopy(const std::string& key, const std::function<void()>& claimed) {
    std::thread::id holder;
    bool before_claim = false, scenario = false;
    HashTable::Location early{};
    SetFaultPointHook("ht.insert.claiming", [&] {
      if (std::this_thread::get_id() != holder || before_claim) return;
      before_claim = true;
      OnOtherThread([&] {
        // An update of the copy an insert claimed: its block must not pass
        // for one of a loaded copy (kBlockLoaded) either.
        ASSERT_TRUE(table_->insert(key, "inserted").ok());
        ASSERT_TRUE(table_->update(key, "early").ok());
        ASSERT_TRUE(table_->locate(key, &early).ok());
      });
      std::string value;
      ASSERT_TRUE(table_->search(key, &value).ok());  // caches Y in this thread
      ASSERT_EQ(value, "early");
      ASSERT_TRUE(table_->search(key, &value).ok());  // a speculative hit
      ASSERT_EQ(value, "early");
    });
    SetFaultPointHook("ht.insert.claimed", [&] {
      if (std::this_thread::get_id() != holder || scenario) return;
      HashTable::Location lowest{};
      int copies = 0;
      ASSERT_TRUE(table_->count_copies(key, &copies).ok());
      ASSERT_TRUE(table_->locate(key, &lowest).ok());
      if (copies != 2 || lowest.slot == early.slot) return;
      scenario = true;
      claimed();
    });
    Status inserted;
    RunHeld(&holder, [&] { inserted = table_->insert(key, "late"); });
    SetFaultPointHook("ht.insert.claiming", nullptr);
    SetFaultPointHook("ht.insert.claimed", nullptr);
    EXPECT_TRUE(before_claim) << key << ": the late insert never reached its claim";
    EXPECT_TRUE(inserted.ok()) << key << ": " << inserted.ToString();
    return scenario;
  }

  // One word of the memory blade, read (or its change count moved, as a
  // client that removes a duplicate does) by another client.
  uint64_t RemoteWord(GlobalAddress at, bool bump = false) {
    uint64_t word = 0;
    Initiator other(config_);
    other.connect(0, blade_->host(), blade_->port(), 2);
    OnOtherThread(
        [&] {
          auto* buf = static_cast<uint64_t*>(other.alloc_cache(8));
          ASSERT_TRUE(other.read(buf, at, 8).ok());
          word = *buf;
          if (bump) {
            ASSERT_TRUE(other.compare_and_swap(buf, at, word, HeaderBumped(word), Option::kSync).ok());
            ASSERT_EQ(*buf, word);
            word = HeaderBumped(word);
          }
        },
        &other);
    return word;
  }
  // The header of the bucket that holds `slot`.
  static GlobalAddress HeaderOf(GlobalAddress slot) { return GlobalAddress(slot.node, slot.offset & ~(kBucketSize - 1)); }

  uint64_t SpeculativeLookups() const {
    const TableStats s = table_->stats();
    return s.speculative_hits + s.speculative_misses;
  }

  static std::string Numbered(const char* prefix, int i) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%s%05d", prefix, i);
    return buf;
  }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
  TableOptions options_;
  std::unique_ptr<HashTable> table_;
};

}  // namespace smart::hashtable
