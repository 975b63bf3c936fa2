// SMART-HT's duplicate copies of a key (two inserts of an absent key that
// claimed different slots) with a client held inside one of its windows: a
// late insert claimed below a cached copy, a reader between a read that
// found no copy and its confirming read, a client about to remove the
// copies above the lowest. No reader may take a superseded copy or miss a
// present key, and no value may come back or vanish (DESIGN.md,
// "Duplicates").
#include <condition_variable>
#include <mutex>

#include "hashtable_stopped_fixture.h"

namespace smart::hashtable {
namespace {

// A speculative search whose cached slot Y has a lower copy X of the key
// (a late insert's, not yet rid of its duplicate Y) must return X's value:
// every reader that looks at the buckets now does, so Y's value would be a
// stale read after a newer one.
TEST_F(HashTableStoppedTest, ASpeculativeSearchReturnsTheLowestCopyAfterALateInsertClaimedBelowIt) {
  options_.speculative_lookup = true;
  options_.spread_inserts_for_tests = true;
  Open();
  int seen = 0;
  for (int k = 0; k < 64 && seen < 3; ++k) {
    const std::string key = "late" + std::to_string(k);
    std::string found;
    uint64_t lookups = 0;
    const bool scenario = LateLowerCopy(key, [&] {
      const uint64_t before = SpeculativeLookups();
      ASSERT_TRUE(table_->search(key, &found).ok());
      lookups = SpeculativeLookups() - before;
    });
    if (!scenario) continue;
    ++seen;
    EXPECT_GT(lookups, 0u) << key << ": the search did not consult its cache";
    EXPECT_EQ(found, "late") << key << ": the search read the higher copy that the late insert is about to remove";
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    EXPECT_EQ(copies, 1) << key;
  }
  EXPECT_GT(seen, 0) << "no late insert claimed a slot below the early copy";
}

// A speculative update whose cached slot Y has a lower copy X (as above)
// began after X was claimed: it must land in X, or the late insert removes
// it with Y and the acknowledged update is lost.
TEST_F(HashTableStoppedTest, ASpeculativeUpdateAfterALateInsertClaimedBelowItIsNotLost) {
  options_.speculative_lookup = true;
  options_.spread_inserts_for_tests = true;
  Open();
  int seen = 0;
  for (int k = 0; k < 64 && seen < 3; ++k) {
    const std::string key = "late" + std::to_string(k);
    Status updated;
    uint64_t lookups = 0;
    const bool scenario = LateLowerCopy(key, [&] {
      const uint64_t before = SpeculativeLookups();
      updated = table_->update(key, "update");
      lookups = SpeculativeLookups() - before;
    });
    if (!scenario) continue;
    ++seen;
    ASSERT_TRUE(updated.ok()) << key << ": " << updated.ToString();
    EXPECT_GT(lookups, 0u) << key << ": the update did not consult its cache";
    std::string found;
    ASSERT_TRUE(table_->search(key, &found).ok());
    EXPECT_EQ(found, "update") << key << ": the acknowledged update was removed with the duplicate it landed in";
    int copies = 0;
    ASSERT_TRUE(table_->count_copies(key, &copies).ok());
    EXPECT_EQ(copies, 1) << key;
  }
  EXPECT_GT(seen, 0) << "no late insert claimed a slot below the early copy";
}

// A search that finds no copy reads again, and reports the miss only when
// that read saw the same candidate buckets with the same headers. Here
// another client moves the change count of one of the key's buckets (as a
// client about to remove a duplicate does) between the first two reads:
// the search must read a third time, and then report the miss. Without a
// change, the second read confirms the first.
TEST_F(HashTableStoppedTest, AMissIsConfirmedOnlyByAReadThatFindsTheBucketHeadersUnchanged) {
  Open();
  for (const bool moved : {false, true}) {
    const std::string key = moved ? "absent-moved" : "absent";
    HashTable::Location where{};
    ASSERT_TRUE(table_->insert(key, "v").ok());
    ASSERT_TRUE(table_->locate(key, &where).ok());
    ASSERT_TRUE(table_->remove(key).ok());
    const uint64_t before = RemoteWord(HeaderOf(where.slot));
    std::thread::id holder;
    int misses = 0;
    SetFaultPointHook("ht.miss.confirming", [&] {
      if (std::this_thread::get_id() != holder) return;
      if (++misses == 1 && moved) RemoteWord(HeaderOf(where.slot), true);
    });
    Status s;
    std::string value;
    RunHeld(&holder, [&] { s = table_->search(key, &value); });
    SetFaultPointHook("ht.miss.confirming", nullptr);
    EXPECT_EQ(s.code(), Status::Code::kNotFound) << key << ": " << s.ToString();
    EXPECT_EQ(misses, moved ? 2 : 1) << key << ": reads that found no copy and were not confirmed";
    EXPECT_EQ(HeaderCount(RemoteWord(HeaderOf(where.slot))), HeaderCount(before) + (moved ? 1 : 0)) << key;
  }
}

// A client that removes a copy of a key that stays present (an insert
// removing the duplicate above its own copy, a delete removing a higher
// copy before the lowest) first pins the lowest copy: it moves the change
// count of the header of its bucket, so that a reader that read that
// bucket before the copy there was claimed, and the removed slot after it
// was emptied, does not report a miss, and publishes the lowest copy's
// value again, so that no client whose read came before can remove it
// (DESIGN.md, "Duplicates").
TEST_F(HashTableStoppedTest, ARemovalOfACopyAboveTheLowestPinsTheLowestCopyFirst) {
  options_.spread_inserts_for_tests = true;
  Open();
  int inserts = 0, deletes = 0;
  for (int k = 0; k < 64 && (inserts == 0 || deletes == 0); ++k) {
    const bool by_delete = inserts > 0;
    const std::string key = "pin" + std::to_string(k);
    uint64_t header_at_claim = 0, header_at_removal = 0, slot_at_claim = 0, slot_at_removal = 0;
    std::string value_at_removal;
    HashTable::Location lowest{};
    std::thread::id deleter;
    bool claimed = false, checked = false;
    auto check = [&] {
      if (checked) return;
      checked = true;
      header_at_removal = RemoteWord(HeaderOf(lowest.slot));
      slot_at_removal = RemoteWord(lowest.slot);
      value_at_removal = SearchOnOtherThread(key);
    };
    SetFaultPointHook("ht.duplicates.removing", [&] {
      if (!by_delete && claimed) check();
    });
    SetFaultPointHook("ht.remove.casing", [&] {
      if (by_delete && std::this_thread::get_id() == deleter) check();
    });
    const bool scenario = LateLowerCopy(key, [&] {
      ASSERT_TRUE(table_->locate(key, &lowest).ok());
      header_at_claim = RemoteWord(HeaderOf(lowest.slot));
      slot_at_claim = lowest.slot_value;
      claimed = true;
      if (by_delete) {
        OnOtherThread([&] {
          deleter = std::this_thread::get_id();
          ASSERT_TRUE(table_->remove(key).ok());
        });
      }
    });
    SetFaultPointHook("ht.duplicates.removing", nullptr);
    SetFaultPointHook("ht.remove.casing", nullptr);
    if (!scenario) continue;
    const char* who = by_delete ? ": the delete" : ": the insert";
    ++(by_delete ? deletes : inserts);
    ASSERT_TRUE(checked) << key << ": no copy above the lowest was removed";
    EXPECT_EQ(HeaderShape(header_at_removal), HeaderShape(header_at_claim)) << key;
    EXPECT_EQ(HeaderCount(header_at_removal), HeaderCount(header_at_claim) + 1)
        << key << who << " removed a higher copy before moving the header";
    EXPECT_NE(slot_at_removal, slot_at_claim) << key << who << " removed a higher copy before pinning the lowest";
    EXPECT_FALSE(SlotEmpty(slot_at_removal)) << key;
    EXPECT_EQ(value_at_removal, "late") << key << ": pinning changed the value";
  }
  EXPECT_GT(inserts, 0) << "no late insert claimed a slot below the early copy";
  EXPECT_GT(deletes, 0) << "no delete met a late lower copy";
}

// An insert I reads the key absent; another insert claims copy L; a
// delete D reads L alone and is held before its CAS; I claims W above L,
// reads both and pins L. D's CAS, released now, would remove L from under
// W, making W (I's value) the key's value, which I, acting on its older
// read, would then remove as a mere duplicate: the value would vanish with
// no delete to account for it. Pinned, L cannot go that way: D reads
// again and removes both. Whatever a reader sees once D returned must stay
// while I finishes removing its duplicate.
TEST_F(HashTableStoppedTest, ACopyAboveTheLowestNeverBecomesTheValueJustBeforeItIsRemovedAsADuplicate) {
  options_.spread_inserts_for_tests = true;
  Open();
  int seen = 0;
  for (int k = 0; k < 64 && seen < 2; ++k) {
    const std::string key = "resurrect" + std::to_string(k);
    std::thread::id holder, deleter_id;
    std::mutex m;
    std::condition_variable cv;
    bool at_cas = false, go = false, scenario = false, claiming = false, removing = false;
    Status deleted;
    std::string after_delete, after_insert;
    HashTable::Location early{};
    std::thread deleter;
    auto release_deleter = [&] {
      {
        std::lock_guard<std::mutex> lock(m);
        go = true;
      }
      cv.notify_all();
      if (deleter.joinable()) deleter.join();
    };
    SetFaultPointHook("ht.remove.casing", [&] {
      if (std::this_thread::get_id() != deleter_id) return;
      std::unique_lock<std::mutex> lock(m);
      if (at_cas) return;  // D's later CASes go on
      at_cas = true;
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    });
    SetFaultPointHook("ht.insert.claiming", [&] {
      if (std::this_thread::get_id() != holder || claiming) return;
      claiming = true;
      OnOtherThread([&] {
        ASSERT_TRUE(table_->insert(key, "early").ok());
        ASSERT_TRUE(table_->locate(key, &early).ok());
      });
      deleter = std::thread([&] {
        deleter_id = std::this_thread::get_id();
        {
          TaskPool pool;
          pool.spawn([&] { deleted = table_->remove(key); });
          pool.run();
        }
        initiator_->release_thread();
      });
      std::unique_lock<std::mutex> lock(m);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return at_cas; }))
          << key << ": the delete never reached its CAS";
    });
    SetFaultPointHook("ht.duplicates.removing", [&] {
      if (std::this_thread::get_id() != holder || removing) return;
      removing = true;
      HashTable::Location lowest{};
      ASSERT_TRUE(table_->locate(key, &lowest).ok());
      scenario = lowest.slot == early.slot;  // W above L: I removes W
      release_deleter();
      if (scenario) after_delete = SearchOnOtherThread(key);
    });
    Status inserted;
    RunHeld(&holder, [&] { inserted = table_->insert(key, "late"); });
    release_deleter();
    SetFaultPointHook("ht.insert.claiming", nullptr);
    SetFaultPointHook("ht.duplicates.removing", nullptr);
    SetFaultPointHook("ht.remove.casing", nullptr);
    ASSERT_TRUE(claiming) << key << ": the insert never reached its claim";
    ASSERT_TRUE(inserted.ok()) << key << ": " << inserted.ToString();
    if (!scenario) continue;
    ++seen;
    ASSERT_TRUE(deleted.ok()) << key << ": " << deleted.ToString();
    after_insert = ReadByAnotherClient(key);
    EXPECT_EQ(after_insert, after_delete)
        << key << ": what a reader saw after the delete returned changed when the insert removed its duplicate";
    EXPECT_EQ(after_insert, "(absent)") << key << ": the delete returned with a copy of the key left";
  }
  EXPECT_GT(seen, 0) << "no insert claimed a copy above the one the held delete read";
}

}  // namespace
}  // namespace smart::hashtable
