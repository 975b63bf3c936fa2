// SMART-DTX records: the bytes of one record slot in remote memory.
//
// A table is an array of bucket nodes, each kSlotsPerNode slots followed by
// an 8-byte link to an overflow node. A slot (all little-endian):
//
//   0   lock     u64  0 free; a lock word (remote_lock.h owner encoding) while
//                     a transaction holds the record; kInvisible is set with
//                     the owner while the primary's commit write is landing
//   8   version  u64  moved forward by every commit that writes the record
//                     (by one) and by every roll-back (by two)
//   16  key      u64
//   24  table    u16
//   26  flags    u8   kValid: the slot holds a live record
//   27  reserved u8   0
//   28  crc      u32  CRC-32C of bytes 8..27 and the value (not the lock word
//                     and not itself), so a reader detects a slot it read
//                     while a write was landing
//   32  value    `value_bytes` bytes (a table's fixed width, a multiple of 8)
//
// Backups hold the same slots at the same positions; their lock word is 0
// except while a commit or a recovery writes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace smart::dtx {

/// Bytes of a slot before its value: lock, version, key, table, flags, crc.
constexpr size_t kSlotHeaderBytes = 32;
/// Slots of a bucket node; a key's bucket holds this many before it chains
/// an overflow node.
constexpr int kSlotsPerNode = 8;
/// Bytes of the overflow link after a node's slots (NodeLink).
constexpr size_t kNodeLinkBytes = 8;
/// The widest value a table may declare.
constexpr size_t kMaxValueBytes = 512;
/// The flags bit of a slot that holds a live record.
constexpr uint8_t kValid = 1;
/// Set in a lock word (with the owner) while the commit writes land.
constexpr uint64_t kInvisible = uint64_t{1} << 63;

/// The fields of a slot, decoded.
struct Record {
  uint64_t lock = 0;
  uint64_t version = 0;
  uint64_t key = 0;
  uint16_t table = 0;
  bool valid = false;
  const char* value = nullptr;  // points into the slot it was decoded from
};

/// Bytes of a slot of a table whose values are `value_bytes` wide.
constexpr size_t SlotBytes(size_t value_bytes) { return kSlotHeaderBytes + value_bytes; }
/// Bytes of a bucket node: its slots and the overflow link.
constexpr size_t NodeBytes(size_t value_bytes) { return kSlotsPerNode * SlotBytes(value_bytes) + kNodeLinkBytes; }

/// Writes a slot: header, value (`value_bytes`, copied from `value` or zeros
/// when null) and CRC.
void EncodeSlot(char* slot, size_t value_bytes, uint64_t lock, uint64_t version, uint64_t key, uint16_t table,
                bool valid, const char* value);
/// Recomputes the CRC after the caller changed version, key, flags or value.
void SealSlot(char* slot, size_t value_bytes);
/// Decodes a slot; false when its CRC does not match (a torn read or bytes
/// that are not a slot). Every slot of a built table is sealed, empty ones too.
bool DecodeSlot(const char* slot, size_t value_bytes, Record* out);
/// Whether the slot's key and table fields say (table, key), unchecked: a
/// bucket scan decodes (and CRC-checks) only the slots this is true for.
bool SlotNames(const char* slot, uint16_t table, uint64_t key);
/// The lock word of a slot.
uint64_t SlotLock(const char* slot);
void SetSlotLock(char* slot, uint64_t lock);

/// The overflow link of a node: 0 none, else 1 + the overflow node's index.
uint64_t NodeLink(const char* node, size_t value_bytes);
void SetNodeLink(char* node, size_t value_bytes, uint64_t link);

/// "free", "held by session 3 (...)" or "held by ... and committing".
std::string DescribeRecordLock(uint64_t lock);

/// Bucket of `key` in a table of `buckets` buckets.
uint64_t BucketOf(uint64_t key, uint16_t table, uint64_t buckets);

}  // namespace smart::dtx
