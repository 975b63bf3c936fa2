// Data path of the shm provider. post_send checks and translates each work
// request, prefetches the lines it will touch and queues it on the
// completion ring; poll carries the queued requests out in post order (the
// copy or atomic a NIC's DMA engine would do) and hands out completions for
// the signaled ones and the failed ones, optionally after a modelled network
// latency. Deferring the copy lets the misses of many tasks' requests
// overlap: each task posts and prefetches, the poller then copies a run of
// requests whose lines are already on their way.
#include <algorithm>
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

// Completion opcode by RingAction.
constexpr uint8_t kCompletionOpcode[] = {IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE, IBV_WC_COMP_SWAP,
                                         IBV_WC_FETCH_ADD, IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE};

inline RingAction ActionOf(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ:
      return RingAction::kRead;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return RingAction::kCompareSwap;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return RingAction::kFetchAdd;
    default:
      return RingAction::kWrite;
  }
}

// Lines of one remote range prefetched at post time; longer ranges stream
// on their own once the copy starts.
constexpr uint64_t kPrefetchLines = 4;

template <int kForWrite>
inline void PrefetchRange(const char* p, uint64_t length) {
  __builtin_prefetch(p, kForWrite, 3);
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  if (__builtin_expect((start & 63) + length <= 64, 1)) return;  // one line
  const uintptr_t first = start & ~uintptr_t{63};
  const uintptr_t stop = std::min<uintptr_t>((start + length - 1) & ~uintptr_t{63}, first + 64 * (kPrefetchLines - 1));
  for (uintptr_t line = first + 64; line <= stop; line += 64) {
    __builtin_prefetch(reinterpret_cast<const char*>(line), kForWrite, 3);
  }
}

// Carries out one request whose checks passed at post time.
inline void Execute(const RingEntry& e) {
  if (__builtin_expect(e.action == RingAction::kRead, 1)) {
    CopyWords(e.local, e.remote, e.byte_len);
    return;
  }
  switch (e.action) {
    case RingAction::kRead:
      CopyWords(e.local, e.remote, e.byte_len);
      return;
    case RingAction::kWrite:
      CopyWords(e.remote, e.local, e.byte_len);
      return;
    case RingAction::kCompareSwap:
    case RingAction::kFetchAdd: {
      auto* word = reinterpret_cast<uint64_t*>(e.remote);
      uint64_t old;
      if (e.action == RingAction::kCompareSwap) {
        old = e.u.atomic.compare_add;
        __atomic_compare_exchange_n(word, &old, e.u.atomic.swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
      } else {
        old = __atomic_fetch_add(word, e.u.atomic.compare_add, __ATOMIC_SEQ_CST);
      }
      memcpy(e.local, &old, sizeof(old));
      return;
    }
    case RingAction::kReadScatter:
    case RingAction::kWriteGather: {
      const auto* list = reinterpret_cast<const ScatterEntry*>(e.local);
      char* remote = e.remote;
      for (uint64_t i = 0; i < e.u.scatter_count; ++i) {
        if (e.action == RingAction::kReadScatter) {
          CopyWords(list[i].addr, remote, list[i].length);
        } else {
          CopyWords(remote, list[i].addr, list[i].length);
        }
        remote += list[i].length;
      }
      return;
    }
  }
}

}  // namespace

ShmQueuePair::ShmQueuePair(ShmDevice* device, const QueuePairOptions& options, uint32_t qp_num)
    : device_(device), options_(options), cq_(static_cast<ShmCompletionQueue*>(options.cq)), qp_num_(qp_num) {
  nic_ = device->nic();
  if (nic_ != nullptr) doorbell_ = nic_->doorbell_for_new_qp(options.domain != nullptr);
  // Inline payloads the ring entry cannot hold, and scatter lists, live in a
  // per-queue-pair slot for each send-queue entry.
  size_t stride = 0;
  if (options_.max_inline_data > static_cast<int>(sizeof(RingEntry::u.inline_data))) {
    stride = static_cast<size_t>(options_.max_inline_data);
  }
  if (options_.max_sge > 1) stride = std::max(stride, static_cast<size_t>(options_.max_sge) * sizeof(ScatterEntry));
  side_stride_ = (stride + 63) & ~size_t{63};
  side_.resize(side_stride_ * static_cast<size_t>(options_.max_send_wr));
}

ShmQueuePair::~ShmQueuePair() {
  if (cq_->concurrent()) {
    std::lock_guard<std::mutex> lock(cq_->mutex());
    cq_->drain_queue_pair(this);
  } else {
    cq_->drain_queue_pair(this);
  }
}

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
  if (peer_ != nullptr) {
    session_word_ = peer_->session_word();
    session_current_ = peer_->session_current();
  }
  connected_ = true;
  connected_to_peer_ = peer_ != nullptr;
  lone_post_ = connected_to_peer_ && options_.max_sge >= 1 && nic_ == nullptr;
}

// Every opcode and scatter list; the peer was checked alive by prepare().
ibv_wc_status ShmQueuePair::prepare_general(const ibv_send_wr& wr, RingEntry* e) {
  switch (wr.opcode) {
    case IBV_WR_RDMA_READ:
    case IBV_WR_RDMA_WRITE: {
      const bool read = wr.opcode == IBV_WR_RDMA_READ;
      const bool is_inline = !read && (wr.send_flags & IBV_SEND_INLINE) != 0;
      uint64_t total = 0;
      for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
      if (is_inline && total > static_cast<uint64_t>(options_.max_inline_data)) return IBV_WC_LOC_LEN_ERR;
      char* remote = translate(wr.wr.rdma.remote_addr, total, wr.wr.rdma.rkey);
      if (remote == nullptr) return IBV_WC_REM_ACCESS_ERR;
      e->remote = remote;
      e->byte_len = static_cast<uint32_t>(total);
      if (is_inline) {
        // Gathered now: the caller may reuse its buffers once post_send returns.
        char* payload = total <= sizeof(e->u.inline_data) ? e->u.inline_data : side_slot();
        char* at = payload;
        for (int i = 0; i < wr.num_sge; ++i) {
          memcpy(at, reinterpret_cast<const char*>(wr.sg_list[i].addr), wr.sg_list[i].length);
          at += wr.sg_list[i].length;
        }
        e->local = payload;
        e->action = RingAction::kWrite;
        PrefetchRange<1>(remote, total);
        return IBV_WC_SUCCESS;
      }
      // Check every scatter entry before taking a side slot.
      for (int i = 0; i < wr.num_sge; ++i) {
        const ibv_sge& sge = wr.sg_list[i];
        if (device_->local_translate(sge.addr, sge.length, sge.lkey) == nullptr) return IBV_WC_LOC_PROT_ERR;
      }
      if (wr.num_sge == 1) {
        e->local = reinterpret_cast<char*>(wr.sg_list[0].addr);
        e->action = read ? RingAction::kRead : RingAction::kWrite;
      } else {
        auto* list = reinterpret_cast<ScatterEntry*>(side_slot());
        for (int i = 0; i < wr.num_sge; ++i) {
          list[i] = ScatterEntry{reinterpret_cast<char*>(wr.sg_list[i].addr), wr.sg_list[i].length};
        }
        e->local = reinterpret_cast<char*>(list);
        e->u.scatter_count = static_cast<uint64_t>(wr.num_sge);
        e->action = read ? RingAction::kReadScatter : RingAction::kWriteGather;
      }
      if (read) {
        PrefetchRange<0>(remote, total);
      } else {
        PrefetchRange<1>(remote, total);
      }
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
      e->remote = target;
      e->local = result;
      e->u.atomic.compare_add = wr.wr.atomic.compare_add;
      e->u.atomic.swap = wr.wr.atomic.swap;
      e->byte_len = 8;
      e->action = ActionOf(wr.opcode);
      __builtin_prefetch(target, 1, 3);
      return IBV_WC_SUCCESS;
    }
    default:
      return IBV_WC_REM_INV_REQ_ERR;
  }
}

// The common requests inline: READ and WRITE with one scatter entry, the
// checks in the order a NIC makes them (inline length, remote, local).
[[gnu::always_inline]] inline ibv_wc_status ShmQueuePair::prepare(const ibv_send_wr& wr, RingEntry* e) {
  if (__builtin_expect(peer_failed_->load(std::memory_order_relaxed), 0)) return IBV_WC_RETRY_EXC_ERR;
  const bool read = wr.opcode == IBV_WR_RDMA_READ;
  if (__builtin_expect(wr.num_sge == 1 && (read || wr.opcode == IBV_WR_RDMA_WRITE), 1)) {
    const ibv_sge& sge = wr.sg_list[0];
    const uint32_t length = sge.length;
    const bool is_inline = !read && (wr.send_flags & IBV_SEND_INLINE) != 0;
    if (__builtin_expect(is_inline, 0)) return prepare_general(wr, e);
    char* remote = translate(wr.wr.rdma.remote_addr, length, wr.wr.rdma.rkey);
    if (__builtin_expect(remote == nullptr, 0)) return IBV_WC_REM_ACCESS_ERR;
    char* local = device_->local_translate(sge.addr, length, sge.lkey);
    if (__builtin_expect(local == nullptr, 0)) return IBV_WC_LOC_PROT_ERR;
    e->remote = remote;
    e->local = local;
    e->byte_len = length;
    if (read) {
      e->action = RingAction::kRead;
      PrefetchRange<0>(remote, length);
      __builtin_prefetch(local, 1, 3);
    } else {
      e->action = RingAction::kWrite;
      PrefetchRange<1>(remote, length);
      __builtin_prefetch(local, 0, 3);
    }
    return IBV_WC_SUCCESS;
  }
  return prepare_general(wr, e);
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

uint64_t ShmQueuePair::modelled_ready(int count) {
  // One doorbell per post_send, as a verbs provider rings it once per list.
  if (doorbell_ != nullptr) doorbell_->ring(ThreadId(), nic_->handoff_cycles());
  return nic_->admit(Cycles(), static_cast<uint32_t>(count)) + device_->latency_cycles();
}

[[gnu::always_inline]] inline void ShmQueuePair::queue(ibv_send_wr* w, uint64_t k, uint64_t ready) {
  RingEntry* e = cq_->next_entry(k);
  // Everything the request needs is copied now: the caller may reuse its
  // work request and scatter list as soon as post_send returns.
  const ibv_wc_status status = __builtin_expect(error_state_, 0) ? IBV_WC_WR_FLUSH_ERR : prepare(*w, e);
  e->wr_id = w->wr_id;
  e->qp = this;
  e->ready_cycles = ready;
  e->status = static_cast<uint8_t>(status);
  ++unsignaled_;
  // Failed requests complete whether signaled or not, and move the queue
  // pair to the error state: everything after them is flushed.
  if ((w->send_flags & IBV_SEND_SIGNALED) || __builtin_expect(status != IBV_WC_SUCCESS, 0)) {
    e->retired = static_cast<uint16_t>(unsignaled_);
    unsignaled_ = 0;
    if (__builtin_expect(status != IBV_WC_SUCCESS, 0)) {
      error_state_ = true;
      e->action = ActionOf(w->opcode);
      e->byte_len = 0;
    }
  } else {
    e->retired = 0;
  }
}

[[gnu::always_inline]] inline int ShmQueuePair::post_locked(ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  // The data path's usual post: one READ or WRITE with one scatter entry.
  // It is valid as it stands, so it goes straight to the ring.
  if (__builtin_expect(lone_post_ && wr != nullptr && wr->next == nullptr && wr->num_sge == 1 &&
                           (wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_RDMA_WRITE) &&
                           outstanding_ < options_.max_send_wr && cq_->free_slots() != 0,
                       1)) {
    ++outstanding_;
    queue(wr, 0, cq_->ready_cycles());
    cq_->publish(1);
    return 0;
  }
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
  const uint64_t ready = __builtin_expect(nic_ != nullptr, 0) ? modelled_ready(count) : cq_->ready_cycles();
  uint64_t k = 0;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next, ++k) queue(w, k, ready);
  cq_->publish(k);
  return 0;
}

ShmCompletionQueue::ShmCompletionQueue(int depth, uint64_t latency_cycles, bool concurrent, bool timed)
    : latency_cycles_(latency_cycles), timed_(timed || latency_cycles != 0), concurrent_(concurrent) {
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

inline uint64_t ShmCompletionQueue::ready_cycles() const {
  return latency_cycles_ == 0 ? 0 : Cycles() + latency_cycles_;
}

[[gnu::always_inline]] inline int ShmCompletionQueue::poll_unlocked(int max_entries, ibv_wc* wc) {
  uint64_t head = head_;
  const uint64_t tail = tail_;
  if (head == tail) return 0;
  const uint64_t now = timed_ ? Cycles() : 0;
  const RingEntry* const ring = ring_.data();
  const uint64_t mask = mask_;
  int n = 0;
  while (n < max_entries && head != tail) {
    const RingEntry& e = ring[head & mask];
    if (e.ready_cycles > now) break;
    // Carried out exactly once, in post order, before its completion (and
    // before any later request's) is handed out. A WRITE or atomic first
    // checks that its session was not fenced meanwhile (guard_session).
    if (__builtin_expect(e.status == IBV_WC_SUCCESS, 1)) {
      if (__builtin_expect(e.action == RingAction::kRead, 1)) {
        CopyWords(e.local, e.remote, e.byte_len);
      } else if (__builtin_expect(e.qp->session_current(), 1)) {
        Execute(e);
      } else {
        refuse(head);
      }
    }
    ++head;
    if (e.retired == 0) continue;  // unsignaled, or its queue pair is gone
    ShmQueuePair* const qp = e.qp;
    ibv_wc& out = wc[n++];
    // Every field written, without a memset of the whole entry first.
    out.wr_id = e.wr_id;
    out.status = static_cast<ibv_wc_status>(e.status);
    out.opcode = static_cast<ibv_wc_opcode>(kCompletionOpcode[static_cast<int>(e.action)]);
    out.vendor_err = 0;
    out.byte_len = e.byte_len;
    out.imm_data = 0;
    out.qp_num = qp->qp_num();
    out.src_qp = 0;
    out.wc_flags = 0;
    out.pkey_index = 0;
    out.slid = 0;
    out.sl = 0;
    out.dlid_path_bits = 0;
    qp->retire(e.retired);
  }
  // A drained ring starts again at its first slot: the next posts write
  // lines that are still in the cache instead of walking the whole ring.
  if (head == tail_) {
    head_ = tail_ = 0;
  } else {
    head_ = head;
  }
  return n;
}

void ShmCompletionQueue::refuse(uint64_t index) {
  RingEntry& e = ring_[index & mask_];
  if (e.action == RingAction::kReadScatter) {
    Execute(e);  // a READ: the fence is for what changes the pool
    return;
  }
  e.status = IBV_WC_REM_ACCESS_ERR;
  if (e.retired != 0) return;
  // Unsignaled: the next completion of its queue pair stands for it (the
  // list's last, signaled request).
  for (uint64_t i = index + 1; i != tail_; ++i) {
    RingEntry& later = ring_[i & mask_];
    if (later.qp == e.qp && later.retired != 0) {
      later.status = IBV_WC_REM_ACCESS_ERR;
      return;
    }
  }
}

void ShmCompletionQueue::drain_queue_pair(ShmQueuePair* qp) {
  for (uint64_t i = head_; i != tail_; ++i) {
    RingEntry& e = ring_[i & mask_];
    if (e.qp != qp) continue;
    const bool reads = e.action == RingAction::kRead || e.action == RingAction::kReadScatter;
    if (e.status == IBV_WC_SUCCESS && qp->local_still_valid(e) && (reads || qp->session_current())) Execute(e);
    e.qp = nullptr;
    e.retired = 0;
    e.status = IBV_WC_WR_FLUSH_ERR;
  }
}

// A buffer deregistered before its request was carried out would take a
// protection error on a NIC; at queue-pair destruction it is skipped.
bool ShmQueuePair::local_still_valid(const RingEntry& e) const {
  const bool captured = e.local == e.u.inline_data ||
                        (e.local >= side_.data() && e.local < side_.data() + side_.size());
  switch (e.action) {
    case RingAction::kRead:
      return device_->local_registered(e.local, e.byte_len);
    case RingAction::kWrite:
      return captured || device_->local_registered(e.local, e.byte_len);
    case RingAction::kCompareSwap:
    case RingAction::kFetchAdd:
      return device_->local_registered(e.local, 8);
    case RingAction::kReadScatter:
    case RingAction::kWriteGather: {
      const auto* list = reinterpret_cast<const ScatterEntry*>(e.local);
      for (uint64_t j = 0; j < e.u.scatter_count; ++j) {
        if (!device_->local_registered(list[j].addr, list[j].length)) return false;
      }
      return true;
    }
  }
  return false;
}

}  // namespace smart::shm
