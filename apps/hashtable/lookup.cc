// SMART-HT lookup: reading a key's candidate buckets, finding its copies in
// the blocks their slots name, and the speculative-lookup cache that skips
// the bucket read when a cached slot is still current.
//
// A search reads the key's two 128-byte bucket pairs (one doorbell, 1 RTT),
// then the blocks whose slot matches the key's 8-bit fingerprint and 12
// directory bits (1 RTT); with speculative lookup a cached (slot address,
// slot value) reads the slot word and the block together (1 RTT).
#include <algorithm>

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
  v->read_at = clock();
  // The lower pair first: a reader takes the lowest copy it sees, so every
  // slot below a copy must be read before it (DESIGN.md, "Duplicates").
  const int lower = v->pair_offset[1] < v->pair_offset[0] ? 1 : 0;
  s = in_.read(buckets + lower * kBucketPairSize, GlobalAddress(sh.node, v->pair_offset[lower]), kBucketPairSize,
               Option::kNone);
  if (!s.ok()) return s;
  return in_.read(buckets + (1 - lower) * kBucketPairSize, GlobalAddress(sh.node, v->pair_offset[1 - lower]),
                  kBucketPairSize, option);
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
      Copy copy{c[i].slot_offset, c[i].slot_value, c[i].bucket, BlockValue(block), BlockLoaded(block)};
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

namespace {

// What a speculative read that must look below the cached slot reads: the
// key's candidate buckets below the slot's, whole, and the slot's own bucket
// up to and including the slot, as one or two runs of adjacent bytes in
// ascending order. Each run starts at a bucket, so in the words read every
// eighth one is a bucket header.
struct LowerRuns {
  int count = 0;
  uint64_t offset[2];
  uint64_t bytes[2];
};

// False when `slot` is not a slot of one of the key's candidate buckets in
// the subtable at `subtable` (the thread's copy of the directory has moved
// on since the slot was cached).
bool FindLowerRuns(const KeyHash& h, uint64_t groups, uint64_t subtable, uint64_t slot, LowerRuns* r) {
  uint64_t first, second;
  BucketIndices(h, groups, &first, &second);
  // Each index reads a pair of adjacent buckets; pairs may overlap or meet.
  uint64_t lo = subtable + BucketPairOffset(first), hi = subtable + BucketPairOffset(second);
  if (hi < lo) std::swap(lo, hi);
  const uint64_t own = slot & ~uint64_t{kBucketSize - 1};  // subtables are 256-byte aligned
  if (slot == own) return false;                              // a bucket header, not a slot
  const uint64_t end = slot + 8;
  if (own >= lo && own < lo + kBucketPairSize) {
    r->count = 1;
    r->offset[0] = lo;
    r->bytes[0] = end - lo;
  } else if (own >= hi && own < hi + kBucketPairSize) {
    if (hi <= lo + kBucketPairSize) {
      r->count = 1;
      r->offset[0] = lo;
      r->bytes[0] = end - lo;
    } else {
      r->count = 2;
      r->offset[0] = lo;
      r->bytes[0] = kBucketPairSize;
      r->offset[1] = hi;
      r->bytes[1] = end - hi;
    }
  } else {
    return false;
  }
  return true;
}

// True when the words of a look below a cached slot (all but the last, the
// slot itself) show that the slot may not be the key's lowest copy: a slot
// that may name the key, or a bucket header that does not accept it (a
// split has moved the bucket's keys away, and with them maybe a lower copy).
bool LowerCopyMayExist(const uint64_t* words, size_t count, const KeyHash& h) {
  const uint64_t dir = h.dir_bits();
  const uint64_t mask = 0xff | (kSlotDirMask << 19);
  const uint64_t pattern = uint64_t{h.fingerprint()} | ((dir & kSlotDirMask) << 19);
  bool may = !HeaderAccepts(words[0], dir);
  for (size_t i = 1; i + 1 < count; ++i) {
    const uint64_t w = words[i];
    if (i % 8 == 0) {
      may |= w != words[0];  // the buckets of one subtable share their header
    } else {
      may |= ((w & mask) == pattern) & ((w >> 32) != 0);  // SlotMayName
    }
  }
  return may;
}

}  // namespace

// Why a speculative read looks below the cached slot Y. Y was the key's
// lowest copy when it was cached, but an insert that read the key as absent
// before Y was claimed can claim a lower slot X at any time later (a client
// stopped between its read and its claim); until it removes Y as its
// duplicate, X holds the key's value. Reading Y then would be a stale read,
// and an update CASing Y would be removed with it. So the read takes, in one
// doorbell and in ascending address order, every candidate slot below Y and
// Y itself, then Y's block, and hits only when Y holds the cached word, no
// slot below it may name the key and every bucket read accepts it.
//
// When it need not: a copy claimed by a load (its blocks carry
// kBlockLoaded) has no late claim to fear, as load()'s promise rules out an
// insert of the key racing with the load; nor can a copy lie below it from
// before, as the load found none. Then the read takes Y and its block
// alone, and hits only when the block it finds still carries the flag.
//
// The block is read in the doorbell of the slot: the two are carried out
// back to back, so the block cannot have been reused under the slot's tag
// in between (that takes the block pool's wrap guard) unless the client
// that carries them out stops in between (on shm, its poller); unlike
// find_key, this path does not read the clock to exclude even that.
Status Ops::speculative_read(int si, const Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                             CacheEntry* e, bool* hit, std::string_view* value, uint64_t* read_at, bool* loaded) {
  *hit = false;
  const uint64_t cached = e->value;
  const bool loaded_copy = (e->slot & kLoadedCopy) != 0;
  const GlobalAddress slot(e->slot & ~kLoadedCopy);
  const size_t length = SlotBlockLength(cached);
  *read_at = clock();
  Status s;
  size_t bytes = 8;
  if (__builtin_expect(loaded_copy, 1)) {
    s = in_.read(tb.buckets, slot, 8, Option::kNone);
    if (!s.ok()) return s;
  } else {
    const DirectoryCache& dc = tc_.dirs[si];
    LowerRuns runs;
    if (dc.global_depth < 0 ||
        !FindLowerRuns(h, sh.groups, DirEntryOffset(dc.entries[h.dir_bits() & DepthMask(dc.global_depth)]),
                       slot.offset, &runs)) {
      ++tc_.stats.speculative_misses;
      cache_erase(h.primary);
      return Status::OK();
    }
    ++tc_.stats.speculative_looks_below;
    bytes = 0;
    for (int i = 0; i < runs.count; ++i) {
      s = in_.read(tb.buckets + bytes, GlobalAddress(slot.node, runs.offset[i]), runs.bytes[i], Option::kNone);
      if (!s.ok()) return s;
      bytes += runs.bytes[i];
    }
  }
  s = in_.read(tb.blocks, GlobalAddress(slot.node, SlotBlockOffset(cached)), length, Option::kSync);
  if (!s.ok()) return s;
  const auto* words = reinterpret_cast<const uint64_t*>(tb.buckets);
  const size_t count = bytes / 8;
  tb.words[0] = words[count - 1];  // Y's word: what write() CASes from
  if (SlotUnfrozen(tb.words[0]) == cached &&
      CheckBlock(tb.blocks, length, SlotTag(cached)) == BlockCheck::kValid && BlockKey(tb.blocks) == key &&
      (loaded_copy ? BlockLoaded(tb.blocks) : !LowerCopyMayExist(words, count, h))) {
    *hit = true;
    *value = BlockValue(tb.blocks);
    *loaded = BlockLoaded(tb.blocks);
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
