// SMART-BT structure changes: leaf splits, internal inserts and splits, and
// new roots.
//
// Order of writes (a split never leaves a page half-written): the new right
// page N is written in full while nothing points at it; then the split page
// P is written in full with its new fences and its sibling link to N, and
// unlocked in the same doorbell; only then is the separator inserted into
// the parent, under the parent's own lock (no task ever holds two page
// locks). A client that dies between the steps leaves either an unreachable
// N (leaked) or an N reachable through P's sibling link whose separator is
// missing in the parent: both are valid trees.
//
// New root: when P was the root, a new internal page (leftmost P, one entry
// for N) is written and installed with one CAS on the root pointer. A CAS
// that fails means another client installed a root first; the separator
// then goes into the page at the parent level found by a new descent. A
// client that needs a level above a root that split but has no new root
// (its splitter died) installs that root itself.
//
// Outcomes: a leaf split is the insert of its new entry, which becomes
// visible with the write of P; from then on the insert took effect, and
// what the parent insert meets (a lock lost, a blade gone) is left to the
// clients that pass by. Internal inserts and new roots only shorten the
// way to pages already linked, so their errors are nobody's outcome.
//
// Unfinished splits: a writer that had to move right from leaf P to its
// sibling makes sure the parent holds (P.max -> sibling) once its own write
// is done (repair_links, operations.cc; likewise for an internal page a
// descent moved right from); an internal insert of a separator
// already present writes nothing, so this costs a lock and a read when the
// splitter was merely slower.
#include "smart/fault_injection.h"
#include "tree_internal.h"

namespace smart::btree {

Status Ops::alloc_page(GlobalAddress* out) {
  const node_t node = static_cast<node_t>(tc_.next_node++ % static_cast<uint32_t>(tree_.nodes_));
  Status s = in_.alloc_memory(node, kPageSize, out);
  if (!s.ok()) return s;
  if ((out->offset & (kPageSize - 1)) != 0) {
    return Status::Internal("B+tree: the remote allocator returned a page not aligned to 1024 bytes");
  }
  return Status::OK();
}

Status Ops::split_leaf(PageLock* lock, TaskBuffers& tb, const LeafEntry& entry, Path* path, BackoffGuard& guard) {
  GlobalAddress right;
  Status s = alloc_page(&right);
  if (!s.ok()) {
    Status u = unlock(lock);
    (void)u;
    return s;
  }
  const GlobalAddress page = lock->page;
  const uint64_t split_key = SplitLeaf(tb.page, entry, right, tb.right);
  s = in_.write(tb.right, right, kPageSize, Option::kNone);
  if (s.ok()) s = sync();
  if (!s.ok()) {
    Status u = unlock(lock);
    (void)u;
    return s;
  }
  FaultPoint("bt.split.leaf.sibling_written");
  // Until P's write lands, N (and the new entry, in P or N) is unreachable:
  // a plain error here means the insert did not take effect.
  s = write_and_unlock(lock, tb.page, page, kPageSize, kLeafSplitWrite);
  if (!s.ok()) return s;
  ++tc_.stats.leaf_splits;
  FaultPoint("bt.split.leaf.linked");
  // The entry is visible now, through P or P's sibling link: the insert took
  // effect. The separator in the parent only saves readers a hop; one that
  // is missing is added by the next writer that moves right from P.
  Status parent = insert_parent(1, split_key, right, page, path, guard);
  (void)parent;
  return Status::OK();
}

Status Ops::insert_parent(int level, uint64_t key, GlobalAddress child, GlobalAddress left, Path* path,
                          BackoffGuard& guard) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  if (level > kMaxLevel) return Status::Internal("B+tree: the tree would grow beyond " + std::to_string(kMaxLevel) + " levels");
  RetryBound bound(options_);
  for (;;) {
    GlobalAddress parent;
    if (path->root_level >= level) parent = path->at[level];
    if (parent.is_null()) {
      GlobalAddress root_page;
      s = root(true, &root_page);
      if (!s.ok()) return s;
      if (root_page == left) {
        // `left` is the root: grow the tree by one level.
        GlobalAddress fresh;
        s = alloc_page(&fresh);
        if (!s.ok()) return s;
        PageHeader h;
        h.min = 0;
        h.unbounded = true;
        h.level = static_cast<uint8_t>(level);
        h.leftmost = left;
        h.version = 1;
        const InternalEntry first{key, child};
        BuildInternal(tb->right, h, &first, 1);
        s = in_.write(tb->right, fresh, kPageSize, Option::kNone);
        if (s.ok()) s = sync();
        if (!s.ok()) return s;
        FaultPoint("bt.root.written");
        s = in_.compare_and_swap(tb->words, tree_.root_word_, left.raw, fresh.raw, Option::kNone);
        if (s.ok()) s = sync();
        if (!s.ok()) return s;
        if (tb->words[0] == left.raw) {
          tc_.root = fresh;
          ++tc_.stats.root_changes;
          return Status::OK();
        }
        // Another client grew the tree first.
        in_.free_memory(fresh, kPageSize);
        tc_.root = GlobalAddress(tb->words[0]);
      }
      s = descend(key, level, tb->page, path, &parent);
      if (s.code() == Status::Code::kNotFound) {
        // The root is still below `level` and is not `left`: the root split
        // and its new root is not installed, because its splitter is about
        // to or died before. Install it (a CAS decides between the two).
        s = read_page(root_page, tb->page);
        if (!s.ok()) return s;
        const PageHeader rh = DecodeHeader(tb->page);
        if (!rh.sibling.is_null() && !rh.unbounded && rh.level + 1 == level) {
          s = insert_parent(level, rh.max, rh.sibling, root_page, path, guard);
          if (!s.ok()) return s;
        }
        bound.why = "the tree's new root does not appear";
        if (!bound.next()) return bound.status();
        continue;
      }
      if (!s.ok()) return s;
    }
    return internal_insert(parent, level, key, child, path, guard);
  }
}

Status Ops::internal_insert(GlobalAddress page, int level, uint64_t key, GlobalAddress child, Path* path,
                            BackoffGuard& guard) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  RetryBound bound(options_);
  for (;;) {
    PageLock lock;
    s = lock_and_read(page, tb->page, guard, bound, &lock);
    if (!s.ok()) return s;
    if (!PageConsistent(tb->page)) {
      ++tc_.stats.torn_reads;
      s = unlock(&lock);
      if (!s.ok()) return s;
      bound.why = "a locked internal page keeps failing its check";
      if (!bound.next()) return bound.status();
      continue;
    }
    const PageHeader h = DecodeHeader(tb->page);
    if (h.level != level || key < h.min) {
      s = unlock(&lock);
      if (!s.ok()) return s;
      bound.why = "the parent of a split keeps moving";
      if (!bound.next()) return bound.status();
      s = descend(key, level, tb->page, path, &page);
      if (!s.ok()) return s;
      continue;
    }
    if (h.right_of(key)) {
      s = unlock(&lock);
      if (!s.ok()) return s;
      ++tc_.stats.moved_right;
      page = h.sibling;
      bound.why = "sibling links keep leading to internal pages whose fences exclude the separator";
      if (!bound.next()) return bound.status();
      continue;
    }
    const int present = FindInternalKey(tb->page, h, key);
    if (present >= 0 && ReadInternalEntry(tb->page, present).child == child) {
      // Already there (a repeated separator insert): nothing to write.
      return unlock(&lock);
    }
    if (InsertInternal(tb->page, key, child)) {
      SealPage(tb->page, TaggedVersion(h.version + 1, false));
      return write_and_unlock(&lock, tb->page, page, kPageSize, kInternalWrite);
    }
    GlobalAddress right;
    s = alloc_page(&right);
    if (!s.ok()) {
      Status u = unlock(&lock);
      (void)u;
      return s;
    }
    const uint64_t up = SplitInternal(tb->page, key, child, right, tb->right);
    s = in_.write(tb->right, right, kPageSize, Option::kNone);
    if (s.ok()) s = sync();
    if (!s.ok()) {
      Status u = unlock(&lock);
      (void)u;
      return s;
    }
    FaultPoint("bt.split.internal.sibling_written");
    s = write_and_unlock(&lock, tb->page, page, kPageSize, kInternalWrite);
    if (!s.ok()) return s;
    ++tc_.stats.internal_splits;
    FaultPoint("bt.split.internal.linked");
    return insert_parent(level + 1, up, right, page, path, guard);
  }
}

}  // namespace smart::btree
