#include "smart/config.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>
#include <sys/stat.h>

#include "smart/common.h"
#include "smart/config/config_reader.h"
#include "smart/config/server_list.h"
#include "smart/logging.h"
#include "smart/status.h"
#include "smart/target/pool_backing.h"

#ifndef SMART_INSTALL_DATADIR
#define SMART_INSTALL_DATADIR ""
#endif

namespace smart {

namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

bool GetEnv(const char* name, std::string* value) {
  if (ConfigRecording* rec = ConfigRecording::Current()) {
    if (std::find(rec->environment.begin(), rec->environment.end(), name) == rec->environment.end()) {
      rec->environment.push_back(name);
    }
  }
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  *value = v;
  return true;
}

std::string FindConfigFile(const std::string& name, const char* env_var) {
  std::string path;
  if (env_var != nullptr && GetEnv(env_var, &path) && !path.empty()) {
    if (!FileExists(path)) throw Error(std::string(env_var) + " names \"" + path + "\", which does not exist");
    return path;
  }
  // The working directory's config/, then next to the program (a build
  // tree's bin/, or an installed bin/ beside share/smart), then the install
  // prefix. Never the working directory's parent: whoever may write there
  // (a shared /tmp) would choose this program's configuration.
  std::vector<std::string> candidates = {"config/" + name};
  const std::string exe = ExecutableDir();
  if (!exe.empty()) {
    candidates.push_back(exe + "/../config/" + name);
    candidates.push_back(exe + "/../share/smart/" + name);
  }
  if (std::string(SMART_INSTALL_DATADIR).size() > 0) candidates.push_back(std::string(SMART_INSTALL_DATADIR) + "/" + name);
  for (const std::string& c : candidates) {
    if (FileExists(c)) return c;
  }
  std::string message = "cannot find config file " + name + "; looked in";
  for (const std::string& c : candidates) message += " " + c;
  if (env_var != nullptr) message += "; set " + std::string(env_var) + " to its path";
  throw Error(message);
}

std::string ConfigFileSearch(const std::string& name, const char* env_var) {
  std::string text = env_var != nullptr ? std::string(env_var) + " if set, else " : "";
  text += name + " in config/ of the working directory, beside the program (config/, share/smart/)";
  const std::string installed = SMART_INSTALL_DATADIR;
  if (!installed.empty()) text += " or in " + installed;
  return text;
}

const char* TransportChoiceName(TransportChoice t) {
  switch (t) {
    case TransportChoice::kAuto:
      return "auto";
    case TransportChoice::kVerbs:
      return "verbs";
    case TransportChoice::kShm:
      return "shm";
  }
  return "?";
}

const char* DoorbellModeName(DoorbellMode m) {
  switch (m) {
    case DoorbellMode::kThreadDomain:
      return "thread_domain";
    case DoorbellMode::kUuar:
      return "uuar";
    case DoorbellMode::kShared:
      return "shared";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// auth, in smart_config.json and backend.json

namespace {

void ReadAuth(ConfigReader& r, const std::string& source, AuthConfig* auth) {
  const char* expectation =
      "\"none\" or an object {\"key_file\": path, \"also_accept\": [path, ...], \"allow_uids\": [uid, ...]}";
  const nlohmann::json* value = r.get("auth", false, expectation);
  if (value == nullptr) return;
  auth->configured = true;
  if (value->is_string()) {
    if (value->get<std::string>() != "none") r.fail("auth", expectation, value);
    auth->none = true;
    return;
  }
  if (!value->is_object()) r.fail("auth", expectation, value);
  r.get_string("auth.key_file", &auth->key_file, false);
  if (!auth->key_file.empty() && auth->key_file[0] != '/') {
    const size_t slash = source.rfind('/');
    if (slash != std::string::npos) auth->key_file = source.substr(0, slash + 1) + auth->key_file;
  }
  if (const nlohmann::json* paths = r.get("auth.also_accept", false, "an array of key file paths")) {
    if (!paths->is_array()) r.fail("auth.also_accept", "an array of key file paths", paths);
    for (const nlohmann::json& path : *paths) {
      if (!path.is_string() || path.get<std::string>().empty()) {
        r.fail("auth.also_accept", "an array of key file paths (non-empty strings)", paths);
      }
      std::string file = path.get<std::string>();
      const size_t slash = source.rfind('/');
      if (file[0] != '/' && slash != std::string::npos) file = source.substr(0, slash + 1) + file;
      auth->also_accept.push_back(file);
    }
  }
  if (const nlohmann::json* uids = r.get("auth.allow_uids", false, "an array of user ids")) {
    if (!uids->is_array()) r.fail("auth.allow_uids", "an array of user ids", uids);
    for (const nlohmann::json& uid : *uids) {
      if (!uid.is_number_unsigned() || uid.get<uint64_t>() >= 0xffffffffull) {
        r.fail("auth.allow_uids", "an array of user ids (non-negative integers)", uids);
      }
      auth->allow_uids.push_back(uid.get<uint32_t>());
    }
  }
}

// max_startups: "start:rate:full" (sshd's MaxStartups form).
void ReadMaxStartups(ConfigReader& r, BackendConfig* c) {
  const char* expectation = "\"start:rate:full\" with 1 <= start <= full <= 1022 and rate a percentage (0..100), "
                            "default \"64:30:256\"";
  const nlohmann::json* value = r.get("max_startups", false, expectation);
  if (value == nullptr) return;
  if (!value->is_string()) r.fail("max_startups", expectation, value);
  const std::string text = value->get<std::string>();
  int start = 0, rate = 0, full = 0;
  char tail = 0;
  if (sscanf(text.c_str(), "%d:%d:%d%c", &start, &rate, &full, &tail) != 3 || start < 1 || start > full ||
      full > kMaxSessions - 1 || rate < 0 || rate > 100 || text.find_first_not_of("0123456789:") != std::string::npos) {
    r.fail("max_startups", expectation, value);
  }
  c->max_startups.start = start;
  c->max_startups.rate = rate;
  c->max_startups.full = full;
}

}  // namespace

// ---------------------------------------------------------------------------
// smart_config.json

SmartConfig SmartConfig::Parse(const std::string& text, const std::string& source) {
  const nlohmann::json root = ParseJsonText(text, source);
  ConfigReader r(root, source);
  SmartConfig c;
  c.source = source;

  int transport = static_cast<int>(c.transport);
  r.get_choice("transport", &transport, false, {"auto", "verbs", "shm"});
  c.transport = static_cast<TransportChoice>(transport);

  r.get_string("infiniband.name", &c.infiniband.name, false);
  r.get_int("infiniband.port", &c.infiniband.port, false, 1, 255);
  r.get_int("infiniband.gid_idx", &c.infiniband.gid_idx, false, -1, 255);
  r.get_bool("infiniband.memory_windows", &c.infiniband.memory_windows, false);

  r.get_uint64("shm.latency_ns", &c.shm.latency_ns, false, 0, 1000000000);
  r.get_bool("shm.nic_model.enabled", &c.shm.nic_model.enabled, false);
  r.get_double("shm.nic_model.rate_mops", &c.shm.nic_model.rate_mops, false, 0.001, 100000);
  r.get_uint64("shm.nic_model.wr_cache_entries", &c.shm.nic_model.wr_cache_entries, false, 1, 1u << 24);
  r.get_double("shm.nic_model.wr_miss_ns", &c.shm.nic_model.wr_miss_ns, false, 0, 1e9);
  r.get_int("shm.nic_model.shared_doorbells", &c.shm.nic_model.shared_doorbells, false, 1, 512);
  r.get_double("shm.nic_model.doorbell_handoff_ns", &c.shm.nic_model.doorbell_handoff_ns, false, 0, 1e9);

  r.get_int("qp_param.max_cqe_size", &c.qp_param.max_cqe_size, false, 1, 1 << 22);
  r.get_int("qp_param.max_wqe_size", &c.qp_param.max_wqe_size, false, 1, 1 << 16);
  r.get_int("qp_param.max_sge_size", &c.qp_param.max_sge_size, false, 1, 32);
  r.get_int("qp_param.max_inline_data", &c.qp_param.max_inline_data, false, 0, 1024);
  r.get_int("qp_param.timeout", &c.qp_param.timeout, false, 1, 31);
  r.get_int("qp_param.retry_cnt", &c.qp_param.retry_cnt, false, 0, 7);
  r.get_int("qp_param.rnr_retry", &c.qp_param.rnr_retry, false, 0, 7);
  r.get_int("qp_param.path_mtu", &c.qp_param.path_mtu, false, 256, 4096);
  const int mtu = c.qp_param.path_mtu;
  if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096) {
    r.fail_value("qp_param.path_mtu", "one of 256, 512, 1024, 2048, 4096", std::to_string(mtu));
  }

  r.get_int("max_nodes", &c.max_nodes, false, 1, kMaxNodes);
  r.get_uint64("initiator_cache_size", &c.initiator_cache_size, false, 1, 1 << 20);
  r.get_int("connect_timeout_ms", &c.connect_timeout_ms, false, 1, 3600 * 1000);
  ReadAuth(r, source, &c.auth);

  r.get_bool("use_thread_aware_alloc", &c.use_thread_aware_alloc, false);
  r.get_int("thread_aware_alloc.total_uuar", &c.thread_aware_alloc.total_uuar, false, 2, 512);
  r.get_int("thread_aware_alloc.shared_uuar", &c.thread_aware_alloc.shared_uuar, false, 1, 511);
  r.get_bool("thread_aware_alloc.shared_cq", &c.thread_aware_alloc.shared_cq, false);
  int doorbell = static_cast<int>(c.thread_aware_alloc.doorbell);
  r.get_choice("thread_aware_alloc.doorbell", &doorbell, false, {"thread_domain", "uuar", "shared"});
  c.thread_aware_alloc.doorbell = static_cast<DoorbellMode>(doorbell);
  if (c.thread_aware_alloc.shared_uuar >= c.thread_aware_alloc.total_uuar) {
    r.fail_value("thread_aware_alloc.shared_uuar",
           "a value below thread_aware_alloc.total_uuar (" + std::to_string(c.thread_aware_alloc.total_uuar) + ")", std::to_string(c.thread_aware_alloc.shared_uuar));
  }

  r.get_bool("use_work_req_throt", &c.use_work_req_throt, false);
  WorkReqThrotConfig& w = c.work_req_throt;
  r.get_int("work_req_throt.initial_credit", &w.initial_credit, false, 1, 4096);
  r.get_int("work_req_throt.max_credit", &w.max_credit, false, 1, 4096);
  r.get_int("work_req_throt.credit_step", &w.credit_step, false, 1, 4096);
  r.get_int("work_req_throt.execution_epochs", &w.execution_epochs, false, 1, 1000000);
  r.get_uint64("work_req_throt.sample_cycles", &w.sample_cycles, false, 10000, uint64_t{1} << 40);
  r.get_double("work_req_throt.inf_credit_weight", &w.inf_credit_weight, false, 0.01, 100);
  r.get_bool("work_req_throt.auto_tuning", &w.auto_tuning, false);
  if (w.max_credit < w.initial_credit) {
    r.fail_value("work_req_throt.max_credit",
           "a value of at least work_req_throt.initial_credit (" + std::to_string(w.initial_credit) + ")", std::to_string(w.max_credit));
  }

  r.get_bool("use_conflict_avoidance", &c.use_conflict_avoidance, false);
  ConflictAvoidanceConfig& a = c.conflict_avoidance;
  r.get_double("conflict_avoidance.low_water_mark", &a.low_water_mark, false, 0, 1);
  r.get_double("conflict_avoidance.high_water_mark", &a.high_water_mark, false, 0, 1);
  r.get_uint64("conflict_avoidance.epoch_us", &a.epoch_us, false, 100, 60000000);
  r.get_uint64("conflict_avoidance.initial_backoff_ns", &a.initial_backoff_ns, false, 1, 1000000000);
  r.get_uint64("conflict_avoidance.max_backoff_ns", &a.max_backoff_ns, false, 1, 10000000000ull);
  r.get_int("conflict_avoidance.max_tasks", &a.max_tasks, false, 1, kMaxTasksPerThread - 1);
  r.get_bool("conflict_avoidance.coroutine_throttling", &a.coroutine_throttling, false);
  r.get_bool("conflict_avoidance.adaptive_backoff_limit", &a.adaptive_backoff_limit, false);
  r.get_bool("conflict_avoidance.gain_check", &a.gain_check, false);
  a.fixed_backoff_limit_ns = a.max_backoff_ns;
  if (a.low_water_mark >= a.high_water_mark) {
    r.fail_value("conflict_avoidance.low_water_mark",
           "a value below conflict_avoidance.high_water_mark (" + std::to_string(a.high_water_mark) + ")", std::to_string(a.low_water_mark));
  }
  if (a.max_backoff_ns < a.initial_backoff_ns) {
    r.fail_value("conflict_avoidance.max_backoff_ns", "a value of at least conflict_avoidance.initial_backoff_ns",
                 std::to_string(a.max_backoff_ns));
  }

  r.get_bool("use_speculative_lookup", &c.use_speculative_lookup, false);
  r.get_bool("experimental.qp_sharing", &c.experimental.qp_sharing, false);
  int coalesce = static_cast<int>(c.coalesce_posts);
  r.get_choice("coalesce_posts", &coalesce, false, {"auto", "on", "off"});
  c.coalesce_posts = static_cast<SmartConfig::CoalescePosts>(coalesce);
  r.check_unknown();
  return c;
}

SmartConfig SmartConfig::LoadFile(const std::string& path) {
  return Parse(ReadTextFile(path, "SMART config file"), path);
}

SmartConfig SmartConfig::Load() {
  SmartConfig c = LoadFile(FindConfigFile("smart_config.json", "SMART_CONFIG_PATH"));
  c.ApplyEnvironment();
  return c;
}

void SmartConfig::ApplySmartOpts(const std::string& opts) {
  // Tokens may be separated by anything that is not a letter or digit.
  std::vector<std::string> tokens;
  std::string current;
  for (char ch : opts + " ") {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      current += ch;
    } else if (!current.empty()) {
      tokens.push_back(current);
      current.clear();
    }
  }
  bool thread_aware = false, throttle = false, conflict = false, spec = false;
  for (const std::string& t : tokens) {
    if (t == "ThrdAwareAlloc") {
      thread_aware = true;
    } else if (t == "WorkReqThrot") {
      throttle = true;
    } else if (t == "ConflictAvoid") {
      conflict = true;
    } else if (t == "SpecLookup") {
      spec = true;
    } else if (t != "None") {
      throw Error("SMART_OPTS: unknown option \"" + t +
                  "\"; expected None or any of ThrdAwareAlloc, WorkReqThrot, ConflictAvoid, SpecLookup");
    }
  }
  use_thread_aware_alloc = thread_aware;
  use_work_req_throt = throttle;
  use_conflict_avoidance = conflict;
  use_speculative_lookup = spec;
}

void SmartConfig::ApplyEnvironment() {
  std::string value;
  if (GetEnv("SMART_OPTS", &value)) ApplySmartOpts(value);
  if (GetEnv("SMART_FAULTS", &value)) faults = ParseFaultRules(value);
  if (GetEnv("DISABLE_CORO_THROT", &value)) conflict_avoidance.coroutine_throttling = false;
  if (GetEnv("MAX_BACKOFF_CYCLE_LOG2", &value)) {
    char* end = nullptr;
    const long log2 = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || log2 > 30) {
      throw Error("MAX_BACKOFF_CYCLE_LOG2: expected an integer of at most 30, found \"" + value + "\"");
    }
    // Upstream's meaning: a fixed cap of the initial backoff << log2; a
    // negative value means practically uncapped (<< 20).
    conflict_avoidance.adaptive_backoff_limit = false;
    conflict_avoidance.fixed_backoff_limit_ns = conflict_avoidance.initial_backoff_ns << (log2 < 0 ? 20 : log2);
  }
}

void ExportProviderEnvironment(const SmartConfig& config) {
  if (!config.use_thread_aware_alloc || config.thread_aware_alloc.doorbell != DoorbellMode::kUuar) return;
  const std::string total = std::to_string(config.thread_aware_alloc.total_uuar);
  const std::string low_latency =
      std::to_string(config.thread_aware_alloc.total_uuar - config.thread_aware_alloc.shared_uuar);
  setenv("MLX5_TOTAL_UUARS", total.c_str(), /*overwrite=*/0);
  setenv("MLX5_NUM_LOW_LAT_UUARS", low_latency.c_str(), /*overwrite=*/0);
}

std::string SmartConfig::Summary() const { return Summary(TransportChoiceName(transport)); }

std::string SmartConfig::Summary(const char* in_use) const {
  std::ostringstream os;
  os << "transport=" << in_use << " ThrdAwareAlloc=" << use_thread_aware_alloc
     << " WorkReqThrot=" << use_work_req_throt << " ConflictAvoid=" << use_conflict_avoidance
     << " SpecLookup=" << use_speculative_lookup;
  return os.str();
}

// ---------------------------------------------------------------------------
// backend.json

BackendConfig BackendConfig::Parse(const std::string& text, const std::string& source) {
  const nlohmann::json root = ParseJsonText(text, source);
  ConfigReader r(root, source);
  BackendConfig c;
  c.source = source;
  r.get_string("dev_dax_path", &c.dev_dax_path, false);
  r.get_string("backing", &c.backing, false);
  ParsePoolBacking(c.backing, source);
  if (!c.dev_dax_path.empty()) {
    if (c.backing != "memfd" && c.backing != "devdax:" + c.dev_dax_path) {
      throw Error(source + ": keys \"dev_dax_path\" and \"backing\" disagree (\"" + c.dev_dax_path + "\" and \"" +
                  c.backing + "\"); set only \"backing\"");
    }
    c.backing = "devdax:" + c.dev_dax_path;
  }
  r.get_uint64("capacity", &c.capacity, false, 1, uint64_t{1} << 30);
  r.get_int("tcp_port", &c.tcp_port, false, 0, 65535);
  r.get_int("nic_numa_node", &c.nic_numa_node, false, -1, 4096);
  r.get_int("max_clients", &c.max_clients, false, 1, kMaxSessions - 1);
  r.get_bool("accept_forwarded", &c.accept_forwarded, false);
  ReadMaxStartups(r, &c);
  r.get_int("max_startups_per_source", &c.max_startups_per_source, false, 1, kMaxSessions - 1);
  r.get_string("bind", &c.bind, false);
  if (c.bind.empty()) {
    r.fail_value("bind", "an address to listen on (127.0.0.1, ::1, 0.0.0.0, ::, a host name)", "\"" + c.bind + "\"");
  }
  ReadAuth(r, source, &c.auth);
  r.check_unknown();
  return c;
}

BackendConfig BackendConfig::LoadFile(const std::string& path) {
  return Parse(ReadTextFile(path, "memory blade config file"), path);
}

}  // namespace smart
