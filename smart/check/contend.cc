#include "smart/check/contend.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "smart/bench/bench.h"
#include "smart/task.h"

namespace smart::check {

Pacer::Pacer(double duration_s, uint64_t ops)
    : end_(NowNs() + static_cast<uint64_t>(duration_s * 1e9)),
      ops_(ops),
      period_(ops == 0 ? 0 : std::max<uint64_t>(1, static_cast<uint64_t>(duration_s * 1e9) / ops)) {}

bool Pacer::more(uint64_t issued) const { return NowNs() < end_ && (ops_ == 0 || issued < ops_); }

void Pacer::wait_for_tick() const {
  if (period_ == 0) return;
  const uint64_t tick = (NowNs() / period_ + 1) * period_;
  for (uint64_t now = NowNs(); now < tick; now = NowNs()) {
    // Far from the tick the thread sleeps (its other tasks wait for the
    // tick too, or for a completion), so that waiting costs no CPU.
    if (tick - now > 300000) {
      usleep(100);
    } else {
      this_task::yield();
    }
  }
}

std::string Bump(const std::string& value) {
  const size_t plus = value.rfind('+');
  if (plus != std::string::npos) {
    const char* first = value.data() + plus + 1;
    const char* last = value.data() + value.size();
    uint64_t n = 0;
    const auto [end, error] = std::from_chars(first, last, n);
    // Canonical decimal only (no sign, no leading zero), as Go's
    // strconv.FormatUint(ParseUint(s)) == s.
    if (error == std::errc() && end == last && std::string_view(first, last - first) == std::to_string(n)) {
      return value.substr(0, plus + 1) + std::to_string(n + 1);
    }
  }
  return value + "+1";
}

}  // namespace smart::check
