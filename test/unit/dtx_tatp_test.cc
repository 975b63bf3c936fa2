// TATP on SMART-DTX: the population against the specification's counts and
// distributions, the database built from it on two memory blades, and call
// forwarding rows inserted and deleted as committed.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "database.h"
#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "tatp.h"
#include "test_util.h"
#include "transaction.h"
#include "verify.h"

namespace smart::dtx::tatp {
namespace {

// Every row the population emits, by table and key.
struct Rows {
  std::map<uint16_t, std::map<uint64_t, std::string>> tables;
  PopulationCounts counts;
};

Rows Collect(uint64_t subscribers) {
  Rows r;
  const auto specs = Tables(subscribers);
  r.counts = Populate(subscribers, [&](uint16_t table, uint64_t key, const void* value) {
    size_t bytes = 0;
    for (const TableSpec& t : specs) bytes = t.id == table ? t.value_bytes : bytes;
    ASSERT_NE(bytes, 0u) << "a row for table " << table;
    const bool fresh = r.tables[table].emplace(key, std::string(static_cast<const char*>(value), bytes)).second;
    EXPECT_TRUE(fresh) << "table " << table << " key " << key << " emitted twice";
  });
  return r;
}

TEST(TatpPopulation, SubscriberNumbersAreDecimalDigitsInNibbles) {
  EXPECT_EQ(SubNumber(0), 0u);
  EXPECT_EQ(SubNumber(7), 7u);
  EXPECT_EQ(SubNumber(1234), 0x1234u);
  EXPECT_EQ(SubNumber(100000), 0x100000u);
  EXPECT_EQ(SubNumber(9999999999ull), 0x9999999999ull);
}

TEST(TatpPopulation, CountsAndDistributionsMatchTheSpecification) {
  constexpr uint64_t kN = 20000;
  const Rows rows = Collect(kN);
  const auto& subs = rows.tables.at(kSubscriber);
  const auto& secs = rows.tables.at(kSecondarySubscriber);
  ASSERT_EQ(subs.size(), kN);
  ASSERT_EQ(secs.size(), kN);
  EXPECT_EQ(rows.counts.subscribers, kN);
  EXPECT_EQ(rows.counts.secondary, kN);
  for (uint64_t s = 0; s < kN; ++s) {
    SubscriberRow sub;
    memcpy(&sub, subs.at(s).data(), sizeof(sub));
    ASSERT_EQ(sub.sub_nbr, SubNumber(s));
    ASSERT_EQ(sub.magic, kSubscriberMagic);
    ASSERT_LT(sub.bits, 1u << 10);
    SecondaryRow sec;
    memcpy(&sec, secs.at(SubNumber(s)).data(), sizeof(sec));
    ASSERT_EQ(sec.s_id, s);
  }
  // 1-4 access rows and facilities per subscriber, each count a quarter of
  // the subscribers; 0-3 call forwarding rows per facility, likewise.
  std::vector<int> access(kN, 0), facility(kN, 0);
  for (const auto& [key, value] : rows.tables.at(kAccessInfo)) {
    ASSERT_GE(key & 0xff, 1u);
    ASSERT_LE(key & 0xff, 4u);
    ++access[key >> 8];
  }
  std::map<uint64_t, int> forwards;  // facility key -> rows
  uint64_t active = 0;
  for (const auto& [key, value] : rows.tables.at(kSpecialFacility)) {
    ASSERT_GE(key & 0xff, 1u);
    ASSERT_LE(key & 0xff, 4u);
    ++facility[key >> 8];
    forwards[key] = 0;
    active += static_cast<uint8_t>(value[0]) == 1;
  }
  for (const auto& [key, value] : rows.tables.at(kCallForwarding)) {
    const uint64_t st = key & 0xff;
    ASSERT_TRUE(st == 0 || st == 8 || st == 16) << key;
    ASSERT_TRUE(forwards.count(key >> 8)) << "call forwarding " << key << " without its facility";
    ++forwards[key >> 8];
    const unsigned end = static_cast<uint8_t>(value[0]);
    ASSERT_GT(end, st);
    ASSERT_LE(end, st + 8);
  }
  std::array<uint64_t, 5> access_hist{}, facility_hist{}, forward_hist{};
  for (uint64_t s = 0; s < kN; ++s) {
    ASSERT_GE(access[s], 1);
    ASSERT_LE(access[s], 4);
    ASSERT_GE(facility[s], 1);
    ASSERT_LE(facility[s], 4);
    ++access_hist[access[s]];
    ++facility_hist[facility[s]];
  }
  for (const auto& [key, n] : forwards) {
    ASSERT_LE(n, 3);
    ++forward_hist[n];
  }
  for (int c = 1; c <= 4; ++c) {
    EXPECT_NEAR(static_cast<double>(access_hist[c]) / kN, 0.25, 0.02) << c << " access rows";
    EXPECT_NEAR(static_cast<double>(facility_hist[c]) / kN, 0.25, 0.02) << c << " facilities";
  }
  for (int c = 0; c <= 3; ++c) {
    EXPECT_NEAR(static_cast<double>(forward_hist[c]) / static_cast<double>(forwards.size()), 0.25, 0.02)
        << c << " call forwarding rows";
  }
  EXPECT_NEAR(static_cast<double>(active) / static_cast<double>(forwards.size()), 0.85, 0.02);
  EXPECT_EQ(rows.counts.access_info, rows.tables.at(kAccessInfo).size());
  EXPECT_EQ(rows.counts.facilities, rows.tables.at(kSpecialFacility).size());
  EXPECT_EQ(rows.counts.active_facilities, active);
  EXPECT_EQ(rows.counts.forwarding, rows.tables.at(kCallForwarding).size());
  // The same rows on every call: replicas are built by separate calls.
  EXPECT_EQ(Collect(kN).tables, rows.tables);
}

TEST(TatpPopulation, MixMatchesTheSpecification) {
  uint64_t rng = 99;
  std::array<int, static_cast<int>(TxType::kCount)> n{};
  constexpr int kPicks = 200000;
  for (int i = 0; i < kPicks; ++i) ++n[static_cast<int>(PickType(&rng))];
  const double want[] = {0.35, 0.10, 0.35, 0.02, 0.14, 0.02, 0.02};
  for (int t = 0; t < static_cast<int>(TxType::kCount); ++t) {
    EXPECT_NEAR(static_cast<double>(n[t]) / kPicks, want[t], 0.005) << TxTypeName(static_cast<TxType>(t));
  }
}

class TatpDatabase : public ::testing::Test {
 protected:
  static constexpr uint64_t kN = 400;
  void SetUp() override {
    config_ = smart::testing::TestConfig();
    for (int b = 0; b < 2; ++b) blades_.push_back(std::make_unique<EmbeddedMemoryBlade>(config_, 64));
    initiator_ = std::make_unique<Initiator>(config_);
    for (int b = 0; b < 2; ++b) {
      initiator_->connect(static_cast<node_t>(b), blades_[b]->host(), blades_[b]->port(), 4);
    }
    DatabaseOptions o;
    o.name = "tatp";
    o.tables = Tables(kN);
    o.backup_degree = 1;
    o.threads = 2;
    o.tasks = 2;
    o.populate = [](const RowSink& sink) { Populate(kN, sink); };
    db_ = std::make_unique<Database>(*initiator_, 2, o);
    rows_ = Collect(kN);
  }

  // A facility of some subscriber and a start time with no call forwarding row.
  uint64_t AbsentForwarding(uint64_t* s, unsigned* sf, unsigned* st) {
    for (const auto& [key, value] : rows_.tables.at(kSpecialFacility)) {
      for (unsigned t : {0u, 8u, 16u}) {
        const uint64_t k = ForwardingKey(key >> 8, key & 0xff, t);
        if (!rows_.tables.at(kCallForwarding).count(k)) {
          *s = key >> 8;
          *sf = key & 0xff;
          *st = t;
          return k;
        }
      }
    }
    ADD_FAILURE() << "every facility has all three call forwarding rows";
    return 0;
  }

  Status Lookup(Transaction& tx, uint64_t key, uint64_t* version) {
    tx.begin();
    const int i = tx.read(kCallForwarding, key);
    Status s = tx.execute();
    if (!s.ok()) return s;
    *version = tx.version(i);
    return tx.commit();
  }

  SmartConfig config_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> blades_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<Database> db_;
  Rows rows_;
};

TEST_F(TatpDatabase, BuiltTablesHoldThePopulation) {
  EXPECT_EQ(Check(*db_, kN, 0), "");
  for (const TableInfo& t : db_->tables()) {
    std::map<uint64_t, std::string> found;
    EXPECT_EQ(ForEachRecord(*db_, t.spec.id,
                            [&](const Record& r) { found.emplace(r.key, std::string(r.value, t.spec.value_bytes)); }),
              "");
    EXPECT_EQ(found, rows_.tables.at(t.spec.id)) << t.spec.name;
  }
  // The check counts call forwarding rows against the committed delta.
  EXPECT_NE(Check(*db_, kN, 1).find("call_forwarding"), std::string::npos);
  EXPECT_EQ(CompareReplicas(*db_), "");
}

TEST_F(TatpDatabase, InsertedAndDeletedCallForwardingRowsAreVisibleOrGoneAsCommitted) {
  Transaction tx(*db_);
  uint64_t s = 0, v = 0;
  unsigned sf = 0, st = 0;
  const uint64_t key = AbsentForwarding(&s, &sf, &st);
  EXPECT_EQ(Lookup(tx, key, &v).code(), Status::Code::kNotFound);
  uint64_t versions[3] = {};
  for (int round = 0; round < 2; ++round) {
    tx.begin();
    const int cf = tx.insert(kCallForwarding, key);
    ASSERT_TRUE(tx.execute().ok());
    ASSERT_FALSE(tx.exists(cf));
    CallForwardingRow row{};
    row.end_time = static_cast<uint8_t>(st + 3);
    row.numberx[0] = static_cast<uint8_t>(round + 1);
    memcpy(tx.value(cf), &row, sizeof(row));
    ASSERT_TRUE(tx.commit().ok());
    ASSERT_TRUE(Lookup(tx, key, &versions[round]).ok());
    EXPECT_EQ(Check(*db_, kN, 1), "");
    // A second insert finds the row.
    tx.begin();
    const int again = tx.insert(kCallForwarding, key);
    ASSERT_TRUE(tx.execute().ok());
    EXPECT_TRUE(tx.exists(again));
    EXPECT_EQ(static_cast<uint8_t>(tx.value(again)[1]), round + 1);
    tx.abort();
    tx.begin();
    tx.remove(kCallForwarding, key);
    ASSERT_TRUE(tx.execute().ok());
    ASSERT_TRUE(tx.commit().ok());
    ASSERT_EQ(tx.accesses().back().deleted, true);
    versions[2] = tx.accesses().back().version;
    EXPECT_EQ(Lookup(tx, key, &v).code(), Status::Code::kNotFound);
    EXPECT_EQ(Check(*db_, kN, 0), "");
    // Deleting it again finds nothing.
    tx.begin();
    tx.remove(kCallForwarding, key);
    EXPECT_EQ(tx.execute().code(), Status::Code::kNotFound);
    // The key's versions go up across the delete and the insert again.
    if (round == 1) EXPECT_GT(versions[1], versions[0]);
    EXPECT_GT(versions[2], versions[round]);
  }
  EXPECT_TRUE(tx.flush().ok());
  EXPECT_EQ(CompareReplicas(*db_), "");
  EXPECT_EQ(FindLeftLocks(*db_), "");
}

TEST_F(TatpDatabase, TheMixKeepsTheTablesConsistent) {
  Transaction tx(*db_);
  Params p;
  p.subscribers = kN;
  uint64_t rng = 7;
  int64_t total = 0;
  std::array<std::array<int, 4>, static_cast<int>(TxType::kCount)> outcomes{};
  for (int i = 0; i < 6000; ++i) {
    const TxType type = PickType(&rng);
    int64_t delta = 0;
    Status error;
    const TxOutcome o = tatp::Run(tx, type, p, &rng, &delta, &error);
    ASSERT_NE(o, TxOutcome::kError) << TxTypeName(type) << ": " << error.ToString();
    ++outcomes[static_cast<int>(type)][static_cast<int>(o)];
    total += delta;
  }
  ASSERT_TRUE(tx.flush().ok());
  for (int t = 0; t < static_cast<int>(TxType::kCount); ++t) {
    EXPECT_GT(outcomes[t][static_cast<int>(TxOutcome::kCommitted)], 0) << TxTypeName(static_cast<TxType>(t));
  }
  // One task: nothing conflicts; the logical aborts are missing rows and
  // inactive facilities, as the mix has them.
  for (int t = 0; t < static_cast<int>(TxType::kCount); ++t) {
    EXPECT_EQ(outcomes[t][static_cast<int>(TxOutcome::kConflict)], 0);
  }
  EXPECT_GT(outcomes[static_cast<int>(TxType::kGetAccessData)][static_cast<int>(TxOutcome::kLogicalAbort)], 0);
  EXPECT_EQ(outcomes[static_cast<int>(TxType::kGetSubscriberData)][static_cast<int>(TxOutcome::kLogicalAbort)], 0);
  EXPECT_EQ(Check(*db_, kN, total), "");
  EXPECT_NE(Check(*db_, kN, total + 1), "");
  EXPECT_EQ(CompareReplicas(*db_), "");
  EXPECT_EQ(FindLeftLocks(*db_), "");
}

}  // namespace
}  // namespace smart::dtx::tatp
