// SMART-DTX undo log: what a transaction writes before it changes any record
// in place, so that a client that dies mid-commit can be rolled back (or
// forward) by another.
//
// Every blade has a log directory: kMaxSessions words, one per session slot,
// each (incarnation << 48) | offset of that session's log area on the blade
// (0: none). A log area is a header and then threads x tasks log slots of
// kLogSlotBytes, one per (thread, task): a task runs one transaction at a
// time, and its slot holds the undo record of its latest read-write
// transaction. The record goes to every blade that holds a replica of a
// record the transaction writes, and is the same on each.
//
// Log area header (kLogAreaHeaderBytes, words of 8 bytes):
//   0   magic (kLogAreaMagic)     8   threads     16  tasks
//   24  a recovery claim: a leased lock word (the one on blade 0 is used)
//   32  the address of the claim this client's recoverers take: the one in
//       its log area on blade 0, so that recoverers that met its locks on
//       different blades take one claim and settle its transactions one at
//       a time
//   40..63 reserved, 0
//   64  the client's session map: for each blade b < kMaxLogAreaBlades, a
//       word (1 << 63) | incarnation << 16 | slot of the client's session
//       on blade b (0: none). A recoverer fences the client on every blade
//       of it before it acts on anything the client may still write: its
//       lock words name its session on one blade only.
// Undo record (little-endian):
//   0   magic u32 (kUndoMagic), item_count u16, reserved u16
//   8   tx_id u64
//   16  crc u32 (CRC-32C of the whole record, this field read as 0),
//       length u32 (whole record)
//   24  items: table u16, slot u16, reserved u32, node u64, lock u64 (the
//       word the transaction holds the record's primary lock with), then the
//       slot's image before the transaction (SlotBytes of its table)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "catalog.h"
#include "smart/common.h"

namespace smart::dtx {

constexpr uint32_t kUndoMagic = 0x4f444e55;  // "UNDO"
constexpr uint64_t kLogAreaMagic = 0x3330474f4c585444ull;  // "DTXLOG03"
constexpr size_t kLogAreaSessionsOffset = 64;
/// Blades a log area's session map covers (more than any database spans).
constexpr int kMaxLogAreaBlades = 64;
constexpr size_t kLogAreaHeaderBytes = kLogAreaSessionsOffset + 8 * kMaxLogAreaBlades;
constexpr size_t kLogAreaClaimOffset = 24;
constexpr size_t kLogAreaClaimAddressOffset = 32;
constexpr size_t kLogSlotBytes = 4096;
constexpr size_t kUndoHeaderBytes = 24;
constexpr size_t kUndoItemHeaderBytes = 24;
constexpr size_t kLogDirectoryBytes = 8 * kMaxSessions;

/// One record's image before the transaction.
struct UndoItem {
  Locator at;
  std::string before;  ///< the whole slot, SlotBytes(value width), lock 0
  uint64_t lock = 0;   ///< the lock word held on the primary
};

struct UndoRecord {
  uint64_t tx_id = 0;
  std::vector<UndoItem> items;
};

/// Bytes EncodeUndo writes for these items.
size_t UndoBytes(const std::vector<UndoItem>& items);
/// Writes the record (at most kLogSlotBytes; the caller checks UndoBytes).
size_t EncodeUndo(const UndoRecord& r, char* out);
/// Decodes a log slot. `slot_bytes_of(table)` gives a table's slot size (0:
/// no such table). Returns "" or what does not make sense; "empty" for a
/// slot no record was ever written to.
std::string DecodeUndo(const char* in, size_t length, size_t (*slot_bytes_of)(const void*, uint16_t),
                       const void* context, UndoRecord* out);

/// A session map word (log area header), and back: false for a word that
/// names no session (none, or bytes that make no sense).
constexpr uint64_t SessionMapWord(SessionId s) {
  return (uint64_t{1} << 63) | uint64_t{s.incarnation} << 16 | s.slot;
}
inline bool DecodeSessionMapWord(uint64_t word, SessionId* s) {
  if ((word >> 63) == 0 || (word & ~((uint64_t{1} << 63) | 0xffffffffull)) != 0) return false;
  s->slot = static_cast<uint16_t>(word & 0xffff);
  s->incarnation = static_cast<uint16_t>((word >> 16) & 0xffff);
  return s->slot != 0 && s->slot < kMaxSessions && s->incarnation <= kSessionIncarnationMask;
}

/// A log directory word.
constexpr uint64_t LogDirectoryWord(uint16_t incarnation, uint64_t offset) {
  return (uint64_t{incarnation} << 48) | (offset & ((uint64_t{1} << 48) - 1));
}
constexpr uint16_t LogDirectoryIncarnation(uint64_t word) { return static_cast<uint16_t>(word >> 48); }
constexpr uint64_t LogDirectoryOffset(uint64_t word) { return word & ((uint64_t{1} << 48) - 1); }

/// Offset of (thread, task)'s log slot inside a log area.
constexpr uint64_t LogSlotOffset(int tasks, int thread, int task) {
  return kLogAreaHeaderBytes + (static_cast<uint64_t>(thread) * static_cast<uint64_t>(tasks) +
                                static_cast<uint64_t>(task)) * kLogSlotBytes;
}

}  // namespace smart::dtx
