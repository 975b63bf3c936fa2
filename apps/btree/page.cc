// SMART-BT page images: sealing and checking lines, headers, entries, and
// the pure halves of a split (what the two pages look like afterwards).
#include "page.h"

#include <algorithm>

#include "smart/crc32c.h"

namespace smart::btree {

namespace {

// CRC-32C of bytes 4..63 of each of `n` (1..4) lines at once: four
// independent chains of the CRC instruction hide its latency, so a page
// check costs about a quarter of 16 sequential CRCs. Same values as
// smart::Crc32c.
__attribute__((target("sse4.2"))) void LineCrcsSse42(const char* const* lines, int n, uint32_t* out) {
  uint64_t c[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
  uint32_t head[4];
  for (int k = 0; k < n; ++k) memcpy(&head[k], lines[k] + 4, 4);
  for (int k = 0; k < n; ++k) c[k] = __builtin_ia32_crc32si(static_cast<uint32_t>(c[k]), head[k]);
  for (size_t off = 8; off < kLineSize; off += 8) {
    for (int k = 0; k < n; ++k) c[k] = __builtin_ia32_crc32di(c[k], Load64(lines[k] + off));
  }
  for (int k = 0; k < n; ++k) out[k] = ~static_cast<uint32_t>(c[k]);
}

void LineCrcs(const char* const* lines, int n, uint32_t* out) {
  static const bool sse42 = Crc32cHasSse42();
  if (sse42) {
    LineCrcsSse42(lines, n, out);
  } else {
    for (int k = 0; k < n; ++k) out[k] = Crc32c(lines[k] + 4, kLineSize - 4);
  }
}

uint32_t StoredCrc(const char* line) {
  uint32_t crc;
  memcpy(&crc, line, 4);
  return crc;
}

}  // namespace

void SealLine(char* page, int line, uint32_t tagged_version) {
  char* l = page + kLineSize * static_cast<size_t>(line);
  memcpy(l + 4, &tagged_version, 4);
  const char* lines[1] = {l};
  uint32_t crc;
  LineCrcs(lines, 1, &crc);
  memcpy(l, &crc, 4);
}

void SealPage(char* page, uint32_t tagged_version) {
  for (int i = 0; i < kLinesPerPage; ++i) SealLine(page, i, tagged_version);
}

bool LineIntact(const char* line) {
  const char* lines[1] = {line};
  uint32_t crc;
  LineCrcs(lines, 1, &crc);
  return crc == StoredCrc(line);
}

bool PageConsistent(const char* page) {
  const uint32_t version = LineVersion(page);
  uint32_t magic;
  memcpy(&magic, page + kMagicOffset, 4);
  if (magic != kPageMagic) return false;
  // No page has more entries or levels than these; bytes that claim more
  // are not a page (and would send the entry loops past its end).
  if (Load16(page + kCountOffset) > kPageEntries || static_cast<uint8_t>(page[kLevelOffset]) > kMaxLevel) return false;
  for (int i = 0; i < kLinesPerPage; i += 4) {
    const char* lines[4];
    for (int k = 0; k < 4; ++k) {
      lines[k] = page + kLineSize * static_cast<size_t>(i + k);
      if (LineVersion(lines[k]) != version) return false;
    }
    uint32_t crcs[4];
    LineCrcs(lines, 4, crcs);
    for (int k = 0; k < 4; ++k) {
      if (crcs[k] != StoredCrc(lines[k])) return false;
    }
  }
  return true;
}

PageHeader DecodeHeader(const char* page) {
  PageHeader h;
  h.min = Load64(page + kMinOffset);
  h.max = Load64(page + kMaxOffset);
  h.sibling = GlobalAddress(Load64(page + kSiblingOffset));
  h.leftmost = GlobalAddress(Load64(page + kLeftmostOffset));
  h.level = static_cast<uint8_t>(page[kLevelOffset]);
  h.unbounded = (static_cast<uint8_t>(page[kFlagsOffset]) & kUnboundedFlag) != 0;
  h.count = Load16(page + kCountOffset);
  h.version = LineVersion(page) & kVersionMask;
  return h;
}

void EncodeHeader(const PageHeader& h, char* page) {
  Store64(page + kMinOffset, h.min);
  Store64(page + kMaxOffset, h.unbounded ? 0 : h.max);
  Store64(page + kSiblingOffset, h.sibling.raw);
  Store64(page + kLeftmostOffset, h.leftmost.raw);
  page[kLevelOffset] = static_cast<char>(h.level);
  page[kFlagsOffset] = static_cast<char>(h.unbounded ? kUnboundedFlag : 0);
  Store16(page + kCountOffset, h.count);
  memcpy(page + kMagicOffset, &kPageMagic, 4);
  memset(page + 48, 0, 16);
}

LeafEntry InlineEntry(uint64_t key, std::string_view value) {
  LeafEntry e;
  e.key = key;
  memcpy(&e.value, value.data(), std::min(value.size(), kInlineValueBytes));
  e.meta = static_cast<uint16_t>(kMetaValid | (value.size() & 0xf));
  return e;
}

LeafEntry BlockEntry(uint64_t key, GlobalAddress block, uint32_t units, uint8_t tag) {
  LeafEntry e;
  e.key = key;
  e.value = block.raw;
  e.meta = static_cast<uint16_t>(kMetaValid | kMetaInBlock | ((units & 0x3f) << 4) | (tag & 0xf));
  return e;
}

int FindLeafKey(const char* page, uint64_t key) {
  for (int line = 1; line < kLinesPerPage; ++line) {
    const char* l = page + kLineSize * static_cast<size_t>(line);
    for (int j = 0; j < kEntriesPerLine; ++j) {
      if ((Load16(l + 8 + 2 * j) & kMetaValid) && Load64(l + kLineHeadBytes + kEntrySize * j) == key) {
        return (line - 1) * kEntriesPerLine + j;
      }
    }
  }
  return -1;
}

int FreeLeafEntry(const char* page) {
  for (int e = 0; e < kPageEntries; ++e) {
    if (!(Load16(page + MetaOffset(e)) & kMetaValid)) return e;
  }
  return -1;
}

int CollectLeafEntries(const char* page, LeafEntry* out) {
  int n = 0;
  for (int e = 0; e < kPageEntries; ++e) {
    const LeafEntry entry = ReadLeafEntry(page, e);
    if (entry.valid()) out[n++] = entry;
  }
  return n;
}

GlobalAddress InternalChild(const char* page, const PageHeader& h, uint64_t key) {
  // Binary search for the last entry with entry.key <= key.
  int lo = 0, hi = std::min<int>(h.count, kPageEntries);
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (Load64(page + EntryOffset(mid)) <= key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo == 0 ? h.leftmost : GlobalAddress(Load64(page + EntryOffset(lo - 1) + 8));
}

int FindInternalKey(const char* page, const PageHeader& h, uint64_t key) {
  int lo = 0, hi = std::min<int>(h.count, kPageEntries);
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const uint64_t k = Load64(page + EntryOffset(mid));
    if (k == key) return mid;
    if (k < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

void InitPage(char* page, const PageHeader& h) {
  memset(page, 0, kPageSize);
  EncodeHeader(h, page);
}

void BuildLeaf(char* page, const PageHeader& h, const LeafEntry* entries, int n) {
  PageHeader header = h;
  header.level = 0;
  header.count = 0;
  InitPage(page, header);
  for (int i = 0; i < n; ++i) WriteLeafEntry(page, i, entries[i]);
  SealPage(page, TaggedVersion(h.version, true));
}

void BuildInternal(char* page, const PageHeader& h, const InternalEntry* entries, int n) {
  PageHeader header = h;
  header.count = static_cast<uint16_t>(n);
  InitPage(page, header);
  for (int i = 0; i < n; ++i) WriteInternalEntry(page, i, entries[i]);
  SealPage(page, TaggedVersion(h.version, false));
}

uint64_t SplitLeaf(char* page, const LeafEntry& extra, GlobalAddress right, char* right_page) {
  const PageHeader h = DecodeHeader(page);
  LeafEntry all[kPageEntries + 1];
  int n = CollectLeafEntries(page, all);
  all[n++] = extra;
  std::sort(all, all + n, [](const LeafEntry& a, const LeafEntry& b) { return a.key < b.key; });
  const int left_count = n / 2;
  const uint64_t split_key = all[left_count].key;

  PageHeader rh = h;
  rh.min = split_key;
  rh.version = 1;
  BuildLeaf(right_page, rh, all + left_count, n - left_count);

  PageHeader lh = h;
  lh.max = split_key;
  lh.unbounded = false;
  lh.sibling = right;
  lh.version = h.version + 1;
  BuildLeaf(page, lh, all, left_count);
  return split_key;
}

bool InsertInternal(char* page, uint64_t key, GlobalAddress child) {
  PageHeader h = DecodeHeader(page);
  const int n = h.count;
  int pos = 0;
  while (pos < n && ReadInternalEntry(page, pos).key < key) ++pos;
  if (pos < n && ReadInternalEntry(page, pos).key == key) {
    WriteInternalEntry(page, pos, InternalEntry{key, child});
    return true;
  }
  if (n >= kPageEntries) return false;
  for (int i = n; i > pos; --i) WriteInternalEntry(page, i, ReadInternalEntry(page, i - 1));
  WriteInternalEntry(page, pos, InternalEntry{key, child});
  h.count = static_cast<uint16_t>(n + 1);
  Store16(page + kCountOffset, h.count);
  return true;
}

uint64_t SplitInternal(char* page, uint64_t key, GlobalAddress child, GlobalAddress right, char* right_page) {
  const PageHeader h = DecodeHeader(page);
  InternalEntry all[kPageEntries + 1];
  int n = 0;
  bool placed = false;
  for (int i = 0; i < h.count; ++i) {
    const InternalEntry e = ReadInternalEntry(page, i);
    if (!placed && key < e.key) {
      all[n++] = InternalEntry{key, child};
      placed = true;
    }
    all[n++] = e;
  }
  if (!placed) all[n++] = InternalEntry{key, child};
  const int mid = n / 2;
  const uint64_t up_key = all[mid].key;

  PageHeader rh = h;
  rh.min = up_key;
  rh.leftmost = all[mid].child;
  rh.version = 1;
  BuildInternal(right_page, rh, all + mid + 1, n - mid - 1);

  PageHeader lh = h;
  lh.max = up_key;
  lh.unbounded = false;
  lh.sibling = right;
  lh.version = h.version + 1;
  BuildInternal(page, lh, all, mid);
  return up_key;
}

namespace {

struct BlockHeader {
  uint32_t crc;
  uint8_t tag;
  uint8_t pad[3];
  uint64_t key;
  uint32_t length;
  uint32_t pad2;
};
static_assert(sizeof(BlockHeader) == kBlockHeaderBytes);

}  // namespace

void EncodeBlock(uint64_t key, std::string_view value, uint8_t tag, uint32_t units, char* out) {
  BlockHeader bh{};
  bh.tag = tag;
  bh.key = key;
  bh.length = static_cast<uint32_t>(value.size());
  memcpy(out, &bh, sizeof(bh));
  memcpy(out + sizeof(bh), value.data(), value.size());
  const size_t used = sizeof(bh) + value.size();
  memset(out + used, 0, units * kBlockUnit - used);
  const uint32_t crc = Crc32c(out + 4, used - 4);
  memcpy(out, &crc, 4);
}

bool DecodeBlock(const char* block, uint32_t units, uint64_t key, uint8_t tag, std::string_view* value) {
  if (units == 0 || units > kMaxBlockUnits) return false;
  BlockHeader bh;
  memcpy(&bh, block, sizeof(bh));
  if (bh.tag != tag || bh.key != key || bh.length > units * kBlockUnit - sizeof(bh)) return false;
  if (Crc32c(block + 4, sizeof(bh) + bh.length - 4) != bh.crc) return false;
  *value = std::string_view(block + sizeof(bh), bh.length);
  return true;
}

}  // namespace smart::btree
