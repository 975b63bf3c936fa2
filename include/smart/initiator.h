/// @file
/// The compute-blade side: coroutine verbs on remote memory.
///
/// Every thread that calls into an Initiator gets its own queue pair to each
/// memory blade, one completion queue shared by them, and (where the device
/// can) its own doorbell. A task queues work requests into its private batch
/// (at most kMaxBatchSize, all to one memory blade), posts the batch with one
/// doorbell, and parks in sync() until its requests completed; the thread's
/// scheduler drains the completion queue between task switches. Outside a
/// task (task 0) sync() polls inline.
///
/// Errors: setup calls throw smart::Error; data-path calls return Status and
/// never throw or exit. A failed completion reaches the task that posted it;
/// after it the queue pair to that memory blade is broken (as on a NIC) and
/// later calls from that thread to that blade fail fast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "smart/common.h"
#include "smart/config.h"
#include "smart/status.h"
#include "smart/transport_kind.h"

namespace smart {

/// A compute blade's access to memory blades: connections, coroutine verbs, remote allocation. One per process is typical; every thread and task uses it.
class Initiator {
 public:
  /// Opens the transport, maps and registers initiator_cache_size MiB of
  /// local buffer, and starts the credit tuner if configured. Throws.
  explicit Initiator(const SmartConfig& config);
  /// Disconnects every memory blade and releases the transport.
  ~Initiator();
  Initiator(const Initiator&) = delete;
  Initiator& operator=(const Initiator&) = delete;

  /// Connects memory blade `node` at host:port with `qp_count` queue pairs,
  /// one for each thread that will use it (threads beyond that count fail
  /// unless experimental.qp_sharing is on). A blade that says it is busy
  /// (its max_startups) is tried again until connect_timeout_ms has passed.
  /// A non-zero `pool_id` pins the blade's pool: a blade serving another
  /// is refused. Throws smart::Error.
  void connect(node_t node, const std::string& host, int port, int qp_count, uint64_t pool_id = 0);
  /// Closes the connection to memory blade `node` (nothing when not connected).
  void disconnect(node_t node);
  /// True while memory blade `node` is connected.
  bool connected(node_t node) const;
  /// Size in bytes of a memory blade's main memory region.
  uint64_t remote_capacity(node_t node) const;
  /// This client's session on memory blade `node` (slot 0 when not
  /// connected): the owner that lock words on that blade name.
  SessionId session(node_t node) const;

  /// A buffer inside the registered cache, 64-byte aligned; nullptr when
  /// the cache is exhausted. Thread-safe; never freed.
  void* alloc_cache(size_t size);

  /// One-sided operations. `local` must come from alloc_cache(). With
  /// Option::kNone the request is only queued in the task's batch, kPost
  /// posts the batch, kSync posts it and waits for everything the task
  /// queued. For CAS and FAA the old remote value lands in *local.
  Status read(void* local, GlobalAddress remote, size_t length, Option option = Option::kSync);
  /// WRITE of `length` bytes from `local` to `remote`.
  Status write(const void* local, GlobalAddress remote, size_t length, Option option = Option::kSync);
  /// CAS of the 8-byte word at `remote`: `desired` if it held `expected`.
  Status compare_and_swap(uint64_t* local, GlobalAddress remote, uint64_t expected, uint64_t desired,
                          Option option = Option::kSync);
  /// FAA: adds `add` to the 8-byte word at `remote`.
  Status fetch_and_add(uint64_t* local, GlobalAddress remote, uint64_t add, Option option = Option::kSync);
  /// Masked compare-and-swap: succeeds when the bits of `compare_mask` equal
  /// those of `compare`, and then replaces only the bits of `swap_mask` with
  /// those of `swap`; the old word lands in *local either way (success:
  /// ((*local ^ compare) & compare_mask) == 0). Masked atomics exist only in
  /// the vendor's old experimental verbs (ibv_exp_post_send); upstream
  /// rdma-core, which Debian ships, has none and no provider-specific (mlx5dv)
  /// form either, so this is emulated on every transport: a READ, then a CAS of
  /// the whole word, repeated while only bits outside compare_mask change
  /// under it (2 round trips uncontended); kRetry after 64 such rounds.
  /// Always synchronous; `local` must hold 2 words of alloc_cache() memory.
  Status masked_compare_and_swap(uint64_t* local, GlobalAddress remote, uint64_t compare, uint64_t compare_mask,
                                 uint64_t swap, uint64_t swap_mask);
  /// Posts the task's batch with one doorbell (waits for credit if throttled).
  Status post_request();
  /// Posts the batch and waits until every request the task posted has
  /// completed; returns the first failure among them.
  Status sync();

  /// Remote memory: size classes 8 B .. 16 KiB from per-thread free lists,
  /// refilled from 16 KiB chunks taken by remote CAS on the memory blade's
  /// super chunk; sizes of a chunk or more take whole chunks.
  Status alloc_memory(node_t node, size_t size, GlobalAddress* out);
  /// Returns memory to the calling thread's free lists.
  void free_memory(GlobalAddress addr, size_t size);
  /// Writes root entry `index` (0..kMaxRootEntries-1) of memory blade `node`.
  Status set_root_entry(node_t node, int index, uint64_t value);
  /// Reads root entry `index` of memory blade `node` into *value.
  Status get_root_entry(node_t node, int index, uint64_t* value);

  /// Polls the calling thread's completion queues once; returns the number
  /// of completions handled. Tasks never need this (their scheduler polls).
  int poll_once();
  /// Gives up the calling thread's queue pairs so another thread can take
  /// them. Precondition: nothing in flight from this thread.
  void release_thread();

  /// The configuration it was built with.
  const SmartConfig& config() const;
  /// The transport in use.
  TransportKind transport() const;
  /// Current work-request bound per thread (set by the tuner).
  int credit_bound() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace smart
