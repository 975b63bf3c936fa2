// What the checkers' contend and read-modify-write commands share: the pace
// of their operations, and what a read-modify-write does to a value.
#pragma once

#include <cstdint>
#include <string>

namespace smart::check {

// Paces a worker's operations over `duration_s` seconds. With `ops` > 0 a
// worker issues at most `ops` operations, one on each tick of a period of
// duration / ops, ticks counted from 0 on the monotonic clock: every worker
// of every process with the same period starts an operation at the same
// instant, so that on the hot keys they overlap, and a recorded history
// stays small enough to check. With `ops` = 0 operations go back to back.
class Pacer {
 public:
  Pacer(double duration_s, uint64_t ops);
  // Whether a worker that has issued `issued` operations issues another.
  bool more(uint64_t issued) const;
  // Waits for the next tick (with no ticks, returns at once).
  void wait_for_tick() const;

 private:
  const uint64_t end_;
  const uint64_t ops_;
  const uint64_t period_;
};

// What the checkers' read-modify-write does to a value, exactly as the
// linearizability checker's model (test/linearizability/model.go, Bump): a
// value ending in "+N" (N a number in canonical decimal that fits 64 bits)
// ends in "+N+1" instead (wrapping as Go's uint64 does); any other value gets
// "+1" appended.
std::string Bump(const std::string& value);

}  // namespace smart::check
