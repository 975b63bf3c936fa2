// The setting of SMART-DTX's unit tests: memory blades inside the test
// process (two unless a test asks for more), every table with a backup on
// each other blade, and a client.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "database.h"
#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "test_util.h"
#include "transaction.h"

namespace smart::dtx::testing {

constexpr uint16_t kAccounts = 1;
constexpr uint16_t kNotes = 2;
constexpr uint16_t kTiny = 3;  // one bucket: every key in one chain
constexpr uint64_t kAccountCount = 200;
constexpr int64_t kInitialBalance = 1000;

class DtxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = smart::testing::TestConfig();
    config_.faults = ParseFaultRules(faults_);
    config_.shm.latency_ns = latency_ns_;
    for (int b = 0; b < blade_count_; ++b) blades_.push_back(std::make_unique<EmbeddedMemoryBlade>(config_, 64));
    initiator_ = Connect();
    db_ = Open(*initiator_);
  }

  std::unique_ptr<Initiator> Connect() {
    return Connect(config_);
  }
  std::unique_ptr<Initiator> Connect(const SmartConfig& config) {
    auto in = std::make_unique<Initiator>(config);
    for (int b = 0; b < blade_count_; ++b) in->connect(static_cast<node_t>(b), blades_[b]->host(), blades_[b]->port(), 8);
    return in;
  }

  DatabaseOptions Options() const {
    DatabaseOptions o;
    o.name = "test";
    o.tables = {TableSpec{kAccounts, "accounts", 8, 64, 16}, TableSpec{kNotes, "notes", 16, 8, 24},
                TableSpec{kTiny, "tiny", 8, 1, 8}};
    o.backup_degree = blade_count_ - 1;
    o.threads = 4;
    o.lease.lease_ns = lease_ns_;
    o.lease.fence = fence_;
    o.tasks = 8;
    o.populate = [](const RowSink& sink) {
      for (uint64_t k = 0; k < kAccountCount; ++k) {
        int64_t balance = kInitialBalance;
        sink(kAccounts, k, &balance);
      }
    };
    return o;
  }

  std::unique_ptr<Database> Open(Initiator& in) { return std::make_unique<Database>(in, blade_count_, Options()); }

  // Every slot of every table, as each replica holds it.
  std::vector<std::string> Replicas(const TableInfo& t) {
    std::vector<std::string> out;
    char* buffer = static_cast<char*>(initiator_->alloc_cache(t.region_bytes()));
    for (size_t r = 0; r < t.replicas.size(); ++r) {
      EXPECT_TRUE(initiator_->read(buffer, NodeAddress(t, r, 0), t.region_bytes()).ok());
      out.emplace_back(buffer, t.region_bytes());
    }
    return out;
  }

  int64_t Balance(Transaction& tx, uint64_t account) {
    tx.begin();
    const int a = tx.read(kAccounts, account);
    Status s = tx.execute();
    EXPECT_TRUE(s.ok()) << s.ToString();
    int64_t b = 0;
    memcpy(&b, tx.value(a), 8);
    EXPECT_TRUE(tx.commit().ok());
    return b;
  }

  Status Transfer(Transaction& tx, uint64_t from, uint64_t to, int64_t amount) {
    tx.begin();
    const int a = tx.write(kAccounts, from);
    const int b = tx.write(kAccounts, to);
    Status s = tx.execute();
    if (!s.ok()) return s;
    *tx.value_as<int64_t>(a) -= amount;
    *tx.value_as<int64_t>(b) += amount;
    return tx.commit();
  }

  void TearDown() override { InstallFaultRules({}); }

  std::string faults_;        // fault rules for the race tests
  uint64_t latency_ns_ = 0;   // shm completion latency for the race tests
  uint64_t lease_ns_ = 2000000000;  // record locks' lease
  int blade_count_ = 2;             // memory blades; every table has a backup on each other one
  FenceMode fence_ = FenceMode::kAlways;  // whether a take-over by lease fences the holder
  SmartConfig config_;
  std::vector<std::unique_ptr<EmbeddedMemoryBlade>> blades_;
  std::unique_ptr<Initiator> initiator_;
  std::unique_ptr<Database> db_;
};

}  // namespace smart::dtx::testing
