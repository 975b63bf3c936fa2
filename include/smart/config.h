// Configuration: the JSON files, their keys (upstream SMART's names) and the
// environment overrides. Every file and variable is read here and nowhere else.
#pragma once

#include "smart/fault_injection.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smart {

enum class TransportChoice { kAuto, kVerbs, kShm };
enum class DoorbellMode { kThreadDomain, kUuar, kShared };

const char* TransportChoiceName(TransportChoice t);
const char* DoorbellModeName(DoorbellMode m);

struct WorkReqThrotConfig {
  int initial_credit = 4;
  int max_credit = 12;
  int credit_step = 2;
  int execution_epochs = 60;
  uint64_t sample_cycles = 19200000;  // TSC cycles per epoch
  double inf_credit_weight = 1.05;
  bool auto_tuning = true;
};

struct ConflictAvoidanceConfig {
  double low_water_mark = 0.1;
  double high_water_mark = 0.5;
  uint64_t epoch_us = 20000;
  uint64_t initial_backoff_ns = 1700;
  uint64_t max_backoff_ns = 1750000;
  int max_tasks = 64;                // coroutines admitted at most
  bool coroutine_throttling = true;  // env DISABLE_CORO_THROT turns it off
  bool adaptive_backoff_limit = true;
  // Fixed truncation point when adaptive_backoff_limit is off.
  uint64_t fixed_backoff_limit_ns = 1750000;
};

struct SmartConfig {
  std::string source;  // file the values came from
  // SMART_FAULTS, parsed; installed when the transport opens.
  std::vector<FaultRule> faults;

  TransportChoice transport = TransportChoice::kAuto;
  struct {
    std::string name;  // empty: first device
    int port = 1;
    int gid_idx = -1;  // -1: pick the RoCE v2 IPv4-mapped GID
  } infiniband;
  struct {
    uint64_t latency_ns = 0;  // added to every completion
  } shm;
  struct {
    int max_cqe_size = 256;
    int max_wqe_size = 256;
    int max_sge_size = 1;
    int max_inline_data = 64;
    int timeout = 14;    // local ACK timeout exponent (4.096 us << timeout)
    int retry_cnt = 7;
    int rnr_retry = 7;
    int path_mtu = 1024;  // bytes
  } qp_param;
  int max_nodes = 128;
  uint64_t initiator_cache_size = 256;  // MiB
  int connect_timeout_ms = 10000;

  bool use_thread_aware_alloc = true;
  struct {
    int total_uuar = 100;
    int shared_uuar = 96;
    bool shared_cq = true;
    DoorbellMode doorbell = DoorbellMode::kThreadDomain;
  } thread_aware_alloc;

  bool use_work_req_throt = true;
  WorkReqThrotConfig work_req_throt;

  bool use_conflict_avoidance = true;
  ConflictAvoidanceConfig conflict_avoidance;

  bool use_speculative_lookup = true;

  struct {
    bool qp_sharing = false;
  } experimental;

  // Loads from SMART_CONFIG_PATH or the default search path, then applies
  // SMART_OPTS and the other environment overrides. Throws smart::Error.
  static SmartConfig Load();
  static SmartConfig LoadFile(const std::string& path);
  // Parses JSON text; `source` names it in error messages. No env applied.
  static SmartConfig Parse(const std::string& text, const std::string& source);
  // Applies SMART_OPTS, DISABLE_CORO_THROT, MAX_BACKOFF_CYCLE_LOG2 and
  // SMART_FAULTS (fault injection for tests: include/smart/fault_injection.h).
  void ApplyEnvironment();
  // Applies a SMART_OPTS value ("None", or tokens ThrdAwareAlloc,
  // WorkReqThrot, ConflictAvoid, SpecLookup). Throws on an unknown token.
  void ApplySmartOpts(const std::string& opts);
  std::string Summary() const;
};

struct BackendConfig {
  std::string source;
  // Where the pool lives: memfd (default), hugetlb, file:PATH or devdax:PATH
  // (see smart/target/pool_backing.h). A file or devdax pool is reopened,
  // with its named roots and allocation state, when the blade restarts.
  std::string backing = "memfd";
  std::string dev_dax_path;  // upstream's key: the same as backing devdax:PATH
  uint64_t capacity = 16000;  // MiB
  int tcp_port = 12345;
  int nic_numa_node = -1;     // -1: no pinning
  int max_clients = 1023;    // sessions at once (the session table has 1023 slots)

  static BackendConfig LoadFile(const std::string& path);
  static BackendConfig Parse(const std::string& text, const std::string& source);
};

struct ServerAddress {
  std::string hostname;
  int port = 12345;
};

struct TestRdmaConfig {
  std::string source;
  std::vector<std::string> servers;  // empty: embedded memory blade
  int port = 12345;
  uint64_t block_size = 8;
  int qp_num = -1;
  std::string type = "read";
  std::string dump_file_path = "test_rdma.csv";
  std::string dump_prefix;  // empty: "rdma-" + type
  double duration = 15;     // seconds
  uint64_t memory_size = 1024;  // MiB of the pool (server) and the address range (client)

  // APP config path: TEST_RDMA_CONF, then default search; env TYPE, BLKSIZE,
  // QP_NUM, DUMP_FILE_PATH, DUMP_PREFIX override.
  static TestRdmaConfig Load(const std::string& explicit_path = "");
  static TestRdmaConfig Parse(const std::string& text, const std::string& source);
};

// datastructure.json: the hash table and B+tree benches (upstream keys).
struct DataStructureConfig {
  std::string source;
  int nr_threads = 1;        // overridden by the bench's NR_THREAD
  int tasks_per_thread = 1;  // overridden by NR_CORO
  std::string dataset = "ycsb-a";
  std::string dump_file_path = "datastructure.csv";
  bool insert_before_execution = true;
  uint64_t max_key = 1000000;  // keys 0 .. max_key-1
  int key_length = 8;          // bytes of the formatted key
  int value_length = 8;        // bytes of a value
  bool rehash_key = false;     // permute key ids before formatting
  double duration = 15;        // seconds measured
  double zipfian_const = 0.99;
  std::vector<ServerAddress> memory_servers;  // empty: embedded memory blade

  // APP_CONFIG_PATH, then the default search; env DATASET_PATH,
  // DUMP_FILE_PATH, ZIPFIAN_CONST (percent), MEMORY_NODES (use the first k
  // servers) override. Throws smart::Error.
  static DataStructureConfig Load(const std::string& explicit_path = "");
  static DataStructureConfig Parse(const std::string& text, const std::string& source);
  void ApplyEnvironment();
};

// Resolves a config file name: `env_var` if set; else, first found,
// config/<name> and ../config/<name> from the working directory,
// config/<name> and share/smart/<name> beside the executable's directory (a
// build tree's bin/, or an installed prefix), and the install prefix's
// share/smart. Never the source tree. Throws, listing where it looked.
std::string FindConfigFile(const std::string& name, const char* env_var);

// Reads an environment variable; empty optional-like "" when unset.
bool GetEnv(const char* name, std::string* value);

}  // namespace smart
