// SMART-HT with a client held inside one of its windows (a fault point's
// hook keeps the task there while others run): between the read of a slot
// and the CAS that depends on it, between an insert's claim and its removal
// of duplicates, and with a CAS whose completion failed. What the held
// operation reports must be the truth, and nothing it does after it resumes
// may lose or bring back a value.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "hash_table.h"
#include "layout.h"
#include "smart/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart::hashtable {
namespace {

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

  // Runs fn as the one task of a thread of its own, and waits for it.
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

// A read-modify-write reads the key's slot word, then stalls before its
// CAS while another thread updates the key until the slot holds that very
// word again: the key's first block, reused 16 times, is back in the slot
// under its first tag. The CAS would win, and the value computed from the
// old one would wipe out every update in between. The stalled operation
// must read again and apply its change to the newest value.
TEST_F(HashTableStoppedTest, AReadModifyWriteStalledAcrossSixteenReusesOfItsBlockDoesNotWin) {
  options_.reclaim_grace_ns = 0;
  options_.tag_wrap_guard_ns = 100000000;  // 100 ms: the tag's wrap waits that long
  Open();
  ASSERT_TRUE(table_->insert("counter", "base").ok());
  std::thread::id holder;
  bool held = false, recurred = false;
  int updates = 0;
  std::string last = "base";
  SetFaultPointHook("ht.rmw.modifying", [&] {
    if (std::this_thread::get_id() != holder || held) return;
    held = true;
    OnOtherThread([&] {
      HashTable::Location read{};
      ASSERT_TRUE(table_->locate("counter", &read).ok());
      // Two blocks take turns in the updating thread's pool, each reused
      // every other update; the wrap of a tag waits its guard.
      while (!recurred && updates < 20000) {
        last = Numbered("u", ++updates);
        ASSERT_TRUE(table_->update("counter", last).ok());
        HashTable::Location now{};
        ASSERT_TRUE(table_->locate("counter", &now).ok());
        recurred = now.slot == read.slot && now.slot_value == read.slot_value;
        if (updates % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  });
  Status s;
  RunHeld(&holder, [&] { s = table_->read_modify_write("counter", [](std::string* v) { *v += "!"; }); });
  SetFaultPointHook("ht.rmw.modifying", nullptr);
  ASSERT_TRUE(held) << "the read-modify-write never reached its fault point";
  ASSERT_TRUE(recurred) << "the slot never held the word the read-modify-write read again (" << updates
                        << " updates)";
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string value;
  ASSERT_TRUE(table_->search("counter", &value).ok());
  EXPECT_EQ(value, last + "!") << "the stalled read-modify-write won its CAS with a value computed from \"base\"";
  EXPECT_GT(table_->stats().slow_slot_reads, 0u);
}

}  // namespace
}  // namespace smart::hashtable
