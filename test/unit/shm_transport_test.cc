#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "smart/bench.h"
#include "smart/status.h"
#include "smart/transport.h"
#include "test_util.h"

namespace smart {
namespace {

// A memory blade region and a client queue pair in one process.
class ShmTransportTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(0); }

  void Build(uint64_t latency_ns, int max_send_wr = 64, int cq_depth = 64) {
    // Mirror order of creation: a queue pair goes before its completion
    // queue, regions before their device.
    qp_.reset();
    cq_.reset();
    peer_.reset();
    local_.reset();
    pool_.reset();
    device_.reset();
    SmartConfig config = testing::TestConfig();
    config.shm.latency_ns = latency_ns;
    device_ = OpenShmDevice(config);
    pool_ = device_->allocate_shared_region(1 << 20);
    local_buffer_.assign(4096, 0);
    local_ = device_->register_memory(local_buffer_.data(), local_buffer_.size());
    peer_ = device_->import_regions({pool_->remote()}, device_->export_regions({pool_.get()}));
    cq_ = device_->create_cq(cq_depth, nullptr, false);
    QueuePairOptions options;
    options.cq = cq_.get();
    options.max_send_wr = max_send_wr;
    options.max_sge = 2;
    options.max_inline_data = 64;
    qp_ = device_->create_qp(options);
    qp_->connect(QueuePairEndpoint{}, peer_);
  }

  uint64_t remote(uint64_t offset) const { return reinterpret_cast<uint64_t>(pool_->addr()) + offset; }
  char* pool_bytes() const { return static_cast<char*>(pool_->addr()); }

  ibv_send_wr Request(ibv_wr_opcode opcode, uint64_t remote_offset, void* local, uint32_t length,
                      bool signaled = true, uint64_t wr_id = 1) {
    sges_.push_back(std::make_unique<ibv_sge>(ibv_sge{reinterpret_cast<uint64_t>(local), length, local_->lkey()}));
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges_.back().get();
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = remote(remote_offset);
      wr.wr.atomic.rkey = pool_->rkey();
    } else {
      wr.wr.rdma.remote_addr = remote(remote_offset);
      wr.wr.rdma.rkey = pool_->rkey();
    }
    return wr;
  }

  int Post(ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    return qp_->post_send(wr, &bad);
  }

  // Polls until `n` completions arrived (the test's own timeout bounds it).
  std::vector<ibv_wc> PollN(int n) {
    std::vector<ibv_wc> out;
    ibv_wc wc[16];
    while (static_cast<int>(out.size()) < n) {
      const int got = cq_->poll(16, wc);
      EXPECT_GE(got, 0);
      out.insert(out.end(), wc, wc + got);
    }
    return out;
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<MemoryRegion> pool_;
  std::vector<char> local_buffer_;
  std::unique_ptr<MemoryRegion> local_;
  std::shared_ptr<PeerMemory> peer_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::vector<std::unique_ptr<ibv_sge>> sges_;
};

TEST_F(ShmTransportTest, WriteThenReadRoundTrips) {
  char* buf = local_buffer_.data();
  strcpy(buf, "hello, memory blade");
  ibv_send_wr write = Request(IBV_WR_RDMA_WRITE, 128, buf, 20);
  ASSERT_EQ(Post(&write), 0);
  auto wc = PollN(1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_STREQ(pool_bytes() + 128, "hello, memory blade");

  char* dst = buf + 1024;
  ibv_send_wr read = Request(IBV_WR_RDMA_READ, 128, dst, 20);
  ASSERT_EQ(Post(&read), 0);
  wc = PollN(1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 20u);
  EXPECT_STREQ(dst, "hello, memory blade");
}

TEST_F(ShmTransportTest, InlineWriteNeedsNoLocalKey) {
  char data[16] = "inline payload";
  ibv_send_wr wr = Request(IBV_WR_RDMA_WRITE, 256, data, 15);
  wr.send_flags |= IBV_SEND_INLINE;
  wr.sg_list->lkey = 0xdead;  // ignored for inline data
  ASSERT_EQ(Post(&wr), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(pool_bytes() + 256, "inline payload", 15), 0);
}

TEST_F(ShmTransportTest, CompareAndSwapReturnsOldValueAndSwapsOnlyOnMatch) {
  auto* word = reinterpret_cast<uint64_t*>(pool_bytes() + 512);
  *word = 7;
  auto* result = reinterpret_cast<uint64_t*>(local_buffer_.data());
  ibv_send_wr miss = Request(IBV_WR_ATOMIC_CMP_AND_SWP, 512, result, 8);
  miss.wr.atomic.compare_add = 5;
  miss.wr.atomic.swap = 9;
  ASSERT_EQ(Post(&miss), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(*result, 7u);
  EXPECT_EQ(*word, 7u);

  ibv_send_wr hit = Request(IBV_WR_ATOMIC_CMP_AND_SWP, 512, result, 8);
  hit.wr.atomic.compare_add = 7;
  hit.wr.atomic.swap = 9;
  ASSERT_EQ(Post(&hit), 0);
  EXPECT_EQ(PollN(1)[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*result, 7u);
  EXPECT_EQ(*word, 9u);
}

TEST_F(ShmTransportTest, FetchAndAddReturnsOldValue) {
  auto* word = reinterpret_cast<uint64_t*>(pool_bytes() + 1024);
  *word = 40;
  auto* result = reinterpret_cast<uint64_t*>(local_buffer_.data());
  ibv_send_wr wr = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 1024, result, 8);
  wr.wr.atomic.compare_add = 2;
  ASSERT_EQ(Post(&wr), 0);
  auto wc = PollN(1);
  EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(*result, 40u);
  EXPECT_EQ(*word, 42u);
}

TEST_F(ShmTransportTest, TwoScatterEntriesAreReadInOrder) {
  strcpy(pool_bytes() + 2048, "abcdefgh12345678");
  char* a = local_buffer_.data();
  char* b = local_buffer_.data() + 512;
  ibv_sge sge[2] = {{reinterpret_cast<uint64_t>(a), 8, local_->lkey()}, {reinterpret_cast<uint64_t>(b), 8, local_->lkey()}};
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 2048, a, 8);
  wr.sg_list = sge;
  wr.num_sge = 2;
  ASSERT_EQ(Post(&wr), 0);
  EXPECT_EQ(PollN(1)[0].byte_len, 16u);
  EXPECT_EQ(memcmp(a, "abcdefgh", 8), 0);
  EXPECT_EQ(memcmp(b, "12345678", 8), 0);
}

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

TEST_F(ShmTransportTest, WrongRkeyCompletesWithRemoteAccessErrorAndFlushesTheRest) {
  char* buf = local_buffer_.data();
  ibv_send_wr bad = Request(IBV_WR_RDMA_READ, 0, buf, 8, /*signaled=*/false, 1);
  bad.wr.rdma.rkey ^= 0x55;
  ibv_send_wr after = Request(IBV_WR_RDMA_READ, 0, buf, 8, true, 2);
  bad.next = &after;
  ASSERT_EQ(Post(&bad), 0);
  auto wc = PollN(2);
  EXPECT_EQ(wc[0].wr_id, 1u);  // failed requests complete even unsignaled
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  // The queue pair stays broken, as on a NIC.
  ibv_send_wr later = Request(IBV_WR_RDMA_READ, 0, buf, 8, true, 3);
  ASSERT_EQ(Post(&later), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(ShmTransportTest, OutOfBoundsAccessIsRemoteAccessErrorNotACrash) {
  char* buf = local_buffer_.data();
  ibv_send_wr past_end = Request(IBV_WR_RDMA_READ, (1 << 20) - 4, buf, 8);
  ASSERT_EQ(Post(&past_end), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_REM_ACCESS_ERR);

  Build(0);
  ibv_send_wr before_start = Request(IBV_WR_RDMA_WRITE, 0, buf, 8);
  before_start.wr.rdma.remote_addr -= 4096;
  ASSERT_EQ(Post(&before_start), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_REM_ACCESS_ERR);

  Build(0);
  ibv_send_wr huge = Request(IBV_WR_RDMA_READ, 64, buf, 8);
  huge.wr.rdma.remote_addr = ~uint64_t{0} - 2;  // wraps around
  ASSERT_EQ(Post(&huge), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(ShmTransportTest, BadLocalKeyIsLocalProtectionError) {
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 0, local_buffer_.data(), 8);
  wr.sg_list->lkey += 1;
  ASSERT_EQ(Post(&wr), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_LOC_PROT_ERR);

  Build(0);
  char outside[8];
  ibv_send_wr unregistered = Request(IBV_WR_RDMA_READ, 0, outside, 8);
  ASSERT_EQ(Post(&unregistered), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(ShmTransportTest, MisalignedAtomicIsInvalidRequest) {
  ibv_send_wr wr = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 4, local_buffer_.data(), 8);
  ASSERT_EQ(Post(&wr), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(ShmTransportTest, MalformedRequestsAreRejectedAtPost) {
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 0, local_buffer_.data(), 8);
  wr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(qp_->post_send(&wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  wr.opcode = IBV_WR_RDMA_READ;
  wr.num_sge = 3;  // above max_sge
  EXPECT_EQ(qp_->post_send(&wr, &bad), EINVAL);
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

TEST_F(ShmTransportTest, FailedPeerCompletesWithRetryExceeded) {
  peer_->mark_failed();
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 0, local_buffer_.data(), 8);
  ASSERT_EQ(Post(&wr), 0);
  EXPECT_EQ(PollN(1)[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST_F(ShmTransportTest, AtomicsFromTwoThreadsNeverLoseAnUpdate) {
  // A second queue pair on its own completion queue, used by another thread.
  auto cq2 = device_->create_cq(64, nullptr, false);
  QueuePairOptions options;
  options.cq = cq2.get();
  auto qp2 = device_->create_qp(options);
  qp2->connect(QueuePairEndpoint{}, peer_);
  auto* word = reinterpret_cast<uint64_t*>(pool_bytes() + 4096);
  *word = 0;
  constexpr int kAdds = 20000;
  // Requests are built here: Request() is not meant for concurrent callers.
  auto add_one = [&](char* result) {
    ibv_send_wr wr = Request(IBV_WR_ATOMIC_FETCH_AND_ADD, 4096, result, 8);
    wr.wr.atomic.compare_add = 1;
    return wr;
  };
  auto worker = [&](QueuePair* qp, CompletionQueue* cq, ibv_send_wr wr) {
    ibv_wc wc;
    for (int i = 0; i < kAdds; ++i) {
      ibv_send_wr* bad;
      ASSERT_EQ(qp->post_send(&wr, &bad), 0);
      while (cq->poll(1, &wc) == 0) {
      }
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
    }
  };
  std::thread t1(worker, qp_.get(), cq_.get(), add_one(local_buffer_.data()));
  std::thread t2(worker, qp2.get(), cq2.get(), add_one(local_buffer_.data() + 64));
  t1.join();
  t2.join();
  EXPECT_EQ(*word, 2u * kAdds);
}

TEST_F(ShmTransportTest, ExportTokenIsSingleUse) {
  const std::string exported = device_->export_regions({pool_.get()});
  EXPECT_NO_THROW(device_->import_regions({pool_->remote()}, exported));
  EXPECT_THROW(device_->import_regions({pool_->remote()}, exported), Error);
}

TEST_F(ShmTransportTest, MalformedExportDetailsAreAClearError) {
  try {
    device_->import_regions({pool_->remote()}, "garbage");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
  }
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

TEST_F(ShmTransportTest, AnInlineWritesBufferCanBeReusedRightAfterPost) {
  // 8 bytes fit the ring entry; 48 bytes (two pieces) take the side buffer.
  char small[8];
  memcpy(small, "smallpay", 8);
  ibv_send_wr first = Request(IBV_WR_RDMA_WRITE, 3300, small, 8, true, 1);
  first.send_flags |= IBV_SEND_INLINE;
  char large[48];
  for (int i = 0; i < 48; ++i) large[i] = static_cast<char>('a' + i % 26);
  ibv_sge pieces[2] = {{reinterpret_cast<uint64_t>(large), 20, 0}, {reinterpret_cast<uint64_t>(large + 20), 28, 0}};
  ibv_send_wr second = Request(IBV_WR_RDMA_WRITE, 3400, large, 48, true, 2);
  second.sg_list = pieces;
  second.num_sge = 2;
  second.send_flags |= IBV_SEND_INLINE;
  first.next = &second;
  ASSERT_EQ(Post(&first), 0);
  memset(small, 'X', sizeof(small));
  memset(large, 'X', sizeof(large));
  auto wc = PollN(2);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].byte_len, 48u);
  EXPECT_EQ(memcmp(pool_bytes() + 3300, "smallpay", 8), 0);
  for (int i = 0; i < 48; ++i) ASSERT_EQ(pool_bytes()[3400 + i], static_cast<char>('a' + i % 26)) << i;
}

TEST_F(ShmTransportTest, WorkRequestsAndScatterListsCanBeReusedRightAfterPost) {
  strcpy(pool_bytes() + 3500, "first...second..");
  char* a = local_buffer_.data();
  char* b = local_buffer_.data() + 256;
  ibv_send_wr wr = Request(IBV_WR_RDMA_READ, 3500, a, 8, true, 1);
  ASSERT_EQ(Post(&wr), 0);
  // Rewritten before the first one completes.
  wr.wr_id = 2;
  wr.wr.rdma.remote_addr = remote(3508);
  wr.sg_list->addr = reinterpret_cast<uint64_t>(b);
  ASSERT_EQ(Post(&wr), 0);
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  auto wc = PollN(2);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(memcmp(a, "first...", 8), 0);
  EXPECT_EQ(memcmp(b, "second..", 8), 0);
}

TEST_F(ShmTransportTest, TwoScatterEntriesAreWrittenInOrder) {
  char* a = local_buffer_.data();
  char* b = local_buffer_.data() + 512;
  memcpy(a, "gathered", 8);
  memcpy(b, "together", 8);
  ibv_sge sge[2] = {{reinterpret_cast<uint64_t>(a), 8, local_->lkey()}, {reinterpret_cast<uint64_t>(b), 8, local_->lkey()}};
  ibv_send_wr wr = Request(IBV_WR_RDMA_WRITE, 3600, a, 8);
  wr.sg_list = sge;
  wr.num_sge = 2;
  ASSERT_EQ(Post(&wr), 0);
  memset(sge, 0, sizeof(sge));  // the list itself may be reused at once
  EXPECT_EQ(PollN(1)[0].byte_len, 16u);
  EXPECT_EQ(memcmp(pool_bytes() + 3600, "gatheredtogether", 16), 0);
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

TEST_F(ShmTransportTest, ImportedMappingSeesTheSameMemory) {
  // The client maps the memfd separately: a write through the queue pair
  // lands in the memory blade's own mapping.
  uint64_t value = 0x1122334455667788ull;
  memcpy(local_buffer_.data(), &value, 8);
  ibv_send_wr wr = Request(IBV_WR_RDMA_WRITE, 8192, local_buffer_.data(), 8);
  ASSERT_EQ(Post(&wr), 0);
  PollN(1);
  uint64_t seen;
  memcpy(&seen, pool_bytes() + 8192, 8);
  EXPECT_EQ(seen, value);
}

// The memfd socket goes into $XDG_RUNTIME_DIR only when that directory is
// this user's and writable by no one else; otherwise into /tmp.
TEST(ShmSocketDirectory, XdgRuntimeDirOnlyWhenItIsThisUsersAlone) {
  char name[] = "/tmp/smart-xdg-test.XXXXXX";
  const std::string dir = mkdtemp(name);
  const char* saved = getenv("XDG_RUNTIME_DIR");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
  auto socket_path = [] {
    auto device = OpenShmDevice(testing::TestConfig());
    auto pool = device->allocate_shared_region(1 << 20);
    const std::string exported = device->export_regions({pool.get()});
    return exported.substr(0, exported.find('\0'));
  };
  chmod(dir.c_str(), 0700);
  EXPECT_EQ(socket_path().rfind(dir + "/smart-shm.", 0), 0u);
  for (mode_t mode : {0777, 0770, 0720, 0702}) {
    chmod(dir.c_str(), mode);
    EXPECT_EQ(socket_path().rfind("/tmp/smart-shm.", 0), 0u) << std::oct << mode;
  }
  if (geteuid() == 0) {  // another user's directory, though root may write to it
    chmod(dir.c_str(), 0700);
    ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
    EXPECT_EQ(socket_path().rfind("/tmp/smart-shm.", 0), 0u);
  }
  if (saved != nullptr) {
    setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
  } else {
    unsetenv("XDG_RUNTIME_DIR");
  }
  [[maybe_unused]] int rc = system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace smart
