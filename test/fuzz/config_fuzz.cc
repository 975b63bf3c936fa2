// Fuzz target: the configuration parsers and the environment's texts, which
// a user (or a script) wrote: the first byte picks smart_config.json,
// backend.json, test_rdma.json, datastructure.json, transaction.json, a
// SMART_OPTS value or a SMART_FAULTS rule list; the rest is the text. Text
// that is not acceptable ends in smart::Error (never another exception or a
// crash), and what is accepted keeps the invariants the parsers promise.
#include <string>

#include "fuzz_check.h"
#include "smart/common.h"
#include "smart/bench/bench_config.h"
#include "smart/config.h"
#include "smart/fault_injection.h"
#include "smart/status.h"

namespace {

void Check(uint8_t which, const std::string& text) {
  using namespace smart;
  switch (which % 7) {
    case 0: {
      const SmartConfig c = SmartConfig::Parse(text, "fuzzed smart_config.json");
      FuzzCheck(c.thread_aware_alloc.shared_uuar < c.thread_aware_alloc.total_uuar,
                "shared_uuar accepted at or above total_uuar");
      FuzzCheck(c.work_req_throt.max_credit >= c.work_req_throt.initial_credit,
                "max_credit accepted below initial_credit");
      FuzzCheck(c.conflict_avoidance.low_water_mark < c.conflict_avoidance.high_water_mark,
                "a low water mark accepted at or above the high one");
      FuzzCheck(c.qp_param.path_mtu >= 256 && c.qp_param.path_mtu <= 4096, "a path MTU out of range accepted");
      FuzzCheck(c.max_nodes >= 1 && c.max_nodes <= kMaxNodes, "max_nodes out of range accepted");
      break;
    }
    case 1: {
      const BackendConfig c = BackendConfig::Parse(text, "fuzzed backend.json");
      FuzzCheck(!c.bind.empty(), "an empty bind address accepted");
      FuzzCheck(c.capacity >= 1 && c.tcp_port >= 0 && c.tcp_port <= 65535, "a capacity or port out of range accepted");
      FuzzCheck(c.max_clients >= 1 && c.max_clients < kMaxSessions, "max_clients out of range accepted");
      break;
    }
    case 2: {
      const TestRdmaConfig c = TestRdmaConfig::Parse(text, "fuzzed test_rdma.json");
      FuzzCheck(c.qp_num != 0, "qp_num 0 accepted");
      FuzzCheck(c.type == "read" || c.type == "write" || c.type == "cas" || c.type == "faa", "an unknown type accepted");
      for (const ServerAddress& s : c.servers) FuzzCheck(!s.hostname.empty(), "an empty server name accepted");
      break;
    }
    case 3: {
      const DataStructureConfig c = DataStructureConfig::Parse(text, "fuzzed datastructure.json");
      FuzzCheck(c.max_key >= 1 && c.key_length >= 1, "max_key or key_length out of range accepted");
      long double room = 1;
      for (int i = 0; i < c.key_length && room <= 1e20L; ++i) room *= 10;
      FuzzCheck(room >= static_cast<long double>(c.max_key), "a key length too short for max_key accepted");
      for (const ServerAddress& s : c.memory_servers) {
        FuzzCheck(!s.hostname.empty() && s.port >= 1 && s.port <= 65535, "a bad memory server accepted");
      }
      break;
    }
    case 4: {
      const TransactionConfig c = TransactionConfig::Parse(text, "fuzzed transaction.json");
      FuzzCheck(c.smallbank_hot_accounts <= c.smallbank_accounts, "more hot accounts than accounts accepted");
      break;
    }
    case 5: {
      SmartConfig c;
      c.ApplySmartOpts(text);
      break;
    }
    default: {
      for (const FaultRule& r : ParseFaultRules(text)) {
        FuzzCheck(r.nth >= 1, "a fault rule firing on hit 0 accepted");
        FuzzCheck(r.target != FaultTarget::kPoint || !r.point.empty(), "a fault rule on an unnamed point accepted");
      }
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    Check(data[0], text);
  } catch (const smart::Error&) {
    // Refused with a message: what bad text must get.
  }
  return 0;
}
