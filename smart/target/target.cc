#include "smart/target.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "smart/logging.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/target/pool_backing.h"
#include "smart/target/target_impl.h"

namespace smart {


namespace {

// Binds the pool's pages (none is touched yet but the super chunk) to the
// NIC's NUMA node, so the NIC's DMA does not cross the interconnect.
void PlaceOnNumaNode(const BackendConfig& config, char* base, uint64_t bytes) {
  const int node = config.nic_numa_node;
  if (numa_available() < 0) {
    SMART_WARN("%s: nic_numa_node %d ignored: this system has no NUMA support", config.source.c_str(), node);
    return;
  }
  if (node > numa_max_node()) {
    throw Error(config.source + ": key \"nic_numa_node\": expected -1 or a NUMA node of this machine (0.." +
                std::to_string(numa_max_node()) + "), found " + std::to_string(node));
  }
  numa_tonode_memory(base, bytes, node);
  SMART_INFO("memory blade: pool bound to NUMA node %d", node);
}

// Descriptors a memory blade needs besides one per client connection: the
// listener, the pool, the device, the shm socket and its connections, logs,
// the stop pipe, the libraries' own.
constexpr rlim_t kReservedDescriptors = 64;

// How many clients the open-file limit lets a blade serve. Every session and
// every handshake in progress holds a connection, so a limit below
// max_clients plus the blade's own descriptors would make accept() fail
// (EMFILE) before max_clients is reached, and then the blade would never get
// to drop an idle handshake to make room for a client with the key.
struct DescriptorPlan {
  int max_clients;  // max_clients as served
  int budget;       // connections held at once, at most (INT_MAX: no limit)
};

// Raises the soft limit up to the hard one where max_clients needs it; where
// even that is short, serves fewer clients and says so. A sixteenth of the
// budget stays free for handshakes that were dropped and are still letting
// go of their sockets, and for refusals on their way out.
DescriptorPlan FitClientsToDescriptors(int max_clients, const std::string& source) {
  auto headroom = [](rlim_t budget) { return std::max<rlim_t>(1, budget / 16); };
  // The budget whose headroom still leaves max_clients, and the blade's own.
  const rlim_t need = (static_cast<rlim_t>(max_clients) * 16 + 14) / 15 + 1 + kReservedDescriptors;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return {max_clients, INT_MAX};
  const rlim_t was = rl.rlim_cur;
  if (rl.rlim_cur < need) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? need : std::min(rl.rlim_max, need);
    if (raised.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      rl = raised;
      SMART_INFO("memory blade: raised the open-file limit from %llu to %llu for max_clients %d (%s)",
                 static_cast<unsigned long long>(was), static_cast<unsigned long long>(rl.rlim_cur), max_clients,
                 source.c_str());
    }
  }
  const rlim_t budget = rl.rlim_cur > kReservedDescriptors + 2 ? rl.rlim_cur - kReservedDescriptors : 2;
  const rlim_t fit = budget - headroom(budget);
  const int budget_int = budget > static_cast<rlim_t>(INT_MAX) ? INT_MAX : static_cast<int>(budget);
  if (fit >= static_cast<rlim_t>(max_clients)) return {max_clients, budget_int};
  SMART_WARN("memory blade: max_clients %d (%s) needs %llu open files, but this process may open only %llu "
             "(ulimit -n; hard limit %s): serving at most %d clients at once. Raise the hard limit (ulimit -Hn, or "
             "LimitNOFILE= for a service) to serve %d",
             max_clients, source.c_str(), static_cast<unsigned long long>(need),
             static_cast<unsigned long long>(rl.rlim_cur),
             rl.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_max).c_str(), static_cast<int>(fit),
             max_clients);
  return {static_cast<int>(fit), budget_int};
}

}  // namespace

namespace {

// Identifies a pool this release formatted, so that a restarted memory
// blade reopens its own pool and refuses to format another file.
struct PoolStamp {
  uint64_t magic;
  uint64_t capacity;
  uint64_t chunk_size;
  uint64_t pool_id;  // random, at format (0 in pools formatted before it existed)
};
constexpr uint64_t kPoolMagic = 0x31304c4f4f50534dull;  // "MSPOOL01"
static_assert(kPoolStampOffset + sizeof(PoolStamp) <= kNamedRootRegistryOffset);

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

// The auth a blade goes by: backend.json's, else smart_config.json's;
// backend.json's auth that names users but no key keeps smart_config.json's
// key (allow_uids alone must not turn authentication off). `where` in the
// result's source names the file the key came from.
AuthConfig EffectiveAuth(const SmartConfig& smart_config, const BackendConfig& backend_config) {
  AuthConfig auth = backend_config.auth.configured ? backend_config.auth : smart_config.auth;
  auth.source = backend_config.auth.configured ? backend_config.source : smart_config.source;
  const bool key_from_smart_config = backend_config.auth.configured && !backend_config.auth.none &&
                                     backend_config.auth.key_file.empty() && !smart_config.auth.none &&
                                     !smart_config.auth.key_file.empty();
  if (key_from_smart_config) {
    auth.key_file = smart_config.auth.key_file;
    auth.also_accept = smart_config.auth.also_accept;
    auth.source = smart_config.source;
  }
  return auth;
}

// The keys `auth` names: key_file first, then also_accept (a rotation:
// each client names its key by ID). Throws smart::Error naming the file.
std::shared_ptr<const std::vector<SessionKey>> LoadKeys(const AuthConfig& auth) {
  auto keys = std::make_shared<std::vector<SessionKey>>();
  if (auth.none || auth.key_file.empty()) {
    if (!auth.also_accept.empty()) {
      throw Error("auth.also_accept in " + auth.source + " lists keys, but the memory blade has no key of its own "
                  "(auth.key_file): set auth.key_file to the key clients use now");
    }
    return keys;
  }
  keys->push_back(SessionKey::Load(auth.key_file, "auth.key_file in " + auth.source));
  for (const std::string& path : auth.also_accept) {
    SessionKey extra = SessionKey::Load(path, "auth.also_accept in " + auth.source);
    for (const SessionKey& k : *keys) {
      if (k.id() == extra.id()) {
        throw Error("auth.also_accept in " + auth.source + ": " + path + " holds key " + extra.id() +
                    ", the same as " + k.path() + "; list each key once");
      }
    }
    keys->push_back(std::move(extra));
  }
  if (keys->size() > 1) {
    std::string ids;
    for (const SessionKey& k : *keys) ids += (ids.empty() ? "" : ", ") + k.id();
    SMART_INFO("memory blade: accepting %zu keys (IDs %s); its own proofs use the key each client names",
               keys->size(), ids.c_str());
  }
  return keys;
}

Target::Target(const SmartConfig& smart_config, const BackendConfig& backend_config)
    : impl_(std::make_unique<Impl>()) {
  impl_->smart_config = smart_config;
  impl_->backend_config = backend_config;
  const DescriptorPlan plan = FitClientsToDescriptors(backend_config.max_clients, backend_config.source);
  impl_->backend_config.max_clients = plan.max_clients;
  impl_->connection_budget = plan.budget;
  impl_->auth = EffectiveAuth(smart_config, backend_config);
  impl_->keys = LoadKeys(impl_->auth);
  // The transport learns whom else it may hand the pool to (shm).
  SmartConfig device_config = smart_config;
  device_config.auth = impl_->auth;
  impl_->device = Device::Open(device_config);
  // Per-session keys where the transport has them (memory windows on
  // verbs); asked before the pool is registered, which depends on it.
  const std::string no_windows = impl_->device->restrict_to_grants();
  if (impl_->device->kind() == TransportKind::kVerbs) {
    if (no_windows.empty()) {
      SMART_INFO("memory blade: each client queue pair gets its own memory window over the pool (type 2), revoked "
                 "when its session ends");
    } else if (!smart_config.infiniband.memory_windows) {
      SMART_INFO("memory blade: no per-session memory windows (%s): every client uses the pool's one rkey",
                 no_windows.c_str());
    } else {
      SMART_WARN("memory blade: no per-session memory windows (%s): every client uses the pool's one rkey, which "
                 "stays valid until the blade stops",
                 no_windows.c_str());
    }
  }
  const uint64_t bytes = backend_config.capacity << 20;
  if (bytes < 2 * kChunkSize) throw Error("memory blade capacity must be at least 1 MiB");
  const PoolBacking backing = ParsePoolBacking(backend_config.backing, backend_config.source);
  bool existing = false;
  if (backing.kind == PoolBacking::Kind::kMemfd) {
    impl_->pool = impl_->device->allocate_shared_region(bytes);
  } else {
    PoolMapping m = MapPool(backing, bytes);
    existing = m.existing;
    impl_->backing_description = m.description;
    impl_->persistent = backing.kind != PoolBacking::Kind::kHugetlb;
    impl_->pool = impl_->device->adopt_shared_region(m.addr, m.length, m.fd);
  }
  base_ = static_cast<char*>(impl_->pool->addr());
  capacity_ = bytes;
  if (backend_config.nic_numa_node >= 0) PlaceOnNumaNode(backend_config, base_, bytes);
  SuperChunk* sc = super_chunk();
  auto* stamp = reinterpret_cast<PoolStamp*>(base_ + kPoolStampOffset);
  impl_->session_table = reinterpret_cast<uint64_t*>(base_ + kSessionTableOffset);
  if (existing && stamp->magic == kPoolMagic && stamp->capacity == bytes && stamp->chunk_size == kChunkSize &&
      sc->max_chunk == bytes / kChunkSize && sc->alloc_chunk >= 1 && sc->alloc_chunk <= sc->max_chunk) {
    // Every session of the earlier run is gone: clearing the alive bits lets
    // clients take over its locks and builds at once. Incarnations go on,
    // so no old lock word can match a new session.
    for (int slot = 1; slot < kMaxSessions; ++slot) {
      __atomic_and_fetch(&impl_->session_table[slot], ~(kSessionAliveBit | kSessionFenceBit), __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&stamp->pool_id, __ATOMIC_ACQUIRE) == 0) {
      __atomic_store_n(&stamp->pool_id, NewPoolId(), __ATOMIC_RELEASE);
    }
    impl_->reopened = true;
    SMART_INFO("memory blade: reopened the pool, %s: %" PRIu64 " of %" PRIu64 " chunks in use",
               impl_->backing_description.c_str(), sc->alloc_chunk, sc->max_chunk);
  } else {
    if (existing && backing.kind == PoolBacking::Kind::kFile && !AllZero(base_, kChunkSize)) {
      const std::string why = stamp->magic == kPoolMagic
                                  ? "a pool made with capacity " + std::to_string(stamp->capacity >> 20) + " MiB"
                                  : "data that is not a memory-blade pool";
      throw Error("memory blade pool: " + backing.path + " holds " + why +
                  "; refusing to format it (remove it, name a new file, or set \"capacity\" to match)");
    }
    memset(static_cast<void*>(sc), 0, kChunkSize);
    sc->max_chunk = bytes / kChunkSize;
    sc->alloc_chunk = 1;  // chunk 0 is the super chunk itself
    __atomic_store_n(&stamp->pool_id, NewPoolId(), __ATOMIC_RELEASE);
    // The stamp last: a blade that dies while formatting leaves no stamp.
    __atomic_store_n(&stamp->chunk_size, kChunkSize, __ATOMIC_RELEASE);
    __atomic_store_n(&stamp->capacity, bytes, __ATOMIC_RELEASE);
    __atomic_store_n(&stamp->magic, kPoolMagic, __ATOMIC_RELEASE);
    if (impl_->persistent) msync(base_, kChunkSize, MS_SYNC);
  }
  impl_->pool_id = __atomic_load_n(&stamp->pool_id, __ATOMIC_ACQUIRE);
  for (int slot = 1; slot < kMaxSessions; ++slot) impl_->free_slots.push_back(slot);
}

uint64_t Target::pool_id() const { return impl_->pool_id; }

std::string Target::pool_id_text() const { return PoolIdText(impl_->pool_id); }

const std::string& Target::backing_description() const { return impl_->backing_description; }

bool Target::reopened() const { return impl_->reopened; }

int Target::Impl::open_session_slot(SessionId* id) {
  std::lock_guard<std::mutex> lock(mutex);
  if (free_slots.empty()) return 0;
  const int slot = free_slots.front();
  free_slots.pop_front();
  const uint64_t before = __atomic_load_n(&session_table[slot], __ATOMIC_ACQUIRE);
  const uint64_t incarnation = ((before & kSessionIncarnationMask) + 1) & kSessionIncarnationMask;
  __atomic_store_n(&session_table[slot], kSessionAliveBit | incarnation, __ATOMIC_RELEASE);
  id->slot = static_cast<uint16_t>(slot);
  id->incarnation = static_cast<uint16_t>(incarnation);
  return slot;
}

void Target::Impl::close_session_slot(int slot) {
  if (slot <= 0) return;
  // Clearing the alive bit is what lets waiters take this client's locks
  // over at once instead of waiting out their leases.
  __atomic_and_fetch(&session_table[slot], ~(kSessionAliveBit | kSessionFenceBit), __ATOMIC_RELEASE);
  std::lock_guard<std::mutex> lock(mutex);
  free_slots.push_back(slot);
}

Target::~Target() { stop(); }

TransportKind Target::transport() const { return impl_->device->kind(); }

std::string Target::transport_description() const { return impl_->device->description(); }

GlobalAddress Target::alloc_chunk(uint64_t count) {
  auto* watermark = reinterpret_cast<uint64_t*>(&super_chunk()->alloc_chunk);
  uint64_t current = __atomic_load_n(watermark, __ATOMIC_ACQUIRE);
  for (;;) {
    if (count == 0 || current + count > super_chunk()->max_chunk) return GlobalAddress::Null();
    if (__atomic_compare_exchange_n(watermark, &current, current + count, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      return GlobalAddress(0, current * kChunkSize);
    }
  }
}

GlobalAddress Target::rel_ptr(const void* p) const {
  const char* c = static_cast<const char*>(p);
  if (c < base_ || c >= base_ + capacity_) return GlobalAddress::Null();
  return GlobalAddress(0, static_cast<uint64_t>(c - base_));
}

void Target::set_root_entry(int index, uint64_t value) {
  if (index < 0 || index >= kMaxRootEntries) throw Error("root entry index out of range: " + std::to_string(index));
  __atomic_store_n(&super_chunk()->root_entries[index], value, __ATOMIC_RELEASE);
}

uint64_t Target::get_root_entry(int index) const {
  if (index < 0 || index >= kMaxRootEntries) throw Error("root entry index out of range: " + std::to_string(index));
  return __atomic_load_n(&super_chunk()->root_entries[index], __ATOMIC_ACQUIRE);
}

int Target::connected_clients() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return static_cast<int>(impl_->sessions.size());
}

uint64_t Target::resident_bytes() const {
  // mincore over the pool counts the pages that exist.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (capacity_ + page - 1) / page;
  uint64_t resident = 0;
  std::vector<unsigned char> vec(1 << 16);
  for (size_t first = 0; first < pages; first += vec.size()) {
    const size_t n = std::min(vec.size(), pages - first);
    if (mincore(base_ + first * page, n * page, vec.data()) != 0) return 0;
    for (size_t i = 0; i < n; ++i) resident += vec[i] & 1;
  }
  return resident * page;
}

void Target::start() {
  if (impl_->listen_fd >= 0) throw Error("memory blade already started");
  const BackendConfig& backend = impl_->backend_config;
  const bool loopback = IsLoopbackAddress(backend.bind);
  if (impl_->current_keys()->empty() && !loopback && !impl_->auth.none) {
    throw Error("memory blade: refusing to listen on " + backend.bind +
                " without a key: any host that reaches the port could read and write the whole pool. Set "
                "\"auth\": {\"key_file\": ...} in " + backend.source +
                " (smart_keygen writes a key), or \"auth\": \"none\" to accept that, or listen on 127.0.0.1");
  }
  impl_->listen_fd = TcpListen(backend.bind, backend.tcp_port, &port_);
  if (impl_->current_keys()->empty() && !loopback) {
    SMART_WARN("memory blade: listening on %s port %d WITHOUT authentication (\"auth\": \"none\"): any host that "
               "reaches this port can read and write the whole pool",
               backend.bind.c_str(), port_);
  }
  if (pipe2(impl_->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    CloseFd(&impl_->listen_fd);
    throw Error(std::string("memory blade: pipe: ") + strerror(errno));
  }
  impl_->listener = std::thread([this] { impl_->serve(); });
}

const std::string& Target::listen_address() const { return impl_->backend_config.bind; }

bool Target::authenticates() const { return !impl_->current_keys()->empty(); }

void Target::reload_keys(const SmartConfig& smart_config, const BackendConfig& backend_config) {
  const AuthConfig auth = EffectiveAuth(smart_config, backend_config);
  std::shared_ptr<const std::vector<SessionKey>> keys = LoadKeys(auth);
  const bool had = !impl_->current_keys()->empty();
  if (keys->empty() != !had) {
    throw Error(std::string("reloading the keys cannot turn authentication ") + (had ? "off" : "on") +
                ": restart the memory blade for that");
  }
  std::string ids;
  for (const SessionKey& k : *keys) ids += (ids.empty() ? "" : ", ") + k.id();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->keys = std::move(keys);
  }
  SMART_INFO("memory blade: keys reloaded from %s: new handshakes may prove key %s; sessions go on",
             auth.source.c_str(), ids.c_str());
}

int Target::handshakes_in_progress() const {
  return impl_->pending_count.load() + impl_->handshakes_running.load();
}

void Target::stop() {
  if (!impl_ || impl_->listen_fd < 0) return;
  impl_->stopping.store(true);
  char c = 's';
  ssize_t ignored = write(impl_->wake_pipe[1], &c, 1);
  (void)ignored;
  if (impl_->listener.joinable()) impl_->listener.join();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (auto& s : impl_->sessions) shutdown(s->fd, SHUT_RDWR);
    // A handshake waiting for a silent peer ends now, not at its deadline.
    for (auto& h : impl_->handshakes) {
      if (h.state->fd >= 0) shutdown(h.state->fd, SHUT_RDWR);
    }
  }
  impl_->reap_handshakes(true);
  while (!impl_->pending.empty()) impl_->forget_pending(impl_->pending.begin());
  for (auto& r : impl_->refused) close(r.fd);
  impl_->refused.clear();
  std::list<std::unique_ptr<Session>> sessions;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    sessions.swap(impl_->sessions);
  }
  for (auto& s : sessions) impl_->close_session_slot(s->slot);
  sessions.clear();
  CloseFd(&impl_->listen_fd);
  CloseFd(&impl_->wake_pipe[0]);
  CloseFd(&impl_->wake_pipe[1]);
  if (impl_->persistent && msync(base_, capacity_, MS_SYNC) != 0) {
    SMART_WARN("memory blade: syncing the pool to %s: %s", impl_->backing_description.c_str(), strerror(errno));
  }
}

// ---------------------------------------------------------------------------
// Termination signals

namespace {
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};
std::atomic<bool> g_reload{false};
std::once_flag g_signal_once;

void OnReloadSignal(int) {
  g_reload.store(true);
  char c = 'r';
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

void OnTerminationSignal(int sig) {
  g_signal.store(sig);
  char c = static_cast<char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}
}  // namespace

void InstallTerminationHandlers() {
  std::call_once(g_signal_once, [] {
    if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + strerror(errno));
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = OnTerminationSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  });
}

bool TerminationRequested() { return g_signal.load() != 0; }

int WaitForTerminationSignal() {
  InstallTerminationHandlers();
  while (g_signal.load() == 0) {
    pollfd p{g_signal_pipe[0], POLLIN, 0};
    poll(&p, 1, 1000);
  }
  return g_signal.load();
}

void InstallReloadHandler() {
  InstallTerminationHandlers();
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = OnReloadSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGHUP, &action, nullptr);
}

int WaitForTerminationOrReload() {
  InstallTerminationHandlers();
  for (;;) {
    if (g_signal.load() != 0) return g_signal.load();
    if (g_reload.exchange(false)) return SIGHUP;
    pollfd p{g_signal_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) {
      char buf[16];
      ssize_t ignored = read(g_signal_pipe[0], buf, sizeof(buf));
      (void)ignored;
    }
  }
}

}  // namespace smart
