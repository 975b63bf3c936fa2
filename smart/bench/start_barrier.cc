#include "smart/bench/start_barrier.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/logging.h"
#include "smart/named_root.h"

namespace smart {

namespace {

constexpr const char* kPrefix = "sync/";
// Added to the counter by a blade that gave up waiting: the others, and any
// that arrive later, fail instead of starting without it.
constexpr uint64_t kAbandoned = uint64_t{1} << 40;

std::string Describe(const StartGroup& group) {
  return "start group \"" + group.name + "\" of " + std::to_string(group.size) + " compute blade" +
         (group.size == 1 ? "" : "s");
}

}  // namespace

StartGroup ParseStartGroup(const std::string& text) {
  const size_t colon = text.rfind(':');
  const std::string expected = " (expected GROUP:N, e.g. run7:3)";
  if (colon == std::string::npos) throw Error("--sync \"" + text + "\": no compute blade count" + expected);
  StartGroup g;
  g.name = text.substr(0, colon);
  const std::string count = text.substr(colon + 1);
  if (g.name.empty()) throw Error("--sync \"" + text + "\": no group name" + expected);
  if (g.name.size() > kMaxRootNameLength - 5) {
    throw Error("--sync \"" + text + "\": the group name is longer than " + std::to_string(kMaxRootNameLength - 5) +
                " characters");
  }
  for (char c : g.name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      throw Error("--sync \"" + text + "\": the group name may hold letters, digits, '.', '_' and '-' only");
    }
  }
  if (count.empty() || count.size() > 4 || count.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(count) < 1) {
    throw Error("--sync \"" + text + "\": the compute blade count \"" + count + "\" is not within 1..9999");
  }
  g.size = std::stoi(count);
  return g;
}

Status WaitForStartGroup(Initiator& initiator, const StartGroup& group, uint64_t timeout_ns, int* arrival) {
  const uint64_t deadline = NowNs() + timeout_ns;
  auto* word = static_cast<uint64_t*>(initiator.alloc_cache(sizeof(uint64_t)));
  if (word == nullptr) return Status::OutOfMemory("start group: the initiator cache is exhausted");
  const std::string name = kPrefix + group.name;
  LeaseOptions lease;
  lease.max_wait_ns = timeout_ns;
  NamedRoots roots(initiator, lease);
  GlobalAddress counter;
  for (;;) {
    RootClaim claim;
    Status s = roots.open(0, name, &claim);
    if (!s.ok()) return Status(s.code(), Describe(group) + ": opening its named root on memory node 0: " + s.ToString());
    if (!claim.must_build()) {
      counter = GlobalAddress(0, claim.value());
      break;
    }
    // The first to arrive makes the counter.
    s = initiator.alloc_memory(0, 64, &counter);
    if (!s.ok()) return Status(s.code(), Describe(group) + ": allocating its counter: " + s.ToString());
    *word = 0;
    s = initiator.write(word, counter, sizeof(uint64_t));
    if (s.ok()) s = claim.publish(counter.offset);
    if (s.code() == Status::Code::kLockLost) continue;  // slower than the lease: attach to the other's
    if (!s.ok()) return Status(s.code(), Describe(group) + ": publishing its counter: " + s.ToString());
    break;
  }
  Status s = initiator.fetch_and_add(word, counter, 1);
  if (!s.ok()) return Status(s.code(), Describe(group) + ": arriving: " + s.ToString());
  const uint64_t ticket = *word;
  if (ticket >= kAbandoned) {
    return Status::InvalidArgument(Describe(group) + ": abandoned, a compute blade of it gave up waiting before all "
                                   "arrived; start all of them again under a new group name");
  }
  if (ticket >= static_cast<uint64_t>(group.size)) {
    return Status::InvalidArgument(Describe(group) + ": " + std::to_string(ticket) +
                                   " compute blades arrived before this one: the group name was used before (give "
                                   "each run its own, e.g. a run id or a time stamp)");
  }
  if (arrival != nullptr) *arrival = static_cast<int>(ticket);
  uint64_t pause_us = 50;
  for (;;) {
    s = initiator.read(word, counter, sizeof(uint64_t));
    if (!s.ok()) return Status(s.code(), Describe(group) + ": waiting: " + s.ToString());
    if (*word >= kAbandoned) {
      return Status::InvalidArgument(Describe(group) + ": abandoned, another compute blade of it gave up waiting; "
                                     "start all of them again under a new group name");
    }
    if (*word >= static_cast<uint64_t>(group.size)) return Status::OK();
    if (NowNs() >= deadline) {
      // Leave a mark, so that no blade of the group starts without this
      // one: only while the count is still short, so that no blade can have
      // started already. A CAS that fails means one more arrived: look again.
      const uint64_t arrived = *word;
      s = initiator.compare_and_swap(word, counter, arrived, arrived + kAbandoned);
      if (!s.ok()) return Status(s.code(), Describe(group) + ": giving up: " + s.ToString());
      if (*word == arrived) {
        return Status::TimedOut(Describe(group) + ": " + std::to_string(arrived) + " of " +
                                std::to_string(group.size) + " arrived within " +
                                std::to_string(timeout_ns / 1000000000) + " s");
      }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    pause_us = std::min<uint64_t>(pause_us * 2, 1000);
  }
}

void JoinStartGroup(Initiator& initiator, const StartGroup& group, double timeout_s, const std::string& program,
                    bool verbose) {
  if (group.size == 0) return;
  const auto realtime_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000 + static_cast<uint64_t>(ts.tv_nsec);
  };
  const uint64_t arrived = realtime_ns();
  int place = 0;
  Status s = WaitForStartGroup(initiator, group, static_cast<uint64_t>(timeout_s * 1e9), &place);
  if (!s.ok()) throw Error(s.ToString());
  if (verbose) {
    SMART_INFO("%s: compute blade %d of %d in start group %s: arrived at %llu, started at %llu (CLOCK_REALTIME ns)",
               program.c_str(), place + 1, group.size, group.name.c_str(), static_cast<unsigned long long>(arrived),
               static_cast<unsigned long long>(realtime_ns()));
  }
}

void WaitForStartFile(const std::string& path, double timeout_s, const std::string& program, bool verbose) {
  if (path.empty()) return;
  const std::string ready = path + ".ready";
  {
    std::ofstream out(ready);
    if (!out) throw Error("--start-file: cannot create " + ready + ": " + std::strerror(errno));
  }
  if (verbose) SMART_INFO("%s: loaded; waiting for %s to start the run", program.c_str(), path.c_str());
  const uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(timeout_s * 1e9);
  struct stat st {};
  while (stat(path.c_str(), &st) != 0) {
    if (MonotonicNs() > deadline) {
      throw Error("--start-file: " + path + " did not appear within " + FormatSignificant(timeout_s) +
                  " s (--sync-timeout)");
    }
    usleep(200);
  }
}

}  // namespace smart
