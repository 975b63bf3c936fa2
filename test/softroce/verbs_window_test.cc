// Per-session memory windows on a real verbs device (run inside the
// Soft-RoCE guest by verbs_tests.sh; skipped where no RDMA device exists).
// A memory blade's pool and two clients' queue pairs live in one process,
// each side on its own device context, as they would in three processes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"
#include "smart/status.h"
#include "smart/transport.h"

namespace smart {
namespace {

constexpr size_t kPoolBytes = 1 << 20;

SmartConfig VerbsConfig(bool memory_windows) {
  SmartConfig config;
  config.transport = TransportChoice::kVerbs;
  if (const char* dev = getenv("SOFTROCE_DEV")) config.infiniband.name = dev;
  if (const char* gid = getenv("SOFTROCE_GID_INDEX")) config.infiniband.gid_idx = atoi(gid);
  config.qp_param.retry_cnt = 6;  // rxe's largest
  config.infiniband.memory_windows = memory_windows;
  return config;
}

// The status of the next completion on `cq`, which must be request
// `wr_id`'s (a hang guard of 10 s fails the test).
ibv_wc_status AwaitCompletion(CompletionQueue& cq, uint64_t wr_id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ibv_wc wc{};
  while (cq.poll(1, &wc) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no completion within 10 s";
      return IBV_WC_GENERAL_ERR;
    }
  }
  EXPECT_EQ(wc.wr_id, wr_id);
  return wc.status;
}

// Posts one signaled request (`sge` the local side; CAS with compare and
// swap) on `qp` and returns its completion's status.
ibv_wc_status PostOne(QueuePair& qp, CompletionQueue& cq, ibv_wr_opcode opcode, ibv_sge sge, uint64_t remote,
                      uint32_t rkey, uint64_t compare, uint64_t swap) {
  ibv_send_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare;
    wr.wr.atomic.swap = swap;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = qp.post_send(&wr, &bad);
  EXPECT_EQ(rc, 0) << strerror(rc);
  if (rc != 0) return IBV_WC_GENERAL_ERR;
  return AwaitCompletion(cq, 7);
}

// One client's connection: its queue pair and the blade's end of it.
struct Link {
  std::unique_ptr<CompletionQueue> blade_cq;
  std::unique_ptr<QueuePair> blade_qp;
  std::unique_ptr<CompletionQueue> client_cq;
  std::unique_ptr<QueuePair> client_qp;
};

class VerbsWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CountRdmaDevices() == 0) GTEST_SKIP() << "no RDMA device (run in the Soft-RoCE guest)";
  }

  void Build(bool memory_windows) {
    blade_ = OpenVerbsDevice(VerbsConfig(memory_windows));
    restriction_ = blade_->restrict_to_grants();
    pool_ = blade_->allocate_shared_region(kPoolBytes);
    for (size_t i = 0; i < kPoolBytes / 8; ++i) pool_words()[i] = 0x5000000000000000ull + i;
    client_ = OpenVerbsDevice(VerbsConfig(memory_windows));
    local_.assign(64, 0);
    local_region_ = client_->register_memory(local_.data(), local_.size() * sizeof(uint64_t));
    peer_ = client_->import_regions({pool_->remote()}, std::string());
  }

  void TearDown() override {
    // Mirror order: queue pairs before their queues, regions before devices.
    links_.clear();
    peer_.reset();
    local_region_.reset();
    pool_.reset();
    client_.reset();
    blade_.reset();
  }

  uint64_t* pool_words() const { return static_cast<uint64_t*>(pool_->addr()); }

  Link& Connect() {
    auto link = std::make_unique<Link>();
    QueuePairOptions options;
    options.max_send_wr = 4;
    options.max_inline_data = 0;
    link->blade_cq = blade_->create_cq(16, nullptr, false);
    options.cq = link->blade_cq.get();
    link->blade_qp = blade_->create_qp(options);
    link->client_cq = client_->create_cq(16, nullptr, false);
    options.cq = link->client_cq.get();
    link->client_qp = client_->create_qp(options);
    link->blade_qp->connect(link->client_qp->endpoint(), nullptr);
    link->client_qp->connect(link->blade_qp->endpoint(), peer_);
    links_.push_back(std::move(link));
    return *links_.back();
  }

  // Posts one signaled request on the link's client queue pair and returns
  // its completion status.
  ibv_wc_status Post(Link& link, ibv_wr_opcode opcode, uint32_t rkey, uint64_t word, uint64_t compare = 0,
                     uint64_t swap = 0) {
    ibv_sge sge{reinterpret_cast<uint64_t>(local_.data()), 8, local_region_->lkey()};
    const uint64_t addr = reinterpret_cast<uint64_t>(pool_->addr()) + word * 8;
    return PostOne(*link.client_qp, *link.client_cq, opcode, sge, addr, rkey, compare, swap);
  }

  std::unique_ptr<Device> blade_;
  std::unique_ptr<Device> client_;
  std::string restriction_;
  std::unique_ptr<MemoryRegion> pool_;
  std::vector<uint64_t> local_;
  std::unique_ptr<MemoryRegion> local_region_;
  std::shared_ptr<PeerMemory> peer_;
  std::vector<std::unique_ptr<Link>> links_;
};

// The blade's end of a link posts `opcode` at the client's registered
// buffer with that buffer's own rkey, as a peer that learned it would.
ibv_wc_status PostAtClient(Link& link, ibv_wr_opcode opcode, MemoryRegion& pool, MemoryRegion& client_buffer,
                           uint64_t* client_word) {
  ibv_sge sge{reinterpret_cast<uint64_t>(pool.addr()), 8, pool.lkey()};
  return PostOne(*link.blade_qp, *link.blade_cq, opcode, sge, reinterpret_cast<uint64_t>(client_word),
                 client_buffer.rkey(), 0, 0xbad);
}

// First: a window that outlives its grant also hangs the teardown of
// every later test (the device keeps the pool), which should not hide this
// test's own failure.
TEST_F(VerbsWindowTest, ARevokedKeyIsRefused) {
  Build(true);
  ASSERT_EQ(restriction_, "");
  Link& link = Connect();
  std::unique_ptr<AccessGrant> grant = blade_->grant_access(*pool_, *link.blade_qp);
  ASSERT_NE(grant, nullptr);
  const uint32_t rkey = grant->rkey();
  ASSERT_EQ(Post(link, IBV_WR_RDMA_READ, rkey, 9), IBV_WC_SUCCESS);
  grant.reset();  // what the blade does when the session ends
  local_[0] = 0xbadull;
  EXPECT_EQ(Post(link, IBV_WR_RDMA_WRITE, rkey, 9), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(pool_words()[9], 0x5000000000000000ull + 9);
}

TEST_F(VerbsWindowTest, TheDeviceGivesWindowsAndTheKeyReadsWritesAndSwapsOnItsQueuePair) {
  Build(true);
  ASSERT_EQ(restriction_, "") << "the device refused per-session windows";
  Link& link = Connect();
  std::unique_ptr<AccessGrant> grant = blade_->grant_access(*pool_, *link.blade_qp);
  ASSERT_NE(grant, nullptr);

  ASSERT_EQ(Post(link, IBV_WR_RDMA_READ, grant->rkey(), 100), IBV_WC_SUCCESS);
  EXPECT_EQ(local_[0], 0x5000000000000000ull + 100);
  local_[0] = 0xfeedull;
  ASSERT_EQ(Post(link, IBV_WR_RDMA_WRITE, grant->rkey(), 200), IBV_WC_SUCCESS);
  EXPECT_EQ(pool_words()[200], 0xfeedull);
  ASSERT_EQ(Post(link, IBV_WR_ATOMIC_CMP_AND_SWP, grant->rkey(), 300, 0x5000000000000000ull + 300, 42),
            IBV_WC_SUCCESS);
  EXPECT_EQ(pool_words()[300], 42u);
}

TEST_F(VerbsWindowTest, AnotherClientsQueuePairCannotUseTheKey) {
  Build(true);
  ASSERT_EQ(restriction_, "");
  Link& first = Connect();
  Link& second = Connect();
  std::unique_ptr<AccessGrant> first_grant = blade_->grant_access(*pool_, *first.blade_qp);
  std::unique_ptr<AccessGrant> second_grant = blade_->grant_access(*pool_, *second.blade_qp);
  ASSERT_NE(first_grant, nullptr);
  ASSERT_NE(second_grant, nullptr);
  // Each works on its own queue pair...
  ASSERT_EQ(Post(second, IBV_WR_RDMA_READ, second_grant->rkey(), 5), IBV_WC_SUCCESS);
  ASSERT_EQ(Post(first, IBV_WR_RDMA_READ, first_grant->rkey(), 6), IBV_WC_SUCCESS);
  // ...and the first client's key, leaked to the second, opens nothing.
  local_[0] = 0xbadull;
  EXPECT_EQ(Post(second, IBV_WR_RDMA_WRITE, first_grant->rkey(), 7), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(pool_words()[7], 0x5000000000000000ull + 7);
}

TEST_F(VerbsWindowTest, WithWindowsThePoolsOwnKeyOpensNothing) {
  Build(true);
  ASSERT_EQ(restriction_, "");
  // A refused request breaks its queue pair: one link per kind of access.
  for (ibv_wr_opcode opcode : {IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE, IBV_WR_ATOMIC_CMP_AND_SWP}) {
    Link& link = Connect();
    std::unique_ptr<AccessGrant> grant = blade_->grant_access(*pool_, *link.blade_qp);
    ASSERT_NE(grant, nullptr);
    local_[0] = 0xbadull;
    EXPECT_EQ(Post(link, opcode, pool_->rkey(), 11, 0x5000000000000000ull + 11, 0xbadull), IBV_WC_REM_ACCESS_ERR)
        << "opcode " << opcode;
    EXPECT_EQ(pool_words()[11], 0x5000000000000000ull + 11);
    if (opcode == IBV_WR_RDMA_READ) EXPECT_EQ(local_[0], 0xbadull) << "the pool's key read the pool";
  }
}

TEST_F(VerbsWindowTest, TurnedOffEveryQueuePairUsesThePoolsKey) {
  Build(false);
  EXPECT_EQ(restriction_, "infiniband.memory_windows is false");
  Link& link = Connect();
  EXPECT_EQ(blade_->grant_access(*pool_, *link.blade_qp), nullptr);
  ASSERT_EQ(Post(link, IBV_WR_RDMA_READ, pool_->rkey(), 13), IBV_WC_SUCCESS);
  EXPECT_EQ(local_[0], 0x5000000000000000ull + 13);
}

// A client's registered buffer (its cache) carries no remote access: a peer
// holding its rkey can neither read, write nor swap a word of it, while
// the client's own READs still land there.
TEST_F(VerbsWindowTest, NoPeerCanReachAClientsRegisteredBuffer) {
  Build(false);
  local_[0] = 0x1234;
  for (ibv_wr_opcode opcode : {IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE, IBV_WR_ATOMIC_CMP_AND_SWP}) {
    Link& link = Connect();  // a failed request ends its queue pair: one each
    EXPECT_EQ(PostAtClient(link, opcode, *pool_, *local_region_, &local_[0]), IBV_WC_REM_ACCESS_ERR)
        << "opcode " << opcode;
    EXPECT_EQ(local_[0], 0x1234u);
  }
  Link& own = Connect();
  EXPECT_EQ(Post(own, IBV_WR_RDMA_READ, pool_->rkey(), 5), IBV_WC_SUCCESS);
  EXPECT_EQ(local_[0], 0x5000000000000005ull);
}

}  // namespace
}  // namespace smart
