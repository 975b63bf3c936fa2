#include "smart/block_pool.h"

#include <algorithm>
#include <string>

#include "smart/initiator.h"
#include "smart/task.h"

namespace smart {

namespace {

// Retired blocks moved to the free lists per allocation, so one call never
// pays for a long backlog at once.
constexpr int kReclaimPerAllocation = 64;

inline uint64_t Entry(uint64_t offset, uint8_t tag) { return offset << 8 | tag; }

}  // namespace

BlockPool::BlockPool(Initiator& initiator, const BlockPoolOptions& options)
    : initiator_(initiator),
      options_(options),
      grace_cycles_(static_cast<uint64_t>(static_cast<double>(options.grace_ns) * CyclesPerNanosecond()) + 1),
      wrap_cycles_(std::max(grace_cycles_, static_cast<uint64_t>(static_cast<double>(options.wrap_guard_ns) *
                                                                 CyclesPerNanosecond()) + 1)),
      tag_mask_(static_cast<uint8_t>((1u << options.tag_bits) - 1)),
      max_units_(static_cast<size_t>(options.max_units < 0 ? 0 : options.max_units)) {
  if (options.unit < 8 || (options.unit & (options.unit - 1)) != 0) {
    throw Error("block pool: unit must be a power of two of at least 8 bytes, got " + std::to_string(options.unit));
  }
  if (options.max_units < 1) throw Error("block pool: max_units must be at least 1");
  if (options.tag_bits < 1 || options.tag_bits > 8) throw Error("block pool: tag_bits must be within 1..8");
  if (options.arena_bytes % options.unit != 0 || options.arena_bytes < options.unit * options.max_units) {
    throw Error("block pool: arena_bytes must be a multiple of the unit and hold the largest block");
  }
}

BlockPool::~BlockPool() = default;

BlockPool::NodePool& BlockPool::add_node_pool(node_t node) {
  if (node >= nodes_.size()) nodes_.resize(size_t{node} + 1);
  std::unique_ptr<NodePool>& p = nodes_[node];
  if (!p) {
    p = std::make_unique<NodePool>();
    p->free.resize(static_cast<size_t>(options_.max_units) + 1);
  }
  return *p;
}

// Moves retired blocks whose grace period (or wrap guard) has passed to the
// free lists. Each queue is in retire order, so it stops at its first block
// still waiting.
void BlockPool::reclaim(NodePool& p) {
  const uint64_t now = Cycles();
  int moved = 0;
  for (; moved < kReclaimPerAllocation && !p.limbo.empty(); ++moved) {
    const Retired& r = p.limbo.front();
    if (now - r.cycles < grace_cycles_) break;
    p.free[r.units].push_back(r.entry);
    p.limbo.pop_front();
  }
  for (; moved < kReclaimPerAllocation && !p.wrapped.empty(); ++moved) {
    const Retired& r = p.wrapped.front();
    if (now - r.cycles < wrap_cycles_) break;
    p.free[r.units].push_back(r.entry);
    p.wrapped.pop_front();
  }
}

// Takes a new arena when the current one has fewer than `bytes` left.
Status BlockPool::refill(node_t node, NodePool& p, uint64_t bytes) {
  while (p.arena_next + bytes > p.arena_end) {
    // One task of the thread refills the arena; the others wait for it.
    if (p.arena_refilling) {
      this_task::yield();
      continue;
    }
    GlobalAddress arena;
    p.arena_refilling = true;
    Status s = initiator_.alloc_memory(node, options_.arena_bytes, &arena);
    p.arena_refilling = false;
    if (!s.ok()) return s;
    if (options_.offset_limit != 0 && arena.offset + options_.arena_bytes > options_.offset_limit) {
      return Status::OutOfMemory("block pool: memory node " + std::to_string(node) + " handed out memory at " +
                                 std::to_string(arena.offset >> 20) + " MiB, beyond the " +
                                 std::to_string(options_.offset_limit >> 20) + " MiB the application can address");
    }
    // The rest of the old arena is dropped: it is smaller than this block.
    p.arena_next = arena.offset;
    p.arena_end = arena.offset + options_.arena_bytes;
    stats_.bytes_allocated += options_.arena_bytes;
  }
  return Status::OK();
}

Status BlockPool::allocate_slow(node_t node, size_t units, Block* out) {
  if (units < 1 || units > static_cast<size_t>(options_.max_units)) {
    return Status::InvalidArgument("block pool: a block of " + std::to_string(units) + " units (at most " +
                                   std::to_string(options_.max_units) + ")");
  }
  NodePool& p = node_pool(node);
  if (!p.limbo.empty() || !p.wrapped.empty()) reclaim(p);
  std::vector<uint64_t>& list = p.free[units];
  if (!list.empty()) {
    take(list, node, units, out);
    return Status::OK();
  }
  const uint64_t bytes = units * options_.unit;
  Status s = refill(node, p, bytes);
  if (!s.ok()) return s;
  out->address = GlobalAddress(node, p.arena_next);
  out->tag = 0;
  out->units = static_cast<uint32_t>(units);
  p.arena_next += bytes;
  return Status::OK();
}

void BlockPool::release(const Block& block) {
  NodePool& p = node_pool(static_cast<node_t>(block.address.node));
  p.free[block.units].push_back(Entry(block.address.offset, block.tag));
  ++stats_.blocks_released;
}

size_t BlockPool::retired_pending() const {
  size_t n = 0;
  for (const auto& p : nodes_) {
    if (p) n += p->limbo.size() + p->wrapped.size();
  }
  return n;
}

}  // namespace smart
