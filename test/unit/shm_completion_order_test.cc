// The shm transport's order of execution and completion, its send queue,
// its modelled latency and its completion ring.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "shm_transport_fixture.h"
#include "smart/transport.h"

namespace smart {
namespace {

TEST_F(ShmTransportTest, OnlySignaledRequestsCompleteInPostOrder) {
  char* buf = local_buffer_.data();
  std::vector<ibv_send_wr> wrs;
  for (int i = 0; i < 6; ++i) wrs.push_back(Request(IBV_WR_RDMA_READ, 64 * i, buf + 64 * i, 8, i % 2 == 1, 100 + i));
  for (int i = 0; i + 1 < 6; ++i) wrs[i].next = &wrs[i + 1];
  ASSERT_EQ(Post(&wrs[0]), 0);
  auto wc = PollN(3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 101u);
  EXPECT_EQ(wc[1].wr_id, 103u);
  EXPECT_EQ(wc[2].wr_id, 105u);
  ibv_wc extra[4];
  EXPECT_EQ(cq_->poll(4, extra), 0);  // the unsignaled ones never complete
}

TEST_F(ShmTransportTest, FullSendQueueRefusesWithEnomemUntilCompletionsRetireIt) {
  Build(0, /*max_send_wr=*/4);
  std::vector<ibv_send_wr> wrs;
  for (int i = 0; i < 5; ++i) wrs.push_back(Request(IBV_WR_RDMA_READ, 0, local_buffer_.data(), 8));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Post(&wrs[i]), 0);
  EXPECT_EQ(Post(&wrs[4]), ENOMEM);
  PollN(4);
  EXPECT_EQ(Post(&wrs[4]), 0);
}

TEST_F(ShmTransportTest, LatencyDelaysCompletionsByAtLeastTheModelledTime) {
  Build(20 * 1000 * 1000);  // 20 ms
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 0, local_buffer_.data(), 8);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Post(&wr), 0);
  ibv_wc wc;
  EXPECT_EQ(cq_->poll(1, &wc), 0);  // not before the latency has passed
  PollN(1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
}

TEST_F(ShmTransportTest, UnsignaledRequestsBeforeASignaledOneAllTakeEffectInOrder) {
  auto* words = reinterpret_cast<uint64_t*>(local_buffer_.data());
  words[0] = 1;
  words[1] = 2;
  words[2] = 3;
  std::vector<ibv_send_wr> wrs;
  wrs.push_back(Request(IBV_WR_RDMA_WRITE, 3000, &words[0], 8, false, 10));  // X = 1
  wrs.push_back(Request(IBV_WR_RDMA_WRITE, 3000, &words[1], 8, false, 11));  // X = 2
  wrs.push_back(Request(IBV_WR_RDMA_WRITE, 3008, &words[2], 8, false, 12));  // Y = 3
  wrs.push_back(Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 3000, &words[3], 8, false, 13));  // X += 5, old to words[3]
  wrs.back().wr.atomic.compare_add = 5;
  wrs.push_back(Request(IBV_WR_RDMA_READ, 3000, &words[4], 16, true, 14));  // X, Y
  for (size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
  ASSERT_EQ(Post(&wrs[0]), 0);
  auto wc = PollN(1);
  EXPECT_EQ(wc[0].wr_id, 14u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(words[3], 2u);
  EXPECT_EQ(words[4], 7u);
  EXPECT_EQ(words[5], 3u);
  ibv_wc extra[4];
  EXPECT_EQ(cq_->poll(4, extra), 0);
}

TEST_F(ShmTransportTest, AListEndingUnsignaledIsCarriedOutBeforeLaterRequests) {
  auto* words = reinterpret_cast<uint64_t*>(local_buffer_.data());
  words[0] = 0xabcdef;
  ibv_send_wr write = Request(IBV_WR_RDMA_WRITE, 3100, &words[0], 8, /*signaled=*/false, 1);
  ASSERT_EQ(Post(&write), 0);
  ibv_wc wc;
  EXPECT_EQ(cq_->poll(1, &wc), 0);  // no completion for it, ever
  ibv_send_wr read = Request(IBV_WR_RDMA_READ, 3100, &words[1], 8, true, 2);
  ASSERT_EQ(Post(&read), 0);
  EXPECT_EQ(PollN(1)[0].wr_id, 2u);
  EXPECT_EQ(words[1], 0xabcdefu);
}

TEST_F(ShmTransportTest, AReadPostedBeforeAWriteToTheSameAddressReturnsTheOldValue) {
  auto* word = reinterpret_cast<uint64_t*>(pool_bytes() + 3200);
  *word = 111;
  auto* words = reinterpret_cast<uint64_t*>(local_buffer_.data());
  words[1] = 222;
  ibv_send_wr read = Request(IBV_WR_RDMA_READ, 3200, &words[0], 8, true, 1);
  ibv_send_wr write = Request(IBV_WR_RDMA_WRITE, 3200, &words[1], 8, true, 2);
  ASSERT_EQ(Post(&read), 0);  // two doorbells on one queue pair
  ASSERT_EQ(Post(&write), 0);
  auto wc = PollN(2);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(words[0], 111u);
  EXPECT_EQ(*word, 222u);
}

TEST_F(ShmTransportTest, DestroyingAQueuePairCarriesOutItsQueuedRequestsAndDropsTheirCompletions) {
  auto* words = reinterpret_cast<uint64_t*>(local_buffer_.data());
  words[0] = 0x5151;
  ibv_send_wr write = Request(IBV_WR_RDMA_WRITE, 3700, &words[0], 8, /*signaled=*/false, 1);
  ibv_send_wr add = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 3712 - 4, &words[1], 8, /*signaled=*/true, 2);
  add.wr.atomic.remote_addr = remote(3712);
  add.wr.atomic.compare_add = 3;
  write.next = &add;
  ASSERT_EQ(Post(&write), 0);
  qp_.reset();
  uint64_t seen;
  memcpy(&seen, pool_bytes() + 3700, 8);
  EXPECT_EQ(seen, 0x5151u);
  memcpy(&seen, pool_bytes() + 3712, 8);
  EXPECT_EQ(seen, 3u);
  ibv_wc wc[4];
  EXPECT_EQ(cq_->poll(4, wc), 0);  // as ibv_destroy_qp cleans its completions
}

TEST_F(ShmTransportTest, QueuePairsSharingACompletionQueueKeepTheirOwnOrderAndCompletions) {
  QueuePairOptions options;
  options.cq = cq_.get();
  auto other = device_->create_qp(options);
  other->connect(QueuePairEndpoint{}, peer_);
  auto* words = reinterpret_cast<uint64_t*>(local_buffer_.data());
  words[0] = 77;
  ibv_send_wr write = Request(IBV_WR_RDMA_WRITE, 3800, &words[0], 8, true, 1);
  ibv_send_wr read = Request(IBV_WR_RDMA_READ, 3800, &words[1], 8, true, 2);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(other->post_send(&write, &bad), 0);
  ASSERT_EQ(Post(&read), 0);
  other.reset();  // its completion goes with it; the write does not
  auto wc = PollN(1);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(words[1], 77u);
  ibv_wc extra[4];
  EXPECT_EQ(cq_->poll(4, extra), 0);
}

TEST_F(ShmTransportTest, AQueuePairSharedByThreadsOnAConcurrentQueueLosesNoUpdate) {
  auto cq = device_->create_cq(64, nullptr, /*concurrent=*/true);
  QueuePairOptions options;
  options.cq = cq.get();
  options.max_send_wr = 16;
  options.concurrent = true;
  auto qp = device_->create_qp(options);
  qp->connect(QueuePairEndpoint{}, peer_);
  auto* word = reinterpret_cast<uint64_t*>(pool_bytes() + 3904);
  *word = 0;
  constexpr int kAdds = 20000;
  std::atomic<int> completed{0};
  // Requests are built here: Request() is not meant for concurrent callers.
  auto add_one = [&](char* result) {
    ibv_send_wr wr = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 3904, result, 8);
    wr.wr.atomic.compare_add = 1;
    return wr;
  };
  auto worker = [&](ibv_send_wr wr) {
    ibv_wc wc[8];
    for (int i = 0; i < kAdds;) {
      ibv_send_wr* bad;
      const int rc = qp->post_send(&wr, &bad);
      ASSERT_TRUE(rc == 0 || rc == ENOMEM) << rc;
      if (rc == 0) ++i;
      const int n = cq->poll(8, wc);
      for (int k = 0; k < n; ++k) ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS);
      completed += n;
    }
  };
  std::thread t1(worker, add_one(local_buffer_.data()));
  std::thread t2(worker, add_one(local_buffer_.data() + 64));
  t1.join();
  t2.join();
  ibv_wc wc[8];
  while (!HasFailure() && completed.load() < 2 * kAdds) completed += cq->poll(8, wc);
  EXPECT_EQ(*word, 2u * kAdds);
  qp.reset();
}

// The completion ring starts again at its first slot whenever it drains.
// Requests that keep it from draining go round its end instead, and either
// way they are carried out and complete in post order.
TEST_F(ShmTransportTest, TheRingKeepsPostOrderWhetherItDrainsOrWrapsAround) {
  Build(0, /*max_send_wr=*/8, /*cq_depth=*/8);
  auto* words = reinterpret_cast<uint64_t*>(pool_bytes());
  for (uint64_t i = 0; i < 64; ++i) words[i] = 1000 + i;
  auto* got = reinterpret_cast<uint64_t*>(local_buffer_.data());
  uint64_t posted = 0, completed = 0;
  int drained = 0;
  for (int round = 0; round < 60; ++round) {
    for (int i = 0; i < 1 + round % 5 && posted - completed < 8; ++i) {
      got[posted % 64] = 0;
      ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 8 * (posted % 64), &got[posted % 64], 8, true, posted);
      ASSERT_EQ(Post(&wr), 0);
      ++posted;
    }
    // Every third round empties the ring; the others take two completions
    // and leave the rest queued across the next posts.
    const int take = round % 3 == 0 ? 8 : 2;
    ibv_wc wc[8];
    const int n = cq_->poll(take, wc);
    ASSERT_GE(n, 0);
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS);
      ASSERT_EQ(wc[k].wr_id, completed) << "completions out of post order";
      EXPECT_EQ(got[completed % 64], 1000 + completed % 64) << "request " << completed;
      ++completed;
    }
    if (posted == completed) ++drained;
  }
  EXPECT_GT(posted, 16u);  // round the 8-slot ring more than twice
  EXPECT_GT(drained, 5);
  EXPECT_LT(drained, 60);
}

}  // namespace
}  // namespace smart
