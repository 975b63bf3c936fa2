// SMART-HT operations.
//
// DESIGN
//
// Round trips. A search reads the key's two 128-byte bucket pairs (one
// doorbell, 1 RTT), then the blocks whose slot matches the key's 8-bit
// fingerprint and 12 directory bits (1 RTT); with speculative lookup a cached
// (slot address, slot value) reads the slot word and the block together (1
// RTT). Update and insert write the new block in the same doorbell as the
// bucket reads, then CAS the slot (update: 3 RTTs, 2 with a speculative hit;
// insert: 3, the last one checking for a concurrent copy).
//
// Duplicates. Two inserts of an absent key may both claim an empty slot.
// Every inserter re-reads the candidates after its CAS and clears every copy
// but the one at the lowest slot address; readers and writers also act on
// the lowest-address copy, so the surviving value never changes behind a
// reader's back. Deletes remove every copy they see.
//
// Growth (extendible hashing). A subtable whose candidate buckets are full
// is split under the shard's resize lock (a bit in the directory header):
// freeze every slot of the old subtable by CAS (writers then fail their CAS
// and back off; readers still read frozen slots), write the new subtable
// with the slots whose next directory bit is 1, rewrite the old one with the
// rest (new bucket headers, new empty-slot depth, new parity bit), and only
// then publish the new subtable in the directory. A client with a stale
// directory notices it from a bucket header that no longer accepts its key;
// a writer that read a slot before the split fails its CAS afterwards
// because the split changed every slot word (empty depth or parity).
//
// Reclamation. A block replaced by update/insert or removed by delete is
// retired by the client whose CAS unlinked it (exactly one CAS succeeds),
// into that thread's FIFO, and reused by the thread only after a grace
// period (reclaim_grace_ns). Each reuse bumps the block's 4-bit tag, which
// is also stored in the slot; a reader checks the block's checksum, tag and
// key, so a reader that raced with a reuse sees a mismatch and re-reads. A
// wrong answer would need a reader stalled across 16 grace periods between
// reading a slot and reading its block. Memory in use is thus bounded by the
// live keys plus the blocks retired within one grace period.
#include "hash_table.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

#include "layout.h"
#include "smart/bench.h"
#include "smart/task.h"
#include "smart/throttle.h"

namespace smart::hashtable {

namespace {

constexpr size_t kMaxBlockBytes = kMaxBlockUnits * kBlockUnit;
constexpr int kCandidateBuckets = 4;
// Room for every candidate's block, so one doorbell reads them all.
constexpr size_t kBlockAreaSize = kCandidateBuckets * kSlotsPerBucket * kMaxBlockBytes;
constexpr int kSplitWindowGroups = 64;
constexpr size_t kBuildBufferSize = size_t{1} << 20;
constexpr uint64_t kArenaBytes = 256 * 1024;
constexpr uint64_t kMaxAttempts = uint64_t{1} << 24;

const Status& NotFoundStatus() {
  static const Status s = Status::NotFound("key not found");
  return s;
}

// value = v, without std::string's general replace when the length is
// unchanged (the common case: a caller reusing its string for one table).
inline void AssignValue(std::string* value, std::string_view v) {
  if (value->size() == v.size()) {
    if (!v.empty()) memcpy(value->data(), v.data(), v.size());
  } else {
    value->assign(v.data(), v.size());
  }
}

Status TooManyAttempts() { return Status::Internal("hash table: an operation kept retrying (table busy or corrupt)"); }

}  // namespace

struct HashTable::Shard {
  node_t node = 0;
  GlobalAddress directory;
  uint64_t groups = 0;
};

namespace {

struct DirectoryCache {
  int global_depth = -1;
  std::vector<uint64_t> entries;
  bool refreshing = false;
};

struct BlockPool {
  struct Retired {
    uint64_t offset;
    uint8_t units;
    uint8_t tag;
    uint64_t cycles;
  };
  std::vector<uint64_t> free[kMaxBlockUnits + 1];  // offset | tag
  std::deque<Retired> limbo;
  uint64_t arena_next = 0;
  uint64_t arena_end = 0;
  bool arena_refilling = false;
};

struct TaskBuffers {
  char* buckets = nullptr;    // two bucket pairs
  char* blocks = nullptr;     // kBlockAreaSize
  char* new_block = nullptr;  // kMaxBlockBytes
  uint64_t* words = nullptr;  // 16 words for CAS results and slot reads
};

struct CacheEntry {
  uint64_t hash = 0;
  uint64_t slot = 0;  // GlobalAddress raw; 0: empty
  uint64_t value = 0;
};

// The candidate buckets of a key as read: two pairs of two buckets.
struct View {
  uint64_t pair_offset[2];
  const uint64_t* words;  // 32 words: pair 0 then pair 1
  uint64_t first_index, second_index;
  uint64_t dir_entry;
  // Unique buckets in search order (main 0, main 1, overflow 0, overflow 1).
  int count = 0;
  int word_base[kCandidateBuckets];  // header word index into `words`
  uint64_t bucket_offset[kCandidateBuckets];

  uint64_t header(int b) const { return words[word_base[b]]; }
  uint64_t slot(int b, int j) const { return words[word_base[b] + 1 + j]; }
  uint64_t slot_offset(int b, int j) const { return bucket_offset[b] + 8 + 8 * static_cast<uint64_t>(j); }
};

struct Copy {
  uint64_t slot_offset;
  uint64_t slot_value;
  int bucket;
  std::string_view value;
};

struct FindResult {
  bool retry = false;  // a block was torn or recycled: read again
  int copies = 0;
  Copy first;           // the copy at the lowest slot address
  Copy all[kCandidateBuckets * kSlotsPerBucket];
};

}  // namespace

struct HashTable::ThreadContext {
  ThreadContext(const SmartConfig& config, size_t shards) : backoff(config), dirs(shards), pools(shards) {}
  Backoff backoff;
  std::vector<DirectoryCache> dirs;
  std::vector<BlockPool> pools;
  char* dir_buffer = nullptr;
  std::vector<TaskBuffers> tasks = std::vector<TaskBuffers>(kMaxTasksPerThread);
  char* split_buffer = nullptr;  // 2 windows + CAS results
  bool split_busy = false;
  std::vector<CacheEntry> cache;
  size_t cache_mask = 0;
  uint64_t grace_cycles = 0;
  TableStats stats;
};

namespace {

class Ops {
 public:
  Ops(Initiator& initiator, const TableOptions& options, HashTable::ThreadContext& tc)
      : in_(initiator), options_(options), tc_(tc) {}

  HashTable::ThreadContext& tc() { return tc_; }

  Status task_buffers(TaskBuffers** out) {
    const int task = this_task::id();
    TaskBuffers& tb = tc_.tasks[task];
    if (tb.buckets == nullptr) {
      char* area = static_cast<char*>(in_.alloc_cache(4 * kBucketPairSize + kBlockAreaSize + kMaxBlockBytes + 128));
      if (area == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
      tb.buckets = area;
      tb.blocks = area + 4 * kBucketPairSize;
      tb.new_block = tb.blocks + kBlockAreaSize;
      tb.words = reinterpret_cast<uint64_t*>(tb.new_block + kMaxBlockBytes);
    }
    *out = &tb;
    return Status::OK();
  }

  // ---- directory ----

  Status refresh_directory(int si, const HashTable::Shard& sh) {
    DirectoryCache& dc = tc_.dirs[si];
    if (dc.refreshing) {
      // Another task of this thread is reading it right now.
      while (dc.refreshing) this_task::yield();
      return Status::OK();
    }
    if (tc_.dir_buffer == nullptr) {
      tc_.dir_buffer = static_cast<char*>(in_.alloc_cache(kDirectorySize));
      if (tc_.dir_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
    }
    dc.refreshing = true;
    Status s = in_.read(tc_.dir_buffer, sh.directory, kDirectorySize, Option::kSync);
    if (s.ok()) {
      DirectoryHeader header;
      memcpy(&header, tc_.dir_buffer, sizeof(header));
      const int depth = static_cast<int>(header.depth_word & 0xff);
      if (header.magic != kDirectoryMagic || depth > kMaxGlobalDepth) {
        s = Status::Internal("hash table: the directory on memory node " + std::to_string(sh.node) + " is corrupt");
      } else {
        dc.entries.resize(size_t{1} << depth);
        memcpy(dc.entries.data(), tc_.dir_buffer + kDirectoryEntriesOffset, 8 * dc.entries.size());
        dc.global_depth = depth;
      }
    }
    dc.refreshing = false;
    return s;
  }

  Status dir_entry(int si, const HashTable::Shard& sh, uint64_t dir_bits, uint64_t* entry) {
    DirectoryCache& dc = tc_.dirs[si];
    while (dc.global_depth < 0) {
      Status s = refresh_directory(si, sh);
      if (!s.ok()) return s;
    }
    *entry = dc.entries[dir_bits & DepthMask(dc.global_depth)];
    return Status::OK();
  }

  // ---- bucket reads ----

  // Reads the key's candidate buckets (with whatever the task queued before,
  // in the same doorbell). *stale: a bucket header rejects the key.
  Status read_candidates(int si, const HashTable::Shard& sh, const KeyHash& h, TaskBuffers& tb, View* v,
                         bool* stale) {
    Status s = dir_entry(si, sh, h.dir_bits(), &v->dir_entry);
    if (!s.ok()) return s;
    const uint64_t sub = DirEntryOffset(v->dir_entry);
    BucketIndices(h, sh.groups, &v->first_index, &v->second_index);
    v->pair_offset[0] = sub + BucketPairOffset(v->first_index);
    v->pair_offset[1] = sub + BucketPairOffset(v->second_index);
    s = in_.read(tb.buckets, GlobalAddress(sh.node, v->pair_offset[0]), kBucketPairSize, Option::kNone);
    if (!s.ok()) return s;
    s = in_.read(tb.buckets + kBucketPairSize, GlobalAddress(sh.node, v->pair_offset[1]), kBucketPairSize,
                 Option::kSync);
    if (!s.ok()) return s;
    v->words = reinterpret_cast<const uint64_t*>(tb.buckets);
    // Search order: main 0, main 1, overflow 0, overflow 1; a bucket shared
    // by both pairs is listed once.
    const int main0 = MainBucketInPair(v->first_index), main1 = MainBucketInPair(v->second_index);
    const int order[kCandidateBuckets][2] = {{0, main0}, {1, main1}, {0, 1 - main0}, {1, 1 - main1}};
    v->count = 0;
    *stale = false;
    for (const auto& o : order) {
      const uint64_t offset = v->pair_offset[o[0]] + kBucketSize * static_cast<uint64_t>(o[1]);
      bool seen = false;
      for (int b = 0; b < v->count; ++b) seen = seen || v->bucket_offset[b] == offset;
      if (seen) continue;
      v->bucket_offset[v->count] = offset;
      v->word_base[v->count] = o[0] * 16 + o[1] * 8;
      if (!HeaderAccepts(v->header(v->count), h.dir_bits())) *stale = true;
      ++v->count;
    }
    return Status::OK();
  }

  // After a stale header: refresh the directory; if it still maps the key
  // to the same subtable, a split is between rewriting the old subtable and
  // publishing the new one, so wait a little.
  Status handle_stale(int si, const HashTable::Shard& sh, const KeyHash& h, uint64_t used_entry, BackoffGuard* g) {
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

  // Reads the blocks of every slot that may hold the key and collects the
  // copies of it. Frozen slots count (their blocks are valid).
  Status find_key(const HashTable::Shard& sh, std::string_view key, const KeyHash& h, const View& v, TaskBuffers& tb,
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
    const uint8_t fp = h.fingerprint();
    const uint64_t dir_bits = h.dir_bits();
    for (int b = 0; b < v.count; ++b) {
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const uint64_t slot = v.slot(b, j);
        if (SlotEmpty(slot) || SlotFingerprint(slot) != fp || SlotDirBits(slot) != dir_bits) continue;
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
    return Status::OK();
  }

  // Reads the key's candidate buckets through a current directory entry (a
  // stale one is refreshed and the read repeated) and finds the key's copies.
  Status locate(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                BackoffGuard* g, View* v, FindResult* r) {
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      bool stale;
      Status s = read_candidates(si, sh, h, tb, v, &stale);
      if (!s.ok()) return s;
      if (!stale) return find_key(sh, key, h, *v, tb, r);
      s = handle_stale(si, sh, h, v->dir_entry, g);
      if (!s.ok()) return s;
    }
    return TooManyAttempts();
  }

  // ---- blocks ----

  Status alloc_block(int si, const HashTable::Shard& sh, size_t units, uint64_t* offset, uint8_t* tag) {
    BlockPool& p = tc_.pools[si];
    if (!p.limbo.empty()) {
      const uint64_t now = Cycles();
      const uint64_t grace = grace_cycles();
      int moved = 0;
      while (!p.limbo.empty() && now - p.limbo.front().cycles >= grace && moved < 64) {
        const BlockPool::Retired& r = p.limbo.front();
        p.free[r.units].push_back(r.offset | r.tag);
        p.limbo.pop_front();
        ++moved;
      }
    }
    std::vector<uint64_t>& list = p.free[units];
    if (!list.empty()) {
      const uint64_t e = list.back();
      list.pop_back();
      *offset = e & ~uint64_t{kBlockUnit - 1};
      *tag = static_cast<uint8_t>(e & 0xf);
      ++tc_.stats.blocks_reused;
      return Status::OK();
    }
    const uint64_t bytes = units * kBlockUnit;
    while (p.arena_next + bytes > p.arena_end) {
      // One task of the thread refills the arena; the others wait for it.
      if (p.arena_refilling) {
        this_task::yield();
        continue;
      }
      GlobalAddress arena;
      p.arena_refilling = true;
      Status s = in_.alloc_memory(sh.node, kArenaBytes, &arena);
      p.arena_refilling = false;
      if (!s.ok()) return s;
      if (arena.offset + kArenaBytes > kMaxBlockOffset) {
        return Status::OutOfMemory("hash table: block memory beyond 256 GiB of a memory blade is not addressable");
      }
      p.arena_next = arena.offset;
      p.arena_end = arena.offset + kArenaBytes;
      tc_.stats.remote_bytes_allocated += kArenaBytes;
    }
    *offset = p.arena_next;
    *tag = 0;
    p.arena_next += bytes;
    return Status::OK();
  }

  // A block unlinked by our CAS: reusable after the grace period.
  void retire_block(int si, uint64_t slot) {
    const SlotFields f = DecodeSlot(slot);
    tc_.pools[si].limbo.push_back(
        BlockPool::Retired{f.block_offset, f.units, static_cast<uint8_t>((f.tag + 1) & 0xf), Cycles()});
    ++tc_.stats.blocks_retired;
  }

  // A block that was never published: reusable at once.
  void release_block(int si, uint64_t offset, size_t units, uint8_t tag) {
    tc_.pools[si].free[units].push_back(offset | tag);
  }

  uint64_t grace_cycles() const { return tc_.grace_cycles; }

  // ---- speculative lookup cache ----

  CacheEntry* cache_find(uint64_t hash) {
    if (tc_.cache.empty()) return nullptr;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    return e.hash == hash && e.slot != 0 ? &e : nullptr;
  }
  void cache_put(uint64_t hash, GlobalAddress slot, uint64_t value) {
    if (tc_.cache.empty()) return;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    e.hash = hash;
    e.slot = slot.raw;
    e.value = SlotUnfrozen(value);
  }
  void cache_erase(uint64_t hash) {
    if (tc_.cache.empty()) return;
    CacheEntry& e = tc_.cache[hash & tc_.cache_mask];
    if (e.hash == hash) e.slot = 0;
  }

  // Reads the cached slot word and its block in one doorbell (after
  // anything queued). True when the slot still holds the cached value and
  // the block holds the key: then *value points into the block area.
  Status speculative_read(std::string_view key, const KeyHash& h, TaskBuffers& tb, CacheEntry* e, bool* hit,
                          std::string_view* value) {
    *hit = false;
    const uint64_t cached = e->value;
    const GlobalAddress slot(e->slot);
    const size_t length = SlotBlockLength(cached);
    Status s = in_.read(tb.words, slot, 8, Option::kNone);
    if (!s.ok()) return s;
    s = in_.read(tb.blocks, GlobalAddress(slot.node, SlotBlockOffset(cached)), length, Option::kSync);
    if (!s.ok()) return s;
    if (SlotUnfrozen(tb.words[0]) == cached &&
        CheckBlock(tb.blocks, length, SlotTag(cached)) == BlockCheck::kValid && BlockKey(tb.blocks) == key) {
      *hit = true;
      *value = BlockValue(tb.blocks);
      ++tc_.stats.speculative_hits;
      return Status::OK();
    }
    ++tc_.stats.speculative_misses;
    cache_erase(h.primary);
    return Status::OK();
  }

  // ---- operations ----

  Status search(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h, std::string* value) {
    TaskBuffers* tb = nullptr;
    Status s = task_buffers(&tb);
    if (!s.ok()) return s;
    if (CacheEntry* e = cache_find(h.primary)) {
      bool hit;
      std::string_view found;
      s = speculative_read(key, h, *tb, e, &hit, &found);
      if (!s.ok()) return s;
      if (hit) {
        AssignValue(value, found);
        return Status::OK();
      }
    }
    bool confirmed = false;
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      View v;
      FindResult r;
      s = locate(si, sh, key, h, *tb, nullptr, &v, &r);
      if (!s.ok()) return s;
      if (r.copies > 0) {
        AssignValue(value, r.first.value);
        if (options_.speculative_lookup) cache_put(h.primary, GlobalAddress(sh.node, r.first.slot_offset), r.first.slot_value);
        return Status::OK();
      }
      if (r.retry) {
        this_task::yield();
        continue;
      }
      // A miss is confirmed by a second read, which a concurrent split
      // cannot fool twice.
      if (!confirmed) {
        confirmed = true;
        continue;
      }
      return NotFoundStatus();
    }
    return TooManyAttempts();
  }

  // Update (insert == false) or upsert (insert == true) of `key` with
  // `value`.
  Status write(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h, std::string_view value,
               bool insert) {
    TaskBuffers* tb = nullptr;
    Status s = task_buffers(&tb);
    if (!s.ok()) return s;
    const size_t units = BlockUnits(key.size(), value.size());
    if (units > static_cast<size_t>(kMaxBlockUnits) || key.size() > kMaxKeyLength) {
      return Status::InvalidArgument("hash table: key and value of " + std::to_string(key.size()) + " and " +
                                     std::to_string(value.size()) + " bytes do not fit in a block (4032 bytes)");
    }
    BackoffGuard g(tc_.backoff);
    uint64_t offset;
    uint8_t tag;
    s = alloc_block(si, sh, units, &offset, &tag);
    if (!s.ok()) return s;
    EncodeBlock(key, value, tag, units, tb->new_block);
    SlotFields f;
    f.fingerprint = h.fingerprint();
    f.units = static_cast<uint8_t>(units);
    f.tag = tag;
    f.dir_bits = static_cast<uint16_t>(h.dir_bits());
    f.block_offset = offset;
    const uint64_t new_slot = EncodeSlot(f);
    // The block write rides in the doorbell of the next read.
    s = in_.write(tb->new_block, GlobalAddress(sh.node, offset), units * kBlockUnit, Option::kNone);
    if (!s.ok()) return s;

    if (CacheEntry* e = cache_find(h.primary)) {
      const GlobalAddress slot(e->slot);
      bool hit;
      std::string_view old;
      s = speculative_read(key, h, *tb, e, &hit, &old);
      if (!s.ok()) return s;
      if (hit && !SlotFrozen(tb->words[0])) {
        const uint64_t expected = tb->words[0];
        const uint64_t desired = (new_slot & ~kParityBit) | (expected & kParityBit);
        s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
        if (!s.ok()) return s;
        if (tb->words[0] == expected) {
          retire_block(si, expected);
          cache_put(h.primary, slot, desired);
          return Status::OK();
        }
        ++tc_.stats.cas_failures;
        cache_erase(h.primary);
        g.retry_task();
      }
    }

    bool confirmed = false;
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      View v;
      FindResult r;
      s = locate(si, sh, key, h, *tb, &g, &v, &r);
      if (!s.ok()) return s;
      if (r.copies == 0 && r.retry) {
        g.retry_task();
        continue;
      }
      if (r.copies > 0) {
        const uint64_t expected = r.first.slot_value;
        if (SlotFrozen(expected)) {
          g.retry_task();
          continue;
        }
        const uint64_t desired = SlotWithParity(new_slot, HeaderDepth(v.header(r.first.bucket)));
        const GlobalAddress slot(sh.node, r.first.slot_offset);
        s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
        if (!s.ok()) return s;
        if (tb->words[0] == expected) {
          retire_block(si, expected);
          if (options_.speculative_lookup) cache_put(h.primary, slot, desired);
          return Status::OK();
        }
        ++tc_.stats.cas_failures;
        g.retry_task();
        continue;
      }
      if (!insert) {
        if (!confirmed) {
          confirmed = true;
          continue;
        }
        release_block(si, offset, units, tag);
        return NotFoundStatus();
      }
      // Absent: claim an empty slot, main buckets first (the emptier one).
      int best_bucket = -1, best_slot = -1;
      bool frozen = false;
      int empties[kCandidateBuckets] = {};
      int first_empty[kCandidateBuckets];
      for (int b = 0; b < v.count; ++b) {
        first_empty[b] = -1;
        for (int j = 0; j < kSlotsPerBucket; ++j) {
          const uint64_t slot = v.slot(b, j);
          if (SlotFrozen(slot)) frozen = true;
          if (SlotEmpty(slot) && !SlotFrozen(slot)) {
            if (first_empty[b] < 0) first_empty[b] = j;
            ++empties[b];
          }
        }
      }
      if (frozen) {
        // A split is moving these buckets.
        g.retry_task();
        continue;
      }
      const int mains = std::min(v.count, 2);
      for (int pass = 0; pass < 2 && best_bucket < 0; ++pass) {
        const int from = pass == 0 ? 0 : mains, to = pass == 0 ? mains : v.count;
        for (int b = from; b < to; ++b) {
          if (empties[b] > 0 && (best_bucket < 0 || empties[b] > empties[best_bucket])) best_bucket = b;
        }
      }
      if (best_bucket < 0) {
        bool busy = false;
        s = split(si, sh, h, DirEntryOffset(v.dir_entry), &busy);
        if (!s.ok()) {
          release_block(si, offset, units, tag);
          return s;
        }
        if (busy) g.retry_task();
        continue;
      }
      best_slot = first_empty[best_bucket];
      const uint64_t expected = v.slot(best_bucket, best_slot);
      const uint64_t desired = SlotWithParity(new_slot, HeaderDepth(v.header(best_bucket)));
      const GlobalAddress slot(sh.node, v.slot_offset(best_bucket, best_slot));
      s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
      if (!s.ok()) return s;
      if (tb->words[0] != expected) {
        ++tc_.stats.cas_failures;
        g.retry_task();
        continue;
      }
      if (options_.speculative_lookup) cache_put(h.primary, slot, desired);
      return remove_duplicates(si, sh, key, h, *tb, g);
    }
    return TooManyAttempts();
  }

  // After an insert: keep only the lowest-address copy of the key.
  Status remove_duplicates(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h, TaskBuffers& tb,
                           BackoffGuard& g) {
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      View v;
      FindResult r;
      Status s = locate(si, sh, key, h, tb, &g, &v, &r);
      if (!s.ok()) return s;
      if (r.retry) {
        g.retry_task();
        continue;
      }
      if (r.copies <= 1) return Status::OK();
      bool again = false;
      for (int i = 0; i < r.copies; ++i) {
        const Copy& c = r.all[i];
        if (c.slot_offset == r.first.slot_offset) continue;
        if (SlotFrozen(c.slot_value)) {
          again = true;
          continue;
        }
        s = in_.compare_and_swap(tb.words, GlobalAddress(sh.node, c.slot_offset), c.slot_value,
                                 EmptySlot(HeaderDepth(v.header(c.bucket))), Option::kSync);
        if (!s.ok()) return s;
        if (tb.words[0] == c.slot_value) {
          retire_block(si, c.slot_value);
        } else {
          ++tc_.stats.cas_failures;
          again = true;
        }
      }
      if (!again) return Status::OK();
      g.retry_task();
    }
    return TooManyAttempts();
  }

  Status remove(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h) {
    TaskBuffers* tb = nullptr;
    Status s = task_buffers(&tb);
    if (!s.ok()) return s;
    BackoffGuard g(tc_.backoff);
    cache_erase(h.primary);
    bool confirmed = false, removed = false;
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      View v;
      FindResult r;
      s = locate(si, sh, key, h, *tb, &g, &v, &r);
      if (!s.ok()) return s;
      if (r.copies == 0 && r.retry) {
        g.retry_task();
        continue;
      }
      if (r.copies == 0) {
        if (removed) return Status::OK();
        if (!confirmed) {
          confirmed = true;
          continue;
        }
        return NotFoundStatus();
      }
      const uint64_t expected = r.first.slot_value;
      if (SlotFrozen(expected)) {
        g.retry_task();
        continue;
      }
      s = in_.compare_and_swap(tb->words, GlobalAddress(sh.node, r.first.slot_offset), expected,
                               EmptySlot(HeaderDepth(v.header(r.first.bucket))), Option::kSync);
      if (!s.ok()) return s;
      if (tb->words[0] != expected) {
        ++tc_.stats.cas_failures;
        g.retry_task();
        continue;
      }
      retire_block(si, expected);
      removed = true;
      // A transient duplicate (concurrent inserts) must go too.
      if (r.copies == 1) return Status::OK();
    }
    return TooManyAttempts();
  }

  Status read_modify_write(int si, const HashTable::Shard& sh, std::string_view key, const KeyHash& h,
                           const std::function<void(std::string*)>& modify) {
    TaskBuffers* tb = nullptr;
    Status s = task_buffers(&tb);
    if (!s.ok()) return s;
    BackoffGuard g(tc_.backoff);
    bool confirmed = false;
    bool have_block = false;
    uint64_t offset = 0;
    uint8_t tag = 0;
    size_t units = 0;
    std::string value;
    auto release = [&] {
      if (have_block) release_block(si, offset, units, tag);
      have_block = false;
    };
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      View v;
      FindResult r;
      s = locate(si, sh, key, h, *tb, &g, &v, &r);
      if (!s.ok()) return s;
      if (r.copies == 0 && r.retry) {
        g.retry_task();
        continue;
      }
      if (r.copies == 0) {
        if (!confirmed) {
          confirmed = true;
          continue;
        }
        release();
        return NotFoundStatus();
      }
      const uint64_t expected = r.first.slot_value;
      if (SlotFrozen(expected)) {
        g.retry_task();
        continue;
      }
      value.assign(r.first.value.data(), r.first.value.size());
      modify(&value);
      const size_t need = BlockUnits(key.size(), value.size());
      if (need > static_cast<size_t>(kMaxBlockUnits)) {
        release();
        return Status::InvalidArgument("hash table: the modified value does not fit in a block");
      }
      if (have_block && need != units) release();
      if (!have_block) {
        s = alloc_block(si, sh, need, &offset, &tag);
        if (!s.ok()) return s;
        units = need;
        have_block = true;
      }
      EncodeBlock(key, value, tag, units, tb->new_block);
      SlotFields f;
      f.fingerprint = h.fingerprint();
      f.units = static_cast<uint8_t>(units);
      f.tag = tag;
      f.dir_bits = static_cast<uint16_t>(h.dir_bits());
      f.block_offset = offset;
      const uint64_t desired = SlotWithParity(EncodeSlot(f), HeaderDepth(v.header(r.first.bucket)));
      const GlobalAddress slot(sh.node, r.first.slot_offset);
      // The block write and the CAS share a doorbell; the queue pair
      // executes them in order.
      s = in_.write(tb->new_block, GlobalAddress(sh.node, offset), units * kBlockUnit, Option::kNone);
      if (!s.ok()) return s;
      s = in_.compare_and_swap(tb->words, slot, expected, desired, Option::kSync);
      if (!s.ok()) return s;
      if (tb->words[0] == expected) {
        retire_block(si, expected);
        if (options_.speculative_lookup) cache_put(h.primary, slot, desired);
        return Status::OK();
      }
      ++tc_.stats.cas_failures;
      g.retry_task();
    }
    release();
    return TooManyAttempts();
  }

  // ---- growth ----

  // Splits the subtable at `subtable` (which held full candidate buckets
  // for `h`). *busy: another client holds the resize lock.
  Status split(int si, const HashTable::Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy) {
    *busy = false;
    if (tc_.split_busy) {
      *busy = true;
      return Status::OK();
    }
    if (tc_.split_buffer == nullptr) {
      tc_.split_buffer = static_cast<char*>(in_.alloc_cache(2 * kSplitWindowGroups * kGroupSize + 16 * 8));
      if (tc_.split_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
    }
    tc_.split_busy = true;
    Status s = split_locked(si, sh, h, subtable, busy);
    tc_.split_busy = false;
    return s;
  }

  Status split_locked(int si, const HashTable::Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy) {
    uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
    const GlobalAddress header_addr = sh.directory;
    // Take the resize lock.
    Status s = in_.read(word, header_addr, 8, Option::kSync);
    if (!s.ok()) return s;
    const uint64_t unlocked = word[0];
    if (unlocked & kDirectoryLockBit) {
      *busy = true;
      return Status::OK();
    }
    s = in_.compare_and_swap(word, header_addr, unlocked, unlocked | kDirectoryLockBit, Option::kSync);
    if (!s.ok()) return s;
    if (word[0] != unlocked) {
      *busy = true;
      return Status::OK();
    }
    uint64_t depth_word = unlocked;
    Status result = split_under_lock(si, sh, h, subtable, &depth_word);
    // Unlock, with the depth after a possible doubling.
    word[0] = depth_word;
    s = in_.write(word, header_addr, 8, Option::kSync);
    if (!s.ok()) return s;
    return result;
  }

  Status split_under_lock(int si, const HashTable::Shard& sh, const KeyHash& h, uint64_t subtable,
                          uint64_t* depth_word) {
    Status s = refresh_directory(si, sh);
    if (!s.ok()) return s;
    DirectoryCache& dc = tc_.dirs[si];
    if (static_cast<uint64_t>(dc.global_depth) != *depth_word) {
      return Status::Internal("hash table: the directory depth changed under the resize lock");
    }
    const uint64_t entry = dc.entries[h.dir_bits() & DepthMask(dc.global_depth)];
    if (DirEntryOffset(entry) != subtable) return Status::OK();  // already split by someone else
    const int depth = DirEntryDepth(entry);
    if (depth >= kMaxGlobalDepth) {
      return Status::OutOfMemory("hash table: a subtable of memory node " + std::to_string(sh.node) +
                                 " is full at the largest directory depth (" + std::to_string(kMaxGlobalDepth) +
                                 "); build the table with a larger expected key count");
    }
    const uint64_t suffix = h.dir_bits() & DepthMask(depth);
    uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
    if (depth == dc.global_depth) {
      // Double the directory: copy the entries to the upper half, then
      // raise the depth (still locked).
      const size_t half = dc.entries.size();
      std::vector<uint64_t> doubled(dc.entries);
      doubled.insert(doubled.end(), dc.entries.begin(), dc.entries.end());
      s = write_entries(sh, doubled, half, half);
      if (!s.ok()) return s;
      dc.entries.swap(doubled);
      ++dc.global_depth;
      *depth_word = static_cast<uint64_t>(dc.global_depth);
      word[0] = *depth_word | kDirectoryLockBit;
      s = in_.write(word, sh.directory, 8, Option::kSync);
      if (!s.ok()) return s;
    }
    const Geometry geometry{depth, sh.groups};
    GlobalAddress fresh;
    s = in_.alloc_memory(sh.node, geometry.subtable_bytes(), &fresh);
    if (!s.ok()) return s;
    const uint64_t new_suffix = suffix | (uint64_t{1} << depth);
    const int new_depth = depth + 1;
    const size_t words_per_group = kGroupSize / 8;
    std::vector<uint64_t> image(sh.groups * words_per_group);
    char* window = tc_.split_buffer;
    char* other = tc_.split_buffer + kSplitWindowGroups * kGroupSize;
    // 1. Freeze the old subtable window by window and write the new one.
    for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
      const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
      const uint64_t bytes = groups * kGroupSize;
      s = in_.read(window, GlobalAddress(sh.node, subtable + g0 * kGroupSize), bytes, Option::kSync);
      if (!s.ok()) return s;
      auto* w = reinterpret_cast<uint64_t*>(window);
      s = freeze(sh, subtable + g0 * kGroupSize, w, groups);
      if (!s.ok()) return s;
      memcpy(&image[g0 * words_per_group], w, bytes);
      auto* n = reinterpret_cast<uint64_t*>(other);
      for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
        n[b * 8] = EncodeBucketHeader(new_depth, new_suffix);
        for (int j = 0; j < kSlotsPerBucket; ++j) {
          const uint64_t slot = SlotUnfrozen(w[b * 8 + 1 + j]);
          const bool moves = !SlotEmpty(slot) && ((SlotDirBits(slot) >> depth) & 1);
          n[b * 8 + 1 + j] = moves ? SlotWithParity(slot, new_depth) : EmptySlot(new_depth);
        }
      }
      s = in_.write(other, fresh + g0 * kGroupSize, bytes, Option::kSync);
      if (!s.ok()) return s;
    }
    // 2. Rewrite the old subtable: new headers, moved slots emptied, kept
    // slots unfrozen with the new parity. Clients still directed here by
    // the directory find their moved keys rejected and wait for step 3.
    for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
      const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
      auto* w = reinterpret_cast<uint64_t*>(window);
      const uint64_t* old = &image[g0 * words_per_group];
      for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
        w[b * 8] = EncodeBucketHeader(new_depth, suffix);
        for (int j = 0; j < kSlotsPerBucket; ++j) {
          const uint64_t slot = SlotUnfrozen(old[b * 8 + 1 + j]);
          const bool keeps = !SlotEmpty(slot) && !((SlotDirBits(slot) >> depth) & 1);
          w[b * 8 + 1 + j] = keeps ? SlotWithParity(slot, new_depth) : EmptySlot(new_depth);
        }
      }
      s = in_.write(window, GlobalAddress(sh.node, subtable + g0 * kGroupSize), groups * kGroupSize, Option::kSync);
      if (!s.ok()) return s;
    }
    // 3. Publish: every entry of the old subtable gets the new depth, half
    // of them the new subtable.
    for (size_t i = 0; i < dc.entries.size(); ++i) {
      if ((i & DepthMask(depth)) != suffix) continue;
      dc.entries[i] = ((i >> depth) & 1) ? EncodeDirEntry(fresh.offset, new_depth) : EncodeDirEntry(subtable, new_depth);
    }
    s = write_entries(sh, dc.entries, 0, dc.entries.size());
    if (!s.ok()) return s;
    ++tc_.stats.splits;
    return Status::OK();
  }

  Status write_entries(const HashTable::Shard& sh, const std::vector<uint64_t>& entries, size_t from, size_t count) {
    // Through the split window buffers (2 windows = 24 KiB = 3072 entries).
    const size_t per_write = 2 * kSplitWindowGroups * kGroupSize / 8;
    for (size_t i = from; i < from + count; i += per_write) {
      const size_t n = std::min(per_write, from + count - i);
      memcpy(tc_.split_buffer, &entries[i], 8 * n);
      Status s = in_.write(tc_.split_buffer, sh.directory + (kDirectoryEntriesOffset + 8 * i), 8 * n, Option::kSync);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  // Freezes every slot of `groups` groups read into `w` (at `offset`); on
  // return `w` holds the frozen values.
  Status freeze(const HashTable::Shard& sh, uint64_t offset, uint64_t* w, uint64_t groups) {
    uint64_t* results = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
    std::vector<int> pending;
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const int index = static_cast<int>(b * 8 + 1 + j);
        if (!SlotFrozen(w[index])) pending.push_back(index);
      }
    }
    while (!pending.empty()) {
      std::vector<int> again;
      for (size_t i = 0; i < pending.size(); i += 16) {
        const size_t n = std::min<size_t>(16, pending.size() - i);
        for (size_t k = 0; k < n; ++k) {
          const int index = pending[i + k];
          Status s = in_.compare_and_swap(&results[k], GlobalAddress(sh.node, offset + 8 * static_cast<uint64_t>(index)),
                                          w[index], w[index] | kFrozenBit, k + 1 == n ? Option::kSync : Option::kNone);
          if (!s.ok()) return s;
        }
        for (size_t k = 0; k < n; ++k) {
          const int index = pending[i + k];
          if (results[k] == w[index]) {
            w[index] |= kFrozenBit;
          } else {
            w[index] = results[k];  // changed under us: freeze what is there now
            again.push_back(index);
          }
        }
      }
      pending.swap(again);
    }
    return Status::OK();
  }

  // ---- inspection ----

  Status inspect(int si, const HashTable::Shard& sh, std::string_view key, FindResult* r, View* view) {
    TaskBuffers* tb = nullptr;
    Status s = task_buffers(&tb);
    if (!s.ok()) return s;
    const KeyHash h = HashKey(key);
    for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
      s = locate(si, sh, key, h, *tb, nullptr, view, r);
      if (!s.ok()) return s;
      if (r->retry) {
        this_task::yield();
        continue;
      }
      return Status::OK();
    }
    return TooManyAttempts();
  }

 private:
  Initiator& in_;
  const TableOptions& options_;
  HashTable::ThreadContext& tc_;
};

// Builds an empty table on `node` for `geometry` and returns its directory.
GlobalAddress BuildTable(Initiator& in, node_t node, const Geometry& geometry) {
  GlobalAddress directory;
  Status s = in.alloc_memory(node, kDirectorySize, &directory);
  if (!s.ok()) throw Error("hash table: cannot allocate the directory on memory node " + std::to_string(node) + ": " + s.ToString());
  char* buffer = static_cast<char*>(in.alloc_cache(kBuildBufferSize));
  if (buffer == nullptr) throw Error("hash table: the initiator cache is too small to build a table; raise initiator_cache_size");
  const uint64_t subtables = uint64_t{1} << geometry.depth;
  std::vector<uint64_t> entries(subtables);
  const uint64_t groups_per_buffer = kBuildBufferSize / kGroupSize;
  Progress progress("building the hash table on memory node " + std::to_string(node), subtables);
  for (uint64_t i = 0; i < subtables; ++i) {
    GlobalAddress sub;
    s = in.alloc_memory(node, geometry.subtable_bytes(), &sub);
    if (!s.ok()) throw Error("hash table: cannot allocate a subtable on memory node " + std::to_string(node) + ": " + s.ToString());
    entries[i] = EncodeDirEntry(sub.offset, geometry.depth);
    auto* w = reinterpret_cast<uint64_t*>(buffer);
    for (uint64_t b = 0; b < groups_per_buffer * kBucketsPerGroup; ++b) {
      w[b * 8] = EncodeBucketHeader(geometry.depth, i);
      for (int j = 0; j < kSlotsPerBucket; ++j) w[b * 8 + 1 + j] = EmptySlot(geometry.depth);
    }
    for (uint64_t g0 = 0; g0 < geometry.groups; g0 += groups_per_buffer) {
      const uint64_t groups = std::min(groups_per_buffer, geometry.groups - g0);
      s = in.write(buffer, sub + g0 * kGroupSize, groups * kGroupSize, Option::kSync);
      if (!s.ok()) throw Error("hash table: building a subtable failed: " + s.ToString());
    }
    progress.update(i + 1);
  }
  progress.finish();
  DirectoryHeader header{static_cast<uint64_t>(geometry.depth), geometry.groups, kDirectoryMagic,
                         static_cast<uint64_t>(geometry.depth)};
  memcpy(buffer, &header, sizeof(header));
  memcpy(buffer + kDirectoryEntriesOffset, entries.data(), 8 * subtables);
  s = in.write(buffer, directory, kDirectoryEntriesOffset + 8 * subtables, Option::kSync);
  if (!s.ok()) throw Error("hash table: writing the directory failed: " + s.ToString());
  return directory;
}

}  // namespace

namespace {

// Tables get ids that are never reused, so a thread's remembered context can
// never belong to a destroyed table that a new one replaced at its address.
std::atomic<uint64_t> g_next_table_id{1};

// The context the calling thread used last, and its table's id: one table
// per thread in the common case, found without ThreadId().
struct LastContext {
  uint64_t table_id = 0;
  HashTable::ThreadContext* context = nullptr;
};
thread_local LastContext tls_last_context;

}  // namespace

HashTable::HashTable(Initiator& initiator, const SmartConfig& config, int shards, const TableOptions& options)
    : initiator_(initiator), config_(config), options_(options), id_(g_next_table_id.fetch_add(1)) {
  if (shards < 1 || shards > kMaxNodes) throw Error("hash table: shard count must be within 1..256");
  if (options_.speculative_cache_entries & (options_.speculative_cache_entries - 1)) {
    throw Error("hash table: speculative_cache_entries must be a power of two");
  }
  auto* word = static_cast<uint64_t*>(initiator_.alloc_cache(64));
  if (word == nullptr) throw Error("hash table: the initiator cache is exhausted");
  const uint64_t keys_per_shard = (options_.expected_keys + static_cast<uint64_t>(shards) - 1) / static_cast<uint64_t>(shards);
  for (int i = 0; i < shards; ++i) {
    auto shard = std::make_unique<Shard>();
    shard->node = static_cast<node_t>(i);
    const GlobalAddress root(shard->node, kRootEntryOffset + 8 * kRootEntryIndex);
    Status s = initiator_.compare_and_swap(word, root, 0, kRootEntryBuilding, Option::kSync);
    if (!s.ok()) throw Error("hash table: reading root entry 0 of memory node " + std::to_string(i) + ": " + s.ToString());
    uint64_t root_value = word[0];
    if (root_value == 0) {
      const Geometry geometry = GeometryFor(keys_per_shard);
      const uint64_t need = kDirectorySize + (uint64_t{1} << geometry.depth) * geometry.subtable_bytes();
      if (need + kChunkSize > initiator_.remote_capacity(shard->node)) {
        throw Error("hash table: memory node " + std::to_string(i) + " has " +
                    std::to_string(initiator_.remote_capacity(shard->node) >> 20) + " MiB, too little for a table of " +
                    std::to_string(keys_per_shard) + " keys (" + std::to_string(need >> 20) +
                    " MiB of buckets before any block); raise capacity in backend.json");
      }
      const GlobalAddress directory = BuildTable(initiator_, shard->node, geometry);
      s = initiator_.set_root_entry(shard->node, kRootEntryIndex, directory.offset);
      if (!s.ok()) throw Error("hash table: publishing the table failed: " + s.ToString());
      root_value = directory.offset;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (root_value == kRootEntryBuilding) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error("hash table: memory node " + std::to_string(i) + " has been building its table for 10 minutes");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      s = initiator_.get_root_entry(shard->node, kRootEntryIndex, &root_value);
      if (!s.ok()) throw Error("hash table: reading root entry 0 failed: " + s.ToString());
    }
    shard->directory = GlobalAddress(shard->node, root_value);
    s = initiator_.read(word, shard->directory, sizeof(DirectoryHeader), Option::kSync);
    if (!s.ok()) throw Error("hash table: reading the directory failed: " + s.ToString());
    DirectoryHeader header;
    memcpy(&header, word, sizeof(header));
    if (header.magic != kDirectoryMagic || header.groups_per_subtable == 0) {
      throw Error("hash table: root entry 0 of memory node " + std::to_string(i) +
                  " does not lead to a hash table (another application's memory blade?)");
    }
    shard->groups = header.groups_per_subtable;
    shards_.push_back(std::move(shard));
  }
}

HashTable::~HashTable() = default;

HashTable::ThreadContext& HashTable::context() {
  LastContext& last = tls_last_context;
  if (__builtin_expect(last.table_id == id_, 1)) return *last.context;
  ThreadContext& tc = context_slow();
  last.table_id = id_;
  last.context = &tc;
  return tc;
}

HashTable::ThreadContext& HashTable::context_slow() {
  const int id = ThreadId();
  ThreadContext* tc = contexts_[id].get();
  if (tc != nullptr) return *tc;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  contexts_[id] = std::make_unique<ThreadContext>(config_, shards_.size());
  tc = contexts_[id].get();
  tc->grace_cycles = static_cast<uint64_t>(static_cast<double>(options_.reclaim_grace_ns) * CyclesPerNanosecond()) + 1;
  if (options_.speculative_lookup && options_.speculative_cache_entries > 0) {
    tc->cache.resize(options_.speculative_cache_entries);
    tc->cache_mask = options_.speculative_cache_entries - 1;
  }
  return *tc;
}

Status HashTable::search(std::string_view key, std::string* value) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  ThreadContext& tc = context();
  // The cache entry is a likely miss: start loading it now.
  if (!tc.cache.empty()) __builtin_prefetch(&tc.cache[h.primary & tc.cache_mask]);
  Ops ops(initiator_, options_, tc);
  return ops.search(si, *shards_[si], key, h, value);
}

Status HashTable::insert(std::string_view key, std::string_view value) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  ThreadContext& tc = context();
  if (!tc.cache.empty()) __builtin_prefetch(&tc.cache[h.primary & tc.cache_mask]);
  Ops ops(initiator_, options_, tc);
  return ops.write(si, *shards_[si], key, h, value, true);
}

Status HashTable::update(std::string_view key, std::string_view value) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  ThreadContext& tc = context();
  if (!tc.cache.empty()) __builtin_prefetch(&tc.cache[h.primary & tc.cache_mask]);
  Ops ops(initiator_, options_, tc);
  return ops.write(si, *shards_[si], key, h, value, false);
}

Status HashTable::read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  Ops ops(initiator_, options_, context());
  return ops.read_modify_write(si, *shards_[si], key, h, modify);
}

Status HashTable::remove(std::string_view key) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  Ops ops(initiator_, options_, context());
  return ops.remove(si, *shards_[si], key, h);
}

Status HashTable::count_copies(std::string_view key, int* copies) {
  const int si = ShardOf(key, shards());
  Ops ops(initiator_, options_, context());
  FindResult r;
  View v;
  Status s = ops.inspect(si, *shards_[si], key, &r, &v);
  *copies = s.ok() ? r.copies : 0;
  return s;
}

Status HashTable::locate(std::string_view key, Location* location) {
  const int si = ShardOf(key, shards());
  const Shard& sh = *shards_[si];
  Ops ops(initiator_, options_, context());
  FindResult r;
  View v;
  Status s = ops.inspect(si, sh, key, &r, &v);
  if (!s.ok()) return s;
  if (r.copies == 0) return NotFoundStatus();
  location->slot = GlobalAddress(sh.node, r.first.slot_offset);
  location->slot_value = r.first.slot_value;
  location->block = GlobalAddress(sh.node, SlotBlockOffset(r.first.slot_value));
  location->block_length = SlotBlockLength(r.first.slot_value);
  return Status::OK();
}

Status HashTable::capacity(int shard, uint64_t* slots, int* global_depth) {
  if (shard < 0 || shard >= shards()) return Status::InvalidArgument("hash table: no such shard");
  const Shard& sh = *shards_[shard];
  ThreadContext& tc = context();
  Ops ops(initiator_, options_, tc);
  Status s = ops.refresh_directory(shard, sh);
  if (!s.ok()) return s;
  const DirectoryCache& dc = tc.dirs[shard];
  std::set<uint64_t> subtables;
  for (uint64_t e : dc.entries) subtables.insert(DirEntryOffset(e));
  *slots = subtables.size() * sh.groups * kSlotsPerGroup;
  *global_depth = dc.global_depth;
  return Status::OK();
}

TableStats HashTable::stats() const {
  TableStats total;
  for (const auto& tc : contexts_) {
    if (!tc) continue;
    const TableStats& s = tc->stats;
    total.torn_reads += s.torn_reads;
    total.stale_directory += s.stale_directory;
    total.cas_failures += s.cas_failures;
    total.splits += s.splits;
    total.speculative_hits += s.speculative_hits;
    total.speculative_misses += s.speculative_misses;
    total.blocks_retired += s.blocks_retired;
    total.blocks_reused += s.blocks_reused;
    total.remote_bytes_allocated += s.remote_bytes_allocated;
  }
  return total;
}

uint64_t HashTable::total_retries() const {
  uint64_t total = 0;
  for (const auto& tc : contexts_) {
    if (tc) total += tc->backoff.total_retries();
  }
  return total;
}

}  // namespace smart::hashtable
