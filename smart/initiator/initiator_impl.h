// Internal state of the Initiator, shared by its setup, data-path and
// allocator files.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "smart/initiator.h"
#include "smart/resource/auth.h"
#include "smart/resource/net.h"
#include "smart/task.h"
#include "smart/task/task_hooks.h"
#include "smart/throttle.h"
#include "smart/transport.h"

namespace smart {

// The initiator's data-path files: forced inline (a hot path whose only
// caller is in the same file) and out of line on the cold side.
#define SMART_HOT_INLINE [[gnu::always_inline]] inline
#define SMART_COLD [[gnu::noinline, gnu::cold]]

// wr_id: task (8 bits) | thread (8) | memory node (16) | requests this
// completion acknowledges (32; 0 on unsignaled requests).
inline uint64_t EncodeWrId(int task, int thread, int node, uint32_t count) {
  return (uint64_t(task) << 56) | (uint64_t(thread) << 48) | (uint64_t(node) << 32) | count;
}

struct Connection {
  node_t node = 0;
  std::string host;
  int port = 0;
  int qp_count = 0;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<std::unique_ptr<CompletionQueue>> private_cqs;  // without shared_cq: one per queue pair
  RemoteRegion regions[kMemoryRegions];
  // Empty, or one per queue pair: that queue pair's own key to the main
  // region (a memory window the blade bound to it), used instead of the
  // region's rkey.
  std::vector<uint32_t> window_rkeys;
  std::shared_ptr<PeerMemory> peer;
  int tcp_fd = -1;
  std::string farewell;  // what the blade said before it closed the connection (watcher thread only)
  SessionId session;  // given by the memory blade at the handshake
  std::atomic<bool> failed{false};

  std::string name() const { return "memory node " + std::to_string(node) + " (" + host + ":" + std::to_string(port) + ")"; }
  ~Connection();
};

// Resources of one queue-pair index. With thread-aware allocation each
// thread owns one slot: its doorbell domain and its completion queue, shared
// by its queue pairs to all memory blades.
struct Slot {
  std::unique_ptr<ThreadDomain> domain;
  std::unique_ptr<CompletionQueue> cq;
  int owner = -1;  // thread id
};

// A thread's view of one memory blade. Three cache lines: indexing by node
// is a multiply by 3 and a shift instead of a multiply by 19 and a shift.
struct alignas(64) Lane {
  bool ready = false;
  uint64_t generation = 0;
  QueuePair* qp = nullptr;
  Connection* connection = nullptr;
  int max_inline = 0;
  uint64_t base[kMemoryRegions] = {};
  uint64_t length[kMemoryRegions] = {};
  uint32_t rkey[kMemoryRegions] = {};
  uint64_t posted = 0;
  std::atomic<uint64_t> acked{0};
  Status failure;  // set by the first failed completion
  bool failure_is_flush = false;
  // Requests of tasks that wait to go out behind one doorbell (coalesce_posts):
  // the work requests of their TaskContexts, linked.
  ibv_send_wr* pending_head = nullptr;
  ibv_send_wr* pending_tail = nullptr;
  int pending = 0;
  bool pending_listed = false;  // in ThreadState::pending_lanes
  uint64_t send_queue_full_since = 0;  // steady clock, ns: when a post of them first found no room
};

constexpr int kMaxSyncTargets = 8;
// How long others may go ahead of the first task waiting for credit
// (wait_for_credit): about 20 us at 2-4 GHz.
constexpr uint64_t kCreditPatienceCycles = 60000;
// Requests that wait behind one doorbell at most (coalesce_posts).
constexpr int kMaxCoalescedRequests = 32;

struct TaskContext {
  ibv_send_wr wr[kMaxBatchSize];
  ibv_sge sge[kMaxBatchSize];
  int count = 0;
  node_t node = 0;
  struct SyncTarget {
    node_t node;
    uint64_t seq;
  };
  SyncTarget targets[kMaxSyncTargets];
  int target_count = 0;
  bool waiting = false;
  bool credit_waiting = false;
  bool coalesced = false;  // wr[] is linked into a lane's pending chain, not yet posted
  Status error;
  uint64_t* scratch = nullptr;  // 64 bytes of registered cache
  uint64_t wr_id_base = 0;      // EncodeWrId(task, thread, 0, 0): the node and count go in per post
};

// Per (thread, memory blade) state of the remote allocator.
struct NodeAllocator {
  static constexpr int kClasses = 12;  // 8 B .. 16 KiB
  std::vector<GlobalAddress> free_lists[kClasses];
  std::unordered_map<uint64_t, std::vector<GlobalAddress>> free_chunks;  // by chunk count
  bool super_chunk_cached = false;
  uint64_t max_chunk = 0;
  uint64_t alloc_chunk = 0;
};

struct ThreadState;

struct StateCache {
  uint64_t instance = 0;
  ThreadState* state = nullptr;
};
extern thread_local constinit SMART_HOT_TLS StateCache tls_state;

class ThreadPoller final : public CompletionPoller {
 public:
  explicit ThreadPoller(ThreadState* state) : state_(state) {}
  int poll() override;
  bool pending() const override;

 private:
  ThreadState* state_;
};

struct ThreadState {
  ThreadState(Initiator::Impl* impl, int thread_id, int slot, int max_nodes);

  Initiator::Impl* impl;
  int thread_id;
  int slot;
  std::vector<Lane> lanes;  // one per memory node, sized once
  // lanes.size(), kept so that the data path compares instead of dividing
  // by sizeof(Lane).
  const size_t lane_count = lanes.size();
  std::vector<CompletionQueue*> cqs;
  std::vector<std::unique_ptr<TaskContext>> tasks;
  std::atomic<int> inflight{0};
  std::atomic<int> bound;
  std::atomic<uint64_t> completed{0};
  std::deque<int> credit_waiters;
  // coalesce_posts: lanes with pending requests, and the tasks whose work
  // requests are in those chains.
  std::vector<node_t> pending_lanes;
  std::vector<TaskContext*> coalesced_tasks;
  uint64_t credit_front_since = 0;  // Cycles() when the first in line became first
  ThreadPoller poller;
  uint64_t attached_pool = 0;
  // Shared queue pairs: completions polled by other threads land here.
  std::atomic<bool> remote_progress{false};
  std::mutex foreign_mutex;
  std::vector<std::pair<node_t, Status>> foreign_failures;
  // Remote allocator
  std::vector<NodeAllocator> allocators;
  bool allocator_busy = false;
  std::deque<int> allocator_waiters;
};

// A refusal for load (the blade's max_startups or a flood): connect()
// tries again.
class BusyRefusal : public Error {
 public:
  using Error::Error;
};

struct Initiator::Impl {
  explicit Impl(const SmartConfig& config);
  ~Impl();

  SmartConfig config;
  std::optional<SessionKey> key;  // auth.key_file: proven to every memory blade
  uint64_t instance;
  std::unique_ptr<Device> device;
  char* cache_base = nullptr;
  size_t cache_size = 0;
  bool cache_huge = false;
  std::unique_ptr<MemoryRegion> cache_region;
  uint32_t cache_lkey = 0;
  std::atomic<size_t> cache_used{0};
  int unbounded = 256;  // work requests a thread may have in flight at most
  bool shared_qps = false;
  bool coalesce = false;  // coalesce_posts (never with shared queue pairs)

  std::mutex mutex;  // connections, slots, states
  std::vector<std::unique_ptr<Connection>> connections;  // by node
  std::atomic<uint64_t> generation{1};
  std::vector<Slot> slots;
  std::unique_ptr<ThreadState> states[kMaxThreads];
  bool domain_fallback_logged = false;

  // Credit tuner
  std::atomic<int> current_bound{0};
  std::thread tuner;
  std::mutex tuner_mutex;
  std::condition_variable tuner_cv;
  bool stopping = false;

  // Connection monitor
  std::thread monitor;
  int monitor_pipe[2] = {-1, -1};
  std::atomic<bool> monitor_stop{false};

  void* cache_alloc(size_t size);
  // The scheduler of the running pool must drain this thread's completion
  // queues, or a waiting task would never wake.
  void attach_poller(ThreadState* ts) {
    TaskPool* pool = task_hooks::CurrentPool();
    if (__builtin_expect(ts->attached_pool != pool->serial(), 0)) {
      pool->attach_poller(&ts->poller);
      ts->attached_pool = pool->serial();
    }
  }
  TaskContext* task_context(ThreadState* ts, int task) {
    TaskContext* t = ts->tasks[task].get();
    if (__builtin_expect(t != nullptr, 1)) return t;
    return create_task_context(ts, task);
  }
  TaskContext* create_task_context(ThreadState* ts, int task);
  // The calling thread's state, created on first use.
  ThreadState* state() {
    if (__builtin_expect(tls_state.instance == instance, 1)) return tls_state.state;
    return state_slow();
  }
  ThreadState* state_slow();
  ThreadState* create_state();
  void release_state(int thread_id);
  Status resolve_lane(ThreadState* ts, node_t node);

  // The data path. The inline ones are defined in initiator_datapath.cc, their
  // only caller, and forced inline there: a task resumes after a context
  // switch with the return-address predictor out of step, so every return
  // between the switch and the caller's code costs a mispredict.
  inline Status add_request(ibv_wr_opcode opcode, void* local, GlobalAddress remote, size_t length,
                            uint64_t compare_add, uint64_t swap, Option option);
  inline Status post(ThreadState* ts, TaskContext* t, int task);
  inline Status wait_for(ThreadState* ts, TaskContext* t, int task);
  int poll(ThreadState* ts);
  inline void handle_completion(ThreadState* ts, const ibv_wc& wc);
  // Out of line: the rare branches of the above.
  void wait_for_credit(ThreadState* ts, TaskContext* t, int task, int n);
  // Posts `first` and the requests linked after it once the send queue has
  // room; returns 0 or the provider's errno value.
  int retry_post(ThreadState* ts, Lane& lane, ibv_send_wr* first, int task);
  Status post_error(const Lane& lane, int n, int rc) const;
  // coalesce_posts: posts the lanes' pending requests (each lane's with one
  // doorbell); a lane whose send queue stays full, or whose post fails,
  // fails. flush_all is a no-op when nothing is pending.
  void flush_all(ThreadState* ts) {
    if (__builtin_expect(!ts->pending_lanes.empty(), 0)) flush_pending(ts);
  }
  void flush_pending(ThreadState* ts);
  // Links the task's batch (t->count requests, wr_ids set) into its lane's chain.
  void defer_post(ThreadState* ts, TaskContext* t, node_t node);
  void flush_lane(ThreadState* ts, node_t node);
  // Waits until the task's own requests left the pending chains.
  void wait_for_flush(ThreadState* ts, TaskContext* t, int task);
  Status add_target(ThreadState* ts, TaskContext* t, int task, node_t node, uint64_t seq);
  Status wait_failed(ThreadState* ts, TaskContext* t, const Status& posted);
  void handle_foreign_completion(const ibv_wc& wc);
  void handle_failed_completion(ThreadState* ts, Lane& lane, const ibv_wc& wc, int task);
  void drain_foreign(ThreadState* ts);
  void wake_all(ThreadState* ts);
  Status failure_status(const ibv_wc& wc, const Connection* connection) const;
  void tune();
  void watch_connections();
  // The handshake on conn->tcp_fd (initiator_handshake.cc): fills in the
  // connection's queue pairs, regions and session. Throws BusyRefusal when
  // the blade refuses for load, smart::Error otherwise.
  void handshake(Connection* conn, const std::string& peer, Deadline deadline, uint64_t pool_id);
  void apply_bound(int bound);
  CompletionQueue* ensure_slot(int index);
};

}  // namespace smart
