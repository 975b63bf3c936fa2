// SMART-HT with a client held inside one of its windows (a fault point's
// hook keeps the task there while others run): between the read of a slot
// and the CAS that depends on it, and with a CAS whose completion failed or
// was refused. What the held operation reports must be the truth, and
// nothing it does after it resumes may lose or bring back a value. The
// windows of duplicate copies are in hashtable_duplicates_test.cc.
#include "hashtable_stopped_fixture.h"

namespace smart::hashtable {
namespace {

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

// A slot CAS that was posted and whose completion then failed may have
// been carried out before the failure (a memory blade that stopped
// answering, a session ended under a request in flight): the operation
// must not call itself failed, only of unknown outcome. Here the soft fence
// refuses each CAS, so the table is left as it was; the operations still
// cannot know that from their completions.
TEST_F(HashTableStoppedTest, AnOperationWhoseSlotCasFailsAfterItsPostHasAnUnknownOutcome) {
  struct Case {
    const char* what;
    const char* point;
    std::function<Status(HashTable&)> op;
    const char* key;     // a key the operation writes
    std::string before;  // its value, which the table keeps
  };
  const std::string_view batch_keys[] = {"b1", "b2", "b3"};
  const std::string_view batch_values[] = {"new", "new", "new"};
  const Case cases[] = {
      {"an update", "ht.write.casing", [](HashTable& t) { return t.update("k", "new"); }, "k", "old"},
      {"an insert of an existing key", "ht.write.casing", [](HashTable& t) { return t.insert("k", "new"); }, "k",
       "old"},
      {"an insert of an absent key", "ht.insert.claiming", [](HashTable& t) { return t.insert("fresh", "new"); },
       "fresh", "(absent)"},
      {"a read-modify-write", "ht.rmw.casing",
       [](HashTable& t) { return t.read_modify_write("k", [](std::string* v) { *v += "+1"; }); }, "k", "old"},
      {"a delete", "ht.remove.casing", [](HashTable& t) { return t.remove("k"); }, "k", "old"},
      {"a load batch", "ht.load.claiming", [&](HashTable& t) { return t.load_batch(batch_keys, batch_values, 3); },
       "b2", "(absent)"},
  };
  for (const Case& c : cases) {
    Open();
    ASSERT_TRUE(table_->insert("k", "old").ok());
    const Status s = FencedAt(c.point, [&] { return c.op(*table_); });
    EXPECT_EQ(s.code(), Status::Code::kOutcomeUnknown) << c.what << ": " << s.ToString();
    EXPECT_NE(s.ToString().find("may or may not have taken effect"), std::string::npos) << s.ToString();
    EXPECT_EQ(ReadByAnotherClient(c.key), c.before) << c.what << ": the refused CAS landed";
    table_.reset();
    initiator_.reset();
    blade_.reset();
  }
}

// An insert claims its slot, then finds a racing insert's copy of its key
// and cannot remove the duplicate (its session is ended meanwhile, so its
// CAS is refused). The insert took effect with its claim: it reports OK,
// not an error.
TEST_F(HashTableStoppedTest, AnInsertWhoseClaimWonIsOkEvenIfRemovingADuplicateFails) {
  options_.spread_inserts_for_tests = true;
  bool raced = false;
  for (int k = 0; k < 32 && !raced; ++k) {
    Open();
    const std::string key = "dup" + std::to_string(k);
    std::thread::id holder;
    bool before_claim = false;
    SetFaultPointHook("ht.insert.claiming", [&] {
      if (std::this_thread::get_id() != holder || before_claim) return;
      before_claim = true;
      OnOtherThread([&] { ASSERT_TRUE(table_->insert(key, "early").ok()); });
    });
    SetFaultPointHook("ht.insert.claimed", [&] {
      if (std::this_thread::get_id() != holder || raced) return;
      int copies = 0;
      ASSERT_TRUE(table_->count_copies(key, &copies).ok());
      if (copies != 2) return;
      raced = true;
      EndThisClientsSession();
    });
    Status inserted;
    RunHeld(&holder, [&] { inserted = table_->insert(key, "late"); });
    SetFaultPointHook("ht.insert.claiming", nullptr);
    SetFaultPointHook("ht.insert.claimed", nullptr);
    if (raced) {
      EXPECT_TRUE(inserted.ok()) << "the insert whose claim won reported " << inserted.ToString();
      const std::string value = ReadByAnotherClient(key);
      EXPECT_TRUE(value == "early" || value == "late") << value;
    }
    table_.reset();
    initiator_.reset();
    blade_.reset();
  }
  EXPECT_TRUE(raced) << "no two inserts of one key claimed different slots";
}

// A CAS the memory blade refuses with a remote access error (fault
// injection, as a NIC reports a bad rkey) was not carried out: the
// operation fails with that error, and the table is unchanged.
TEST_F(HashTableStoppedTest, AnOperationWhoseSlotCasWasRefusedFailsWithTheError) {
  // A work-request rule when the transport opens puts the fault-injecting
  // wrapper in place (this one never fires); the one that fails is
  // installed once the table is built and the key inserted.
  Open();
  table_.reset();
  initiator_.reset();
  config_.faults = ParseFaultRules("delay=1us@faa#1000000000");
  initiator_ = std::make_unique<Initiator>(config_);
  initiator_->connect(0, blade_->host(), blade_->port(), 8);
  table_ = std::make_unique<HashTable>(*initiator_, config_, 1, options_);
  ASSERT_TRUE(table_->insert("k", "old").ok());
  InstallFaultRules(ParseFaultRules("fail@cas#1"));
  const Status s = table_->update("k", "new");
  InstallFaultRules({});
  EXPECT_EQ(s.code(), Status::Code::kRemoteAccess) << s.ToString();
  EXPECT_EQ(ReadByAnotherClient("k"), "old");
}

}  // namespace
}  // namespace smart::hashtable
