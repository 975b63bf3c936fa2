// SMART-DTX undo log: what a transaction writes before it changes any record
// in place, so that a client that dies mid-commit can be rolled back (or
// forward) by another.
//
// Every blade has a log directory: kMaxSessions words, one per session slot,
// each (incarnation << 48) | offset of that session's log area on the blade
// (0: none). A log area is a 64-byte header (magic, threads, tasks at 0, 8,
// 16; at 24 a recovery claim, a leased lock word; at 32 the address of the
// claim the owner's recoverers take: the one in its log area on blade 0, so
// that recoverers that met the owner's locks on different blades take one
// claim and settle its transactions one at a time) and then
// threads x tasks log slots of kLogSlotBytes, one per (thread, task): a task
// runs one transaction at a time, and its slot holds the undo record of its
// latest read-write transaction. The record goes to every blade that holds a
// replica of a record the transaction writes, and is the same on each.
//
// The record also names the owner's session on every blade it went to, so
// that a recoverer can fence the owner on each of them (the lock words name
// its session only on the blades of the records it locked) before it rolls
// anything back or forward.
//
// Undo record (little-endian):
//   0   magic u32 (kUndoMagic), item_count u16, session_count u16
//   8   tx_id u64
//   16  crc u32 (CRC-32C of the whole record, this field read as 0),
//       length u32 (whole record)
//   24  sessions, 8 bytes each: blade u16, session slot u16, incarnation
//       u16, reserved u16 (the owner's session on that blade)
//   then items: table u16, slot u16, reserved u32, node u64, lock u64 (the
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

constexpr uint32_t kUndoMagic = 0x32444e55;  // "UND2"
constexpr uint64_t kLogAreaMagic = 0x3230474f4c585444ull;  // "DTXLOG02"
constexpr size_t kLogAreaHeaderBytes = 64;
constexpr size_t kLogAreaClaimOffset = 24;
constexpr size_t kLogAreaClaimAddressOffset = 32;
constexpr size_t kLogSlotBytes = 4096;
constexpr size_t kUndoHeaderBytes = 24;
constexpr size_t kUndoItemHeaderBytes = 24;
constexpr size_t kUndoSessionBytes = 8;
/// Blades one record can name (more than any database spans).
constexpr size_t kMaxUndoSessions = 64;
constexpr size_t kLogDirectoryBytes = 8 * kMaxSessions;

/// One record's image before the transaction.
struct UndoItem {
  Locator at;
  std::string before;  ///< the whole slot, SlotBytes(value width), lock 0
  uint64_t lock = 0;   ///< the lock word held on the primary
};

/// The owner's session on one blade the record went to.
struct UndoSession {
  uint16_t blade = 0;
  SessionId session;
};

struct UndoRecord {
  uint64_t tx_id = 0;
  std::vector<UndoSession> sessions;
  std::vector<UndoItem> items;
};

/// Bytes EncodeUndo writes for this record.
size_t UndoBytes(const UndoRecord& r);
/// Writes the record (at most kLogSlotBytes; the caller checks UndoBytes).
size_t EncodeUndo(const UndoRecord& r, char* out);
/// Decodes a log slot. `slot_bytes_of(table)` gives a table's slot size (0:
/// no such table). Returns "" or what does not make sense; "empty" for a
/// slot no record was ever written to.
std::string DecodeUndo(const char* in, size_t length, size_t (*slot_bytes_of)(const void*, uint16_t),
                       const void* context, UndoRecord* out);

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
