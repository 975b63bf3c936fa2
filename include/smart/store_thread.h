/// @file
/// What one thread of a data structure's client takes from the framework's
/// services: backoff under conflict avoidance and a block pool for its
/// out-of-place blocks. An application's per-thread context (kept in a
/// PerThread) derives from StoreThread, and its statistics are summed in one
/// place, SumStoreStats, so every structure reports the services' counters
/// under the same names.
#pragma once

#include <cstdint>
#include <memory>

#include "smart/block_pool.h"
#include "smart/config.h"
#include "smart/per_thread.h"
#include "smart/throttle.h"

namespace smart {

/// The framework services one thread of a data structure uses. The thread's
/// application context derives from it; `blocks` is built with the context,
/// on the thread's first operation.
struct StoreThread {
  /// `config` sets the backoff (conflict_avoidance).
  explicit StoreThread(const SmartConfig& config) : backoff(config) {}
  Backoff backoff;                    ///< this thread's admission, backoff and retry counts
  std::unique_ptr<BlockPool> blocks;  ///< this thread's blocks (null until the store builds it)
};

/// The counters of `Stats`, summed over every context of `contexts` (threads
/// quiet), with the services' counters filled in from the services
/// themselves. `Context` derives from StoreThread and has a member `stats` of
/// type `Stats`, a struct of uint64_t counters (AddCounters) that includes
/// `retries`, `blocks_retired`, `blocks_reused`, `blocks_released` and
/// `remote_bytes_allocated`; a thread's own copies of those stay 0.
template <typename Context>
auto SumStoreStats(const PerThread<Context>& contexts) {
  auto total = contexts.sum_of([](const Context& c) { return c.stats; });
  const BlockPoolStats pools =
      contexts.sum_of([](const Context& c) { return c.blocks ? c.blocks->stats() : BlockPoolStats{}; });
  total.retries = contexts.sum_of([](const Context& c) { return c.backoff.total_retries(); });
  total.blocks_retired = pools.blocks_retired;
  total.blocks_reused = pools.blocks_reused;
  total.blocks_released = pools.blocks_released;
  total.remote_bytes_allocated = pools.bytes_allocated;
  return total;
}

}  // namespace smart
