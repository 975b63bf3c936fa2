// The bench configs (bench_config.h): test_rdma.json, datastructure.json,
// transaction.json.
#include "smart/bench/bench_config.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "smart/common.h"
#include "smart/config/config_reader.h"
#include "smart/config/server_list.h"
#include "smart/status.h"

namespace smart {

// ---------------------------------------------------------------------------
// test_rdma.json

TestRdmaConfig TestRdmaConfig::Parse(const std::string& text, const std::string& source) {
  const nlohmann::json root = ParseJsonText(text, source);
  ConfigReader r(root, source);
  TestRdmaConfig c;
  c.source = source;
  const char* expectation = "an array of memory blade addresses: \"host\", \"host:port\" or "
                            "{\"hostname\": string, \"port\": integer} (port: the port key when absent)";
  if (const nlohmann::json* servers = r.get("servers", false, expectation)) {
    if (!servers->is_array()) r.fail("servers", expectation, servers);
    // Port 0: the port key's, applied where it is used (--port may change it).
    for (const nlohmann::json& s : *servers) c.servers.push_back(ReadServerEntry(r, "servers", expectation, s, 0));
  }
  r.get_int("port", &c.port, false, 0, 65535);
  r.get_uint64("block_size", &c.block_size, false, 1, 1 << 20);
  r.get_int("qp_num", &c.qp_num, false, -kMaxThreads, kMaxThreads);
  int type = 0;
  const std::vector<std::string> types = {"read", "write", "cas", "faa", "atomic"};
  r.get_choice("type", &type, false, types);
  c.type = types[type] == "atomic" ? "faa" : types[type];
  r.get_string("dump_file_path", &c.dump_file_path, false);
  r.get_string("dump_prefix", &c.dump_prefix, false);
  r.get_double("duration", &c.duration, false, 0.01, 86400);
  r.get_uint64("memory_size", &c.memory_size, false, 1, uint64_t{1} << 30);
  r.check_unknown();
  if (c.qp_num == 0) {
    r.fail_value("qp_num", "a non-zero integer (-k: one queue pair per k threads)", std::to_string(c.qp_num));
  }
  return c;
}

TestRdmaConfig TestRdmaConfig::Load(const std::string& explicit_path) {
  const std::string path = explicit_path.empty() ? FindConfigFile("test_rdma.json", "TEST_RDMA_CONF") : explicit_path;
  TestRdmaConfig c = Parse(ReadTextFile(path, "test_rdma config file"), path);
  std::string value;
  if (GetEnv("TYPE", &value)) {
    if (value == "atomic") value = "faa";
    if (value != "read" && value != "write" && value != "cas" && value != "faa") {
      throw Error("TYPE: expected read, write, cas, faa or atomic, found \"" + value + "\"");
    }
    c.type = value;
  }
  if (GetEnv("BLKSIZE", &value)) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v == 0 || v > (1u << 20)) {
      throw Error("BLKSIZE: expected a block size in bytes (1..1048576), found \"" + value + "\"");
    }
    c.block_size = v;
  }
  if (GetEnv("QP_NUM", &value)) {
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v == 0 || v < -kMaxThreads || v > kMaxThreads) {
      throw Error("QP_NUM: expected a non-zero integer in [-256, 256], found \"" + value + "\"");
    }
    c.qp_num = static_cast<int>(v);
  }
  if (GetEnv("DUMP_FILE_PATH", &value)) c.dump_file_path = value;
  if (GetEnv("DUMP_PREFIX", &value)) c.dump_prefix = value;
  return c;
}

// ---------------------------------------------------------------------------
// datastructure.json

namespace {

const std::vector<std::string> kDatasets = {"ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e",
                                            "ycsb-f", "update-only", "read-only"};

void CheckDataset(const std::string& dataset, const std::string& where) {
  for (const std::string& d : kDatasets) {
    if (d == dataset) return;
  }
  std::string all;
  for (const std::string& d : kDatasets) all += (all.empty() ? "" : ", ") + d;
  throw Error(where + ": unknown workload \"" + dataset + "\"; expected one of " + all);
}

}  // namespace

namespace {

// IDLE_USEC=n: each task idles n microseconds after each operation or
// committed transaction (upstream's knob for latency-throughput curves).
void ApplyIdle(uint64_t* idle_us) {
  std::string value;
  if (!GetEnv("IDLE_USEC", &value)) return;
  char* end = nullptr;
  const long long us = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || us < 0 || us > 10000000) {
    throw Error("IDLE_USEC: expected microseconds 0..10000000, found \"" + value + "\"");
  }
  *idle_us = static_cast<uint64_t>(us);
}

}  // namespace

DataStructureConfig DataStructureConfig::Parse(const std::string& text, const std::string& source) {
  const nlohmann::json root = ParseJsonText(text, source);
  ConfigReader r(root, source);
  DataStructureConfig c;
  c.source = source;
  int dataset = 0;
  r.get_choice("dataset", &dataset, false, kDatasets);
  c.dataset = kDatasets[dataset];
  r.get_string("dump_file_path", &c.dump_file_path, false);
  // Upstream reads these and never uses them; the threads and coroutines
  // are the benches' NR_THREAD and NR_CORO.
  r.ignore("nr_threads");
  r.ignore("tasks_per_thread");
  r.ignore("nic_numa_node");
  r.ignore("cpu_nodes");
  r.ignore("cores_per_cpu");
  r.get_bool("insert_before_execution", &c.insert_before_execution, false);
  r.get_uint64("max_key", &c.max_key, false, 1, uint64_t{1} << 40);
  r.get_int("key_length", &c.key_length, false, 1, 255);
  r.get_int("value_length", &c.value_length, false, 1, 3072);
  r.get_bool("rehash_key", &c.rehash_key, false);
  r.get_double("duration", &c.duration, false, 0.01, 86400);
  r.get_double("zipfian_const", &c.zipfian_const, false, 0, 0.9999);
  ReadMemoryServers(r, false, &c.memory_servers);
  r.check_unknown();
  // A formatted key must tell every key id apart.
  long double room = 1;
  for (int i = 0; i < c.key_length && room <= 1e20L; ++i) room *= 10;
  if (room < static_cast<long double>(c.max_key)) {
    r.fail_value("key_length", "enough decimal digits for max_key (" + std::to_string(c.max_key) + " keys)",
                 std::to_string(c.key_length));
  }
  return c;
}

void DataStructureConfig::ApplyEnvironment() {
  std::string value;
  if (GetEnv("DATASET_PATH", &value)) {
    CheckDataset(value, "DATASET_PATH");
    dataset = value;
  }
  if (GetEnv("DUMP_FILE_PATH", &value)) dump_file_path = value;
  if (GetEnv("ZIPFIAN_CONST", &value)) {
    char* end = nullptr;
    const long percent = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || percent < 0 || percent > 99) {
      throw Error("ZIPFIAN_CONST: expected an integer percentage 0..99, found \"" + value + "\"");
    }
    zipfian_const = static_cast<double>(percent) / 100.0;
  }
  ApplyIdle(&idle_us);
  ApplyMemoryNodes(&memory_servers);
}

DataStructureConfig DataStructureConfig::Load(const std::string& explicit_path) {
  const std::string path =
      explicit_path.empty() ? FindConfigFile("datastructure.json", "APP_CONFIG_PATH") : explicit_path;
  DataStructureConfig c = Parse(ReadTextFile(path, "data structure config file"), path);
  c.ApplyEnvironment();
  return c;
}

TransactionConfig TransactionConfig::Parse(const std::string& text, const std::string& source) {
  const nlohmann::json root = ParseJsonText(text, source);
  ConfigReader r(root, source);
  TransactionConfig c;
  c.source = source;
  ReadMemoryServers(r, false, &c.memory_servers);
  r.get_uint64("smallbank.num_accounts", &c.smallbank_accounts, false, 2, uint64_t{1} << 32);
  r.get_uint64("smallbank.num_hot_accounts", &c.smallbank_hot_accounts, false, 2, uint64_t{1} << 32);
  r.get_uint64("tatp.num_subscriber", &c.tatp_subscribers, false, 1, uint64_t{1} << 30);
  r.get_uint64("nr_transactions", &c.nr_transactions, false, 1, uint64_t{1} << 50);
  r.get_double("duration", &c.duration, false, 0, 86400);
  r.get_int("backup_degree", &c.backup_degree, false, 0, kMaxNodes - 1);
  r.get_string("dump_file_path", &c.dump_file_path, false);
  // Upstream ships a TPC-C section that nothing reads.
  r.ignore("tpcc");
  r.check_unknown();
  if (c.smallbank_hot_accounts > c.smallbank_accounts) {
    r.fail("smallbank.num_hot_accounts", "at most smallbank.num_accounts (" + std::to_string(c.smallbank_accounts) + ")",
           r.get("smallbank.num_hot_accounts", false, ""));
  }
  return c;
}

TransactionConfig TransactionConfig::Load(const std::string& explicit_path) {
  const std::string path =
      explicit_path.empty() ? FindConfigFile("transaction.json", "APP_CONFIG_PATH") : explicit_path;
  TransactionConfig c = Parse(ReadTextFile(path, "transaction config file"), path);
  std::string value;
  if (GetEnv("DUMP_FILE_PATH", &value)) c.dump_file_path = value;
  ApplyIdle(&c.idle_us);
  ApplyMemoryNodes(&c.memory_servers);
  return c;
}

}  // namespace smart
