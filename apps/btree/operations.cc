// SMART-BT writes: insert (upsert), update, read-modify-write and delete,
// and the value blocks of long values.
//
// Round trips with a free lock and no split: (1) the lock CAS and the leaf
// READ in one doorbell, (2) the write-back of the entry's 64-byte line and
// the release CAS in one doorbell. A long value's new block is written in
// the first doorbell. On a hand-over from a local waiter's predecessor the
// CAS and the release are skipped.
//
// Deletes clear the entry (its line is rewritten without it), so the key is
// never found again and the entry is free for the next insert into the
// leaf. Value blocks unlinked by an update or delete are retired into the
// thread's smart::BlockPool and reused after a grace period; their 4-bit tag
// (in the block and in the entry) and CRC let a reader that raced with a
// reuse notice it and read the leaf again.
#include "smart/fault_injection.h"
#include "tree_internal.h"

namespace smart::btree {

Status Ops::alloc_block(node_t node, uint32_t units, Block* out) { return tc_.blocks->allocate(node, units, out); }

void Ops::retire_block(const LeafEntry& e) {
  if (!e.valid() || !e.in_block()) return;
  tc_.blocks->retire(Block{GlobalAddress(e.value), e.block_units(), e.block_tag()});
}

void Ops::settle_blocks(const Status& s, Block* fresh, bool* have_fresh, const LeafEntry& old) {
  if (s.ok()) {
    // The leaf names the new block and no longer the old one.
    *have_fresh = false;
    retire_block(old);
  } else if (s.code() == Status::Code::kOutcomeUnknown) {
    // The leaf may name either block, now or once a write still in flight
    // lands: neither may ever be reused, so both are leaked.
    if (*have_fresh) ++tc_.stats.blocks_leaked;
    if (old.valid() && old.in_block()) ++tc_.stats.blocks_leaked;
    *have_fresh = false;
  } else if (*have_fresh) {
    // Nothing was written: no page names the new block.
    tc_.blocks->release(*fresh);
    *have_fresh = false;
  }
}

Status Ops::check_locked_leaf(uint64_t key, TaskBuffers& tb, PageLock* lock, Path* path, GlobalAddress* leaf,
                              bool* from_cache, uint64_t cached, RetryBound& bound, bool* again, MissingLink* link) {
  *again = true;
  // Only a way read from the remote tree says something about the parent:
  // a cached level-1 page is merely older than the separators it lacks.
  const bool fresh_way = !*from_cache;
  if (!PageConsistent(tb.page)) {
    // Under the lock a page is torn only while a write of a previous holder
    // (one that was slower than its lease) is still landing.
    ++tc_.stats.torn_reads;
    Status s = unlock(lock);
    if (!s.ok()) return s;
    bound.why = "a locked leaf keeps failing its check";
    if (!bound.next()) return bound.status();
    this_task::yield();
    return Status::OK();
  }
  const PageHeader h = DecodeHeader(tb.page);
  if (!h.is_leaf() || key < h.min || h.right_of(key)) {
    Status s = unlock(lock);
    if (!s.ok()) return s;
    if (*from_cache) {
      tc_.cache.invalidate(cached);
      ++tc_.stats.cache_invalidations;
      *from_cache = false;
    }
    if (h.is_leaf() && h.right_of(key)) {
      ++tc_.stats.moved_right;
      if (fresh_way && link->left.is_null()) *link = MissingLink{lock->page, h.max, h.sibling, 0};
      *leaf = h.sibling;
      bound.why = "sibling links keep leading to leaves whose fences exclude the key";
      return bound.next() ? Status::OK() : bound.status();
    }
    bound.why = "the key's leaf keeps moving";
    if (!bound.next()) return bound.status();
    return descend(key, 0, tb.page, path, leaf);
  }
  *again = false;
  return Status::OK();
}

Status Ops::write(uint64_t key, WriteMode mode, std::string_view value,
                  const std::function<void(std::string*)>* modify) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  if (value.size() > kMaxValueBytes) {
    return Status::InvalidArgument("B+tree: a value of " + std::to_string(value.size()) + " bytes is longer than " +
                                   std::to_string(kMaxValueBytes));
  }
  BackoffGuard guard(tc_.backoff);
  RetryBound bound(options_);
  Path path;
  GlobalAddress leaf;
  bool read = false, from_cache = false;
  uint64_t cached = 0;
  MissingLink link;
  s = find_leaf(key, tb->page, &path, &leaf, &read, &from_cache, &cached);
  if (!s.ok()) return s;

  // The new value's block. It is released (reused at once) only while no
  // page can name it: before the write that would, or when that write
  // certainly did not land (settle_blocks).
  Block block;
  bool have_block = false;
  auto drop_block = [&] {
    if (have_block) tc_.blocks->release(block);
    have_block = false;
  };
  // A long value goes to a new block on the leaf's blade, written in the
  // doorbell of the lock CAS.
  auto stage_block = [&](std::string_view v, node_t node) -> Status {
    const uint32_t units = BlockUnitsFor(v.size());
    Status st = alloc_block(node, units, &block);
    if (!st.ok()) return st;
    have_block = true;
    EncodeBlock(key, v, block.tag, units, tb->new_block);
    return in_.write(tb->new_block, block.address, units * kBlockUnit, Option::kNone);
  };
  if (mode != WriteMode::kReadModifyWrite && value.size() > kInlineValueBytes) {
    s = stage_block(value, static_cast<node_t>(leaf.node));
    if (!s.ok()) return s;
  }
  std::string modified;
  for (;;) {
    PageLock lock;
    s = lock_and_read(leaf, tb->page, guard, bound, &lock);
    if (!s.ok()) {
      drop_block();
      return s;
    }
    bool again = false;
    s = check_locked_leaf(key, *tb, &lock, &path, &leaf, &from_cache, cached, bound, &again, &link);
    if (!s.ok()) {
      drop_block();
      return s;
    }
    if (again) continue;
    FaultPoint("bt.leaf.locked");
    const int e = FindLeafKey(tb->page, key);
    if (e < 0 && mode != WriteMode::kUpsert) {
      drop_block();
      speculative_erase(key);
      // The leaf was read whole while this task held its lock: the key was
      // absent then, whatever the release finds (it writes nothing).
      (void)unlock(&lock);
      return NotFoundStatus();
    }
    const LeafEntry old = e >= 0 ? ReadLeafEntry(tb->page, e) : LeafEntry{};
    LeafEntry entry;
    if (mode == WriteMode::kReadModifyWrite) {
      bool torn = false;
      s = entry_value(old, *tb, &modified, &torn);
      if (s.ok() && torn) {
        s = Status::Internal("B+tree: the value block of key " + std::to_string(key) +
                             " fails its check while its leaf is locked");
      }
      if (s.ok()) {
        (*modify)(&modified);
        if (modified.size() > kMaxValueBytes) s = Status::InvalidArgument("B+tree: the modified value is too long");
      }
      if (s.ok() && modified.size() > kInlineValueBytes) s = stage_block(modified, static_cast<node_t>(leaf.node));
      if (!s.ok()) {
        drop_block();
        Status u = unlock(&lock);
        (void)u;
        return s;
      }
      entry = modified.size() > kInlineValueBytes ? BlockEntry(key, block.address, block.units, block.tag)
                                                  : InlineEntry(key, modified);
    } else if (have_block) {
      entry = BlockEntry(key, block.address, block.units, block.tag);
    } else {
      entry = InlineEntry(key, value);
    }
    const int slot = e >= 0 ? e : FreeLeafEntry(tb->page);
    if (slot < 0) {
      speculative_erase(key);
      s = split_leaf(&lock, *tb, entry, &path, guard);
      // A split is for a key not yet in the leaf: there is no old entry.
      settle_blocks(s, &block, &have_block, LeafEntry{});
      if (s.ok()) repair_links(link, &path, guard);
      return s;
    }
    WriteLeafEntry(tb->page, slot, entry);
    const int line = EntryLine(slot);
    SealLine(tb->page, line, LineVersion(tb->page));
    const uint64_t at = kLineSize * static_cast<uint64_t>(line);
    s = write_and_unlock(&lock, tb->page + at, leaf + at, kLineSize, kLeafWrite);
    settle_blocks(s, &block, &have_block, old);
    if (!s.ok()) {
      speculative_erase(key);
      return s;
    }
    if (options_.speculative_lookup) speculative_put(key, leaf, slot);
    repair_links(link, &path, guard);
    return Status::OK();
  }
}

void Ops::repair_links(const MissingLink& link, Path* path, BackoffGuard& guard) {
  // Usually the splitter adds the separator itself a moment later; adding
  // it too is harmless (an internal insert of a present separator with the
  // same child writes nothing). When the splitter died, this completes its
  // split. Errors are left for the next writer that moves right there.
  const MissingLink leaf = path->leaf_link;
  const MissingLink internal = path->internal_link;
  for (const MissingLink* l : {&link, &leaf, &internal}) {
    if (l->left.is_null() || (l == &leaf && leaf.left == link.left)) continue;
    ++tc_.stats.links_checked;
    Status s = insert_parent(l->level + 1, l->key, l->right, l->left, path, guard);
    (void)s;
  }
}

Status Ops::remove(uint64_t key) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  BackoffGuard guard(tc_.backoff);
  RetryBound bound(options_);
  speculative_erase(key);
  Path path;
  GlobalAddress leaf;
  bool read = false, from_cache = false;
  uint64_t cached = 0;
  MissingLink link;
  s = find_leaf(key, tb->page, &path, &leaf, &read, &from_cache, &cached);
  if (!s.ok()) return s;
  for (;;) {
    PageLock lock;
    s = lock_and_read(leaf, tb->page, guard, bound, &lock);
    if (!s.ok()) return s;
    bool again = false;
    s = check_locked_leaf(key, *tb, &lock, &path, &leaf, &from_cache, cached, bound, &again, &link);
    if (!s.ok()) return s;
    if (again) continue;
    FaultPoint("bt.leaf.locked");
    const int e = FindLeafKey(tb->page, key);
    if (e < 0) {
      // Absent in the leaf read under the lock, whatever the release finds.
      (void)unlock(&lock);
      return NotFoundStatus();
    }
    const LeafEntry old = ReadLeafEntry(tb->page, e);
    WriteLeafEntry(tb->page, e, LeafEntry{});
    const int line = EntryLine(e);
    SealLine(tb->page, line, LineVersion(tb->page));
    const uint64_t at = kLineSize * static_cast<uint64_t>(line);
    s = write_and_unlock(&lock, tb->page + at, leaf + at, kLineSize, kLeafWrite);
    Block none;
    bool no_block = false;
    settle_blocks(s, &none, &no_block, old);
    if (!s.ok()) return s;
    repair_links(link, &path, guard);
    return Status::OK();
  }
}

}  // namespace smart::btree
