// Shard placement and the epoch record: where shards go, which changes of
// the membership are allowed, and the record's JSON form and its checks.
#include "smart/replica_set.h"

#include <gtest/gtest.h>

#include <map>

namespace smart::membership {
namespace {

TEST(ReplicaSet, ShardsGoRoundTheBladesWithDistinctCopies) {
  std::vector<ReplicaSet> sets;
  ASSERT_TRUE(PlaceShards({"a", "b", "c", "d"}, 8, 3, &sets).ok());
  ASSERT_EQ(sets.size(), 8u);
  std::map<std::string, int> primaries;
  for (size_t s = 0; s < sets.size(); ++s) {
    ASSERT_EQ(sets[s].blades.size(), 3u);
    EXPECT_NE(sets[s].blades[0], sets[s].blades[1]);
    EXPECT_NE(sets[s].blades[1], sets[s].blades[2]);
    EXPECT_NE(sets[s].blades[0], sets[s].blades[2]);
    ++primaries[sets[s].blades[0]];
  }
  for (const char* b : {"a", "b", "c", "d"}) EXPECT_EQ(primaries[b], 2) << b;
  EXPECT_EQ(sets[3].blades, (std::vector<std::string>{"d", "a", "b"}));
}

TEST(ReplicaSet, PlacementRefusesWhatCannotHold) {
  std::vector<ReplicaSet> sets;
  EXPECT_FALSE(PlaceShards({"a", "b"}, 4, 3, &sets).ok());         // fewer blades than copies
  EXPECT_FALSE(PlaceShards({"a", "b", "c"}, 4, 4, &sets).ok());    // more than kMaxReplicas
  EXPECT_FALSE(PlaceShards({"a", "b", "c"}, 0, 2, &sets).ok());    // no shard
  EXPECT_FALSE(PlaceShards({"a", "a", "c"}, 4, 2, &sets).ok());    // a blade twice
  EXPECT_FALSE(PlaceShards({"a", "b/c", "d"}, 4, 2, &sets).ok());  // not a path part
}

TEST(ReplicaSet, ADeadBladeLeavesEverySetAndItsShardsKeepTheirOtherCopies) {
  Epoch first;
  ASSERT_TRUE(FirstEpoch({"a", "b", "c"}, 6, 2, &first).ok());
  std::string primary;
  ASSERT_TRUE(first.Primary(1, &primary).ok());
  EXPECT_EQ(primary, "b");
  Epoch next;
  ASSERT_TRUE(RemoveBlade(first, "b", &next).ok());
  EXPECT_EQ(next.number, 2u);
  EXPECT_EQ(next.phase, EpochPhase::kFencing);
  EXPECT_EQ(next.members.count("b"), 0u);
  for (const ReplicaSet& set : next.shards) {
    EXPECT_EQ(std::count(set.blades.begin(), set.blades.end(), "b"), 0);
    EXPECT_FALSE(set.blades.empty());
  }
  ASSERT_TRUE(next.Primary(1, &primary).ok());
  EXPECT_EQ(primary, "c");  // shard 1 was {b, c}
  // With one copy left of some shards, the next death of a holder is refused.
  Epoch third;
  Status s = RemoveBlade(next, "c", &third);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("last voting copy"), std::string::npos) << s.message();
}

TEST(ReplicaSet, AJoiningBladeCatchesUpInTheSetsThatLackACopyAndIsNoPrimary) {
  Epoch first, second, third;
  ASSERT_TRUE(FirstEpoch({"a", "b", "c"}, 6, 2, &first).ok());
  ASSERT_TRUE(RemoveBlade(first, "c", &second).ok());
  ASSERT_TRUE(AddBlade(second, "d", &third).ok());
  EXPECT_EQ(third.number, 3u);
  EXPECT_EQ(third.members.at("d"), MemberState::kCatchingUp);
  for (size_t s = 0; s < third.shards.size(); ++s) {
    const auto& set = third.shards[s].blades;
    const bool had_c = std::count(first.shards[s].blades.begin(), first.shards[s].blades.end(), "c") > 0;
    EXPECT_EQ(std::count(set.begin(), set.end(), "d"), had_c ? 1 : 0) << "shard " << s;
    std::string primary;
    ASSERT_TRUE(third.Primary(s, &primary).ok());
    EXPECT_NE(primary, "d");
  }
  Epoch again;
  EXPECT_FALSE(AddBlade(third, "d", &again).ok());
}

TEST(ReplicaSet, TheRecordRoundTripsThroughJson) {
  Epoch first, second;
  ASSERT_TRUE(FirstEpoch({"m1", "m2", "m3"}, 5, 3, &first).ok());
  ASSERT_TRUE(RemoveBlade(first, "m2", &second).ok());
  Epoch back;
  ASSERT_TRUE(ParseEpoch(EncodeEpoch(second), &back).ok());
  EXPECT_EQ(back.number, second.number);
  EXPECT_EQ(back.phase, second.phase);
  EXPECT_EQ(back.replicas, 3);
  EXPECT_EQ(back.members, second.members);
  ASSERT_EQ(back.shards.size(), second.shards.size());
  for (size_t s = 0; s < back.shards.size(); ++s) EXPECT_EQ(back.shards[s].blades, second.shards[s].blades);
}

TEST(ReplicaSet, ARecordThatBreaksARuleIsRefusedNamingIt) {
  const std::string good =
      R"({"epoch":4,"phase":"open","replicas":2,"members":{"a":"voting","b":"catching-up"},"shards":[["a","b"]]})";
  Epoch e;
  ASSERT_TRUE(ParseEpoch(good, &e).ok());
  const std::pair<std::string, std::string> bad[] = {
      {R"({"epoch":0,"phase":"open","replicas":2,"members":{"a":"voting"},"shards":[["a"]]})", "number"},
      {R"({"epoch":4,"phase":"closed","replicas":2,"members":{"a":"voting"},"shards":[["a"]]})", "phase"},
      {R"({"epoch":4,"phase":"open","replicas":2,"members":{"a":"voting"},"shards":[["a","a"]]})", "twice"},
      {R"({"epoch":4,"phase":"open","replicas":2,"members":{"a":"voting"},"shards":[["a","z"]]})", "not a member"},
      {R"({"epoch":4,"phase":"open","replicas":2,"members":{"b":"catching-up"},"shards":[["b"]]})", "no voting"},
      {R"({"epoch":4,"phase":"open","replicas":1,"members":{"a":"voting","b":"voting"},"shards":[["a","b"]]})",
       "blades, not 1 to 1"},
      {R"({"epoch":4,"phase":"open","replicas":2,"members":{"a":"asleep"},"shards":[["a"]]})", "neither"},
      {R"({"epoch":4,"phase":"open","replicas":2,"members":{"a":"voting"},"shards":[]})", "shards must be"},
      {R"({"epoch":-4,"phase":"open","replicas":2,"members":{"a":"voting"},"shards":[["a"]]})", "epoch number"},
      {"[]", "not a JSON object"},
  };
  for (const auto& [text, why] : bad) {
    Status s = ParseEpoch(text, &e);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(why), std::string::npos) << text << ": " << s.message();
  }
}

}  // namespace
}  // namespace smart::membership
