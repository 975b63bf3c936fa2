#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "shm_transport_fixture.h"
#include "smart/bench/bench.h"
#include "smart/status.h"
#include "smart/transport.h"
#include "test_util.h"

namespace smart {
namespace {

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
