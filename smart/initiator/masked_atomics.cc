// Masked atomics, emulated with READ and CAS (see initiator.h).
#include <string>

#include "smart/initiator.h"

namespace smart {

Status Initiator::masked_compare_and_swap(uint64_t* local, GlobalAddress remote, uint64_t compare,
                                          uint64_t compare_mask, uint64_t swap, uint64_t swap_mask) {
  constexpr int kRounds = 64;
  Status s = read(local, remote, 8, Option::kSync);
  if (!s.ok()) return s;
  uint64_t old = local[0];
  for (int round = 0; round < kRounds; ++round) {
    if ((old ^ compare) & compare_mask) {
      local[0] = old;  // the compared bits differ: fail, as a NIC's would
      return Status::OK();
    }
    const uint64_t desired = (old & ~swap_mask) | (swap & swap_mask);
    s = compare_and_swap(local, remote, old, desired, Option::kSync);
    if (!s.ok()) return s;
    if (local[0] == old) return Status::OK();
    old = local[0];  // changed under us: judge the new value
  }
  local[0] = old;
  return Status::Retry("masked compare-and-swap at " + remote.to_string() + ": the word kept changing for " +
                       std::to_string(kRounds) + " rounds");
}

}  // namespace smart
