// Fuzz target: SMART-BT's parsers of remote bytes: a page image as read
// (its line checks, header, leaf and internal entries, and the in-place
// insert and split a writer runs on it) and a value block named by a leaf
// entry. Nothing may read or write past the page; a page that passes its
// checks yields entries and children from the page itself.
//
// Input: a flags byte, then the page image (zero-filled to kPageSize),
// then a unit count and block bytes. Flags bit 0: keep the bytes as they are; otherwise
// the page gets its magic and every line is sealed, so that only its
// fields are wrong and the parsers behind the line checks run.
#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>

#include "fuzz_check.h"
#include "page.h"
#include "test/unit/guarded_page.h"

using namespace smart;
using namespace smart::btree;

namespace {

void Block(const uint8_t* bytes, size_t size, uint64_t key, uint8_t tag) {
  // The first byte picks the unit count, as a leaf entry's 6 bits would.
  if (size == 0) return;
  const uint32_t units = static_cast<uint32_t>(bytes[0] % (kMaxBlockUnits + 2));
  const size_t length = static_cast<size_t>(units) * kBlockUnit;
  std::unique_ptr<char[]> block(new char[length == 0 ? 1 : length]);
  memset(block.get(), 0, length);
  memcpy(block.get(), bytes + 1, std::min(size - 1, length));
  if (units > kMaxBlockUnits) return;  // a caller never reads more than a block
  std::string_view value;
  if (!DecodeBlock(block.get(), units, key, tag, &value)) return;
  FuzzCheck(units >= 1, "a block of no units decoded");
  FuzzCheck(value.data() >= block.get() && value.data() + value.size() <= block.get() + length,
            "a decoded block's value lies outside it");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool raw = data[0] & 1;
  const uint8_t* image = data + 1;
  const size_t image_size = std::min(size - 1, kPageSize);
  static GuardedPage p, right;
  memset(p.page, 0, kPageSize);
  memcpy(p.page, image, image_size);
  p.Arm();
  right.Arm();
  if (!raw) {
    memcpy(p.page + kMagicOffset, &kPageMagic, 4);
    uint32_t version;
    memcpy(&version, p.page, 4);
    SealPage(p.page, version);
  }
  uint64_t key = 0;
  memcpy(&key, p.page + 8, 8);
  key ^= static_cast<uint64_t>(size) * 0x9e3779b97f4a7c15ull;
  if (PageConsistent(p.page)) {
    const PageHeader h = DecodeHeader(p.page);
    FuzzCheck(h.count <= kPageEntries && h.level <= kMaxLevel, "a page that passed its checks has impossible fields");
    const int found = FindLeafKey(p.page, key);
    FuzzCheck(found >= -1 && found < kPageEntries, "a leaf search returned an entry outside the page");
    const int free_entry = FreeLeafEntry(p.page);
    FuzzCheck(free_entry >= -1 && free_entry < kPageEntries, "a free entry outside the page");
    LeafEntry entries[kPageEntries];
    const int n = CollectLeafEntries(p.page, entries);
    FuzzCheck(n >= 0 && n <= kPageEntries, "more leaf entries than a page holds");
    for (int i = 0; i < n; ++i) {
      FuzzCheck(entries[i].inline_length() <= kInlineValueBytes, "an inline value longer than its room");
    }
    std::set<uint64_t> children{h.leftmost.raw};
    for (int i = 0; i < h.count; ++i) children.insert(ReadInternalEntry(p.page, i).child.raw);
    FuzzCheck(children.count(InternalChild(p.page, h, key).raw) == 1, "a descent to a child the page does not name");
    const int at = FindInternalKey(p.page, h, key);
    FuzzCheck(at >= -1 && at < h.count, "an internal search outside the entries");
    if (!InsertInternal(p.page, key, GlobalAddress(0, 1024))) {
      SplitInternal(p.page, key, GlobalAddress(0, 1024), GlobalAddress(0, 2048), right.page);
      FuzzCheck(PageConsistent(right.page), "a split wrote a right page that fails its checks");
      FuzzCheck(right.GuardIntact(), "a split wrote past the right page");
    }
    FuzzCheck(p.GuardIntact(), "a parser wrote past the page");
  }
  if (size > 1 + kPageSize) Block(data + 1 + kPageSize, size - 1 - kPageSize, key, static_cast<uint8_t>(key & 0xf));
  return 0;
}
