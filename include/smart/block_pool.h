/// @file
/// The block pool: out-of-place blocks on memory blades for data structures
/// that publish a block with one CAS of a pointer (hash-table values, B+tree
/// leaves, transaction records), and reclamation that is safe against
/// one-sided readers that may still hold an old pointer.
///
/// Blocks come in size classes of `unit` bytes (1 .. max_units units), cut
/// from arenas that the pool takes with Initiator::alloc_memory. A block that
/// was published and then unlinked is retired: it may still be read by a
/// client that loaded the old pointer, so it is reused only after a grace
/// period, and each reuse bumps the block's reuse tag. The application keeps
/// the tag both next to its pointer and inside the block (with a checksum of
/// the block): a reader whose pointer's tag differs from the block's, or whose
/// checksum fails, has raced with a reuse and re-reads. A block that was never
/// published is released and reused at once, tag unchanged.
///
/// The tag has few bits, so a block's (address, tag) pair comes back after
/// 2^tag_bits reuses, and a client that read the pointer long before (a
/// stopped process) could take the block's new bytes for the old ones, or win
/// a CAS against a pointer word that only looks unchanged. With
/// `wrap_guard_ns` set, the retire that wraps a block's tag back to 0 makes it
/// wait that long instead of the grace period. Every cycle of the tag passes
/// through that retire once, so a pair (address, tag) is current again no
/// sooner than wrap_guard_ns after it was last current: a client that acts
/// on a pointer within that time after it read it never meets a recurrence.
///
/// Threads: one BlockPool per thread; the tasks of that thread share it (no
/// locks, nothing shared between threads). Setup throws smart::Error; the
/// data path returns Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "smart/common.h"
#include "smart/status.h"
#include "smart/task.h"

namespace smart {

class Initiator;

/// How a BlockPool cuts and recycles blocks.
struct BlockPoolOptions {
  /// Size-class granularity in bytes (a power of two, at least 8).
  size_t unit = 64;
  /// Largest block, in units.
  int max_units = 63;
  /// Bytes taken from a memory blade at a time (a multiple of the unit).
  uint64_t arena_bytes = 256 * 1024;
  /// A retired block is reused only after this long.
  uint64_t grace_ns = 20000000;
  /// Width of the reuse tag (1..8 bits); it wraps after 2^tag_bits reuses.
  int tag_bits = 4;
  /// A retire that wraps the tag back to 0 waits this long before the block
  /// is reused (0: the grace period, like any other); see above.
  uint64_t wrap_guard_ns = 0;
  /// Offsets a block may not reach (0: no limit), for applications that keep
  /// block offsets in fewer than 48 bits.
  uint64_t offset_limit = 0;
};

/// A block: where it is, how many units it spans, and its current reuse tag.
struct Block {
  GlobalAddress address;  ///< where the block starts
  uint32_t units = 0;  ///< its size in units
  uint8_t tag = 0;  ///< its reuse tag
};

/// What a BlockPool did so far.
struct BlockPoolStats {
  uint64_t bytes_allocated = 0;  ///< taken from the memory blades (whole arenas)
  uint64_t blocks_retired = 0;  ///< published blocks unlinked and retired
  uint64_t bytes_retired = 0;  ///< their bytes
  uint64_t blocks_reused = 0;    ///< allocations served by a retired block
  uint64_t bytes_reused = 0;  ///< their bytes
  uint64_t blocks_released = 0;  ///< never-published blocks handed back
};

/// One thread's blocks on every memory blade it uses, with grace-period reuse.
class BlockPool {
 public:
  /// Throws smart::Error on options that make no sense.
  BlockPool(Initiator& initiator, const BlockPoolOptions& options);
  /// Keeps every block (remote memory is not given back).
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  /// A block of `units` units on memory node `node`: a retired block whose
  /// grace period has passed, or fresh space from the node's arena (taking a
  /// new arena may park the task; other tasks of the thread wait for it).
  /// Inline fast path: a block from the size class's free list; every
  /// kReclaimEvery-th allocation, and whenever the list is empty, the slow
  /// path first moves retired blocks whose grace period passed.
  Status allocate(node_t node, size_t units, Block* out) {
    if (__builtin_expect(node < nodes_.size() && units >= 1 && units <= max_units_, 1)) {
      NodePool* p = nodes_[node].get();
      if (p != nullptr && (++p->allocations % kReclaimEvery) != 0) {
        std::vector<uint64_t>& list = p->free[units];
        if (!list.empty()) {
          take(list, node, units, out);
          return Status::OK();
        }
      }
    }
    return allocate_slow(node, units, out);
  }
  /// A published block that the caller's CAS unlinked: reused after the
  /// grace period (the wrap guard when its tag wraps), with its tag bumped.
  void retire(const Block& block) {
    NodePool& p = node_pool(static_cast<node_t>(block.address.node));
    const uint8_t tag = static_cast<uint8_t>((block.tag + 1) & tag_mask_);
    const Retired r{block.address.offset << 8 | tag, Cycles(), block.units};
    if (__builtin_expect(tag == 0, 0)) {
      p.wrapped.push_back(r);
    } else {
      p.limbo.push_back(r);
    }
    ++stats_.blocks_retired;
    stats_.bytes_retired += block.units * options_.unit;
  }
  /// A block from allocate() that was never published: reusable at once.
  void release(const Block& block);

  /// Counters so far.
  const BlockPoolStats& stats() const { return stats_; }
  /// The options in use.
  const BlockPoolOptions& options() const { return options_; }
  /// Retired blocks still waiting out their grace period.
  size_t retired_pending() const;

 private:
  struct Retired {
    uint64_t entry;  // offset << 8 | tag
    uint64_t cycles;
    uint32_t units;
  };
  struct NodePool {
    std::vector<std::vector<uint64_t>> free;  // per size class: offset << 8 | tag
    std::deque<Retired> limbo;    // waiting out the grace period
    std::deque<Retired> wrapped;  // tag wrapped to 0: waiting out the wrap guard
    uint64_t allocations = 0;
    uint64_t arena_next = 0;
    uint64_t arena_end = 0;
    bool arena_refilling = false;
  };

  // Allocations between two reclaim passes when the free list is not empty;
  // a pass moves up to 64 blocks, so the backlog of retired blocks cannot grow.
  static constexpr uint64_t kReclaimEvery = 32;

  NodePool& node_pool(node_t node) {
    if (__builtin_expect(node < nodes_.size() && nodes_[node] != nullptr, 1)) return *nodes_[node];
    return add_node_pool(node);
  }
  NodePool& add_node_pool(node_t node);
  Status allocate_slow(node_t node, size_t units, Block* out);
  void take(std::vector<uint64_t>& list, node_t node, size_t units, Block* out) {
    const uint64_t e = list.back();
    list.pop_back();
    out->address = GlobalAddress(node, e >> 8);
    out->tag = static_cast<uint8_t>(e);
    out->units = static_cast<uint32_t>(units);
    ++stats_.blocks_reused;
    stats_.bytes_reused += units * options_.unit;
  }
  void reclaim(NodePool& p);
  Status refill(node_t node, NodePool& p, uint64_t bytes);

  Initiator& initiator_;
  const BlockPoolOptions options_;
  const uint64_t grace_cycles_;
  const uint64_t wrap_cycles_;  // at least grace_cycles_
  const uint8_t tag_mask_;
  const size_t max_units_;
  std::vector<std::unique_ptr<NodePool>> nodes_;
  BlockPoolStats stats_;
};

}  // namespace smart
