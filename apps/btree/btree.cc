// SMART-BT: the public façade. A call finds the calling thread's context
// and hands the work to Ops, whose files are listed in tree_internal.h.
#include "btree.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>

#include "tree_internal.h"

namespace smart::btree {

const Status& NotFoundStatus() {
  static const Status s = Status::NotFound("key not found");
  return s;
}

Status Ops::alloc_task_buffers(TaskBuffers& tb, TaskBuffers** out) {
  const size_t block_bytes = kMaxBlockUnits * kBlockUnit;
  char* area = static_cast<char*>(in_.alloc_cache(2 * kPageSize + kLineSize + 2 * block_bytes + 16 * 8));
  if (area == nullptr) return Status::OutOfMemory("B+tree: the initiator cache is exhausted");
  tb.page = area;
  tb.right = area + kPageSize;
  tb.line = tb.right + kPageSize;
  tb.block = tb.line + kLineSize;
  tb.new_block = tb.block + block_bytes;
  tb.words = reinterpret_cast<uint64_t*>(tb.new_block + block_bytes);
  *out = &tb;
  return Status::OK();
}

namespace {

// The local lock state of every client (initiator) and tree in the process,
// found by the initiator and the tree's lock table on memory node 0: BTree
// objects of one client on one tree share it (tree_internal.h, LocalLocks).
std::shared_ptr<BTree::LocalLocks> OpenLocalLocks(Initiator& initiator, GlobalAddress lock_table, int nodes) {
  static std::mutex mutex;
  static std::map<std::pair<const Initiator*, uint64_t>, std::weak_ptr<BTree::LocalLocks>> open;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = open.begin(); it != open.end();) it = it->second.expired() ? open.erase(it) : std::next(it);
  auto& slot = open[{&initiator, lock_table.raw}];
  std::shared_ptr<BTree::LocalLocks> locks = slot.lock();
  if (locks == nullptr) {
    locks = std::make_shared<BTree::LocalLocks>(nodes);
    slot = locks;
  } else if (locks->nodes != nodes) {
    throw Error("B+tree: this initiator has the tree open on " + std::to_string(locks->nodes) +
                " memory nodes already; another BTree object of it asks for " + std::to_string(nodes));
  }
  return locks;
}

}  // namespace

BTree::BTree(Initiator& initiator, const SmartConfig& config, int nodes, const TreeOptions& options)
    : initiator_(initiator), config_(config), options_(options), nodes_(nodes),
      contexts_([this] { return make_context(); }) {
  this_task::require_outside("B+tree: opening the tree");
  if (nodes < 1 || nodes > kMaxNodes) throw Error("B+tree: the number of memory nodes must be within 1..256");
  if (options_.speculative_cache_entries & (options_.speculative_cache_entries - 1)) {
    throw Error("B+tree: speculative_cache_entries must be a power of two");
  }
  for (int i = 0; i < nodes; ++i) {
    if (!initiator_.connected(static_cast<node_t>(i))) {
      throw Error("B+tree: memory node " + std::to_string(i) + " is not connected");
    }
  }
  OpenTree(initiator_, nodes_, options_.lease, &lock_tables_, &root_word_);
  local_locks_ = OpenLocalLocks(initiator_, lock_tables_[0], nodes_);
}

BTree::~BTree() = default;

BTree::ThreadContext& BTree::context() { return contexts_.get(); }

// Called on the thread that will use the context, on its first operation.
std::unique_ptr<BTree::ThreadContext> BTree::make_context() {
  const int id = ThreadId();
  auto tc = std::make_unique<ThreadContext>(config_, options_.index_cache_pages, &index_cache_used_,
                                            options_.index_cache_budget_pages);
  tc->next_lock_lease = static_cast<uint32_t>(std::random_device()());
  BlockPoolOptions pool;
  pool.unit = kBlockUnit;
  pool.max_units = kMaxBlockUnits;
  pool.arena_bytes = kBlockArenaBytes;
  pool.grace_ns = options_.reclaim_grace_ns;
  pool.tag_bits = 4;
  tc->blocks = std::make_unique<BlockPool>(initiator_, pool);
  if (options_.speculative_lookup && options_.speculative_cache_entries > 0) {
    tc->speculative.resize(options_.speculative_cache_entries);
    tc->speculative_mask = options_.speculative_cache_entries - 1;
  }
  for (int i = 0; i < nodes_; ++i) tc->sessions.push_back(initiator_.session(static_cast<node_t>(i)));
  tc->waker.mailbox = &local_locks_->mailboxes[id];
  // Threads start placing new pages on different blades.
  tc->next_node = static_cast<uint32_t>(id);
  return tc;
}

Status BTree::search(uint64_t key, std::string* value) {
  ThreadContext& tc = context();
  // The speculative entry is a likely cache miss: start loading it now.
  if (!tc.speculative.empty()) __builtin_prefetch(&tc.speculative[MixKey(key) & tc.speculative_mask]);
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.search(key, value);
}

Status BTree::insert(uint64_t key, std::string_view value) {
  ThreadContext& tc = context();
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.write(key, WriteMode::kUpsert, value, nullptr);
}

Status BTree::update(uint64_t key, std::string_view value) {
  ThreadContext& tc = context();
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.write(key, WriteMode::kUpdate, value, nullptr);
}

Status BTree::read_modify_write(uint64_t key, const std::function<void(std::string*)>& modify) {
  ThreadContext& tc = context();
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.write(key, WriteMode::kReadModifyWrite, std::string_view(), &modify);
}

Status BTree::remove(uint64_t key) {
  ThreadContext& tc = context();
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.remove(key);
}

Status BTree::scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, std::string>>* out) {
  ThreadContext& tc = context();
  ++tc.stats.operations;
  Ops ops(*this, tc);
  return ops.scan(start, count, out);
}

Status BTree::height(int* levels) {
  Ops ops(*this, context());
  TaskBuffers* tb = nullptr;
  Status s = ops.task_buffers(&tb);
  if (!s.ok()) return s;
  GlobalAddress root;
  s = ops.root(true, &root);
  if (!s.ok()) return s;
  s = ops.read_page(root, tb->page);
  if (!s.ok()) return s;
  *levels = DecodeHeader(tb->page).level + 1;
  return Status::OK();
}

Status BTree::leaf_of(uint64_t key, GlobalAddress* page) {
  Ops ops(*this, context());
  TaskBuffers* tb = nullptr;
  Status s = ops.task_buffers(&tb);
  if (!s.ok()) return s;
  Path path;
  return ops.descend(key, 0, tb->page, &path, page);
}

Status BTree::check_leaves(uint64_t* keys) {
  *keys = 0;
  Ops ops(*this, context());
  TaskBuffers* tb = nullptr;
  Status s = ops.task_buffers(&tb);
  if (!s.ok()) return s;
  Path path;
  GlobalAddress leaf;
  s = ops.descend(0, 0, tb->page, &path, &leaf);
  if (!s.ok()) return s;
  uint64_t expected_min = 0;
  LeafEntry entries[kPageEntries];
  for (uint64_t pages = 0;; ++pages) {
    const PageHeader h = DecodeHeader(tb->page);
    const std::string where = "leaf " + std::to_string(pages) + " at " + leaf.to_string();
    if (!h.is_leaf()) return Status::Internal(where + " is not a leaf");
    if (h.min != expected_min) {
      return Status::Internal(where + " starts at " + std::to_string(h.min) + ", its left neighbour ends at " +
                              std::to_string(expected_min));
    }
    const int n = CollectLeafEntries(tb->page, entries);
    std::sort(entries, entries + n, [](const LeafEntry& a, const LeafEntry& b) { return a.key < b.key; });
    for (int i = 0; i < n; ++i) {
      if (!h.covers(entries[i].key)) return Status::Internal(where + " holds key " + std::to_string(entries[i].key) + " outside its fences");
      if (i > 0 && entries[i].key == entries[i - 1].key) {
        return Status::Internal(where + " holds key " + std::to_string(entries[i].key) + " twice");
      }
    }
    *keys += static_cast<uint64_t>(n);
    if (h.unbounded) {
      if (!h.sibling.is_null()) return Status::Internal(where + " has no upper fence but a sibling");
      return Status::OK();
    }
    if (h.sibling.is_null()) return Status::Internal(where + " has an upper fence but no sibling");
    if (h.max <= h.min) return Status::Internal(where + " has empty fences");
    expected_min = h.max;
    leaf = h.sibling;
    s = ops.read_page(leaf, tb->page);
    if (!s.ok()) return s;
  }
}

TreeStats BTree::stats() const { return SumStoreStats(contexts_); }

}  // namespace smart::btree
