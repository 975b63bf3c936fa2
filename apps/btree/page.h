// SMART-BT pages as they lie in remote memory (apps/btree/DESIGN.md): 1024
// bytes, 16 lines of 64 bytes, each line opening with a CRC-32C and the page
// version. These functions work on a page image in local memory; they never
// touch the network, so the unit tests cover them on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "smart/common.h"

namespace smart::btree {

constexpr size_t kPageSize = 1024;
constexpr size_t kLineSize = 64;
constexpr int kLinesPerPage = static_cast<int>(kPageSize / kLineSize);  // 16
// Bytes of a line before its entries: CRC-32C, version, and one 16-bit meta
// per entry.
constexpr size_t kLineHeadBytes = 16;
constexpr int kEntrySize = 16;
constexpr int kEntriesPerLine = static_cast<int>((kLineSize - kLineHeadBytes) / kEntrySize);  // 3
constexpr int kEntryLines = kLinesPerPage - 1;  // line 0 holds the page header
constexpr int kPageEntries = kEntryLines * kEntriesPerLine;  // 45
constexpr uint32_t kPageMagic = 0x53425431;                   // "SBT1"
constexpr uint32_t kLeafVersionFlag = 0x80000000u;
constexpr uint32_t kVersionMask = 0x7fffffffu;
constexpr int kMaxLevel = 15;
constexpr size_t kInlineValueBytes = 8;

// Header field offsets in line 0.
constexpr size_t kMinOffset = 8;
constexpr size_t kMaxOffset = 16;
constexpr size_t kSiblingOffset = 24;
constexpr size_t kLeftmostOffset = 32;
constexpr size_t kLevelOffset = 40;
constexpr size_t kFlagsOffset = 41;
constexpr size_t kCountOffset = 42;
constexpr size_t kMagicOffset = 44;
constexpr uint8_t kUnboundedFlag = 1;

// Leaf entry meta (16 bits).
constexpr uint16_t kMetaValid = 0x8000;
constexpr uint16_t kMetaInBlock = 0x4000;

struct PageHeader {
  uint64_t min = 0;
  uint64_t max = 0;
  bool unbounded = true;  // no upper fence
  GlobalAddress sibling;
  GlobalAddress leftmost;
  uint8_t level = 0;
  uint16_t count = 0;
  uint32_t version = 0;  // without the leaf flag

  bool is_leaf() const { return level == 0; }
  // The fences hold `key`.
  bool covers(uint64_t key) const { return key >= min && (unbounded || key < max); }
  // `key` lies right of this page: move to the sibling.
  bool right_of(uint64_t key) const { return !unbounded && key >= max; }
};

// Byte offset of entry `e` (0..44) in a page.
inline size_t EntryOffset(int e) {
  return kLineSize * static_cast<size_t>(1 + e / kEntriesPerLine) + kLineHeadBytes + kEntrySize * static_cast<size_t>(e % kEntriesPerLine);
}
// Line (1..15) holding entry `e`.
inline int EntryLine(int e) { return 1 + e / kEntriesPerLine; }
inline size_t MetaOffset(int e) {
  return kLineSize * static_cast<size_t>(EntryLine(e)) + 8 + 2 * static_cast<size_t>(e % kEntriesPerLine);
}

inline uint64_t Load64(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
inline void Store64(char* p, uint64_t v) { memcpy(p, &v, 8); }
inline uint16_t Load16(const char* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
inline void Store16(char* p, uint16_t v) { memcpy(p, &v, 2); }

// ---- lines ----

// Seals line `line` of `page` with `version` (leaf flag included): writes
// the version and the CRC of the line.
void SealLine(char* page, int line, uint32_t tagged_version);
// Seals all 16 lines.
void SealPage(char* page, uint32_t tagged_version);
// A single 64-byte line is whole: its CRC matches.
bool LineIntact(const char* line);
inline uint32_t LineVersion(const char* line) {
  uint32_t v;
  memcpy(&v, line + 4, 4);
  return v;
}
// Every line intact and all carrying line 0's version, a page magic, and
// an entry count and level that a page can have.
bool PageConsistent(const char* page);

// ---- header ----

PageHeader DecodeHeader(const char* page);
// Writes the header fields into line 0 (not sealed).
void EncodeHeader(const PageHeader& h, char* page);
inline uint32_t TaggedVersion(uint32_t version, bool leaf) { return (version & kVersionMask) | (leaf ? kLeafVersionFlag : 0); }

// ---- leaf entries ----

struct LeafEntry {
  uint64_t key = 0;
  uint64_t value = 0;  // inline bytes, or the block's address
  uint16_t meta = 0;
  bool valid() const { return meta & kMetaValid; }
  bool in_block() const { return meta & kMetaInBlock; }
  size_t inline_length() const { return (meta & 0xf) < kInlineValueBytes ? (meta & 0xf) : kInlineValueBytes; }
  uint8_t block_tag() const { return meta & 0xf; }
  uint32_t block_units() const { return (meta >> 4) & 0x3f; }
};

inline LeafEntry ReadLeafEntry(const char* page, int e) {
  LeafEntry r;
  const char* p = page + EntryOffset(e);
  r.key = Load64(p);
  r.value = Load64(p + 8);
  r.meta = Load16(page + MetaOffset(e));
  return r;
}
inline void WriteLeafEntry(char* page, int e, const LeafEntry& entry) {
  char* p = page + EntryOffset(e);
  Store64(p, entry.key);
  Store64(p + 8, entry.value);
  Store16(page + MetaOffset(e), entry.meta);
}
// An inline entry for a value of at most 8 bytes.
LeafEntry InlineEntry(uint64_t key, std::string_view value);
// An entry naming a value block.
LeafEntry BlockEntry(uint64_t key, GlobalAddress block, uint32_t units, uint8_t tag);
inline std::string_view InlineValue(const LeafEntry& e, const uint64_t* value_word) {
  return std::string_view(reinterpret_cast<const char*>(value_word), e.inline_length());
}
// Index of the valid entry holding `key`, or -1.
int FindLeafKey(const char* page, uint64_t key);
// Index of the first free entry, or -1 when the leaf is full.
int FreeLeafEntry(const char* page);
// Valid entries of a leaf, unordered; returns their number.
int CollectLeafEntries(const char* page, LeafEntry* out);

// ---- internal entries ----

struct InternalEntry {
  uint64_t key = 0;
  GlobalAddress child;
};
inline InternalEntry ReadInternalEntry(const char* page, int e) {
  const char* p = page + EntryOffset(e);
  return InternalEntry{Load64(p), GlobalAddress(Load64(p + 8))};
}
inline void WriteInternalEntry(char* page, int e, const InternalEntry& entry) {
  char* p = page + EntryOffset(e);
  Store64(p, entry.key);
  Store64(p + 8, entry.child.raw);
}
// Index of the internal entry whose key is `key`, or -1.
int FindInternalKey(const char* page, const PageHeader& h, uint64_t key);
// The child of an internal page that covers `key` (within the fences).
GlobalAddress InternalChild(const char* page, const PageHeader& h, uint64_t key);

// ---- building pages ----

// An empty page image (all entries free), not sealed.
void InitPage(char* page, const PageHeader& h);
// A leaf page from `n` entries (placed in order), sealed with `version`.
void BuildLeaf(char* page, const PageHeader& h, const LeafEntry* entries, int n);
// An internal page from `n` sorted entries, sealed with `version`.
void BuildInternal(char* page, const PageHeader& h, const InternalEntry* entries, int n);

// Leaf split: the leaf `page` (full) plus `extra` sorted by key; the lower
// half stays in `page` (version + 1, max = split key, sibling = `right`),
// the upper half goes into `right_page` (fences [split key, old max),
// sibling = the old sibling). Both are sealed. Returns the split key.
uint64_t SplitLeaf(char* page, const LeafEntry& extra, GlobalAddress right, char* right_page);
// Inserts (key, child) into an internal page image in sorted position
// (replacing the child when the key is present). False when the page is
// full and the key is new. The image is not sealed.
bool InsertInternal(char* page, uint64_t key, GlobalAddress child);
// Internal split of a full page plus (key, child): the middle key goes up,
// its child becomes the right page's leftmost. Both sealed; returns the
// key that goes up.
uint64_t SplitInternal(char* page, uint64_t key, GlobalAddress child, GlobalAddress right, char* right_page);

// ---- value blocks ----

constexpr size_t kBlockHeaderBytes = 24;
constexpr size_t kBlockUnit = 64;
constexpr int kMaxBlockUnits = 63;
constexpr size_t kMaxValueBytes = kMaxBlockUnits * kBlockUnit - kBlockHeaderBytes;
inline uint32_t BlockUnitsFor(size_t value_length) {
  return static_cast<uint32_t>((kBlockHeaderBytes + value_length + kBlockUnit - 1) / kBlockUnit);
}
// Writes the block image (units * 64 bytes) for key and value.
void EncodeBlock(uint64_t key, std::string_view value, uint8_t tag, uint32_t units, char* out);
// The value, when the block image holds `key` with `tag` and its CRC
// matches; false for a torn or recycled block.
bool DecodeBlock(const char* block, uint32_t units, uint64_t key, uint8_t tag, std::string_view* value);

}  // namespace smart::btree
