/// @file
/// What every data structure built on the framework lets its user set in
/// the same way: speculative lookup, the grace period of reused blocks, the
/// lease of its remote locks, and how long an operation keeps retrying.
///
/// SMART-HT's `TableOptions` and SMART-BT's `TreeOptions` derive from it and
/// add their own; a program that sets these four for either store (a bench,
/// a checker) writes them once, for a `StoreOptions&`.
#pragma once

#include <cstdint>

#include "smart/remote_lock.h"

namespace smart {

/// The options every store of the framework takes (see the file's
/// description); a store's own options struct derives from it.
struct StoreOptions {
  /// Speculative lookup: each thread remembers where it last found a key
  /// and reads only that place first (the store's own cache size decides
  /// how many keys it remembers).
  bool speculative_lookup = false;
  /// A retired block (an old value's) is reused only after this long, so
  /// that a reader that still holds its address finds it unchanged or
  /// notices the reuse by its tag (BlockPoolOptions::grace_ns).
  uint64_t reclaim_grace_ns = 20000000;
  /// The lease of the store's remote locks and of its build claim: a holder
  /// that stopped is taken over (and fenced) after this, a dead one as soon
  /// as its memory blade saw its session close.
  LeaseOptions lease;
  /// An operation that keeps meeting the same obstacle (a torn page or
  /// block, a lock held by a live client, a structure that makes no sense)
  /// for this long gives up with Status kTimedOut: an error, never a loop.
  /// Time the process did not run does not count.
  uint64_t retry_timeout_ns = 10000000000;
};

}  // namespace smart
