// SMART-HT lookup: reading a key's candidate buckets, finding its copies in
// the blocks their slots name, and the speculative-lookup cache that skips
// the bucket read when a cached slot is still current.
//
// A search reads the key's two 128-byte bucket pairs (one doorbell, 1 RTT),
// then the blocks whose slot matches the key's 8-bit fingerprint and 12
// directory bits (1 RTT); with speculative lookup a cached (slot address,
// slot value) reads the slot word and the block together (1 RTT).
#include "table_internal.h"

namespace smart::hashtable {

Status Ops::queue_candidates(int si, const Shard& sh, const KeyHash& h, char* buckets, View* v, Option option) {
  Status s = dir_entry(si, sh, h.dir_bits(), &v->dir_entry);
  if (!s.ok()) return s;
  const uint64_t sub = DirEntryOffset(v->dir_entry);
  BucketIndices(h, sh.groups, &v->first_index, &v->second_index);
  v->pair_offset[0] = sub + BucketPairOffset(v->first_index);
  v->pair_offset[1] = sub + BucketPairOffset(v->second_index);
  v->words = reinterpret_cast<const uint64_t*>(buckets);
  v->read_at = Cycles();
  s = in_.read(buckets, GlobalAddress(sh.node, v->pair_offset[0]), kBucketPairSize, Option::kNone);
  if (!s.ok()) return s;
  return in_.read(buckets + kBucketPairSize, GlobalAddress(sh.node, v->pair_offset[1]), kBucketPairSize, option);
}

bool IndexCandidates(const KeyHash& h, View* v) {
  // Search order: main 0, main 1, overflow 0, overflow 1; a bucket shared
  // by both pairs is listed once.
  const int main0 = MainBucketInPair(v->first_index), main1 = MainBucketInPair(v->second_index);
  const int order[kCandidateBuckets][2] = {{0, main0}, {1, main1}, {0, 1 - main0}, {1, 1 - main1}};
  v->count = 0;
  bool stale = false;
  for (const auto& o : order) {
    const uint64_t offset = v->pair_offset[o[0]] + kBucketSize * static_cast<uint64_t>(o[1]);
    bool seen = false;
    for (int b = 0; b < v->count; ++b) seen = seen || v->bucket_offset[b] == offset;
    if (seen) continue;
    v->bucket_offset[v->count] = offset;
    v->word_base[v->count] = o[0] * 16 + o[1] * 8;
    if (!HeaderAccepts(v->header(v->count), h.dir_bits())) stale = true;
    ++v->count;
  }
  return stale;
}

SlotChoice ChooseEmptySlot(const View& v) {
  SlotChoice c;
  int first_empty[kCandidateBuckets];
  for (int b = 0; b < v.count; ++b) {
    first_empty[b] = -1;
    for (int j = 0; j < kSlotsPerBucket; ++j) {
      const uint64_t slot = v.slot(b, j);
      if (SlotFrozen(slot)) c.frozen = true;
      if (SlotEmpty(slot) && !SlotFrozen(slot)) {
        if (first_empty[b] < 0) first_empty[b] = j;
        ++c.empties[b];
      }
    }
  }
  if (c.frozen) return c;
  const int mains = std::min(v.count, 2);
  for (int pass = 0; pass < 2 && c.bucket < 0; ++pass) {
    const int from = pass == 0 ? 0 : mains, to = pass == 0 ? mains : v.count;
    for (int b = from; b < to; ++b) {
      if (c.empties[b] > 0 && (c.bucket < 0 || c.empties[b] > c.empties[c.bucket])) c.bucket = b;
    }
  }
  if (c.bucket >= 0) c.slot = first_empty[c.bucket];
  return c;
}

Status Ops::read_candidates(int si, const Shard& sh, const KeyHash& h, TaskBuffers& tb, View* v,
                            bool* stale) {
  Status s = queue_candidates(si, sh, h, tb.buckets, v, Option::kSync);
  if (!s.ok()) return s;
  *stale = IndexCandidates(h, v);
  return Status::OK();
}

Status Ops::handle_stale(int si, const Shard& sh, const KeyHash& h, uint64_t used_entry, BackoffGuard* g) {
  ++tc_.stats.stale_directory;
  Status s = refresh_directory(si, sh);
  if (!s.ok()) return s;
  uint64_t entry = 0;
  s = dir_entry(si, sh, h.dir_bits(), &entry);
  if (!s.ok()) return s;
  if (DirEntryOffset(entry) == DirEntryOffset(used_entry)) {
    if (g != nullptr) {
      g->retry_task();
    }
    this_task::yield();
  }
  return Status::OK();
}

Status Ops::find_key(const Shard& sh, std::string_view key, const KeyHash& h, const View& v, TaskBuffers& tb,
                     FindResult* r) {
  r->retry = false;
  r->copies = 0;
  struct Candidate {
    uint64_t slot_offset, slot_value;
    int bucket;
    size_t at, length;
  };
  Candidate c[kCandidateBuckets * kSlotsPerBucket];
  int n = 0;
  for (int b = 0; b < v.count; ++b) {
    for (int j = 0; j < kSlotsPerBucket; ++j) {
      const uint64_t slot = v.slot(b, j);
      if (!SlotMayName(slot, h)) continue;
      if (SlotBlockLength(slot) == 0) {
        // A slot that names a block of no units is corrupt: nothing to read.
        r->retry = true;
        continue;
      }
      c[n++] = Candidate{v.slot_offset(b, j), slot, b, 0, SlotBlockLength(slot)};
    }
  }
  int done = 0;
  while (done < n) {
    // As many blocks as fit in the block area, in one doorbell.
    size_t used = 0;
    int end = done;
    while (end < n && (end == done || used + c[end].length <= kBlockAreaSize)) {
      c[end].at = used;
      used += c[end].length;
      ++end;
    }
    if (used > kBlockAreaSize) return Status::Internal("hash table: a slot names an oversized block");
    for (int i = done; i < end; ++i) {
      Status s = in_.read(tb.blocks + c[i].at, GlobalAddress(sh.node, SlotBlockOffset(c[i].slot_value)), c[i].length,
                          i + 1 == end ? Option::kSync : Option::kNone);
      if (!s.ok()) return s;
    }
    for (int i = done; i < end; ++i) {
      const char* block = tb.blocks + c[i].at;
      const BlockCheck check = CheckBlock(block, c[i].length, SlotTag(c[i].slot_value));
      if (check != BlockCheck::kValid) {
        if (check == BlockCheck::kTorn) ++tc_.stats.torn_reads;
        r->retry = true;
        continue;
      }
      if (BlockKey(block) != key) continue;
      Copy copy{c[i].slot_offset, c[i].slot_value, c[i].bucket, BlockValue(block)};
      r->all[r->copies++] = copy;
      if (r->copies == 1 || copy.slot_offset < r->first.slot_offset) r->first = copy;
    }
    done = end;
  }
  // The blocks were read so long after their slots that a block could have
  // been reused under the same tag meanwhile (only a stopped or descheduled
  // client gets here): its bytes may not be the ones its slot named.
  if (n > 0 && !fresh(v.read_at)) {
    ++tc_.stats.slow_slot_reads;
    r->retry = true;
  }
  return Status::OK();
}

Status Ops::locate(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                   BackoffGuard* g, ViewUse use, View* v, FindResult* r) {
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    bool stale;
    Status s = read_candidates(si, sh, h, tb, v, &stale);
    if (!s.ok()) return s;
    if (!stale) {
      // Whole-view agreement costs a look at every candidate slot, so it is
      // checked where nothing cheaper is enough (ViewUse).
      if (use == ViewUse::kWrite) {
        if (!v->torn()) return find_key(sh, key, h, *v, tb, r);
      } else {
        s = find_key(sh, key, h, *v, tb, r);
        if (!s.ok()) return s;
        const bool torn = r->copies == 0 ? v->torn()
                          : use == ViewUse::kUpdate
                              ? !SlotAgreesWithHeader(r->first.slot_value, v->header(r->first.bucket))
                              : false;
        if (!torn) return s;
      }
      // Read while a split rewrote a bucket: read again once it is done.
      ++tc_.stats.torn_buckets;
      bound.why = "a bucket's slots disagree with its header's depth (the bucket is corrupt)";
      if (g != nullptr) g->retry_task();
      this_task::yield();
      continue;
    }
    bound.why = "the key's bucket headers reject it under the current directory";
    s = handle_stale(si, sh, h, v->dir_entry, g);
    if (!s.ok()) return s;
  }
  return bound.status();
}

Status Ops::speculative_read(std::string_view key, const KeyHash& h, TaskBuffers& tb, CacheEntry* e, bool* hit,
                             std::string_view* value, uint64_t* read_at) {
  *hit = false;
  const uint64_t cached = e->value;
  const GlobalAddress slot(e->slot);
  const size_t length = SlotBlockLength(cached);
  *read_at = Cycles();
  Status s = in_.read(tb.words, slot, 8, Option::kNone);
  if (!s.ok()) return s;
  s = in_.read(tb.blocks, GlobalAddress(slot.node, SlotBlockOffset(cached)), length, Option::kSync);
  if (!s.ok()) return s;
  if (SlotUnfrozen(tb.words[0]) == cached &&
      CheckBlock(tb.blocks, length, SlotTag(cached)) == BlockCheck::kValid && BlockKey(tb.blocks) == key &&
      fresh(*read_at)) {
    *hit = true;
    *value = BlockValue(tb.blocks);
    ++tc_.stats.speculative_hits;
    return Status::OK();
  }
  ++tc_.stats.speculative_misses;
  cache_erase(h.primary);
  return Status::OK();
}

Status Ops::inspect(int si, const Shard& sh, std::string_view key, FindResult* r, View* view) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  const KeyHash h = HashKey(key);
  RetryBound bound(*this, si, sh);
  for (; bound.more(); bound.next()) {
    s = locate(si, sh, key, h, *tb, nullptr, ViewUse::kRead, view, r);
    if (!s.ok()) return s;
    if (r->retry) {
      bound.why = "a block named by the key's slot keeps failing its checksum";
      this_task::yield();
      continue;
    }
    return Status::OK();
  }
  return bound.status();
}

}  // namespace smart::hashtable
