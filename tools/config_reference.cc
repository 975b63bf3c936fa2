// smart_config_reference: prints docs/config_reference.md, every key of every
// config file and every environment variable, with type, allowed values,
// default and meaning. Keys, types, ranges and defaults come from the
// parsers themselves (ConfigRecording), so the reference cannot drift from
// them; the meanings come from the table below, and a key without one (or
// a meaning for a key no parser reads) is an error. `ctest -R
// config_reference` compares the output with the committed file.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "smart/bench/bench_config.h"
#include "smart/command_line.h"
#include "smart/config.h"
#include "smart/config/config_reader.h"
#include "smart/status.h"

namespace {

struct Meaning {
  const char* file;
  const char* key;
  const char* text;
};

// What each key means. File order, then the order the parser reads them.
const Meaning kKeys[] = {
    {"smart_config.json", "transport", "`auto` picks `verbs` when the host has an RDMA device and `shm` (same-host software RDMA) otherwise"},
    {"smart_config.json", "infiniband.name", "RDMA device to open (`verbs`); empty: the first one"},
    {"smart_config.json", "infiniband.port", "port of that device"},
    {"smart_config.json", "infiniband.gid_idx", "GID index; -1 picks the RoCE v2 IPv4-mapped GID"},
    {"smart_config.json", "infiniband.memory_windows",
     "memory blade on verbs: a memory window per client queue pair, revoked when its session ends (where the "
     "device has type 2 windows); false: one rkey for every client"},
    {"smart_config.json", "shm.latency_ns", "`shm`: delay added to every completion, to model a network round trip"},
    {"smart_config.json", "shm.nic_model.enabled", "`shm`: model an RNIC's limits (message-rate cap, work-request cache, shared doorbells; docs/nic_model.md)"},
    {"smart_config.json", "shm.nic_model.rate_mops", "NIC model: requests per microsecond the device carries out at most (ConnectX-6 fit: 111.1)"},
    {"smart_config.json", "shm.nic_model.wr_cache_entries", "NIC model: outstanding requests the device keeps on chip; beyond them requests take the miss cost"},
    {"smart_config.json", "shm.nic_model.wr_miss_ns", "NIC model: extra device time for a request the work-request cache misses"},
    {"smart_config.json", "shm.nic_model.shared_doorbells", "NIC model: doorbells shared by queue pairs without a thread domain (thread-aware allocation off)"},
    {"smart_config.json", "shm.nic_model.doorbell_handoff_ns", "NIC model: time a thread spends ringing a shared doorbell another thread rang last"},
    {"smart_config.json", "qp_param.max_cqe_size", "entries of each completion queue"},
    {"smart_config.json", "qp_param.max_wqe_size", "send work requests each queue pair holds"},
    {"smart_config.json", "qp_param.max_sge_size", "scatter-gather entries per work request"},
    {"smart_config.json", "qp_param.max_inline_data", "bytes a WRITE may carry inline in its work request"},
    {"smart_config.json", "qp_param.timeout", "local ACK timeout exponent (4.096 us << timeout)"},
    {"smart_config.json", "qp_param.retry_cnt", "transport retries before a queue pair fails (lowered to 6 on rxe, so a dead blade fails instead of hanging)"},
    {"smart_config.json", "qp_param.rnr_retry", "receiver-not-ready retries"},
    {"smart_config.json", "qp_param.path_mtu", "path MTU in bytes: 256, 512, 1024, 2048 or 4096"},
    {"smart_config.json", "max_nodes", "memory blades a client may connect to"},
    {"smart_config.json", "initiator_cache_size", "MiB of registered local memory each client takes for its verbs' buffers"},
    {"smart_config.json", "connect_timeout_ms", "bound on one handshake, on both sides"},
    {"smart_config.json", "auth", "`\"none\"`, or an object with the keys below (docs/security.md); absent: no key"},
    {"smart_config.json", "auth.key_file", "shared key a client proves it holds (a key file `smart_keygen` writes, mode 0600, owned by the user; nothing else is accepted); relative to this file's directory"},
    {"smart_config.json", "auth.also_accept", "a memory blade started with this file: further key files it accepts besides `key_file` while the cluster moves to a new key (each client names its key by ID; docs/security.md); relative to this file's directory"},
    {"smart_config.json", "auth.allow_uids", "a memory blade started with this file: users besides its own that may map its `shm` pool, when it is a memfd or hugetlb pool (a file or devdax pool goes to its own user only; default: none)"},
    {"smart_config.json", "use_thread_aware_alloc", "each thread owns its queue pairs, completion queue and doorbell (SMART_OPTS `ThrdAwareAlloc`)"},
    {"smart_config.json", "thread_aware_alloc.total_uuar", "doorbell mode `uuar`: MLX5_TOTAL_UUARS for the patched libmlx5"},
    {"smart_config.json", "thread_aware_alloc.shared_uuar", "doorbell mode `uuar`: UUARs left shared (MLX5_NUM_LOW_LAT_UUARS is total_uuar minus this)"},
    {"smart_config.json", "thread_aware_alloc.shared_cq", "the queue pairs of one thread share its completion queue"},
    {"smart_config.json", "thread_aware_alloc.doorbell", "how a thread gets its own doorbell: a thread domain (stock rdma-core), the patched libmlx5's UUARs, or the provider's shared ones; a mode the device cannot give falls back with one log line"},
    {"smart_config.json", "use_work_req_throt", "bound the work requests in flight per thread (SMART_OPTS `WorkReqThrot`)"},
    {"smart_config.json", "work_req_throt.initial_credit", "first bound the tuner tries"},
    {"smart_config.json", "work_req_throt.max_credit", "largest finite bound tried"},
    {"smart_config.json", "work_req_throt.credit_step", "step between the bounds tried"},
    {"smart_config.json", "work_req_throt.execution_epochs", "epochs the chosen bound holds before the tuner trains again"},
    {"smart_config.json", "work_req_throt.sample_cycles", "TSC cycles per epoch"},
    {"smart_config.json", "work_req_throt.inf_credit_weight", "no bound wins unless a finite one beat it by this factor"},
    {"smart_config.json", "work_req_throt.auto_tuning", "false: keep initial_credit"},
    {"smart_config.json", "use_conflict_avoidance", "backoff on CAS retries and fewer running coroutines when retries are frequent (SMART_OPTS `ConflictAvoid`)"},
    {"smart_config.json", "conflict_avoidance.low_water_mark", "below this retry rate, admit twice the coroutines"},
    {"smart_config.json", "conflict_avoidance.high_water_mark", "above this retry rate, admit half the coroutines"},
    {"smart_config.json", "conflict_avoidance.epoch_us", "how often the retry rate is judged"},
    {"smart_config.json", "conflict_avoidance.initial_backoff_ns", "first backoff delay"},
    {"smart_config.json", "conflict_avoidance.max_backoff_ns", "largest backoff cap"},
    {"smart_config.json", "conflict_avoidance.max_tasks", "coroutines admitted at most per thread"},
    {"smart_config.json", "conflict_avoidance.coroutine_throttling", "admit fewer coroutines when the retry rate is high (DISABLE_CORO_THROT turns it off)"},
    {"smart_config.json", "conflict_avoidance.adaptive_backoff_limit", "let the backoff cap move with the retry rate"},
    {"smart_config.json", "conflict_avoidance.gain_check", "now and then compare epochs with admission and backoff off and on, and set both aside for a while where on finishes no more operations per second (a thread's own rate: what its retries cost other clients is not seen); false: always in force, as upstream"},
    {"smart_config.json", "use_speculative_lookup", "applications may answer from a cached slot, read and checked in one round trip (SMART_OPTS `SpecLookup`)"},
    {"smart_config.json", "coalesce_posts", "a task's requests wait, until no task of its thread is runnable, to go out with the other tasks' behind one doorbell (at most 32 per memory blade); auto: on verbs, off on shm; off: a doorbell per task"},
    {"smart_config.json", "experimental.qp_sharing", "threads share queue pairs (the baseline thread-aware allocation improves on)"},

    {"backend.json", "dev_dax_path", "upstream's key: the same as `backing` `devdax:PATH`"},
    {"backend.json", "backing", "where the pool lives: `memfd`, `hugetlb`, `file:PATH` or `devdax:PATH`; a file or devdax pool is reopened with its named roots and allocation state when the blade restarts"},
    {"backend.json", "capacity", "MiB of the pool"},
    {"backend.json", "tcp_port", "port of the handshake (0: any free port, printed at start)"},
    {"backend.json", "nic_numa_node", "NUMA node the pool is bound to (-1: no binding)"},
    {"backend.json", "max_clients", "sessions at once, those still in their handshake included"},
    {"backend.json", "accept_forwarded", "with a key: let in clients whose connection was forwarded (NAT, a port mapping, a proxy); by default a client must have dialled the address its connection arrived at, so that no relay can pass it on to another blade"},
    {"backend.json", "max_startups", "`\"start:rate:full\"` (sshd's MaxStartups form): with `start` or more connections that have not proven the key, a newcomer is refused with probability rate% and told to retry; at `full` (capped at max_clients) the longest-waiting of them is dropped for it"},
    {"backend.json", "max_startups_per_source", "connections that have not proven the key from one address (IPv4, or an IPv6 /64), at most; a newcomer from an address at the limit takes the place of that address's longest-waiting one"},
    {"backend.json", "bind", "address the blade listens on; beyond loopback it needs a key or an explicit `\"auth\": \"none\"`"},
    {"backend.json", "auth", "`\"none\"` (take clients without a key; warned once), or an object with the keys below; absent: smart_config.json's"},
    {"backend.json", "auth.key_file", "the blade's shared key; clients must prove they hold it before anything about the pool is revealed"},
    {"backend.json", "auth.also_accept", "further key files the blade accepts besides `key_file` while the cluster moves to a new key; each client names its key by ID and the blade proves with that one"},
    {"backend.json", "auth.allow_uids", "`shm`: users besides the blade's own that may map its pool (default: none)"},

    {"test_rdma.json", "servers", "memory blades to connect to (the first is used), each `\"host\"`, `\"host:port\"`, `\"[IPv6]:port\"` or `{\"hostname\": ..., \"port\": ..., \"pool_id\": ...}`; a missing port is `port`'s; `pool_id` pins the blade's pool; empty: an embedded one"},
    {"test_rdma.json", "port", "their handshake port"},
    {"test_rdma.json", "block_size", "bytes per operation"},
    {"test_rdma.json", "qp_num", "queue pairs per memory blade; -k: one per k threads"},
    {"test_rdma.json", "type", "the operation measured (`atomic` is `faa`)"},
    {"test_rdma.json", "dump_file_path", "CSV file the result line is appended to"},
    {"test_rdma.json", "dump_prefix", "prefix of the result line; empty: `rdma-` and the type"},
    {"test_rdma.json", "duration", "seconds measured"},
    {"test_rdma.json", "memory_size", "MiB of the pool (server) and of the address range read (client)"},

    {"datastructure.json", "dataset", "YCSB workload"},
    {"datastructure.json", "dump_file_path", "CSV file the result line is appended to"},
    {"datastructure.json", "nr_threads", ""},
    {"datastructure.json", "tasks_per_thread", ""},
    {"datastructure.json", "nic_numa_node", ""},
    {"datastructure.json", "cpu_nodes", ""},
    {"datastructure.json", "cores_per_cpu", ""},
    {"datastructure.json", "insert_before_execution", "load max_key keys before the run"},
    {"datastructure.json", "max_key", "keys 0 .. max_key-1"},
    {"datastructure.json", "key_length", "bytes of a formatted key (enough decimal digits for max_key)"},
    {"datastructure.json", "value_length", "bytes of a value"},
    {"datastructure.json", "rehash_key", "permute key ids before formatting them"},
    {"datastructure.json", "duration", "seconds measured"},
    {"datastructure.json", "zipfian_const", "skew of the key popularity (0: uniform)"},
    {"datastructure.json", "memory_servers", "memory blades, one shard each: `\"host:port\"`, `\"[IPv6]:port\"` or `{\"hostname\": ..., \"port\": ..., \"pool_id\": ...}` (the forms of test_rdma.json's `servers`, a port required; `pool_id`, the 16 hex digits a blade prints at start, pins its pool: a blade serving another is refused); empty: an embedded one"},

    {"transaction.json", "memory_servers", "memory blades: `\"host:port\"`, `\"[IPv6]:port\"` or `{\"hostname\": ..., \"port\": ..., \"pool_id\": ...}` (a port required; `pool_id` pins the blade's pool); absent or empty: embedded ones"},
    {"transaction.json", "smallbank.num_accounts", "SmallBank accounts"},
    {"transaction.json", "smallbank.num_hot_accounts", "the hot ones among them"},
    {"transaction.json", "tatp.num_subscriber", "TATP subscribers"},
    {"transaction.json", "nr_transactions", "attempts, split over threads x coroutines (when duration is 0)"},
    {"transaction.json", "duration", "seconds to run; 0: run nr_transactions instead"},
    {"transaction.json", "backup_degree", "backups of every table (fewer than the memory blades)"},
    {"transaction.json", "dump_file_path", "CSV file the result line is appended to"},
    {"transaction.json", "tpcc", ""},
};

// What each environment variable does.
const Meaning kEnvironment[] = {
    {"", "SMART_CONFIG_PATH", "path of smart_config.json (else the search path above)"},
    {"", "APP_CONFIG_PATH", "path of the application's file: datastructure.json or transaction.json"},
    {"", "TEST_RDMA_CONF", "path of test_rdma.json"},
    {"", "SMART_OPTS", "the techniques that are on: `None`, or any of `ThrdAwareAlloc WorkReqThrot ConflictAvoid SpecLookup`"},
    {"", "SMART_FAULTS", "fault injection for tests: rules `ACTION@TARGET[#N[+]]` separated by `;` (smart/fault_injection.h)"},
    {"", "DISABLE_CORO_THROT", "set: conflict avoidance keeps every coroutine running"},
    {"", "MAX_BACKOFF_CYCLE_LOG2", "a fixed backoff cap of initial_backoff_ns << N (negative: practically none)"},
    {"", "TYPE", "test_rdma: overrides `type`"},
    {"", "BLKSIZE", "test_rdma: overrides `block_size`"},
    {"", "QP_NUM", "test_rdma: overrides `qp_num`"},
    {"", "DUMP_FILE_PATH", "overrides `dump_file_path` of test_rdma.json, datastructure.json and transaction.json"},
    {"", "DUMP_PREFIX", "test_rdma: overrides `dump_prefix`"},
    {"", "DATASET_PATH", "overrides `dataset` of datastructure.json"},
    {"", "ZIPFIAN_CONST", "overrides `zipfian_const`, as an integer percentage (99: 0.99)"},
    {"", "IDLE_USEC", "hashtable, btree, smallbank and tatp benches: each coroutine idles this many microseconds (yielding to the others) after each operation or committed transaction, to draw latency-throughput curves (`--idle-us` overrides)"},
    {"", "MEMORY_NODES", "use only the first k entries of `memory_servers`"},
};

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out.empty() ? " " : out;
}

const char* kFiles[] = {"smart_config.json", "backend.json", "test_rdma.json", "datastructure.json", "transaction.json"};
const char* kAbout[] = {
    "The transport, queue pairs and the three techniques; read by every client and by a memory blade for its transport.",
    "A memory blade (`*_backend`, `test_rdma` as a server): its pool and its listener.",
    "The one-sided micro benchmark `test_rdma`.",
    "The hash table's and the B+tree's benches (`hashtable_bench`, `btree_bench`).",
    "The transaction benches (`smallbank_bench`, `tatp_bench`).",
};

}  // namespace

int main(int argc, char** argv) {
  using namespace smart;
  CLI::App app{"smart_config_reference: prints docs/config_reference.md (every key of every config file and every "
               "environment variable, with type, allowed values, default and meaning) to standard output; takes no "
               "arguments"};
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  // The reference shows defaults, not this shell's overrides.
  clearenv();
  char dir_template[] = "/tmp/smart-config-reference-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("smart_config_reference: mkdtemp");
    return 1;
  }
  ConfigRecording recording;
  try {
    // Objects whose members are read only when present.
    SmartConfig smart = SmartConfig::Parse("{\"auth\": {}}", "smart_config.json");
    smart.ApplyEnvironment();
    BackendConfig::Parse("{\"auth\": {}}", "backend.json");
    for (const char* name : {"test_rdma.json", "datastructure.json", "transaction.json"}) {
      const std::string path = std::string(dir) + "/" + name;
      std::ofstream(path) << "{}";
      if (std::string(name) == "test_rdma.json") TestRdmaConfig::Load(path);
      if (std::string(name) == "datastructure.json") DataStructureConfig::Load(path);
      if (std::string(name) == "transaction.json") TransactionConfig::Load(path);
      unlink(path.c_str());
    }
    for (const auto& [name, variable] : {std::pair{"smart_config.json", "SMART_CONFIG_PATH"},
                                         std::pair{"datastructure.json", "APP_CONFIG_PATH"},
                                         std::pair{"test_rdma.json", "TEST_RDMA_CONF"}}) {
      try {
        FindConfigFile(name, variable);
      } catch (const Error&) {
        // Not found anywhere: only the variable's name is wanted.
      }
    }
  } catch (const Error& e) {
    rmdir(dir);
    std::fprintf(stderr, "smart_config_reference: %s\n", e.what());
    return 1;
  }
  rmdir(dir);

  // Every key read has a meaning, and every meaning names a key read.
  std::map<std::pair<std::string, std::string>, std::string> meanings;
  for (const Meaning& m : kKeys) meanings[{m.file, m.key}] = m.text;
  std::set<std::pair<std::string, std::string>> read;
  bool complete = true;
  for (const ConfigKeyRecord& k : recording.keys) {
    read.insert({k.file, k.key});
    if (!meanings.count({k.file, k.key})) {
      std::fprintf(stderr, "smart_config_reference: %s key \"%s\" has no meaning in tools/config_reference.cc\n",
                   k.file.c_str(), k.key.c_str());
      complete = false;
    }
  }
  for (const Meaning& m : kKeys) {
    if (!read.count({m.file, m.key})) {
      std::fprintf(stderr, "smart_config_reference: %s key \"%s\" is described but no parser reads it\n", m.file, m.key);
      complete = false;
    }
  }
  std::map<std::string, std::string> env_meanings;
  for (const Meaning& m : kEnvironment) env_meanings[m.key] = m.text;
  for (const std::string& v : recording.environment) {
    if (!env_meanings.count(v)) {
      std::fprintf(stderr, "smart_config_reference: variable %s has no meaning in tools/config_reference.cc\n", v.c_str());
      complete = false;
    }
  }
  for (const Meaning& m : kEnvironment) {
    bool asked = false;
    for (const std::string& v : recording.environment) asked = asked || v == m.key;
    if (!asked) {
      std::fprintf(stderr, "smart_config_reference: variable %s is described but nothing reads it\n", m.key);
      complete = false;
    }
  }
  if (!complete) return 1;

  std::printf("# Configuration reference {#page_config_reference}\n\n");
  std::printf("Every key of every configuration file and every environment variable.\n");
  std::printf("Generated by `smart_config_reference` from the parsers themselves (keys, types,\n");
  std::printf("allowed values and defaults), so it cannot drift from them; `ctest -R\n");
  std::printf("config_reference` checks the committed copy. A key left out takes its default;\n");
  std::printf("a key that is unknown, out of range or of the wrong type stops the program\n");
  std::printf("with the file, the key and what was expected; keys starting with `_` are\n");
  std::printf("comments. Files are found through their variable below, else `config/` in\n");
  std::printf("the working directory, `config/` and `share/smart/` beside the program, and\n");
  std::printf("the install prefix's `share/smart/` (@ref page_configuration).\n");
  for (size_t f = 0; f < sizeof(kFiles) / sizeof(kFiles[0]); ++f) {
    std::printf("\n## %s\n\n%s\n\n", kFiles[f], kAbout[f]);
    std::printf("| key | type | allowed | default | meaning |\n| --- | --- | --- | --- | --- |\n");
    for (const ConfigKeyRecord& k : recording.keys) {
      if (k.file != kFiles[f]) continue;
      std::string meaning = meanings[{k.file, k.key}];
      if (k.type == "ignored") meaning = "accepted and not used (upstream's files carry it)";
      if (k.required) meaning = "(required) " + meaning;
      std::printf("| `%s` | %s | %s | %s | %s |\n", k.key.c_str(), Cell(k.type).c_str(),
                  Cell(k.type == "ignored" ? "" : k.range).c_str(),
                  Cell(k.default_value.empty() ? "" : "`" + k.default_value + "`").c_str(), Cell(meaning).c_str());
    }
  }
  std::printf("\n## Environment variables\n\n| variable | meaning |\n| --- | --- |\n");
  for (const std::string& v : recording.environment) {
    std::printf("| `%s` | %s |\n", v.c_str(), Cell(env_meanings[v]).c_str());
  }
  return 0;
}
