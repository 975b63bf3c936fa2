// Initiator setup: the registered cache, connections and their handshake,
// per-thread state, the credit tuner and the connection monitor.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "smart/initiator/initiator_impl.h"
#include "smart/logging.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/util/memory.h"
#include "smart/util/peer_text.h"

namespace smart {

namespace {

std::atomic<uint64_t> g_instance{1};

// Live initiators, so a thread that exits can return its state to those
// still alive.
std::mutex g_registry_mutex;
std::unordered_map<uint64_t, Initiator::Impl*> g_registry;

struct ThreadExitHook {
  int thread_id = -1;
  std::vector<uint64_t> instances;
  ~ThreadExitHook() {
    const int id = thread_id;
    if (id < 0) return;
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    for (uint64_t instance : instances) {
      auto it = g_registry.find(instance);
      if (it != g_registry.end()) it->second->release_state(id);
    }
  }
};
thread_local ThreadExitHook tls_exit_hook;

}  // namespace

constinit thread_local SMART_HOT_TLS StateCache tls_state;

Connection::~Connection() {
  qps.clear();
  private_cqs.clear();
  peer.reset();
  CloseFd(&tcp_fd);
}

ThreadState::ThreadState(Initiator::Impl* owner, int id, int slot_index, int max_nodes)
    : impl(owner), thread_id(id), slot(slot_index), lanes(max_nodes), tasks(kMaxTasksPerThread),
      poller(this), allocators(max_nodes) {}

Initiator::Impl::Impl(const SmartConfig& cfg) : config(cfg), instance(g_instance.fetch_add(1)) {
  if (!config.auth.none && !config.auth.key_file.empty()) {
    key = SessionKey::Load(config.auth.key_file, "auth.key_file in " + config.source);
  }
  device = Device::Open(config);
  cache_size = config.initiator_cache_size << 20;
  cache_base = static_cast<char*>(AllocateBuffer(cache_size, &cache_huge));
  cache_region = device->register_memory(cache_base, cache_size);
  cache_lkey = cache_region->lkey();
  unbounded = std::min(config.qp_param.max_wqe_size, config.qp_param.max_cqe_size);
  shared_qps = config.experimental.qp_sharing;
  coalesce = !shared_qps && (config.coalesce_posts == SmartConfig::CoalescePosts::kOn ||
                             (config.coalesce_posts == SmartConfig::CoalescePosts::kAuto &&
                              device->kind() == TransportKind::kVerbs));
  connections.resize(config.max_nodes);
  slots.resize(kMaxThreads);
  const int initial = config.use_work_req_throt && !shared_qps
                          ? std::min(config.work_req_throt.initial_credit, unbounded)
                          : unbounded;
  current_bound.store(initial);
  if (pipe2(monitor_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("initiator: pipe failed");
  monitor = std::thread([this] { watch_connections(); });
  if (config.use_work_req_throt && config.work_req_throt.auto_tuning && !shared_qps) {
    tuner = std::thread([this] { tune(); });
  }
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_registry[instance] = this;
}

Initiator::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_registry.erase(instance);
  }
  {
    std::lock_guard<std::mutex> lock(tuner_mutex);
    stopping = true;
  }
  tuner_cv.notify_all();
  if (tuner.joinable()) tuner.join();
  monitor_stop.store(true);
  char c = 'q';
  ssize_t ignored = ::write(monitor_pipe[1], &c, 1);
  (void)ignored;
  if (monitor.joinable()) monitor.join();
  CloseFd(&monitor_pipe[0]);
  CloseFd(&monitor_pipe[1]);
  for (auto& s : states) s.reset();
  connections.clear();
  slots.clear();
  cache_region.reset();
  FreeBuffer(cache_base, cache_size);
  device.reset();
}

Initiator::Initiator(const SmartConfig& config) : impl_(std::make_unique<Impl>(config)) {}

Initiator::~Initiator() = default;

const SmartConfig& Initiator::config() const { return impl_->config; }

TransportKind Initiator::transport() const { return impl_->device->kind(); }

int Initiator::credit_bound() const { return impl_->current_bound.load(); }

void* Initiator::alloc_cache(size_t size) { return impl_->cache_alloc(size); }

void* Initiator::Impl::cache_alloc(size_t size) {
  const size_t rounded = (std::max<size_t>(size, 1) + 63) & ~size_t{63};
  size_t used = cache_used.load(std::memory_order_relaxed);
  for (;;) {
    if (rounded > cache_size || used > cache_size - rounded) return nullptr;
    if (cache_used.compare_exchange_weak(used, used + rounded)) return cache_base + used;
  }
}

// ---------------------------------------------------------------------------
// Per-thread state

ThreadState* Initiator::Impl::state_slow() {
  const int id = ThreadId();
  ThreadState* ts;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ts = states[id].get();
  }
  if (ts == nullptr) ts = create_state();
  tls_state.instance = instance;
  tls_state.state = ts;
  return ts;
}

ThreadState* Initiator::Impl::create_state() {
  const int id = ThreadId();
  std::lock_guard<std::mutex> lock(mutex);
  int slot = -1;
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    if (slots[i].owner < 0) {
      slot = i;
      break;
    }
  }
  if (slot < 0) throw Error("initiator: no free queue-pair slot for a new thread");
  slots[slot].owner = id;
  states[id] = std::make_unique<ThreadState>(this, id, slot, config.max_nodes);
  states[id]->bound.store(current_bound.load());
  tls_exit_hook.thread_id = id;
  tls_exit_hook.instances.push_back(instance);
  return states[id].get();
}

void Initiator::Impl::release_state(int thread_id) {
  std::lock_guard<std::mutex> lock(mutex);
  ThreadState* ts = states[thread_id].get();
  if (ts == nullptr) return;
  slots[ts->slot].owner = -1;
  states[thread_id].reset();
}

void Initiator::release_thread() {
  const int id = ThreadId();
  impl_->release_state(id);
  tls_state = StateCache();
}

CompletionQueue* Initiator::Impl::ensure_slot(int index) {
  Slot& slot = slots[index];
  const bool thread_aware = config.use_thread_aware_alloc;
  if (thread_aware && config.thread_aware_alloc.doorbell == DoorbellMode::kThreadDomain && !slot.domain &&
      !domain_fallback_logged) {
    slot.domain = device->create_thread_domain();
    if (!slot.domain) {
      domain_fallback_logged = true;
      SMART_WARN("doorbell mode thread_domain: %s cannot allocate thread domains; using the provider's shared "
                 "doorbells (mode in effect: shared)",
                 device->description().c_str());
    }
  }
  if (!slot.cq) slot.cq = device->create_cq(config.qp_param.max_cqe_size, slot.domain.get(), shared_qps);
  return slot.cq.get();
}

bool Initiator::connected(node_t node) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return node < impl_->connections.size() && impl_->connections[node] != nullptr;
}

SessionId Initiator::session(node_t node) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (node >= impl_->connections.size() || !impl_->connections[node]) return SessionId{};
  return impl_->connections[node]->session;
}

uint64_t Initiator::remote_capacity(node_t node) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (node >= impl_->connections.size() || !impl_->connections[node]) return 0;
  return impl_->connections[node]->regions[kMainMemoryRegion].length;
}

void Initiator::connect(node_t node, const std::string& host, int port, int qp_count, uint64_t pool_id) {
  Impl& im = *impl_;
  if (node >= im.config.max_nodes) {
    throw Error("connect: memory node id " + std::to_string(node) + " is not below max_nodes (" +
                std::to_string(im.config.max_nodes) + ")");
  }
  if (qp_count < 1 || qp_count > std::min(kMaxQueuePairsPerConnection, kMaxThreads)) {
    throw Error("connect: qp_count must be within 1.." + std::to_string(kMaxThreads) + ", got " +
                std::to_string(qp_count));
  }
  if (port < 1 || port > 65535) throw Error("connect: port must be within 1..65535, got " + std::to_string(port));
  {
    std::lock_guard<std::mutex> lock(im.mutex);
    if (im.connections[node]) throw Error("connect: memory node " + std::to_string(node) + " is already connected");
  }
  // A blade busy with handshakes (max_startups, or a flood) refuses with
  // "busy": try again, each time after a longer random pause, until
  // connect_timeout_ms has passed since the first attempt.
  const auto start = std::chrono::steady_clock::now();
  const Deadline deadline = start + std::chrono::milliseconds(im.config.connect_timeout_ms);
  const std::string peer = host + ":" + std::to_string(port);
  std::unique_ptr<Connection> conn;
  int pause_ms = 5;
  std::string busy;  // the last busy refusal
  for (int attempt = 1;; ++attempt) {
    conn = std::make_unique<Connection>();
    conn->node = node;
    conn->host = host;
    conn->port = port;
    conn->qp_count = qp_count;
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      conn->tcp_fd = TcpConnect(host, port, static_cast<int>(std::max<int64_t>(1, left.count())));
      im.handshake(conn.get(), peer, deadline, pool_id);
      break;
    } catch (const BusyRefusal& e) {
      busy = e.what();
      thread_local std::mt19937 random{std::random_device{}()};
      const int pause = std::uniform_int_distribution<int>(pause_ms / 2, pause_ms)(random);
      if (std::chrono::steady_clock::now() + std::chrono::milliseconds(pause) >= deadline) {
        throw Error(busy + " (busy at each of " + std::to_string(attempt) + " attempts within connect_timeout_ms, " +
                    std::to_string(im.config.connect_timeout_ms) + " ms)");
      }
      if (attempt == 1) SMART_INFO("memory blade %s is busy; trying again within connect_timeout_ms", peer.c_str());
      conn.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(pause));
      pause_ms = std::min(pause_ms * 2, 200);
    } catch (const Error& e) {
      // A retry that ran out of time: the busy blade is the story.
      if (busy.empty() || std::chrono::steady_clock::now() < deadline) throw;
      throw Error(busy + " (busy at each of " + std::to_string(attempt - 1) + " attempts within connect_timeout_ms, " +
                  std::to_string(im.config.connect_timeout_ms) + " ms; the last attempt: " + e.what() + ")");
    }
  }
  {
    std::lock_guard<std::mutex> lock(im.mutex);
    im.connections[node] = std::move(conn);
    im.generation.fetch_add(1);
  }
  char c = 'c';
  ssize_t ignored = ::write(im.monitor_pipe[1], &c, 1);
  (void)ignored;
}

void Initiator::disconnect(node_t node) {
  std::unique_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (node >= impl_->connections.size()) return;
    conn = std::move(impl_->connections[node]);
    impl_->generation.fetch_add(1);
  }
  char c = 'd';
  ssize_t ignored = ::write(impl_->monitor_pipe[1], &c, 1);
  (void)ignored;
  // The monitor rebuilds its poll set under the mutex; the connection is
  // out of the table, so closing it now is safe.
}

// ---------------------------------------------------------------------------
// Background threads

void Initiator::Impl::apply_bound(int bound) {
  current_bound.store(bound);
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& s : states) {
    if (s) s->bound.store(bound, std::memory_order_relaxed);
  }
}

void Initiator::Impl::tune() {
  CreditTuner tuner_logic(config.work_req_throt, unbounded);
  const double cycles_per_ns = CyclesPerNanosecond();
  const auto epoch = std::chrono::nanoseconds(
      static_cast<int64_t>(static_cast<double>(config.work_req_throt.sample_cycles) / cycles_per_ns));
  uint64_t last_total = 0;
  auto last = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(tuner_mutex);
  while (!stopping) {
    tuner_cv.wait_for(lock, epoch, [this] { return stopping; });
    if (stopping) break;
    uint64_t total = 0;
    {
      std::lock_guard<std::mutex> states_lock(mutex);
      for (auto& s : states) {
        if (s) total += s->completed.load(std::memory_order_relaxed);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const double factor = std::chrono::duration<double>(now - last).count() /
                          std::chrono::duration<double>(epoch).count();
    const uint64_t delta = total >= last_total ? total - last_total : 0;
    last_total = total;
    last = now;
    if (delta == 0 || factor <= 0) continue;  // idle epochs do not count
    const int before = tuner_logic.bound();
    const int after = tuner_logic.on_epoch(static_cast<double>(delta) / factor);
    if (after != before) {
      lock.unlock();
      apply_bound(after);
      lock.lock();
    }
  }
}

void Initiator::Impl::watch_connections() {
  while (!monitor_stop.load()) {
    std::vector<pollfd> fds = {{monitor_pipe[0], POLLIN, 0}};
    std::vector<Connection*> watched;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& c : connections) {
        if (c && !c->failed.load()) {
          fds.push_back({c->tcp_fd, POLLIN | POLLRDHUP, 0});
          watched.push_back(c.get());
        }
      }
    }
    const int n = ::poll(fds.data(), fds.size(), 500);
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(monitor_pipe[0], buf, sizeof(buf)) > 0) {
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < watched.size(); ++i) {
      if (fds[1 + i].revents == 0) continue;
      // Still in the table? disconnect() may have removed it meanwhile.
      Connection* c = watched[i];
      bool present = false;
      for (auto& live : connections) present = present || live.get() == c;
      if (!present) continue;
      char buf[256];
      const ssize_t r = recv(c->tcp_fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (r > 0) {
        // A blade that ends the session says why first (a fence); keep a
        // bounded amount of it for the line below.
        c->farewell.append(buf, std::min<size_t>(static_cast<size_t>(r), 512 - std::min<size_t>(512, c->farewell.size())));
        continue;
      }
      if (r < 0 && errno == EAGAIN) continue;
      c->failed.store(true);
      if (c->peer) c->peer->mark_failed();
      if (!c->farewell.empty()) {
        SMART_WARN("%s ended this client's session (%s); requests to it will fail", c->name().c_str(),
                   PeerText(c->farewell).c_str());
      } else {
        SMART_WARN("%s closed its connection: the memory blade is gone; requests to it will fail", c->name().c_str());
      }
    }
  }
}

}  // namespace smart
