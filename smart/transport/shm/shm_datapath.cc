// Data path of the shm provider: post_send carries out each work request on
// the peer's mapped memory and queues a completion for signaled requests (and
// for failed ones, as a NIC does); poll hands them out in order, optionally
// after a modelled network latency.
#include <cstring>

#include "smart/status.h"
#include "smart/task.h"
#include "smart/transport/shm/shm_transport.h"

namespace smart::shm {

namespace {

// Copies in aligned 8-byte words where possible so that a concurrent 8-byte
// atomic on the same word is never seen half-done, as on a NIC.
inline void CopyWords(char* dst, const char* src, uint64_t length) {
  const uintptr_t alignment = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | length;
  if (length == 8 && (alignment & 7) == 0) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst),
                     __atomic_load_n(reinterpret_cast<const uint64_t*>(src), __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  } else if ((alignment & 7) == 0 && length <= 512) {
    auto* d = reinterpret_cast<uint64_t*>(dst);
    const auto* s = reinterpret_cast<const uint64_t*>(src);
    for (uint64_t i = 0; i < length / 8; ++i) {
      __atomic_store_n(d + i, __atomic_load_n(s + i, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    }
  } else {
    memcpy(dst, src, length);
  }
}

inline ibv_wc_opcode CompletionOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_RDMA_WRITE:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    default:
      return IBV_WC_SEND;
  }
}

}  // namespace

inline void ShmCompletionQueue::push(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t byte_len,
                              ShmQueuePair* qp, uint32_t retired) {
  // The caller checked free_slots() for the whole post.
  Entry& e = ring_[tail_ & mask_];
  e.wr_id = wr_id;
  e.qp = qp;
  e.ready_cycles = latency_cycles_ == 0 ? 0 : Cycles() + latency_cycles_;
  e.byte_len = byte_len;
  e.retired = retired;
  e.status = static_cast<uint8_t>(status);
  e.opcode = static_cast<uint8_t>(opcode);
  ++tail_;
}

ShmQueuePair::ShmQueuePair(ShmDevice* device, const QueuePairOptions& options, uint32_t qp_num)
    : device_(device), options_(options), cq_(static_cast<ShmCompletionQueue*>(options.cq)), qp_num_(qp_num) {}

QueuePairEndpoint ShmQueuePair::endpoint() const {
  QueuePairEndpoint ep;
  ep.qp_num = qp_num_;
  return ep;
}

void ShmQueuePair::connect(const QueuePairEndpoint&, std::shared_ptr<PeerMemory> peer) {
  if (peer != nullptr) {
    peer_ = std::dynamic_pointer_cast<ShmPeerMemory>(peer);
    if (peer_ == nullptr) throw Error("shm transport: peer memory belongs to another transport");
    if (peer_->regions_.size() > kMaxPeerRegions) throw Error("shm transport: too many peer regions");
    // A private copy of the region table keeps the data path to one cache line.
    region_count_ = static_cast<int>(peer_->regions_.size());
    for (int i = 0; i < region_count_; ++i) regions_[i] = peer_->regions_[i];
    peer_failed_ = peer_->failed_flag();
  }
  connected_ = true;
  connected_to_peer_ = peer_ != nullptr;
}

// Every opcode and scatter list; the peer was checked alive by execute().
ibv_wc_status ShmQueuePair::execute_general(const ibv_send_wr& wr, uint32_t* byte_len) {
  switch (wr.opcode) {
    case IBV_WR_RDMA_READ: {
      if (__builtin_expect(wr.num_sge == 1, 1)) {
        const ibv_sge& sge = wr.sg_list[0];
        const char* src = translate(wr.wr.rdma.remote_addr, sge.length, wr.wr.rdma.rkey);
        if (src == nullptr) return IBV_WC_REM_ACCESS_ERR;
        char* dst = device_->local_translate(sge.addr, sge.length, sge.lkey);
        if (dst == nullptr) return IBV_WC_LOC_PROT_ERR;
        CopyWords(dst, src, sge.length);
        *byte_len = sge.length;
        return IBV_WC_SUCCESS;
      }
      uint64_t total = 0;
      for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
      const char* src = translate(wr.wr.rdma.remote_addr, total, wr.wr.rdma.rkey);
      if (src == nullptr) return IBV_WC_REM_ACCESS_ERR;
      for (int i = 0; i < wr.num_sge; ++i) {
        const ibv_sge& sge = wr.sg_list[i];
        char* dst = device_->local_translate(sge.addr, sge.length, sge.lkey);
        if (dst == nullptr) return IBV_WC_LOC_PROT_ERR;
        CopyWords(dst, src, sge.length);
        src += sge.length;
      }
      *byte_len = static_cast<uint32_t>(total);
      return IBV_WC_SUCCESS;
    }
    case IBV_WR_RDMA_WRITE: {
      const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
      uint64_t total = 0;
      for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
      if (is_inline && total > static_cast<uint64_t>(options_.max_inline_data)) return IBV_WC_LOC_LEN_ERR;
      char* dst = translate(wr.wr.rdma.remote_addr, total, wr.wr.rdma.rkey);
      if (dst == nullptr) return IBV_WC_REM_ACCESS_ERR;
      for (int i = 0; i < wr.num_sge; ++i) {
        const ibv_sge& sge = wr.sg_list[i];
        // Inline data is copied at post time on a NIC: no key is checked.
        const char* src = is_inline ? reinterpret_cast<const char*>(sge.addr)
                                    : device_->local_translate(sge.addr, sge.length, sge.lkey);
        if (src == nullptr) return IBV_WC_LOC_PROT_ERR;
        CopyWords(dst, src, sge.length);
        dst += sge.length;
      }
      *byte_len = static_cast<uint32_t>(total);
      return IBV_WC_SUCCESS;
    }
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: {
      if (wr.num_sge != 1 || wr.sg_list[0].length != 8) return IBV_WC_LOC_LEN_ERR;
      if (wr.wr.atomic.remote_addr & 7) return IBV_WC_REM_INV_REQ_ERR;
      char* target = translate(wr.wr.atomic.remote_addr, 8, wr.wr.atomic.rkey);
      if (target == nullptr) return IBV_WC_REM_ACCESS_ERR;
      char* result = device_->local_translate(wr.sg_list[0].addr, 8, wr.sg_list[0].lkey);
      if (result == nullptr) return IBV_WC_LOC_PROT_ERR;
      auto* word = reinterpret_cast<uint64_t*>(target);
      uint64_t old;
      if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
        old = wr.wr.atomic.compare_add;
        __atomic_compare_exchange_n(word, &old, wr.wr.atomic.swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
      } else {
        old = __atomic_fetch_add(word, wr.wr.atomic.compare_add, __ATOMIC_SEQ_CST);
      }
      memcpy(result, &old, sizeof(old));
      *byte_len = 8;
      return IBV_WC_SUCCESS;
    }
    default:
      return IBV_WC_REM_INV_REQ_ERR;
  }
}

// The common requests inline: READ and WRITE with one scatter entry.
[[gnu::always_inline]] inline ibv_wc_status ShmQueuePair::execute(const ibv_send_wr& wr, uint32_t* byte_len) {
  if (__builtin_expect(peer_failed_->load(std::memory_order_relaxed), 0)) return IBV_WC_RETRY_EXC_ERR;
  const bool read = wr.opcode == IBV_WR_RDMA_READ;
  if (__builtin_expect(wr.num_sge == 1 && (read || wr.opcode == IBV_WR_RDMA_WRITE), 1)) {
    const ibv_sge& sge = wr.sg_list[0];
    const uint32_t length = sge.length;
    const bool is_inline = !read && (wr.send_flags & IBV_SEND_INLINE) != 0;
    if (__builtin_expect(is_inline && length > static_cast<uint32_t>(options_.max_inline_data), 0)) {
      return IBV_WC_LOC_LEN_ERR;
    }
    char* remote = translate(wr.wr.rdma.remote_addr, length, wr.wr.rdma.rkey);
    if (__builtin_expect(remote == nullptr, 0)) return IBV_WC_REM_ACCESS_ERR;
    // Inline data is copied at post time on a NIC: no key is checked.
    char* local = is_inline ? reinterpret_cast<char*>(sge.addr) : device_->local_translate(sge.addr, length, sge.lkey);
    if (__builtin_expect(local == nullptr, 0)) return IBV_WC_LOC_PROT_ERR;
    if (read) {
      CopyWords(local, remote, length);
    } else {
      CopyWords(remote, local, length);
    }
    *byte_len = length;
    return IBV_WC_SUCCESS;
  }
  return execute_general(wr, byte_len);
}

namespace {
constexpr uint32_t kSupportedOpcodes = (1u << IBV_WR_RDMA_READ) | (1u << IBV_WR_RDMA_WRITE) |
                                       (1u << IBV_WR_ATOMIC_CMP_AND_SWP) | (1u << IBV_WR_ATOMIC_FETCH_AND_ADD);
}

int ShmQueuePair::post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (__builtin_expect(cq_->concurrent(), 0)) return post_concurrent(wr, bad_wr);
  return post_locked(wr, bad_wr);
}

int ShmQueuePair::post_concurrent(ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  // Queue pairs sharing a concurrent completion queue serialise on it, so
  // the send-queue and ring accounting below stays exact.
  std::lock_guard<std::mutex> lock(cq_->mutex());
  return post_locked(wr, bad_wr);
}

[[gnu::always_inline]] inline int ShmQueuePair::post_locked(ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  // Validate the whole list first: nothing is posted when any request is
  // malformed or the send queue cannot hold it, as ibv_post_send reports.
  int count = 0;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    if (__builtin_expect(static_cast<unsigned>(w->num_sge - 1) >= static_cast<unsigned>(options_.max_sge) ||
                             static_cast<unsigned>(w->opcode) >= 32 ||
                             !((kSupportedOpcodes >> w->opcode) & 1),
                         0)) {
      *bad_wr = w;
      return EINVAL;
    }
    ++count;
  }
  if (__builtin_expect(!connected_to_peer_, 0)) {
    *bad_wr = wr;
    return EINVAL;  // not connected, or a memory blade's queue pair: nothing to address
  }
  if (__builtin_expect(outstanding_ + count > options_.max_send_wr || cq_->free_slots() < static_cast<size_t>(count), 0)) {
    *bad_wr = wr;
    return ENOMEM;
  }
  outstanding_ += count;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    uint32_t byte_len = 0;
    const ibv_wc_status status = __builtin_expect(error_state_, 0) ? IBV_WC_WR_FLUSH_ERR : execute(*w, &byte_len);
    ++unsignaled_;
    // Failed requests complete whether signaled or not, and move the queue
    // pair to the error state: everything after them is flushed.
    if ((w->send_flags & IBV_SEND_SIGNALED) || __builtin_expect(status != IBV_WC_SUCCESS, 0)) {
      cq_->push(w->wr_id, status, CompletionOpcode(w->opcode), byte_len, this, unsignaled_);
      unsignaled_ = 0;
      if (__builtin_expect(status != IBV_WC_SUCCESS, 0)) error_state_ = true;
    }
  }
  return 0;
}

ShmCompletionQueue::ShmCompletionQueue(int depth, uint64_t latency_cycles, bool concurrent)
    : latency_cycles_(latency_cycles), concurrent_(concurrent) {
  uint64_t size = 1;
  while (size < static_cast<uint64_t>(depth)) size <<= 1;
  ring_.resize(size);
  mask_ = size - 1;
}

int ShmCompletionQueue::poll(int max_entries, ibv_wc* wc) {
  if (!concurrent_) return poll_unlocked(max_entries, wc);
  std::lock_guard<std::mutex> lock(mutex_);
  return poll_unlocked(max_entries, wc);
}

[[gnu::always_inline]] inline int ShmCompletionQueue::poll_unlocked(int max_entries, ibv_wc* wc) {
  if (head_ == tail_) return 0;
  const uint64_t now = latency_cycles_ == 0 ? 0 : Cycles();
  int n = 0;
  while (n < max_entries && head_ != tail_) {
    const Entry& e = ring_[head_ & mask_];
    if (e.ready_cycles > now) break;
    ibv_wc& out = wc[n++];
    // Every field written, without a memset of the whole entry first.
    out.wr_id = e.wr_id;
    out.status = static_cast<ibv_wc_status>(e.status);
    out.opcode = static_cast<ibv_wc_opcode>(e.opcode);
    out.vendor_err = 0;
    out.byte_len = e.byte_len;
    out.imm_data = 0;
    out.qp_num = e.qp->qp_num();
    out.src_qp = 0;
    out.wc_flags = 0;
    out.pkey_index = 0;
    out.slid = 0;
    out.sl = 0;
    out.dlid_path_bits = 0;
    e.qp->retire(e.retired);
    ++head_;
  }
  return n;
}

}  // namespace smart::shm
