// Helpers shared by the unit tests.
#pragma once

#include <string>

#include "smart/config.h"

namespace smart::testing {

// A complete smart_config.json body on the shm transport; `extra` is
// spliced in as additional top-level members (e.g. "\"shm\": {...},").
inline std::string ConfigText(const std::string& extra = "") {
  return std::string(R"({)") + extra + R"(
    "transport": "shm",
    "infiniband": {"name": "", "port": 1},
    "qp_param": {"max_cqe_size": 256, "max_wqe_size": 256, "max_sge_size": 2, "max_inline_data": 64},
    "max_nodes": 8,
    "initiator_cache_size": 16,
    "use_thread_aware_alloc": true,
    "thread_aware_alloc": {"total_uuar": 100, "shared_uuar": 96, "shared_cq": true},
    "use_work_req_throt": false,
    "work_req_throt": {"initial_credit": 4, "max_credit": 12, "credit_step": 2, "execution_epochs": 60,
                       "sample_cycles": 19200000, "inf_credit_weight": 1.05, "auto_tuning": false},
    "use_conflict_avoidance": true,
    "use_speculative_lookup": true
  })";
}

inline SmartConfig TestConfig(const std::string& extra = "") { return SmartConfig::Parse(ConfigText(extra), "test"); }

}  // namespace smart::testing
