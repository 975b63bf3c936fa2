// Fuzz target: SMART-DTX's parsers of remote bytes: a record slot (of any
// table width), a catalog block and an undo record, as another client or a
// corrupted blade may have left them. Nothing may read past the bytes given;
// what decodes must make sense and encode back to the same bytes.
//
// Input: a selector byte, then the bytes. Selector % 3: 0 a slot (width
// 8 * (1 + next byte % 64)), 1 a catalog block (zero-filled to its size),
// 2 an undo record in a log slot (zero-filled to kLogSlotBytes).
#include <cstring>
#include <memory>
#include <vector>

#include "catalog.h"
#include "fuzz_check.h"
#include "record.h"
#include "undo_log.h"

using namespace smart;
using namespace smart::dtx;

namespace {

size_t SlotBytesOf(const void*, uint16_t table) {
  // Tables 1..4 with widths 8, 16, 40, 512; others do not exist.
  switch (table) {
    case 1: return SlotBytes(8);
    case 2: return SlotBytes(16);
    case 3: return SlotBytes(40);
    case 4: return SlotBytes(kMaxValueBytes);
    default: return 0;
  }
}

void Slot(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t width = 8 * (1 + data[0] % 64);
  const size_t bytes = SlotBytes(width);
  std::unique_ptr<char[]> slot(new char[bytes]);
  memset(slot.get(), 0, bytes);
  memcpy(slot.get(), data + 1, std::min(size - 1, bytes));
  Record r;
  if (!DecodeSlot(slot.get(), width, &r)) return;
  FuzzCheck(r.value == slot.get() + kSlotHeaderBytes, "a decoded value does not lie in its slot");
  std::unique_ptr<char[]> again(new char[bytes]);
  EncodeSlot(again.get(), width, r.lock, r.version, r.key, r.table, r.valid, r.value);
  FuzzCheck(memcmp(again.get(), slot.get(), bytes) == 0, "a decoded slot does not encode to its bytes");
}

void Catalog(const uint8_t* data, size_t size) {
  std::vector<char> block(kCatalogBytes, 0);
  memcpy(block.data(), data, std::min(size, block.size()));
  CatalogBlock c;
  if (!DecodeCatalog(block.data(), &c).empty()) return;
  FuzzCheck(!c.tables.empty() && c.tables.size() <= static_cast<size_t>(kMaxTables), "a catalog of no or too many tables");
  FuzzCheck(c.backup_degree >= 0 && c.backup_degree < c.blade_count, "a catalog's backup degree out of range");
  std::vector<TableSpec> specs;
  for (const CatalogBlock::Entry& e : c.tables) specs.push_back(e.spec);
  FuzzCheck(CheckTableSpecs(specs).empty(), "a decoded catalog names tables that fail their check");
  for (const CatalogBlock::Entry& e : c.tables) {
    FuzzCheck(e.spec.value_bytes % 8 == 0 && e.spec.value_bytes <= kMaxValueBytes, "a decoded table width");
  }
}

void Undo(const uint8_t* data, size_t size) {
  std::vector<char> slot(kLogSlotBytes, 0);
  memcpy(slot.data(), data, std::min(size, slot.size()));
  UndoRecord r;
  if (!DecodeUndo(slot.data(), slot.size(), SlotBytesOf, nullptr, &r).empty()) return;
  FuzzCheck(UndoBytes(r.items) <= kLogSlotBytes, "a decoded undo record longer than its slot");
  for (const UndoItem& i : r.items) {
    FuzzCheck(i.before.size() == SlotBytesOf(nullptr, i.at.table), "an undo image of the wrong size");
    FuzzCheck(i.at.slot < kSlotsPerNode, "an undo item names a slot past its node");
  }
  std::vector<char> again(kLogSlotBytes, 0);
  const size_t n = EncodeUndo(r, again.data());
  FuzzCheck(memcmp(again.data(), slot.data(), n) == 0, "a decoded undo record does not encode to its bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: Slot(data + 1, size - 1); break;
    case 1: Catalog(data + 1, size - 1); break;
    default: Undo(data + 1, size - 1); break;
  }
  return 0;
}
