/// @file
/// The YCSB driver: loads keys into any KvStore and runs a workload (A-F,
/// update-only, read-only) on threads x coroutines for a fixed time. Only
/// operations that succeeded count toward throughput and latency; misses
/// (kNotFound) and failures are counted apart and reported. With `verify`,
/// every value written carries its key and every value read is checked.
#pragma once

#include <cstdint>
#include <string>

#include "smart/bench/bench.h"
#include "smart/bench/kv_store.h"

namespace smart {

/// Most keys a loader's task hands to KvStore::load_batch in one call.
constexpr int kMaxLoadBatch = 64;

/// What to load and run.
struct YcsbOptions {
  std::string dataset = "ycsb-c";  ///< workload name
  uint64_t max_key = 0;  ///< keys loaded (0 .. max_key-1)
  int key_length = 8;  ///< characters of a key
  int value_length = 8;  ///< bytes of a value
  double zipf = 0.99;  ///< zipfian constant
  double duration = 5;  ///< seconds of the run
  bool rehash_key = false;  ///< permute key ids before formatting
  bool load = true;      ///< insert keys 0..max_key-1 before the run
  /// No other client loads at the same time: the load uses KvStore::load,
  /// which may skip the work against racing inserts of one key.
  bool sole_loader = false;
  /// Keys a sole loader's task hands to KvStore::load_batch at a time
  /// (0..kMaxLoadBatch; 0: the store's KvStore::preferred_load_batch; 1: load() one by
  /// one). Unused without sole_loader.
  int load_batch = 0;
  bool verify = false;   ///< values carry their key; reads check it
  int threads = 1;  ///< worker threads
  int coros = 1;  ///< coroutines per thread
  bool progress = true;  ///< a progress line while loading (on a terminal)
  uint64_t idle_ns = 0;  ///< each coroutine idles this long after each operation (IDLE_USEC)
};

/// Throws smart::Error naming the first value that makes no sense: an
/// unknown dataset, max_key 0, a duration not above 0, key or value length
/// out of range, a key length with too few digits for max_key, a zipfian
/// constant outside [0, 1), thread or coroutine counts out of range, and
/// scan workloads on a store without scan.
void CheckYcsbOptions(const YcsbOptions& options, const KvStore& store);

/// What a run did.
struct YcsbResult {
  uint64_t succeeded = 0;  ///< operations that succeeded
  uint64_t not_found = 0;  ///< misses (kNotFound)
  uint64_t failed = 0;          ///< errors, and (verify) wrong values
  uint64_t wrong_values = 0;    ///< of the failures: values that did not hold their key
  uint64_t scans = 0;           ///< of the successes: scans
  uint64_t scanned_keys = 0;    ///< keys returned by the scans that succeeded
  std::string first_failure;    ///< what the first failure said
  double seconds = 0;  ///< measured run time
  uint64_t retries = 0;  ///< the store's retries during the run
  Histogram latency;            ///< successes only, nanoseconds
  /// Successful operations per second, in millions.
  double mops() const { return seconds > 0 ? static_cast<double>(succeeded) / seconds / 1e6 : 0; }
};

/// Inserts keys 0..max_key-1 (permuted with rehash_key). Throws smart::Error
/// on the first failure. Returns the seconds it took.
double YcsbLoad(KvStore& store, const YcsbOptions& options);
/// Runs the workload for options.duration seconds. An operation that fails
/// (other than a miss or a wrong value) stops the run; the result says so.
YcsbResult YcsbRun(KvStore& store, const YcsbOptions& options);


}  // namespace smart
