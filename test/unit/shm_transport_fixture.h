// The shm transport's unit-test fixture: a memory blade region and a client
// queue pair in one process (shm_transport_test.cc: single requests and their
// errors; shm_completion_order_test.cc: order, the send queue and the
// completion ring).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "smart/transport.h"
#include "test_util.h"

namespace smart {

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

}  // namespace smart
