// SMART_FAULTS rules: parsing, the named points, and carrying out an action.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "fault_internal.h"
#include "smart/common.h"
#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "smart/status.h"

namespace smart {

namespace fault_internal {
std::atomic<bool> g_points_armed{false};
}  // namespace fault_internal

namespace {

struct ArmedRule {
  FaultRule rule;
  uint64_t hits = 0;
  bool fired = false;
};

std::mutex g_mutex;
std::vector<ArmedRule> g_rules;
bool g_rule_points = false;  // some rule names a point
std::map<std::string, std::function<void()>> g_hooks;

void ArmPoints() {
  fault_internal::g_points_armed.store(g_rule_points || !g_hooks.empty(), std::memory_order_relaxed);
}
bool g_request_rules = false;

[[noreturn]] void Bad(const std::string& rule, const std::string& why) {
  throw Error("SMART_FAULTS: bad rule \"" + rule + "\": " + why +
              " (expected ACTION@TARGET[#N[+]]; ACTION: kill, stop, exit=CODE, delay=Nus|Nms, fail; "
              "TARGET: point:NAME, read, write, cas, faa, any, posted:read|write|cas|faa|any)");
}

uint64_t ParseNumber(const std::string& rule, const std::string& text, const char* what) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 12) {
    Bad(rule, std::string(what) + " \"" + text + "\" is not a number");
  }
  return std::stoull(text);
}

FaultRule ParseRule(const std::string& text) {
  FaultRule r;
  r.text = text;
  const size_t at = text.find('@');
  if (at == std::string::npos) Bad(text, "no '@'");
  const std::string action = text.substr(0, at);
  std::string target = text.substr(at + 1);
  const size_t hash = target.rfind('#');
  if (hash != std::string::npos) {
    std::string count = target.substr(hash + 1);
    if (!count.empty() && count.back() == '+') {
      r.repeat = true;
      count.pop_back();
    }
    r.nth = ParseNumber(text, count, "the hit count");
    if (r.nth == 0) Bad(text, "hits count from 1");
    target = target.substr(0, hash);
  }
  if (action == "kill") {
    r.action = FaultAction::kKill;
  } else if (action == "stop") {
    r.action = FaultAction::kStop;
  } else if (action == "fail") {
    r.action = FaultAction::kFail;
  } else if (action.rfind("exit=", 0) == 0) {
    r.action = FaultAction::kExit;
    const uint64_t code = ParseNumber(text, action.substr(5), "the exit code");
    if (code > 255) Bad(text, "an exit code is 0..255");
    r.exit_code = static_cast<int>(code);
  } else if (action.rfind("delay=", 0) == 0) {
    r.action = FaultAction::kDelay;
    std::string amount = action.substr(6);
    uint64_t unit = 0;
    if (amount.size() > 2 && amount.compare(amount.size() - 2, 2, "us") == 0) unit = 1000;
    if (amount.size() > 2 && amount.compare(amount.size() - 2, 2, "ms") == 0) unit = 1000000;
    if (unit == 0) Bad(text, "a delay ends in us or ms");
    r.delay_ns = ParseNumber(text, amount.substr(0, amount.size() - 2), "the delay") * unit;
  } else {
    Bad(text, "unknown action \"" + action + "\"");
  }
  if (target.rfind("posted:", 0) == 0) {
    r.after_post = true;
    target = target.substr(7);
    if (r.action == FaultAction::kFail) Bad(text, "fail acts before the post; posted: is for kill, stop, exit, delay");
    if (target.rfind("point:", 0) == 0) Bad(text, "posted: names an opcode (read, write, cas, faa, any), not a point");
  }
  if (target.rfind("point:", 0) == 0) {
    r.target = FaultTarget::kPoint;
    r.point = target.substr(6);
    if (r.point.empty()) Bad(text, "a point needs a name");
    if (r.action == FaultAction::kFail) Bad(text, "fail applies to work requests, not to points");
  } else if (target == "read") {
    r.target = FaultTarget::kRead;
  } else if (target == "write") {
    r.target = FaultTarget::kWrite;
  } else if (target == "cas") {
    r.target = FaultTarget::kCas;
  } else if (target == "faa") {
    r.target = FaultTarget::kFaa;
  } else if (target == "any") {
    r.target = FaultTarget::kAnyRequest;
  } else {
    Bad(text, "unknown target \"" + target + "\"");
  }
  return r;
}

// Counts one hit of a rule that matched; true when the rule fires on it.
// A one-shot rule fires on its nth hit only, a repeating one on every nth.
bool Fires(ArmedRule& a) {
  ++a.hits;
  if (a.rule.repeat) return a.hits % a.rule.nth == 0;
  if (a.hits != a.rule.nth) return false;
  a.fired = true;
  return true;
}

}  // namespace

std::vector<FaultRule> ParseFaultRules(const std::string& text) {
  std::vector<FaultRule> rules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string rule = text.substr(start, end - start);
    const size_t first = rule.find_first_not_of(" \t");
    const size_t last = rule.find_last_not_of(" \t");
    rule = first == std::string::npos ? "" : rule.substr(first, last - first + 1);
    if (!rule.empty()) rules.push_back(ParseRule(rule));
    start = end + 1;
  }
  return rules;
}

void InstallFaultRules(const std::vector<FaultRule>& rules) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_rules.clear();
  bool points = false;
  g_request_rules = false;
  for (const FaultRule& r : rules) {
    g_rules.push_back(ArmedRule{r});
    if (r.target == FaultTarget::kPoint) points = true;
    else g_request_rules = true;
  }
  g_rule_points = points;
  ArmPoints();
  for (const FaultRule& r : rules) SMART_WARN("fault injection armed: %s", r.text.c_str());
}

void SetFaultPointHook(const std::string& point, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (hook) {
    g_hooks[point] = std::move(hook);
  } else {
    g_hooks.erase(point);
  }
  ArmPoints();
}

bool HasWorkRequestFaults() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_request_rules;
}

namespace fault_internal {

void Perform(const FaultRule& rule) {
  switch (rule.action) {
    // raise(), not kill(getpid()): a signal sent to the process may be taken
    // by another thread while this one runs on past the point; raised in
    // this thread, it stops (or ends) the process before this thread
    // returns to the code that hit the point.
    case FaultAction::kKill:
      raise(SIGKILL);
      break;
    case FaultAction::kStop:
      raise(SIGSTOP);
      break;
    case FaultAction::kExit:
      _exit(rule.exit_code);
    case FaultAction::kDelay:
      std::this_thread::sleep_for(std::chrono::nanoseconds(rule.delay_ns));
      break;
    case FaultAction::kFail:
      break;  // carried out by the caller on its work request
  }
}

void HitPoint(const char* name) {
  FaultRule fire;
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto h = g_hooks.find(name);
    if (h != g_hooks.end()) hook = h->second;
  }
  // Outside the lock: a hook may yield to other tasks, which reach points too.
  if (hook) hook();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ArmedRule* found = nullptr;
    for (ArmedRule& a : g_rules) {
      if (a.rule.target != FaultTarget::kPoint || a.fired || a.rule.point != name) continue;
      if (Fires(a)) {
        found = &a;
        break;
      }
    }
    if (found == nullptr) return;
    fire = found->rule;
  }
  if (!fire.repeat) SMART_WARN("fault injection: %s fires", fire.text.c_str());
  Perform(fire);
}

bool HitRequest(int opcode, FaultRule* fire) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (ArmedRule& a : g_rules) {
    if (a.fired || a.rule.target == FaultTarget::kPoint) continue;
    const FaultTarget t = a.rule.target;
    const bool matches = t == FaultTarget::kAnyRequest || (t == FaultTarget::kRead && opcode == IBV_WR_RDMA_READ) ||
                         (t == FaultTarget::kWrite && opcode == IBV_WR_RDMA_WRITE) ||
                         (t == FaultTarget::kCas && opcode == IBV_WR_ATOMIC_CMP_AND_SWP) ||
                         (t == FaultTarget::kFaa && opcode == IBV_WR_ATOMIC_FETCH_AND_ADD);
    if (!matches || !Fires(a)) continue;
    *fire = a.rule;
    return true;
  }
  return false;
}

}  // namespace fault_internal
}  // namespace smart
