// The shm provider's soft fence (PeerMemory::guard_session): once the
// session word of a client's connection changes (the memory blade ended the
// session, or another client set its fence bit), the provider refuses that
// client's WRITEs and atomics, including ones it posted before the change
// and carries out only now, and leaves the pool untouched; READs go on.
#include "shm_transport_fixture.h"

#include <cstring>

#include "smart/common.h"
#include "smart/status.h"

namespace smart {
namespace {

const uint64_t kWordOffset = SessionWordAddress(5);
constexpr uint64_t kCurrent = kSessionAliveBit | 7;

class ShmSessionGuardTest : public ShmTransportTest {
 protected:
  void SetUp() override {
    ShmTransportTest::SetUp();
    session_word() = kCurrent;
    // A queue pair connected after the peer learned its session word.
    peer_->guard_session(remote(kWordOffset), pool_->rkey(), kCurrent);
    QueuePairOptions options;
    options.cq = cq_.get();
    options.max_send_wr = 64;
    options.max_sge = 2;
    options.max_inline_data = 64;
    qp_ = device_->create_qp(options);
    qp_->connect(QueuePairEndpoint{}, peer_);
  }
  uint64_t& session_word() { return *reinterpret_cast<uint64_t*>(pool_bytes() + kWordOffset); }
  uint64_t pool_word(uint64_t offset) { return *reinterpret_cast<uint64_t*>(pool_bytes() + offset); }
};

TEST_F(ShmSessionGuardTest, WritesGoThroughWhileTheSessionIsCurrent) {
  uint64_t* local = reinterpret_cast<uint64_t*>(local_buffer_.data());
  local[0] = 41;
  ibv_send_wr w = Request(IBV_WR_RDMA_WRITE, 64, local, 8);
  ASSERT_EQ(Post(&w), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(pool_word(64), 41u);
  EXPECT_FALSE(peer_->session_ended());
}

TEST_F(ShmSessionGuardTest, AWritePostedBeforeTheFenceIsRefusedWhenCarriedOut) {
  uint64_t* local = reinterpret_cast<uint64_t*>(local_buffer_.data());
  local[0] = 41;
  ibv_send_wr w = Request(IBV_WR_RDMA_WRITE, 64, local, 8);
  ASSERT_EQ(Post(&w), 0);
  // Posted, not yet polled: another client sets the fence bit.
  session_word() = kCurrent | kSessionFenceBit;
  const ibv_wc wc = PollN(1)[0];
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(pool_word(64), 0u);
  EXPECT_TRUE(peer_->session_ended());
}

TEST_F(ShmSessionGuardTest, AtomicsAreRefusedOnceTheBladeEndedTheSession) {
  uint64_t* local = reinterpret_cast<uint64_t*>(local_buffer_.data());
  session_word() = 7;  // alive bit cleared: the session is over
  ibv_send_wr cas = Request(IBV_WR_ATOMIC_CMP_AND_SWP, 128, local, 8);
  cas.wr.atomic.compare_add = 0;
  cas.wr.atomic.swap = 99;
  ASSERT_EQ(Post(&cas), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(pool_word(128), 0u);
  // A later session in the same slot (incarnation 8) is not this one either.
  session_word() = kSessionAliveBit | 8;
  ibv_send_wr faa = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 128, local, 8);
  faa.wr.atomic.compare_add = 1;
  ASSERT_EQ(Post(&faa), 0);
  EXPECT_NE(PollN(1)[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(pool_word(128), 0u);
}

TEST_F(ShmSessionGuardTest, AnUnsignaledRefusedWriteFailsTheCompletionAfterIt) {
  uint64_t* local = reinterpret_cast<uint64_t*>(local_buffer_.data());
  local[0] = 41;
  *reinterpret_cast<uint64_t*>(pool_bytes() + 256) = 1234;
  session_word() = kCurrent | kSessionFenceBit;
  ibv_send_wr w = Request(IBV_WR_RDMA_WRITE, 64, local, 8, /*signaled=*/false, 1);
  ibv_send_wr r = Request(IBV_WR_RDMA_READ, 256, local + 1, 8, /*signaled=*/true, 2);
  w.next = &r;
  ASSERT_EQ(Post(&w), 0);
  const ibv_wc wc = PollN(1)[0];
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(pool_word(64), 0u);
}

TEST_F(ShmSessionGuardTest, ReadsStillWorkAfterTheFence) {
  uint64_t* local = reinterpret_cast<uint64_t*>(local_buffer_.data());
  *reinterpret_cast<uint64_t*>(pool_bytes() + 256) = 1234;
  session_word() = kCurrent | kSessionFenceBit;
  ibv_send_wr r = Request(IBV_WR_RDMA_READ, 256, local, 8);
  ASSERT_EQ(Post(&r), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(local[0], 1234u);
}

TEST_F(ShmSessionGuardTest, AWordOutsideThePeersRegionsIsAnError) {
  EXPECT_THROW(peer_->guard_session(remote(1 << 20), pool_->rkey(), kCurrent), Error);
  EXPECT_THROW(peer_->guard_session(remote(8) + 1, pool_->rkey(), kCurrent), Error);
  EXPECT_THROW(peer_->guard_session(remote(8), pool_->rkey() + 1, kCurrent), Error);
}

}  // namespace
}  // namespace smart
