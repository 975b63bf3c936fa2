// SMART-HT operations: search, insert (upsert) and update, remove,
// read-modify-write, and the per-thread allocation of key-value blocks.
//
// Round trips. Update and insert read the buckets, then the blocks of the
// slots that may hold the key, then write the new block and CAS the slot in
// one doorbell (the queue pair carries them out in order): update 3 RTTs, 2
// with a speculative hit; insert 3, the last one checking for a concurrent
// copy. The block goes out with the CAS because its kBlockLoaded flag
// follows the copy it replaces, which only the reads tell.
//
// Duplicates (two inserts of an absent key that both claimed a slot):
// duplicates.cc removes the extra copies after an insert.
//
// Reclamation. A block replaced by update/insert or removed by delete is
// retired by the client whose CAS unlinked it (exactly one CAS succeeds)
// into the thread's smart::BlockPool (include/smart/block_pool.h), and
// reused only after a grace period (reclaim_grace_ns), or after the wrap
// guard (tag_wrap_guard_ns) when the reuse brings its 4-bit tag back to 0.
// The slot holds the tag too; a reader checks the block's checksum, tag and
// key, so a reader that raced with a reuse sees a mismatch and re-reads. A
// slot word comes back no sooner than the wrap guard after it was last
// current, so an operation that CASes a slot word it read, or trusts a
// block it names, within half of it (Ops::fresh) never takes a word that
// only looks unchanged for the one it read; past that it reads again. A
// block a CAS of unknown outcome may have published or unlinked is never
// handed back. Memory in use is bounded by the live keys plus the blocks
// retired within one grace period and a sixteenth of the blocks retired
// within one wrap guard.
#include <unistd.h>

#include <algorithm>
#include <random>

#include "smart/fault_injection.h"
#include "table_internal.h"

namespace smart::hashtable {

Status SlotCasFailed(const Status& s, const std::string& what) {
  if (s.code() == Status::Code::kRemoteAccess || s.code() == Status::Code::kInvalidArgument) return s;
  return Status::OutcomeUnknown("hash table: " + what + " may or may not have taken effect: its slot CAS was posted " +
                                "and did not complete (" + s.ToString() + ")");
}

Status Ops::search(int si, const Shard& sh, std::string_view key, const KeyHash& h, std::string* value) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  if (CacheEntry* e = cache_find(h.primary)) {
    bool hit, loaded;
    std::string_view found;
    uint64_t read_at;
    s = speculative_read(si, sh, key, h, *tb, e, &hit, &found, &read_at, &loaded);
    if (!s.ok()) return s;
    if (hit) {
      AssignValue(value, found);
      return Status::OK();
    }
  }
  MissCheck miss;
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    View v;
    FindResult r;
    s = locate(si, sh, key, h, *tb, nullptr, ViewUse::kRead, &v, &r);
    if (!s.ok()) return s;
    // A candidate whose block failed its check may be the lowest copy: the
    // one that holds the key's value.
    if (r.retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      this_task::yield();
      continue;
    }
    if (r.copies > 0) {
      AssignValue(value, r.first.value);
      if (options_.speculative_lookup) {
        cache_put(h.primary, GlobalAddress(sh.node, r.first.slot_offset), r.first.slot_value, r.first.loaded);
      }
      return Status::OK();
    }
    // A miss is confirmed by a read that finds the buckets unchanged
    // (MissCheck): neither a split nor duplicate removal can fool both.
    if (!miss.confirms(v)) {
      FaultPoint("ht.miss.confirming");
      continue;
    }
    return NotFoundStatus();
  }
  return bound.status();
}

Status Ops::write(int si, const Shard& sh, std::string_view key, const KeyHash& h, std::string_view value,
                  WriteKind kind) {
  const bool insert = kind != WriteKind::kUpdate;
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  const size_t units = BlockUnits(key.size(), value.size());
  if (!BlockFits(key.size(), units)) {
    return Status::InvalidArgument("hash table: key and value of " + std::to_string(key.size()) + " and " +
                                   std::to_string(value.size()) + " bytes do not fit in a block (4032 bytes)");
  }
  BackoffGuard g(tc_.backoff);
  uint64_t offset;
  uint8_t tag;
  s = alloc_block(sh, units, &offset, &tag);
  if (!s.ok()) return s;
  const uint64_t new_slot = NewSlot(h, units, tag, offset);
  // Queues the new block, to go out in the doorbell of the CAS that
  // publishes it (the queue pair carries them out in order): it carries
  // kBlockLoaded when the copy it goes into does, which only the reads
  // before the CAS tell.
  auto queue_block = [&](bool loaded) {
    EncodeBlock(key, value, tag, units, tb->new_block, loaded ? kBlockLoaded : 0);
    return in_.write(tb->new_block, GlobalAddress(sh.node, offset), units * kBlockUnit, Option::kNone);
  };

  // CASes the key's slot from `expected` (read by this operation, the read
  // posted at `read_at`) to `desired`; *finished when the write is done: the
  // CAS won, or it lost to another client's write of the key, which
  // superseded this one. A word read too long ago is not CASed (it may only
  // look unchanged: TableOptions::tag_wrap_guard_ns); the caller reads again.
  // `cached`: the slot came from a speculative hit; `loaded`: the copy's
  // block carries kBlockLoaded.
  auto cas_slot = [&](GlobalAddress slot, uint64_t expected, uint64_t desired, uint64_t read_at, bool cached,
                      bool loaded, bool* finished) -> Status {
    *finished = false;
    if (!fresh(read_at)) {
      ++tc_.stats.slow_slot_reads;
      return Status::OK();
    }
    FaultPoint("ht.write.casing");
    Status st = queue_block(loaded);
    if (!st.ok()) return st;
    st = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
    // The new block stays taken: the slot may name it.
    if (!st.ok()) return SlotCasFailed(st, insert ? "an insert of an existing key" : "an update");
    const uint64_t found = tb->words[0];
    if (found == expected) {
      retire_block(sh, expected);
      if (cached) {
        cache_swung(h.primary, slot, desired);
      } else if (options_.speculative_lookup) {
        cache_put(h.primary, slot, desired, loaded);
      }
      *finished = true;
      return Status::OK();
    }
    ++tc_.stats.cas_failures;
    bool found_loaded = false;
    st = superseded(sh, key, expected, found, read_at, *tb, finished, &found_loaded);
    if (st.ok() && *finished) {
      release_block(sh, offset, units, tag);
      if (options_.speculative_lookup) cache_put(h.primary, slot, found, found_loaded);
    }
    return st;
  };

  if (CacheEntry* e = cache_find(h.primary)) {
    const GlobalAddress slot(e->slot & ~kLoadedCopy);
    bool hit, loaded;
    std::string_view old;
    uint64_t read_at;
    s = speculative_read(si, sh, key, h, *tb, e, &hit, &old, &read_at, &loaded);
    if (!s.ok()) return s;
    if (hit && !SlotFrozen(tb->words[0])) {
      const uint64_t expected = tb->words[0];
      bool finished;
      s = cas_slot(slot, expected, (new_slot & ~kParityBit) | (expected & kParityBit), read_at, true, loaded,
                   &finished);
      if (!s.ok()) return s;
      if (finished) return Status::OK();
      cache_erase(h.primary);
      g.retry_task();
    }
  }

  MissCheck miss;
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    View v;
    FindResult r;
    s = locate(si, sh, key, h, *tb, &g, insert ? ViewUse::kWrite : ViewUse::kUpdate, &v, &r);
    if (!s.ok()) return s;
    if (r.retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      g.retry_task();
      continue;
    }
    if (r.copies > 0) {
      const uint64_t expected = r.first.slot_value;
      if (SlotFrozen(expected)) {
        bound.why = "the key's slots stay frozen by a split";
        g.retry_task();
        continue;
      }
      bool finished;
      s = cas_slot(GlobalAddress(sh.node, r.first.slot_offset), expected,
                   SlotWithParity(new_slot, HeaderDepth(v.header(r.first.bucket))), v.read_at, false,
                   r.first.loaded, &finished);
      if (!s.ok()) return s;
      if (finished) return Status::OK();
      g.retry_task();
      continue;
    }
    if (!insert) {
      if (!miss.confirms(v)) {
        FaultPoint("ht.miss.confirming");
        continue;
      }
      release_block(sh, offset, units, tag);
      return NotFoundStatus();
    }
    // Absent: claim an empty slot, main buckets first (the emptier one).
    const SlotChoice choice = ChooseEmptySlot(v);
    if (choice.frozen) {
      bound.why = "the key's slots stay frozen by a split";
      // A split is moving these buckets.
      g.retry_task();
      continue;
    }
    if (choice.bucket < 0) {
      bool busy = false;
      s = split(si, sh, h, DirEntryOffset(v.dir_entry), &busy);
      if (!s.ok()) {
        release_block(sh, offset, units, tag);
        return s;
      }
      if (busy) g.retry_task();
      continue;
    }
    int best_bucket = choice.bucket, best_slot = choice.slot;
    if (__builtin_expect(options_.spread_inserts_for_tests, 0)) {
      // Tests: each insert picks a candidate bucket (of those with room)
      // and an empty slot at random, so that racing inserts of one key,
      // in one process or several, mostly land in different buckets and
      // slots and the duplicate removal runs.
      thread_local std::minstd_rand spread(static_cast<unsigned>(getpid()) * 7919u +
                                           static_cast<unsigned>(ThreadId()) * 104729u +
                                           static_cast<unsigned>(clock()));
      const int pick = static_cast<int>(spread() % 1000003);
      int with_room[kCandidateBuckets];
      int roomy = 0;
      for (int b = 0; b < v.count; ++b) {
        if (choice.empties[b] > 0) with_room[roomy++] = b;
      }
      best_bucket = with_room[pick % roomy];
      int skip = (pick / roomy) % choice.empties[best_bucket];
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const uint64_t slot = v.slot(best_bucket, j);
        if (!SlotEmpty(slot) || SlotFrozen(slot) || skip-- > 0) continue;
        best_slot = j;
        break;
      }
    }
    const uint64_t expected = v.slot(best_bucket, best_slot);
    const uint64_t desired = SlotWithParity(new_slot, HeaderDepth(v.header(best_bucket)));
    const GlobalAddress slot(sh.node, v.slot_offset(best_bucket, best_slot));
    FaultPoint("ht.insert.claiming");
    // A load's copy is the key's only one (the caller's promise).
    s = queue_block(kind == WriteKind::kLoad);
    if (!s.ok()) return s;
    s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
    if (!s.ok()) return SlotCasFailed(s, "an insert");
    if (tb->words[0] != expected) {
      ++tc_.stats.cas_failures;
      g.retry_task();
      continue;
    }
    FaultPoint("ht.insert.claimed");
    if (kind == WriteKind::kLoad) {
      // No racing insert of this key (the caller's promise): this slot is
      // its only copy.
      if (options_.speculative_lookup) cache_put(h.primary, slot, desired, true);
      return Status::OK();
    }
    // The slot is cached only once it is known to be the key's lowest copy:
    // an update through the cache must never land in a copy that this
    // insert is about to remove as a duplicate.
    //
    // The insert took effect with its claim, whatever happens to the
    // removal of duplicates: its copy is either the lowest (its value is
    // the key's) or a higher one, which the insert of the lower copy
    // superseded, just as if that one had come later. A copy left behind is
    // never read (readers take the lowest), and the next insert or delete
    // of the key removes it; so a failed removal does not make the insert
    // fail.
    (void)remove_duplicates(si, sh, key, h, *tb, g, slot, desired);
    return Status::OK();
  }
  return bound.status();
}

// After a write's slot CAS lost: sets *done when the slot now names another
// valid block of the same key. The value this write read was current within
// the operation (read by it, not taken from a cache) and another client's
// write of the key replaced it since, so this write takes effect just
// before that one, where no reader can see it, and is done: a retry would
// only put an older value over a newer one. A frozen or emptied slot, or
// one that names the same block (a split's rewrite), is not such a write,
// nor a block of another key (the slot was reused), nor one that a
// read-modify-write wrote (it computed its value from the one this write
// read, so this write cannot go just before it): those retry, and so does a
// write that could not read the block soon enough after its read of the
// slot (read_at) to be sure that the block still holds what `found` named.
Status Ops::superseded(const Shard& sh, std::string_view key, uint64_t expected, uint64_t found, uint64_t read_at,
                       TaskBuffers& tb, bool* done, bool* found_loaded) {
  *done = false;
  if (SlotFrozen(found) || SlotEmpty(found) || SlotBlockOffset(found) == SlotBlockOffset(expected)) {
    return Status::OK();
  }
  const size_t length = SlotBlockLength(found);
  if (length == 0 || length > kMaxBlockUnits * kBlockUnit) return Status::OK();
  Status s = in_.read(tb.blocks, GlobalAddress(sh.node, SlotBlockOffset(found)), length, Option::kSync);
  if (!s.ok()) return s;
  if (CheckBlock(tb.blocks, length, SlotTag(found)) == BlockCheck::kValid && BlockKey(tb.blocks) == key &&
      !BlockDerived(tb.blocks) && fresh(read_at)) {
    *done = true;
    *found_loaded = BlockLoaded(tb.blocks);
    ++tc_.stats.writes_superseded;
  }
  return Status::OK();
}

Status Ops::remove(int si, const Shard& sh, std::string_view key, const KeyHash& h) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  BackoffGuard g(tc_.backoff);
  cache_erase(h.primary);
  MissCheck miss;
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    View v;
    FindResult r;
    s = locate(si, sh, key, h, *tb, &g, ViewUse::kWrite, &v, &r);
    if (!s.ok()) return s;
    if (r.retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      g.retry_task();
      continue;
    }
    if (r.copies == 0) {
      if (!miss.confirms(v)) {
        FaultPoint("ht.miss.confirming");
        continue;
      }
      return NotFoundStatus();
    }
    // Copies go highest address first and the lowest last. The lowest is
    // the key's value for every reader; a higher one (an insert that raced
    // with an earlier write and has not removed its duplicate yet) may hold
    // a value that later writes superseded, and removing the lowest first
    // would let a reader see it again.
    const Copy* target = &r.first;
    for (int i = 0; i < r.copies; ++i) {
      if (r.all[i].slot_offset > target->slot_offset) target = &r.all[i];
    }
    const uint64_t expected = target->slot_value;
    if (SlotFrozen(expected)) {
      bound.why = "the key's slots stay frozen by a split";
      g.retry_task();
      continue;
    }
    if (!fresh(v.read_at)) {
      ++tc_.stats.slow_slot_reads;
      continue;
    }
    if (r.copies > 1) {
      // The key stays present in its lowest copy, pinned (pin_lowest).
      bool pinned = false;
      s = pin_lowest(sh, key, h, v, r.first, *tb, &pinned);
      if (!s.ok()) return s;
      if (!pinned) {
        g.retry_task();
        continue;
      }
    }
    FaultPoint("ht.remove.casing");
    s = in_.compare_and_swap(tb->words, GlobalAddress(sh.node, target->slot_offset), expected,
                             EmptySlot(HeaderDepth(v.header(target->bucket))), Option::kSync);
    // Removing a higher copy changes nothing a reader sees (the lowest one
    // holds the key's value), so only the CAS on the last copy decides
    // whether the delete took effect.
    if (!s.ok()) return r.copies == 1 ? SlotCasFailed(s, "a delete") : s;
    if (tb->words[0] != expected) {
      ++tc_.stats.cas_failures;
      g.retry_task();
      continue;
    }
    retire_block(sh, expected);
    if (r.copies == 1) return Status::OK();
    ++tc_.stats.duplicates_removed;
    FaultPoint("ht.remove.duplicate_removed");
  }
  return bound.status();
}

Status Ops::read_modify_write(int si, const Shard& sh, std::string_view key, const KeyHash& h,
                              const std::function<void(std::string*)>& modify) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  BackoffGuard g(tc_.backoff);
  MissCheck miss;
  bool have_block = false;
  uint64_t offset = 0;
  uint8_t tag = 0;
  size_t units = 0;
  std::string value;
  auto release = [&] {
    if (have_block) release_block(sh, offset, units, tag);
    have_block = false;
  };
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    View v;
    FindResult r;
    s = locate(si, sh, key, h, *tb, &g, ViewUse::kWrite, &v, &r);
    if (!s.ok()) return s;
    if (r.retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      g.retry_task();
      continue;
    }
    if (r.copies == 0) {
      if (!miss.confirms(v)) {
        FaultPoint("ht.miss.confirming");
        continue;
      }
      release();
      return NotFoundStatus();
    }
    const uint64_t expected = r.first.slot_value;
    if (SlotFrozen(expected)) {
      bound.why = "the key's slots stay frozen by a split";
      g.retry_task();
      continue;
    }
    // Between the read and the CAS: a client stopped here must not CAS a
    // slot word that only looks unchanged (the check below).
    FaultPoint("ht.rmw.modifying");
    value.assign(r.first.value.data(), r.first.value.size());
    modify(&value);
    const size_t need = BlockUnits(key.size(), value.size());
    if (need > static_cast<size_t>(kMaxBlockUnits)) {
      release();
      return Status::InvalidArgument("hash table: the modified value does not fit in a block");
    }
    if (have_block && need != units) release();
    if (!have_block) {
      s = alloc_block(sh, need, &offset, &tag);
      if (!s.ok()) return s;
      units = need;
      have_block = true;
    }
    // kBlockLoaded follows the copy; kBlockDerived: a write that loses its
    // CAS to this one must not count itself superseded (layout.h).
    EncodeBlock(key, value, tag, units, tb->new_block, (r.first.loaded ? kBlockLoaded : 0) | kBlockDerived);
    const uint64_t desired = SlotWithParity(NewSlot(h, units, tag, offset), HeaderDepth(v.header(r.first.bucket)));
    const GlobalAddress slot(sh.node, r.first.slot_offset);
    // The CAS compares the slot word with the one read, which after 16
    // reuses of its block can hold another value again (ABA): the new value
    // was computed from the old one, so winning then would lose every write
    // in between. Within half the wrap guard of the read no such reuse can
    // have happened (TableOptions::tag_wrap_guard_ns); later, read again.
    if (!fresh(v.read_at)) {
      ++tc_.stats.slow_slot_reads;
      continue;
    }
    FaultPoint("ht.rmw.casing");
    // The block write and the CAS share a doorbell; the queue pair
    // executes them in order.
    s = in_.write(tb->new_block, GlobalAddress(sh.node, offset), units * kBlockUnit, Option::kNone);
    if (!s.ok()) return s;
    s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
    if (!s.ok()) return SlotCasFailed(s, "a read-modify-write");
    if (tb->words[0] == expected) {
      retire_block(sh, expected);
      if (options_.speculative_lookup) cache_put(h.primary, slot, desired, r.first.loaded);
      return Status::OK();
    }
    ++tc_.stats.cas_failures;
    g.retry_task();
  }
  release();
  return bound.status();
}

Status Ops::alloc_block(const Shard& sh, size_t units, uint64_t* offset, uint8_t* tag) {
  Block block;
  Status s = tc_.blocks->allocate(sh.node, units, &block);
  if (!s.ok()) return s;
  *offset = block.address.offset;
  *tag = block.tag;
  return Status::OK();
}

void Ops::retire_block(const Shard& sh, uint64_t slot) {
  const SlotFields f = DecodeSlot(slot);
  tc_.blocks->retire(Block{GlobalAddress(sh.node, f.block_offset), f.units, f.tag});
}

void Ops::release_block(const Shard& sh, uint64_t offset, size_t units, uint8_t tag) {
  tc_.blocks->release(Block{GlobalAddress(sh.node, offset), static_cast<uint32_t>(units), tag});
}

}  // namespace smart::hashtable
