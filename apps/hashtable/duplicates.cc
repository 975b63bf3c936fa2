// SMART-HT duplicates: what an insert does after its claim when a racing
// insert of the same key claimed another slot, and the pin every client
// puts on the lowest copy before it removes copies above it.
//
// Two inserts of an absent key may both claim an empty slot. Every
// inserter re-reads the candidates after its CAS and clears every copy but
// the one at the lowest slot address, highest first; readers and
// writers also act on the lowest-address copy, so the surviving value never
// changes behind a reader's back. Deletes remove every copy they see, the
// lowest last (a higher copy may hold a value that writes to the lowest
// superseded). A search or write that could not check a candidate's block
// reads again, as that candidate may be the lowest copy. An insert caches
// its slot for speculative lookup only once its copy is known to be the
// lowest: an update through the cache must never land in a copy about to
// be removed. DESIGN.md has the argument.
//
// Before removing copies above the lowest, a client pins the lowest copy
// (Ops::pin_lowest): a reader that missed it sees its bucket header moved,
// and no client acting on an older read can remove it first.
#include "smart/fault_injection.h"
#include "table_internal.h"

namespace smart::hashtable {

Status Ops::remove_duplicates(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                              BackoffGuard& g, GlobalAddress own_slot, uint64_t own_value) {
  // The insert's own copy goes into the speculative cache if it survives
  // as the key's first copy.
  auto cache_if_first = [&](const FindResult& r) {
    if (options_.speculative_lookup && r.copies > 0 && r.first.slot_offset == own_slot.offset &&
        r.first.slot_value == own_value) {
      cache_put(h.primary, own_slot, own_value, false);
    }
  };
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    View v;
    FindResult r;
    Status s = locate(si, sh, key, h, tb, &g, ViewUse::kWrite, &v, &r);
    if (!s.ok()) return s;
    if (r.retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      g.retry_task();
      continue;
    }
    if (r.copies <= 1) {
      cache_if_first(r);
      return Status::OK();
    }
    // Highest address first, as a delete goes, and a lower copy only once
    // every higher one is gone: a reader reads the lower slots before the
    // higher ones, so when it finds a copy removed, every copy above it is
    // already gone too, and the reader never takes a higher copy's value
    // for the key's (DESIGN.md, "Duplicates").
    int order[kCandidateBuckets * kSlotsPerBucket];
    for (int i = 0; i < r.copies; ++i) order[i] = i;
    std::sort(order, order + r.copies,
              [&](int a, int b) { return r.all[a].slot_offset > r.all[b].slot_offset; });
    // The copy that stays is the key's value for every reader from now on:
    // pinned, it cannot go before the copies above it (pin_lowest).
    FaultPoint("ht.duplicates.pinning");
    bool pinned = false;
    s = pin_lowest(sh, key, h, v, r.first, tb, &pinned);
    if (!s.ok()) return s;
    if (!pinned) {
      g.retry_task();
      continue;
    }
    FaultPoint("ht.duplicates.removing");
    bool again = false;
    for (int k = 0; k < r.copies; ++k) {
      const Copy& c = r.all[order[k]];
      if (c.slot_offset == r.first.slot_offset) continue;
      if (SlotFrozen(c.slot_value)) {
        bound.why = "the key's slots stay frozen by a split";
        again = true;
        break;
      }
      if (!fresh(v.read_at)) {
        ++tc_.stats.slow_slot_reads;
        again = true;
        break;
      }
      s = in_.compare_and_swap(tb.words, GlobalAddress(sh.node, c.slot_offset), c.slot_value,
                               EmptySlot(HeaderDepth(v.header(c.bucket))), Option::kSync);
      if (!s.ok()) return s;
      if (tb.words[0] != c.slot_value) {
        ++tc_.stats.cas_failures;
        again = true;
        break;
      }
      retire_block(sh, c.slot_value);
      ++tc_.stats.duplicates_removed;
    }
    if (!again) {
      cache_if_first(r);
      return Status::OK();
    }
    g.retry_task();
  }
  return bound.status();
}

Status Ops::pin_lowest(const Shard& sh, std::string_view key, const KeyHash& h, const View& v, const Copy& lowest,
                       TaskBuffers& tb, bool* pinned) {
  *pinned = false;
  if (SlotFrozen(lowest.slot_value)) return Status::OK();
  const size_t units = BlockUnits(key.size(), lowest.value.size());
  uint64_t offset;
  uint8_t tag;
  Status s = alloc_block(sh, units, &offset, &tag);
  if (!s.ok()) return s;
  EncodeBlock(key, lowest.value, tag, units, tb.new_block, (lowest.loaded ? kBlockLoaded : 0) | kBlockDerived);
  const uint64_t desired = SlotWithParity(NewSlot(h, units, tag, offset), HeaderDepth(v.header(lowest.bucket)));
  if (!fresh(v.read_at)) {
    ++tc_.stats.slow_slot_reads;
    release_block(sh, offset, units, tag);
    return Status::OK();
  }
  // One doorbell, carried out in order: the header, the block, the slot.
  const uint64_t header = v.header(lowest.bucket);
  s = in_.compare_and_swap(tb.words + 1, GlobalAddress(sh.node, v.bucket_offset[lowest.bucket]), header,
                           HeaderBumped(header), Option::kNone);
  if (s.ok()) s = in_.write(tb.new_block, GlobalAddress(sh.node, offset), units * kBlockUnit, Option::kNone);
  if (s.ok()) {
    s = in_.compare_and_swap(tb.words, GlobalAddress(sh.node, lowest.slot_offset), lowest.slot_value, desired,
                             Option::kSync);
  }
  // The block stays taken when the CAS did not complete: the slot may name
  // it. The value is the one the slot held, so no outcome changes.
  if (!s.ok()) return s;
  if (tb.words[0] != lowest.slot_value) {
    ++tc_.stats.cas_failures;
    release_block(sh, offset, units, tag);
    return Status::OK();
  }
  retire_block(sh, lowest.slot_value);
  ++tc_.stats.lowest_pinned;
  *pinned = true;
  return Status::OK();
}

}  // namespace smart::hashtable
