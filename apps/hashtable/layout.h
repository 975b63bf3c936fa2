// SMART-HT on-wire layout: the words and blocks a client reads and writes on
// a memory blade. Everything here is plain data and pure functions, so the
// unit tests cover it without a memory blade.
//
// Per shard (one memory blade), reached through the named root "hashtable":
//
//   Directory   header (global depth, geometry, resize lock, split intent), then
//               an array of entries (subtable offset | local depth), of which
//               the first 1 << global depth are in use; the array moves to a
//               larger one when the table outgrows it.
//   Subtable    groups_per_subtable groups of three 64-byte buckets:
//               [main bucket of even indices][shared overflow][main of odd].
//               A key's bucket index i (one per hash) reads 128 bytes: for an
//               even i buckets 0-1 of group i/2 (main, overflow), for an odd
//               i buckets 1-2 (overflow, main), so all three buckets hold keys.
//   Bucket      header (local depth, change count, suffix), 7 slots of 8 bytes.
//   KV block    written out of place, immutable once published; a slot CAS
//               publishes it. Trailing CRC-32C detects a torn read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace smart::hashtable {

constexpr const char* kRootName = "hashtable";

constexpr int kSlotsPerBucket = 7;
constexpr size_t kBucketSize = 64;
constexpr int kBucketsPerGroup = 3;
constexpr size_t kGroupSize = kBucketSize * kBucketsPerGroup;  // 192
constexpr int kSlotsPerGroup = kSlotsPerBucket * kBucketsPerGroup;
constexpr size_t kBucketPairSize = 2 * kBucketSize;  // one READ per hash

// Directory: up to 2^kMaxGlobalDepth entries, in an array that holds
// 2^capacity depth of them. The array starts right after the header and
// moves to a larger one (kDirectoryGrowthBits more) when the global depth
// reaches its capacity, so the table grows for as long as its memory blade
// has memory. The low kSlotDirBits bits of a key's directory hash are kept
// in its slot, so a split up to that depth never reads a block to decide
// where a key goes; deeper splits read the blocks of the slots they move
// and hash the keys.
constexpr int kMaxGlobalDepth = 32;
constexpr int kDefaultDirectoryCapacityDepth = 20;
constexpr int kDirectoryGrowthBits = 4;
constexpr int kSlotDirBits = 12;
constexpr uint64_t kSlotDirMask = (uint64_t{1} << kSlotDirBits) - 1;
constexpr uint64_t kDirectoryMagic = 0x3330544848434152ull;  // "RACEHT03"
// The directory header. The resize lock is a smart::RemoteLock word (owner
// and lease), so a client that dies while splitting is taken over; the
// split intent tells the new holder what the dead one was doing, so that it
// can finish the split (see split.cc).
struct DirectoryHeader {
  uint64_t depth_word;  // EncodeDepthWord: global depth, capacity, where the entries are
  uint64_t groups_per_subtable;
  uint64_t magic;
  uint64_t initial_depth;
  uint64_t resize_lock;   // RemoteLock word; 0: free
  uint64_t split_intent;  // 0: no split under way; else EncodeSplitIntent
  uint64_t split_old;     // offset of the subtable being split
  uint64_t split_fresh;   // offset of the subtable it splits into
};
static_assert(sizeof(DirectoryHeader) == 64);
constexpr size_t kResizeLockOffset = offsetof(DirectoryHeader, resize_lock);
constexpr size_t kSplitIntentOffset = offsetof(DirectoryHeader, split_intent);

// Split intent word: phase (bits 0-7: 1 freezing the old subtable and
// writing the new one, 2 rewriting the old one, 3 publishing in the
// directory), the old subtable's local depth (bits 8-15) and its suffix
// (bits 32-63).
struct SplitIntent {
  int phase = 0;
  int depth = 0;
  uint64_t suffix = 0;
};
inline uint64_t EncodeSplitIntent(const SplitIntent& i) {
  return static_cast<uint64_t>(i.phase & 0xff) | static_cast<uint64_t>(i.depth & 0xff) << 8 | i.suffix << 32;
}
inline SplitIntent DecodeSplitIntent(uint64_t w) {
  return SplitIntent{static_cast<int>(w & 0xff), static_cast<int>((w >> 8) & 0xff), w >> 32};
}
constexpr size_t kDirectoryEntriesOffset = sizeof(DirectoryHeader);
// Bytes of a directory built with room for 2^capacity_depth entries.
inline uint64_t DirectoryBytes(int capacity_depth) { return kDirectoryEntriesOffset + (uint64_t{8} << capacity_depth); }

// The header's depth word: the global depth (bits 0-7), the capacity of the
// entry array as a depth (bits 8-15) and the array's offset on the memory
// blade (bits 16-63; 0: right after the header). One 8-byte write changes
// all three, so a reader never pairs a depth with the wrong array.
struct DirectoryShape {
  int depth = 0;
  int capacity_depth = 0;
  uint64_t entries_offset = 0;  // 0: after the header
};
inline uint64_t EncodeDepthWord(const DirectoryShape& d) {
  return static_cast<uint64_t>(d.depth & 0xff) | static_cast<uint64_t>(d.capacity_depth & 0xff) << 8 |
         d.entries_offset << 16;
}
inline DirectoryShape DecodeDepthWord(uint64_t w) {
  return DirectoryShape{static_cast<int>(w & 0xff), static_cast<int>((w >> 8) & 0xff), w >> 16};
}
// A depth word that makes sense for a blade of `capacity` bytes.
inline bool DepthWordValid(const DirectoryShape& d, uint64_t capacity) {
  return d.depth <= d.capacity_depth && d.capacity_depth <= kMaxGlobalDepth &&
         (d.entries_offset == 0 || (d.entries_offset % 8 == 0 && d.entries_offset < capacity &&
                                    (uint64_t{8} << d.capacity_depth) <= capacity - d.entries_offset));
}

// Directory entry: subtable offset (chunk aligned) | local depth (bits 0-7).
inline uint64_t EncodeDirEntry(uint64_t subtable_offset, int local_depth) {
  return subtable_offset | static_cast<uint64_t>(local_depth);
}
inline uint64_t DirEntryOffset(uint64_t entry) { return entry & ~uint64_t{0xff}; }
inline int DirEntryDepth(uint64_t entry) { return static_cast<int>(entry & 0xff); }
inline uint64_t DepthMask(int depth) { return (uint64_t{1} << depth) - 1; }

// Bucket header: the subtable's local depth and suffix, as written by the
// last split, and a change count. A client whose key does not match depth
// and suffix used a stale directory. The count (24 bits, wrapping) goes up
// before a copy of a key that stays present is removed from a bucket pair
// while a lower copy of the key lives in this bucket (DESIGN.md,
// "Duplicates"): a reader that found no copy compares the headers of its
// two reads and reads again when one moved.
//   bits  0-7   local depth
//   bits  8-31  change count
//   bits 32-63  suffix
struct BucketHeader {
  uint32_t depth_and_count;
  uint32_t suffix;
};
static_assert(sizeof(BucketHeader) == 8);
constexpr uint64_t kHeaderCountUnit = uint64_t{1} << 8;
constexpr uint64_t kHeaderCountMask = uint64_t{0xffffff} << 8;
inline uint64_t EncodeBucketHeader(int local_depth, uint64_t suffix) {
  return static_cast<uint64_t>(local_depth & 0xff) | (suffix << 32);
}
inline int HeaderDepth(uint64_t header) { return static_cast<int>(header & 0xff); }
inline uint64_t HeaderSuffix(uint64_t header) { return header >> 32; }
inline uint64_t HeaderCount(uint64_t header) { return (header & kHeaderCountMask) >> 8; }
// The header without its change count: what a split writes.
inline uint64_t HeaderShape(uint64_t header) { return header & ~kHeaderCountMask; }
// `header` with its change count one up (wrapping within its bits).
inline uint64_t HeaderBumped(uint64_t header) {
  return HeaderShape(header) | ((header + kHeaderCountUnit) & kHeaderCountMask);
}
// True when a key with these directory bits belongs to the bucket's subtable.
// A header whose depth makes no sense accepts nothing.
inline bool HeaderAccepts(uint64_t header, uint64_t dir_bits) {
  const int depth = HeaderDepth(header);
  return depth >= 0 && depth <= kMaxGlobalDepth && (dir_bits & DepthMask(depth)) == HeaderSuffix(header);
}

// Slot word (0 is never a valid value after a table is built):
//   bits  0-7   fingerprint
//   bits  8-13  block length in 64-byte units (1..63); for an empty slot the
//               local depth of its subtable, so an insert that read the slot
//               before a split cannot land in it after the split
//   bits 14-17  block tag: bumped each time the block is reused, so a reader
//               holding an old slot value notices a recycled block
//   bit  18     frozen: a split is moving the bucket; writers wait
//   bits 19-30  the low kSlotDirBits directory hash bits of the key
//   bit  31     parity of the subtable's local depth when the slot was
//               written: a split rewrites every slot it keeps, so a writer
//               that read the slot before the split fails its CAS after it
//   bits 32-63  block offset / 64 on the shard's memory blade (256 GiB)
constexpr size_t kBlockUnit = 64;
constexpr int kMaxBlockUnits = 63;
constexpr uint64_t kMaxBlockOffset = (uint64_t{1} << 32) * kBlockUnit;
constexpr int kTagBits = 4;
constexpr uint64_t kFrozenBit = uint64_t{1} << 18;
constexpr uint64_t kParityBit = uint64_t{1} << 31;

struct SlotFields {
  uint8_t fingerprint = 0;
  uint8_t units = 0;  // block length / 64
  uint8_t tag = 0;
  uint16_t dir_bits = 0;
  bool parity = false;
  uint64_t block_offset = 0;  // bytes, 64-aligned
};

inline uint64_t EncodeSlot(const SlotFields& f) {
  return uint64_t{f.fingerprint} | (uint64_t{f.units} & 0x3f) << 8 | (uint64_t{f.tag} & 0xf) << 14 |
         (uint64_t{f.dir_bits} & 0xfff) << 19 | uint64_t{f.parity} << 31 | (f.block_offset / kBlockUnit) << 32;
}
inline SlotFields DecodeSlot(uint64_t slot) {
  SlotFields f;
  f.fingerprint = static_cast<uint8_t>(slot);
  f.units = static_cast<uint8_t>((slot >> 8) & 0x3f);
  f.tag = static_cast<uint8_t>((slot >> 14) & 0xf);
  f.dir_bits = static_cast<uint16_t>((slot >> 19) & 0xfff);
  f.parity = (slot & kParityBit) != 0;
  f.block_offset = (slot >> 32) * kBlockUnit;
  return f;
}
inline bool SlotEmpty(uint64_t slot) { return (slot >> 32) == 0; }
inline bool SlotFrozen(uint64_t slot) { return (slot & kFrozenBit) != 0; }
inline uint64_t SlotUnfrozen(uint64_t slot) { return slot & ~kFrozenBit; }
inline uint8_t SlotFingerprint(uint64_t slot) { return static_cast<uint8_t>(slot); }
inline uint64_t SlotBlockOffset(uint64_t slot) { return (slot >> 32) * kBlockUnit; }
inline size_t SlotBlockLength(uint64_t slot) { return ((slot >> 8) & 0x3f) * kBlockUnit; }
inline uint8_t SlotTag(uint64_t slot) { return static_cast<uint8_t>((slot >> 14) & 0xf); }
inline uint64_t SlotDirBits(uint64_t slot) { return (slot >> 19) & 0xfff; }
// `slot` (non-empty) as written into a subtable of local depth `depth`.
inline uint64_t SlotWithParity(uint64_t slot, int depth) {
  return (depth & 1) ? (slot | kParityBit) : (slot & ~kParityBit);
}
inline uint64_t EmptySlot(int local_depth) { return static_cast<uint64_t>(local_depth & 0x3f) << 8; }

// True when an unfrozen slot agrees with the local depth of its bucket's
// header: an empty slot carries that depth, a full one its parity. Every
// write of a slot keeps this, so a bucket whose slots disagree with its
// header was read while a split rewrote it (a READ is atomic only per 8-byte
// word: the old header can come with rewritten slots), or is corrupt. A
// writer must not act on such a read: an empty slot rewritten by the split
// would take, by CAS, a key that the old header accepts but that the split
// moved to the new subtable, where nobody would find it. Frozen slots
// predate the rewrite and make writers wait anyway.
inline bool SlotAgreesWithHeader(uint64_t slot, uint64_t header) {
  if (SlotFrozen(slot)) return true;
  const int depth = HeaderDepth(header);
  if (SlotEmpty(slot)) return slot == EmptySlot(depth);
  return ((slot & kParityBit) != 0) == ((depth & 1) != 0);
}

// KV block: header, key, value, zero padding, CRC-32C of everything before
// the last 4 bytes. The tag repeats the slot's tag.
struct BlockHeader {
  uint16_t key_length;
  uint8_t tag;
  uint8_t flags;  // kBlockLoaded, kBlockDerived
  uint32_t value_length;
};
// The slot holding this block got its key's copy from a load (HashTable::
// load: no other insert of the key ran at the same time), and only writes
// to that copy followed, each passing the flag on. No copy of the key can
// then lie below the slot, so a speculative read need not look there
// (lookup.cc). Blocks of copies that inserts claimed do not carry it.
constexpr uint8_t kBlockLoaded = 1;
// Written by a read-modify-write: its value was computed from the one it
// replaced. A write that lost its CAS to such a block cannot have taken
// effect just before it (the read-modify-write read the value before), so
// it does not count itself superseded (Ops::superseded).
constexpr uint8_t kBlockDerived = 2;
static_assert(sizeof(BlockHeader) == 8);
constexpr size_t kBlockTrailer = 4;

inline size_t BlockUnits(size_t key_length, size_t value_length) {
  return (sizeof(BlockHeader) + key_length + value_length + kBlockTrailer + kBlockUnit - 1) / kBlockUnit;
}
constexpr size_t kMaxKeyLength = 1024;


// Fills `out` (units * 64 bytes) with a block. Precondition: the key and
// value fit in `units` units.
void EncodeBlock(std::string_view key, std::string_view value, uint8_t tag, size_t units, char* out,
                 uint8_t flags = 0);

enum class BlockCheck { kValid, kTorn, kWrongTag };
// Checks a block read for a slot: CRC first (a torn or recycled-while-read
// block), then the tag (a block reused since the slot was read).
BlockCheck CheckBlock(const char* block, size_t length, uint8_t expected_tag);
inline std::string_view BlockKey(const char* block) {
  const auto* h = reinterpret_cast<const BlockHeader*>(block);
  return {block + sizeof(BlockHeader), h->key_length};
}
inline bool BlockLoaded(const char* block) {
  return (reinterpret_cast<const BlockHeader*>(block)->flags & kBlockLoaded) != 0;
}
inline bool BlockDerived(const char* block) {
  return (reinterpret_cast<const BlockHeader*>(block)->flags & kBlockDerived) != 0;
}
inline std::string_view BlockValue(const char* block) {
  const auto* h = reinterpret_cast<const BlockHeader*>(block);
  return {block + sizeof(BlockHeader) + h->key_length, h->value_length};
}

// The hashes of a key: directory bits, fingerprint, two bucket indices in
// [0, 2 * groups_per_subtable), and the shard, from independent seeds.
struct KeyHash {
  uint64_t primary;    // dir bits 0-11 (0-11), fingerprint (13-20), bucket 0 (32-63)
  uint64_t secondary;  // dir bits 12-31 (0-19), bucket 1 (32-63)
  // kMaxGlobalDepth bits; the slot keeps the low kSlotDirBits of them.
  uint64_t dir_bits() const { return (primary & kSlotDirMask) | (secondary & 0xfffff) << kSlotDirBits; }
  uint8_t fingerprint() const { return static_cast<uint8_t>(primary >> 13); }
};
uint64_t HashBytes(const void* data, size_t length, uint64_t seed);
KeyHash HashKey(std::string_view key);
int ShardOf(std::string_view key, int shards);
// ShardOf and HashKey of one key in a single pass over it (same values).
KeyHash HashKeyAndShard(std::string_view key, int shards, int* shard);
// Bucket index for hash word `h` in a subtable of `groups` groups.
inline uint64_t BucketIndex(uint64_t h, uint64_t groups) { return ((h >> 32) * (2 * groups)) >> 32; }
// The two bucket indices of a key; never equal.
void BucketIndices(const KeyHash& hash, uint64_t groups, uint64_t* first, uint64_t* second);
// Byte offset, inside the subtable, of the 128-byte pair read for index i.
inline uint64_t BucketPairOffset(uint64_t index) { return (index >> 1) * kGroupSize + (index & 1) * kBucketSize; }
// Within the pair read for index i: which of the two buckets is the main one.
inline int MainBucketInPair(uint64_t index) { return static_cast<int>(index & 1); }

// Initial geometry for a table expected to hold `keys` keys: 2^depth
// subtables of `groups` groups, about 75% full at `keys`.
struct Geometry {
  int depth;
  uint64_t groups;
  uint64_t subtable_bytes() const;
  uint64_t capacity_slots() const { return (uint64_t{1} << depth) * groups * kSlotsPerGroup; }
};
constexpr uint64_t kMaxGroupsPerSubtable = 16384;
constexpr uint64_t kMinGroupsPerSubtable = 8;
constexpr int kMaxInitialDepth = 10;
Geometry GeometryFor(uint64_t keys);

}  // namespace smart::hashtable
