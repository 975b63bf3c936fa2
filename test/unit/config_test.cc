#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "smart/bench/bench_config.h"
#include "smart/config.h"
#include "smart/logging.h"
#include "smart/status.h"
#include "test_util.h"

namespace smart {
namespace {

// Expects parsing to fail with a message containing every fragment.
template <typename Fn>
void ExpectConfigError(Fn fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
    FAIL() << "expected a configuration error";
  } catch (const Error& e) {
    for (const char* f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(SmartConfig, ParsesTheShippedFile) {
  const SmartConfig c = SmartConfig::LoadFile(std::string(SMART_SOURCE_DIR) + "/config/smart_config.json");
  EXPECT_EQ(c.qp_param.max_cqe_size, 256);
  EXPECT_EQ(c.work_req_throt.initial_credit, 4);
  EXPECT_EQ(c.thread_aware_alloc.doorbell, DoorbellMode::kThreadDomain);
  EXPECT_EQ(c.transport, TransportChoice::kAuto);
  EXPECT_EQ(c.coalesce_posts, SmartConfig::CoalescePosts::kAuto);
}

TEST(SmartConfig, CoalescePostsIsAutoOnOrOff) {
  EXPECT_EQ(SmartConfig::Parse(testing::ConfigText("\"coalesce_posts\": \"off\","), "c.json").coalesce_posts,
            SmartConfig::CoalescePosts::kOff);
  EXPECT_EQ(SmartConfig::Parse(testing::ConfigText("\"coalesce_posts\": \"on\","), "c.json").coalesce_posts,
            SmartConfig::CoalescePosts::kOn);
  ExpectConfigError([] { SmartConfig::Parse(testing::ConfigText("\"coalesce_posts\": true,"), "c.json"); },
                    {"c.json", "coalesce_posts", "\"auto\", \"on\", \"off\""});
}

TEST(SmartConfig, AcceptsUpstreamStyleFileWithoutNewerKeys) {
  // No transport, gid_idx, shm, conflict_avoidance or experimental keys.
  const SmartConfig c = SmartConfig::Parse(R"({
    "infiniband": {"name": "mlx5_0", "port": 1},
    "qp_param": {"max_cqe_size": 128, "max_wqe_size": 128, "max_sge_size": 1, "max_inline_data": 64},
    "max_nodes": 32, "initiator_cache_size": 1024,
    "use_thread_aware_alloc": true,
    "thread_aware_alloc": {"total_uuar": 100, "shared_uuar": 96, "shared_cq": true},
    "use_work_req_throt": true,
    "work_req_throt": {"initial_credit": 4, "max_credit": 12, "credit_step": 2, "execution_epochs": 60,
                       "sample_cycles": 19200000, "inf_credit_weight": 1.05, "auto_tuning": true},
    "use_conflict_avoidance": false, "use_speculative_lookup": false})",
                                           "upstream.json");
  EXPECT_EQ(c.infiniband.name, "mlx5_0");
  EXPECT_EQ(c.max_nodes, 32);
  EXPECT_EQ(c.infiniband.gid_idx, -1);
}

TEST(SmartConfig, UnknownKeyNamesFileAndKey) {
  ExpectConfigError([] { SmartConfig::Parse(testing::ConfigText("\"use_thread_awre_alloc\": true,"), "my.json"); },
                    {"my.json", "unknown key", "use_thread_awre_alloc"});
}

TEST(SmartConfig, UnknownNestedKeyNamesTheFullPath) {
  const std::string text = testing::ConfigText("\"shm\": {\"latency\": 5},");
  ExpectConfigError([&] { SmartConfig::Parse(text, "my.json"); }, {"shm.latency"});
}

TEST(SmartConfig, CommentKeysAreIgnored) {
  EXPECT_NO_THROW(SmartConfig::Parse(testing::ConfigText("\"_comment\": \"hello\","), "my.json"));
}

TEST(SmartConfig, MissingKeysTakeTheirDefaults) {
  std::string text = testing::ConfigText();
  const std::string key = "\"max_nodes\": 8,";
  text.erase(text.find(key), key.size());
  EXPECT_EQ(SmartConfig::Parse(text, "my.json").max_nodes, SmartConfig().max_nodes);
  // A file with one key: every other key has its default.
  const SmartConfig shm = SmartConfig::Parse(R"({"transport": "shm"})", "my.json");
  const SmartConfig defaults;
  EXPECT_EQ(shm.transport, TransportChoice::kShm);
  EXPECT_EQ(shm.qp_param.max_wqe_size, defaults.qp_param.max_wqe_size);
  EXPECT_EQ(shm.work_req_throt.max_credit, defaults.work_req_throt.max_credit);
  EXPECT_EQ(shm.thread_aware_alloc.total_uuar, defaults.thread_aware_alloc.total_uuar);
  EXPECT_EQ(shm.use_speculative_lookup, defaults.use_speculative_lookup);
  EXPECT_EQ(shm.initiator_cache_size, defaults.initiator_cache_size);
}

TEST(SmartConfig, AKeyThatConflictsWithAnotherKeysDefaultSaysSo) {
  // shared_uuar's default (96) is not below a total_uuar of 50.
  ExpectConfigError([] { SmartConfig::Parse(R"({"thread_aware_alloc": {"total_uuar": 50}})", "my.json"); },
                    {"my.json", "thread_aware_alloc.shared_uuar", "not in the file", "default (96)"});
}

TEST(SmartConfig, WrongTypeSaysWhatWasExpected) {
  std::string text = testing::ConfigText();
  text.replace(text.find("\"max_nodes\": 8"), 14, "\"max_nodes\": \"eight\"");
  ExpectConfigError([&] { SmartConfig::Parse(text, "my.json"); }, {"max_nodes", "expected an integer", "\"eight\""});
}

TEST(SmartConfig, OutOfRangeValueIsRejected) {
  std::string text = testing::ConfigText();
  text.replace(text.find("\"max_nodes\": 8"), 14, "\"max_nodes\": 9999");
  ExpectConfigError([&] { SmartConfig::Parse(text, "my.json"); }, {"max_nodes", "[1, 256]"});
}

TEST(SmartConfig, BadTransportChoiceListsTheChoices) {
  std::string t = testing::ConfigText();
  t.replace(t.find("\"transport\": \"shm\""), 18, "\"transport\": \"rdma\"");
  ExpectConfigError([&] { SmartConfig::Parse(t, "my.json"); }, {"transport", "\"auto\"", "\"verbs\"", "\"shm\""});
}

TEST(SmartConfig, ParentThatIsNotAnObjectIsATypeError) {
  std::string t = testing::ConfigText();
  t.replace(t.find("\"infiniband\": {\"name\": \"\", \"port\": 1}"), 37, "\"infiniband\": 3");
  ExpectConfigError([&] { SmartConfig::Parse(t, "my.json"); }, {"infiniband", "an object"});
}

TEST(SmartConfig, InvalidJsonIsReported) {
  ExpectConfigError([] { SmartConfig::Parse("{ \"a\": ", "broken.json"); }, {"broken.json", "not valid JSON"});
  // The JSON parser throws out_of_range, not parse_error, for this one.
  ExpectConfigError([] { SmartConfig::Parse("{ \"max_nodes\": 1E400 }", "huge.json"); },
                    {"huge.json", "not valid JSON", "number overflow"});
}

TEST(SmartConfig, CrossKeyConstraintsAreChecked) {
  std::string t = testing::ConfigText();
  t.replace(t.find("\"shared_uuar\": 96"), 17, "\"shared_uuar\": 100");
  ExpectConfigError([&] { SmartConfig::Parse(t, "my.json"); }, {"shared_uuar", "below"});
}

TEST(SmartConfig, SmartOptsTurnsTechniquesOnByToken) {
  SmartConfig c = testing::TestConfig();
  c.ApplySmartOpts("None");
  EXPECT_FALSE(c.use_thread_aware_alloc);
  EXPECT_FALSE(c.use_work_req_throt);
  EXPECT_FALSE(c.use_conflict_avoidance);
  EXPECT_FALSE(c.use_speculative_lookup);
  c.ApplySmartOpts("ThrdAwareAlloc,WorkReqThrot");
  EXPECT_TRUE(c.use_thread_aware_alloc);
  EXPECT_TRUE(c.use_work_req_throt);
  EXPECT_FALSE(c.use_conflict_avoidance);
  c.ApplySmartOpts("ConflictAvoid+SpecLookup");
  EXPECT_FALSE(c.use_thread_aware_alloc);
  EXPECT_TRUE(c.use_conflict_avoidance);
  EXPECT_TRUE(c.use_speculative_lookup);
}

TEST(SmartConfig, UnknownSmartOptsTokenIsAnError) {
  SmartConfig c = testing::TestConfig();
  ExpectConfigError([&] { c.ApplySmartOpts("ThrdAwareAlloc,Turbo"); }, {"SMART_OPTS", "Turbo", "ConflictAvoid"});
}

TEST(SmartConfig, EnvironmentOverridesAreApplied) {
  SmartConfig c = testing::TestConfig();
  setenv("SMART_OPTS", "SpecLookup", 1);
  setenv("DISABLE_CORO_THROT", "1", 1);
  setenv("MAX_BACKOFF_CYCLE_LOG2", "3", 1);
  c.ApplyEnvironment();
  unsetenv("SMART_OPTS");
  unsetenv("DISABLE_CORO_THROT");
  unsetenv("MAX_BACKOFF_CYCLE_LOG2");
  EXPECT_TRUE(c.use_speculative_lookup);
  EXPECT_FALSE(c.use_conflict_avoidance);
  EXPECT_FALSE(c.conflict_avoidance.coroutine_throttling);
  EXPECT_FALSE(c.conflict_avoidance.adaptive_backoff_limit);
  EXPECT_EQ(c.conflict_avoidance.fixed_backoff_limit_ns, c.conflict_avoidance.initial_backoff_ns << 3);
}

TEST(SmartConfig, BadMaxBackoffLog2IsAnError) {
  SmartConfig c = testing::TestConfig();
  setenv("MAX_BACKOFF_CYCLE_LOG2", "lots", 1);
  ExpectConfigError([&] { c.ApplyEnvironment(); }, {"MAX_BACKOFF_CYCLE_LOG2", "lots"});
  unsetenv("MAX_BACKOFF_CYCLE_LOG2");
}

TEST(SmartConfig, ConfigPathFromEnvironmentMustExist) {
  setenv("SMART_CONFIG_PATH", "/nonexistent/smart.json", 1);
  ExpectConfigError([] { SmartConfig::Load(); }, {"SMART_CONFIG_PATH", "/nonexistent/smart.json"});
  unsetenv("SMART_CONFIG_PATH");
}

TEST(BackendConfig, ParsesAndValidates) {
  const BackendConfig c = BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0})", "backend.json");
  EXPECT_EQ(c.capacity, 64u);
  EXPECT_EQ(c.tcp_port, 0);
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 70000})", "backend.json"); },
                    {"backend.json", "tcp_port"});
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": -1, "tcp_port": 1})", "backend.json"); },
                    {"capacity"});
  EXPECT_EQ(BackendConfig::Parse(R"({"tcp_port": 1})", "backend.json").capacity, BackendConfig().capacity);
}

TEST(BackendConfig, BindAndAuth) {
  const BackendConfig plain = BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0})", "/etc/smart/backend.json");
  EXPECT_EQ(plain.bind, "127.0.0.1");
  EXPECT_FALSE(plain.auth.configured);
  const BackendConfig keyed = BackendConfig::Parse(
      R"({"capacity": 64, "tcp_port": 0, "bind": "0.0.0.0", "auth": {"key_file": "smart.key", "allow_uids": [1001, 0]}})",
      "/etc/smart/backend.json");
  EXPECT_EQ(keyed.bind, "0.0.0.0");
  EXPECT_TRUE(keyed.auth.configured);
  EXPECT_FALSE(keyed.auth.none);
  EXPECT_EQ(keyed.auth.key_file, "/etc/smart/smart.key");  // beside the config file
  EXPECT_EQ(keyed.auth.allow_uids, (std::vector<uint32_t>{1001, 0}));
  EXPECT_EQ(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": {"key_file": "/k"}})", "b.json").auth.key_file,
            "/k");
  EXPECT_TRUE(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": "none"})", "b.json").auth.none);
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": "off"})", "b.json"); },
                    {"b.json", "\"auth\"", "\"none\" or an object"});
  ExpectConfigError(
      [] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": {"allow_uids": [-1]}})", "b.json"); },
      {"auth.allow_uids", "user ids"});
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": {"keyfile": "k"}})", "b.json"); },
                    {"auth.keyfile"});
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "bind": ""})", "b.json"); },
                    {"bind"});
  const SmartConfig client = SmartConfig::Parse(testing::ConfigText(R"("auth": {"key_file": "k"},)"), "conf/smart.json");
  EXPECT_EQ(client.auth.key_file, "conf/k");
}

TEST(BackendConfig, HandshakeLimitsAndRotationKeys) {
  const BackendConfig plain = BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0})", "b.json");
  EXPECT_EQ(plain.max_startups.start, 64);
  EXPECT_EQ(plain.max_startups.rate, 30);
  EXPECT_EQ(plain.max_startups.full, 256);
  EXPECT_EQ(plain.max_startups_per_source, 16);
  const BackendConfig c = BackendConfig::Parse(
      R"({"capacity": 64, "tcp_port": 0, "max_startups": "10:50:100", "max_startups_per_source": 4,
          "auth": {"key_file": "new.key", "also_accept": ["old.key", "/keys/older.key"]}})",
      "/etc/smart/backend.json");
  EXPECT_EQ(c.max_startups.start, 10);
  EXPECT_EQ(c.max_startups.rate, 50);
  EXPECT_EQ(c.max_startups.full, 100);
  EXPECT_EQ(c.max_startups_per_source, 4);
  EXPECT_EQ(c.auth.also_accept, (std::vector<std::string>{"/etc/smart/old.key", "/keys/older.key"}));
  for (const char* bad : {"10:50", "100:50:10", "10:101:100", "0:30:100", "10:30:2000", "10:30:100x", "a:b:c"}) {
    const std::string text = std::string(R"({"capacity": 64, "tcp_port": 0, "max_startups": ")") + bad + R"("})";
    ExpectConfigError([&text] { BackendConfig::Parse(text, "b.json"); }, {"max_startups", "start:rate:full", bad});
  }
  ExpectConfigError(
      [] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "max_startups": 64})", "b.json"); },
      {"max_startups", "start:rate:full"});
  ExpectConfigError(
      [] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "auth": {"also_accept": "k"}})", "b.json"); },
      {"auth.also_accept", "array of key file paths"});
  ExpectConfigError(
      [] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "max_startups_per_source": 0})", "b.json"); },
      {"max_startups_per_source"});
}

TEST(BackendConfig, PoolBacking) {
  EXPECT_EQ(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0})", "b.json").backing, "memfd");
  EXPECT_EQ(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "backing": "hugetlb"})", "b.json").backing,
            "hugetlb");
  EXPECT_EQ(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "backing": "file:/x/pool"})", "b.json").backing,
            "file:/x/pool");
  // Upstream's dev_dax_path names a devdax backing.
  EXPECT_EQ(BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "dev_dax_path": "/dev/dax0.0"})", "b.json").backing,
            "devdax:/dev/dax0.0");
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "backing": "disk"})", "b.json"); },
                    {"b.json", "backing", "disk", "file:PATH"});
  ExpectConfigError([] { BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "backing": "file:"})", "b.json"); },
                    {"backing", "names no path"});
  ExpectConfigError(
      [] {
        BackendConfig::Parse(R"({"capacity": 64, "tcp_port": 0, "backing": "file:/p", "dev_dax_path": "/dev/dax0.0"})",
                             "b.json");
      },
      {"dev_dax_path", "backing", "disagree"});
}

TEST(TestRdmaConfig, ParsesUpstreamFile) {
  const TestRdmaConfig c = TestRdmaConfig::Parse(
      R"({"servers": ["optane06"], "port": 12345, "block_size": 8, "qp_num": -1, "dump_file_path": "x.csv", "type": "atomic"})",
      "test_rdma.json");
  ASSERT_EQ(c.servers.size(), 1u);
  EXPECT_EQ(c.servers[0].hostname, "optane06");
  EXPECT_EQ(c.servers[0].port, 0);  // the port key's
  EXPECT_EQ(c.type, "faa");  // upstream's name for fetch-and-add
}

TEST(DataStructureConfig, DeadKeysAreAcceptedWithADeprecationLine) {
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel, const char* line) { lines.emplace_back(line); });
  const DataStructureConfig c =
      DataStructureConfig::Parse(R"({"nr_threads": 96, "tasks_per_thread": 8, "max_key": 10})", "d.json");
  DataStructureConfig::Parse(R"({"max_key": 10})", "quiet.json");
  SetLogSink({});
  EXPECT_EQ(c.max_key, 10u);
  ASSERT_EQ(lines.size(), 2u);  // none for the file without them
  EXPECT_NE(lines[0].find("d.json"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("nr_threads"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("deprecated"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("tasks_per_thread"), std::string::npos) << lines[1];
}

// The shipped datastructure.json with `servers` as its memory_servers.
DataStructureConfig DataStructureWith(const std::string& servers) {
  std::ifstream in(std::string(SMART_SOURCE_DIR) + "/config/datastructure.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string empty = "\"memory_servers\": []";
  const size_t at = text.find(empty);
  if (at == std::string::npos) throw std::runtime_error("datastructure.json has no empty memory_servers");
  text.replace(at, empty.size(), "\"memory_servers\": " + servers);
  return DataStructureConfig::Parse(text, "d.json");
}

TEST(ServerAddresses, ServersAndMemoryServersAcceptTheSameForms) {
  const TestRdmaConfig t = TestRdmaConfig::Parse(
      R"({"servers": ["optane06", "optane07:4000", {"hostname": "h", "port": 5}, {"hostname": "g"}, "[fe80::1]:7"],
          "port": 12345, "block_size": 8, "dump_file_path": "", "type": "read"})",
      "t.json");
  ASSERT_EQ(t.servers.size(), 5u);
  EXPECT_EQ(t.servers[1].hostname, "optane07");
  EXPECT_EQ(t.servers[1].port, 4000);
  EXPECT_EQ(t.servers[2].port, 5);
  EXPECT_EQ(t.servers[3].port, 0);
  EXPECT_EQ(t.servers[4].hostname, "fe80::1");
  EXPECT_EQ(t.servers[4].port, 7);
  const DataStructureConfig d =
      DataStructureWith(R"(["optane07:4000", {"hostname": "h", "port": 5}, "[fe80::1]:7"])");
  ASSERT_EQ(d.memory_servers.size(), 3u);
  EXPECT_EQ(d.memory_servers[0].hostname, "optane07");
  EXPECT_EQ(d.memory_servers[0].port, 4000);
  EXPECT_EQ(d.memory_servers[2].port, 7);
}

TEST(ServerAddresses, AMemoryServerMayPinItsPool) {
  const DataStructureConfig d = DataStructureWith(
      R"([{"hostname": "h", "port": 5, "pool_id": "00f1e2d3c4b5a697"}, "g:6"])");
  ASSERT_EQ(d.memory_servers.size(), 2u);
  EXPECT_EQ(d.memory_servers[0].pool_id, 0x00f1e2d3c4b5a697ull);
  EXPECT_EQ(d.memory_servers[1].pool_id, 0u);
  for (const char* bad : {R"("F1E2D3C4B5A69788")", R"("f1e2")", R"("0000000000000000")", "17"}) {
    ExpectConfigError([&bad] { DataStructureWith(std::string(R"([{"hostname": "h", "port": 5, "pool_id": )") + bad + "}]"); },
                      {"memory_servers", "pool_id", "16 lowercase hex digits"});
  }
}

TEST(BenchEnvironment, IdleUsecIsReadAndChecked) {
  const std::string path = ::testing::TempDir() + "/datastructure.json";
  {
    std::ifstream in(std::string(SMART_SOURCE_DIR) + "/config/datastructure.json");
    std::ofstream out(path);
    out << in.rdbuf();
  }
  setenv("IDLE_USEC", "250", 1);
  EXPECT_EQ(DataStructureConfig::Load(path).idle_us, 250u);
  setenv("IDLE_USEC", "-3", 1);
  ExpectConfigError([&] { DataStructureConfig::Load(path); }, {"IDLE_USEC", "-3"});
  unsetenv("IDLE_USEC");
  EXPECT_EQ(DataStructureConfig::Load(path).idle_us, 0u);
}

TEST(ConfigLookup, TheWorkingDirectorysParentIsNeverSearched) {
  // /tmp/X/config/ planted by whoever may write to /tmp/X, the program run
  // from /tmp/X/work: not its configuration.
  char name[] = "/tmp/smart-lookup-test.XXXXXX";
  const std::string dir = mkdtemp(name);
  ASSERT_EQ(mkdir((dir + "/config").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir + "/work").c_str(), 0755), 0);
  std::ofstream(dir + "/config/planted_lookup_test.json") << "{}";
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir((dir + "/work").c_str()), 0);
  std::string found, error;
  try {
    found = FindConfigFile("planted_lookup_test.json", nullptr);
  } catch (const Error& e) {
    error = e.what();
  }
  // The working directory's own config/ is searched.
  ASSERT_EQ(mkdir((dir + "/work/config").c_str(), 0755), 0);
  std::ofstream(dir + "/work/config/planted_lookup_test.json") << "{}";
  const std::string own = FindConfigFile("planted_lookup_test.json", nullptr);
  ASSERT_EQ(chdir(cwd), 0);
  [[maybe_unused]] int rc = system(("rm -rf " + dir).c_str());
  EXPECT_EQ(found, "") << "found the parent's " << found;
  EXPECT_NE(error.find("cannot find config file planted_lookup_test.json"), std::string::npos) << error;
  EXPECT_EQ(error.find(" ../config/"), std::string::npos) << error;
  EXPECT_EQ(own, "config/planted_lookup_test.json");
}

TEST(ServerAddresses, BadAddressesNameWhatIsWrong) {
  // memory_servers has no port key to fall back on.
  ExpectConfigError(
      [] { DataStructureWith(R"(["optane07"])"); },
      {"d.json", "memory_servers", "optane07", "no port"});
  ExpectConfigError(
      [] { DataStructureWith(R"([{"hostname": "h"}])"); },
      {"memory_servers"});
  ExpectConfigError(
      [] {
        TestRdmaConfig::Parse(R"({"servers": ["h:70000"], "port": 1, "block_size": 8, "dump_file_path": "", "type": "read"})",
                              "t.json");
      },
      {"servers", "70000", "1..65535"});
  for (const char* text : {"fe80::1:7", "[fe80::1", ":80", "h:", "h:8x", "[h]x"}) {
    SCOPED_TRACE(text);
    try {
      ParseServerAddress(text, 1);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ParseServerAddress("h", 9).port, 9);
  EXPECT_THROW(ParseServerAddress("h"), Error);
}

TEST(TestRdmaConfig, RejectsBadValues) {
  ExpectConfigError(
      [] {
        TestRdmaConfig::Parse(R"({"servers": [1], "port": 1, "block_size": 8, "dump_file_path": "", "type": "read"})",
                              "t.json");
      },
      {"servers"});
  ExpectConfigError(
      [] {
        TestRdmaConfig::Parse(R"({"servers": [], "port": 1, "block_size": 8, "dump_file_path": "", "type": "scan"})",
                              "t.json");
      },
      {"type", "\"cas\""});
  ExpectConfigError(
      [] {
        TestRdmaConfig::Parse(
            R"({"servers": [], "port": 1, "block_size": 8, "qp_num": 0, "dump_file_path": "", "type": "read"})", "t.json");
      },
      {"qp_num"});
}

TEST(TransactionConfig, ParsesTheShippedFileAndAnUpstreamStyleOne) {
  std::ifstream in(std::string(SMART_SOURCE_DIR) + "/config/transaction.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const TransactionConfig shipped = TransactionConfig::Parse(text, "transaction.json");
  EXPECT_EQ(shipped.smallbank_accounts, 100000u);
  EXPECT_EQ(shipped.backup_degree, 1);
  EXPECT_TRUE(shipped.memory_servers.empty());
  // Upstream's file: two servers, a TPC-C section nothing reads, no duration.
  const TransactionConfig upstream = TransactionConfig::Parse(R"({
    "memory_servers": [{"hostname": "optane06", "port": 12345}, {"hostname": "optane07", "port": 12345}],
    "tpcc": {"num_warehouse": 8, "num_district_per_warehouse": 10},
    "smallbank": {"num_accounts": 5000, "num_hot_accounts": 100},
    "tatp": {"num_subscriber": 777},
    "nr_transactions": 1234, "dump_file_path": "x.csv"})", "upstream");
  EXPECT_EQ(upstream.memory_servers.size(), 2u);
  EXPECT_EQ(upstream.smallbank_accounts, 5000u);
  EXPECT_EQ(upstream.smallbank_hot_accounts, 100u);
  EXPECT_EQ(upstream.tatp_subscribers, 777u);
  EXPECT_EQ(upstream.nr_transactions, 1234u);
  EXPECT_EQ(upstream.duration, 0);
}

TEST(TransactionConfig, BadValuesAreNamed) {
  ExpectConfigError([] { TransactionConfig::Parse(R"({"smallbank": {"num_acounts": 5}})", "t.json"); },
                    {"t.json", "smallbank.num_acounts"});
  ExpectConfigError([] { TransactionConfig::Parse(R"({"smallbank": {"num_accounts": 10, "num_hot_accounts": 20}})", "t.json"); },
                    {"smallbank.num_hot_accounts"});
  ExpectConfigError([] { TransactionConfig::Parse(R"({"backup_degree": -1})", "t.json"); }, {"backup_degree"});
  ExpectConfigError([] { TransactionConfig::Parse(R"({"duration": "long"})", "t.json"); }, {"duration"});
}

// The library leaves the environment alone; a program that wants the uuar
// doorbells exports the provider's variables from its configuration, and a
// value the user set stays.
TEST(ExportProviderEnvironment, SetsTheUuarVariablesOnlyInUuarModeAndKeepsTheUsers) {
  unsetenv("MLX5_TOTAL_UUARS");
  unsetenv("MLX5_NUM_LOW_LAT_UUARS");
  SmartConfig config;
  config.thread_aware_alloc.total_uuar = 40;
  config.thread_aware_alloc.shared_uuar = 30;
  config.thread_aware_alloc.doorbell = DoorbellMode::kThreadDomain;
  ExportProviderEnvironment(config);
  EXPECT_EQ(getenv("MLX5_TOTAL_UUARS"), nullptr);
  config.thread_aware_alloc.doorbell = DoorbellMode::kUuar;
  config.use_thread_aware_alloc = false;
  ExportProviderEnvironment(config);
  EXPECT_EQ(getenv("MLX5_TOTAL_UUARS"), nullptr);
  config.use_thread_aware_alloc = true;
  ExportProviderEnvironment(config);
  ASSERT_NE(getenv("MLX5_TOTAL_UUARS"), nullptr);
  EXPECT_STREQ(getenv("MLX5_TOTAL_UUARS"), "40");
  EXPECT_STREQ(getenv("MLX5_NUM_LOW_LAT_UUARS"), "10");
  setenv("MLX5_TOTAL_UUARS", "64", 1);
  ExportProviderEnvironment(config);
  EXPECT_STREQ(getenv("MLX5_TOTAL_UUARS"), "64") << "a value the user set was overwritten";
  unsetenv("MLX5_TOTAL_UUARS");
  unsetenv("MLX5_NUM_LOW_LAT_UUARS");
}

}  // namespace
}  // namespace smart
