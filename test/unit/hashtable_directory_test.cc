// SMART-HT's directory copies: each thread keeps one per shard, and its
// tasks share it. These tests hold one task inside a refresh (a hook at the
// fault point ht.directory.read) while another client changes the directory,
// and check what the thread's other tasks then see.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "blade_fixture.h"
#include "hash_table.h"
#include "smart/fault_injection.h"
#include "smart/task.h"

namespace smart::hashtable {
namespace {

class HashTableDirectoryTest : public smart::testing::BladeTest {
 protected:
  void SetUp() override {
    BladeTest::SetUp();
    options_.expected_keys = 300;
    table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options_);
  }
  void TearDown() override { SetFaultPointHook("ht.directory.read", nullptr); }

  // Another client inserts keys until its table's global depth exceeds
  // `depth` (the directory doubled); returns the depth it saw.
  int GrowFromAnotherClient(int depth) {
    int seen = depth;
    std::thread other([&] {
      auto in = Connect();
      HashTable table(*in, config_, 1, options_);
      for (int i = 0; i < 100000 && seen <= depth; ++i) {
        ASSERT_TRUE(table.insert("grow-" + std::to_string(i), "value").ok());
        uint64_t slots = 0;
        ASSERT_TRUE(table.capacity(0, &slots, &seen).ok());
      }
    });
    other.join();
    return seen;
  }

  TableOptions options_;
  std::unique_ptr<HashTable> table_;
};

// A refresh that finds another task of its thread refreshing must not hand
// back that task's copy: it was read before the call and may miss a change
// the caller has to see (for a splitter, a split published since, whose
// entries it would otherwise overwrite).
TEST_F(HashTableDirectoryTest, ARefreshWaitingForAnotherTasksReadsTheDirectoryAgain) {
  uint64_t slots = 0;
  int before = -1;
  ASSERT_TRUE(table_->capacity(0, &slots, &before).ok());

  const std::thread::id here = std::this_thread::get_id();
  bool first_at_point = false, second_waiting = false;
  int hits_here = 0;
  SetFaultPointHook("ht.directory.read", [&] {
    if (std::this_thread::get_id() != here || ++hits_here > 1) return;
    // The first task, its directory header read: held here until the second
    // task has started its own refresh.
    first_at_point = true;
    while (!second_waiting) this_task::yield();
  });

  int first_depth = -1, second_depth = -1, grown = -1;
  Status first, second;
  TaskPool pool;
  pool.spawn([&] { first = table_->capacity(0, &slots, &first_depth); });
  pool.spawn([&] {
    while (!first_at_point) this_task::yield();
    grown = GrowFromAnotherClient(before);
    // No yield between this flag and the refresh below: the first task stays
    // at the point until this one waits inside refresh_directory.
    second_waiting = true;
    second = table_->capacity(0, &slots, &second_depth);
  });
  pool.run();

  ASSERT_TRUE(first.ok()) << first.ToString();
  ASSERT_TRUE(second.ok()) << second.ToString();
  ASSERT_GT(grown, before);
  EXPECT_EQ(hits_here, 2) << "the second refresh did not read the directory";
  EXPECT_EQ(first_depth, before) << "the first refresh read its header before the other client grew the table";
  EXPECT_EQ(second_depth, grown) << "the second refresh returned a copy older than its call";
}

}  // namespace
}  // namespace smart::hashtable
