/// @file
/// Configuration: the JSON files, their keys (upstream SMART's names) and the
/// environment overrides. Every file and variable is read here and nowhere else.
#pragma once

#include "smart/fault_injection.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smart {

/// The `transport` key: auto (verbs if an RDMA device exists, else shm), verbs or shm.
enum class TransportChoice { kAuto, kVerbs, kShm };
/// thread_aware_alloc.doorbell: a doorbell per thread through a thread domain, through the patched libmlx5's UUARs, or the provider's shared one.
enum class DoorbellMode { kThreadDomain, kUuar, kShared };

/// "auto", "verbs" or "shm".
const char* TransportChoiceName(TransportChoice t);
/// "thread_domain", "uuar" or "shared".
const char* DoorbellModeName(DoorbellMode m);

/// Keys of `work_req_throt`: the credit tuner (CreditTuner).
struct WorkReqThrotConfig {
  int initial_credit = 4;  ///< first bound tried in training
  int max_credit = 12;  ///< largest finite bound tried
  int credit_step = 2;  ///< step between the bounds tried
  int execution_epochs = 60;  ///< epochs the chosen bound holds before training again
  uint64_t sample_cycles = 19200000;  ///< TSC cycles per epoch
  double inf_credit_weight = 1.05;  ///< unbounded wins unless a finite bound beat it by this factor
  bool auto_tuning = true;  ///< false: keep initial_credit
};

/// Keys of `conflict_avoidance`: backoff and coroutine admission (Backoff).
struct ConflictAvoidanceConfig {
  double low_water_mark = 0.1;  ///< below this retry rate, admit twice the tasks
  double high_water_mark = 0.5;  ///< above this retry rate, admit half the tasks
  uint64_t epoch_us = 20000;  ///< how often the retry rate is judged
  uint64_t initial_backoff_ns = 1700;  ///< first backoff delay
  uint64_t max_backoff_ns = 1750000;  ///< largest backoff cap
  int max_tasks = 64;                ///< coroutines admitted at most
  bool coroutine_throttling = true;  ///< env DISABLE_CORO_THROT turns it off
  bool adaptive_backoff_limit = true;  ///< let the backoff cap move with the retry rate
  /// Check now and then that admission and backoff finish more operations
  /// per second than both off, and set both aside for a while when they
  /// do not (GainCheck). Off by default: a thread's own rate does not see
  /// what its retries without backoff cost other clients (see throttle.md).
  bool gain_check = false;
  /// Fixed truncation point when adaptive_backoff_limit is off.
  uint64_t fixed_backoff_limit_ns = 1750000;
};

/// Keys of `auth`, in smart_config.json and backend.json: session
/// authentication (docs/security.md). `"auth": "none"` instead of an
/// object says explicitly that a memory blade takes clients without a key.
struct AuthConfig {
  std::string source;       ///< the file it came from (for messages)
  bool configured = false;  ///< the file has an `auth` key
  bool none = false;        ///< `"auth": "none"`
  /// The shared key (32 or more bytes; smart_keygen writes one). Relative
  /// to the config file's directory. Empty: no key.
  std::string key_file;
  /// shm: users besides the memory blade's own that may map its pool.
  std::vector<uint32_t> allow_uids;
  /// A memory blade's further keys, accepted besides `key_file` while the
  /// cluster moves from one key to another (each client names its key by
  /// ID). Relative to the config file's directory.
  std::vector<std::string> also_accept;
};

/// smart_config.json: the transport, queue pairs and the three techniques. The defaults are every key's default.
struct SmartConfig {
  std::string source;  ///< file the values came from
  /// SMART_FAULTS, parsed; installed when the transport opens.
  std::vector<FaultRule> faults;

  TransportChoice transport = TransportChoice::kAuto;  ///< `transport`
  /// `infiniband`: which device, port and GID.
  struct {
    std::string name;  ///< empty: first device
    int port = 1;
    int gid_idx = -1;  ///< -1: pick the RoCE v2 IPv4-mapped GID
    /// A memory blade gives each client queue pair its own memory window
    /// (type 2) over the pool, revoked when the session ends, where the
    /// device has them; false: every client uses the pool's one rkey.
    bool memory_windows = true;
  } infiniband;  ///< `infiniband`
  struct {
    uint64_t latency_ns = 0;  ///< added to every completion
    /// `shm.nic_model`: an RNIC's limits modelled on the shm transport (off
    /// by default). The defaults are fitted to ConnectX-6 (docs/nic_model.md).
    struct {
      bool enabled = false;
      double rate_mops = 111.1;         ///< device message rate, M requests/s
      uint64_t wr_cache_entries = 1152; ///< outstanding requests the NIC keeps on chip
      double wr_miss_ns = 14.5;         ///< extra device time for a request the cache misses
      int shared_doorbells = 12;        ///< doorbells queue pairs without a thread domain share
      double doorbell_handoff_ns = 600; ///< cost of ringing a doorbell another thread rang last
    } nic_model;
  } shm;  ///< `shm`
  /// `qp_param`: queue pair sizes and retry settings.
  struct {
    int max_cqe_size = 256;
    int max_wqe_size = 256;
    int max_sge_size = 1;
    int max_inline_data = 64;
    int timeout = 14;    ///< local ACK timeout exponent (4.096 us << timeout)
    int retry_cnt = 7;
    int rnr_retry = 7;
    int path_mtu = 1024;  ///< bytes
  } qp_param;  ///< `qp_param`
  int max_nodes = 128;  ///< memory blades a client may connect
  uint64_t initiator_cache_size = 256;  ///< MiB
  int connect_timeout_ms = 10000;  ///< bound on one handshake (both sides)
  AuthConfig auth;  ///< `auth`: the key a client proves (and a memory blade without its own)

  bool use_thread_aware_alloc = true;  ///< per-thread queue pairs, CQ and doorbell
  /// `thread_aware_alloc`: how per-thread resources are made.
  struct {
    int total_uuar = 100;
    int shared_uuar = 96;
    bool shared_cq = true;
    DoorbellMode doorbell = DoorbellMode::kThreadDomain;
  } thread_aware_alloc;  ///< `thread_aware_alloc`

  bool use_work_req_throt = true;  ///< bound the work requests in flight per thread
  WorkReqThrotConfig work_req_throt;  ///< `work_req_throt`

  bool use_conflict_avoidance = true;  ///< backoff and coroutine admission on retries
  ConflictAvoidanceConfig conflict_avoidance;  ///< `conflict_avoidance`

  bool use_speculative_lookup = true;  ///< applications may use cached lookups

  /// `coalesce_posts`: a task's requests wait, until no task of its thread
  /// is runnable, to go out with the other tasks' behind one doorbell (at
  /// most 32 per memory blade). `auto`: on verbs (a doorbell is a system
  /// call on rxe, an MMIO write on a NIC), off on shm (a function call);
  /// `off`: each task rings its own. Never with experimental.qp_sharing.
  enum class CoalescePosts : uint8_t { kAuto, kOn, kOff };
  CoalescePosts coalesce_posts = CoalescePosts::kAuto;  ///< `coalesce_posts`: auto, on or off (above)

  /// `experimental`: options outside the paper's design.
  struct {
    bool qp_sharing = false;
  } experimental;  ///< `experimental`

  /// Loads from SMART_CONFIG_PATH or the default search path, then applies
  /// SMART_OPTS and the other environment overrides. Throws smart::Error.
  static SmartConfig Load();
  /// Loads `path` (no environment applied). Throws smart::Error.
  static SmartConfig LoadFile(const std::string& path);
  /// Parses JSON text; `source` names it in error messages. No env applied.
  static SmartConfig Parse(const std::string& text, const std::string& source);
  /// Applies SMART_OPTS, DISABLE_CORO_THROT, MAX_BACKOFF_CYCLE_LOG2 and
  /// SMART_FAULTS (fault injection for tests: include/smart/fault_injection.h).
  void ApplyEnvironment();
  /// Applies a SMART_OPTS value ("None", or tokens ThrdAwareAlloc,
  /// WorkReqThrot, ConflictAvoid, SpecLookup). Throws on an unknown token.
  void ApplySmartOpts(const std::string& opts);
  /// One line naming the transport and the techniques that are on.
  std::string Summary() const;
  /// Summary() naming `in_use` ("verbs", "shm": what `auto` chose) as the
  /// transport.
  std::string Summary(const char* in_use) const;
};

/// backend.json: a memory blade's pool and listener.
struct BackendConfig {
  std::string source;  ///< file the values came from
  /// Where the pool lives: memfd (default), hugetlb, file:PATH or devdax:PATH
  /// (see smart/target/pool_backing.h). A file or devdax pool is reopened,
  /// with its named roots and allocation state, when the blade restarts.
  std::string backing = "memfd";
  std::string dev_dax_path;  ///< upstream's key: the same as backing devdax:PATH
  uint64_t capacity = 16000;  ///< MiB
  int tcp_port = 12345;  ///< port the blade listens on (0: any free port)
  /// Address the blade listens on: loopback unless told otherwise; beyond
  /// loopback it needs a key or an explicit `"auth": "none"`.
  std::string bind = "127.0.0.1";
  AuthConfig auth;  ///< `auth`: the blade's key; absent: smart_config.json's
  int nic_numa_node = -1;     ///< -1: no pinning
  int max_clients = 1023;    ///< sessions at once, those still in their handshake included (the session table has 1023 slots)
  /// With a key, a client must have dialled the address its connection
  /// arrived at, so that a relay cannot pass it on to another blade; true
  /// lets forwarded connections in (NAT, a port mapping, a proxy).
  bool accept_forwarded = false;
  /// `max_startups`, "start:rate:full" in sshd's MaxStartups form: with
  /// `start` or more connections that have not proven the key, a newcomer
  /// is refused (told to retry) with probability rate%; at `full` the
  /// longest-waiting of them is dropped for it instead.
  struct {
    int start = 64;
    int rate = 30;
    int full = 256;
  } max_startups;
  /// Connections that have not proven the key from one address (IPv4, or
  /// an IPv6 /64), at most: a newcomer from an address at the limit takes
  /// the place of that address's longest-waiting one.
  int max_startups_per_source = 16;

  /// Loads and checks `path`. Throws smart::Error.
  static BackendConfig LoadFile(const std::string& path);
  /// Parses JSON text; `source` names it in messages. Throws smart::Error.
  static BackendConfig Parse(const std::string& text, const std::string& source);
};

/// A memory blade to connect to (an entry of `memory_servers` or `servers`).
struct ServerAddress {
  std::string hostname;  ///< host name or address
  int port = 12345;  ///< TCP port of its handshake; 0 in test_rdma.json's `servers`: its `port` key
  /// The blade's pool ID, pinned (`"pool_id"`): the client refuses a blade
  /// that serves another pool. 0: any.
  uint64_t pool_id = 0;
};

/// Parses an address as every server list and `--server` flag accepts it:
/// `host`, `host:port` or `[IPv6]:port`. A missing port is `default_port`,
/// or an error when that is negative. Throws smart::Error naming the text
/// and what is wrong with it.
ServerAddress ParseServerAddress(const std::string& text, int default_port = -1);

/// Resolves a config file name: `env_var` if set; else, first found,
/// config/NAME and ../config/NAME from the working directory,
/// config/NAME and share/smart/NAME beside the executable's directory (a
/// build tree's bin/, or an installed prefix), and the install prefix's
/// share/smart. Never the source tree. Throws, listing where it looked.
std::string FindConfigFile(const std::string& name, const char* env_var);

/// Where FindConfigFile looks for `name`, in a phrase for a program's
/// --help: "$ENV, else NAME in config/, beside the program (config/,
/// share/smart/) or in PREFIX/share/smart". `env_var` may be null.
std::string ConfigFileSearch(const std::string& name, const char* env_var);

/// For programs, not libraries: doorbell mode `uuar` sizes the patched
/// libmlx5's doorbell pool through MLX5_TOTAL_UUARS and
/// MLX5_NUM_LOW_LAT_UUARS, which the provider reads when the device opens.
/// Sets them from `thread_aware_alloc` (total_uuar, and total_uuar minus
/// shared_uuar) unless the environment has them already; does nothing in
/// the other modes or when thread-aware allocation is off. The library itself
/// never changes the environment: in uuar mode without these variables the
/// verbs transport logs what to set. The framework's programs call this after
/// loading their configuration.
void ExportProviderEnvironment(const SmartConfig& config);

/// Reads an environment variable; empty optional-like "" when unset.
bool GetEnv(const char* name, std::string* value);

}  // namespace smart
