// Record slots: encoding, CRC, and the bucket hash (layout in record.h).
#include "record.h"

#include <cstring>

#include "smart/crc32c.h"
#include "smart/remote_lock.h"

namespace smart::dtx {

namespace {

constexpr size_t kVersionAt = 8;
constexpr size_t kKeyAt = 16;
constexpr size_t kTableAt = 24;
constexpr size_t kFlagsAt = 26;
constexpr size_t kCrcAt = 28;

template <typename T>
T Load(const char* p) {
  T v;
  memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
void Store(char* p, T v) {
  memcpy(p, &v, sizeof(v));
}

// CRC of version, key, table, flags and the value; not of the lock word,
// which locks change by CAS alone, nor of the CRC field.
uint32_t SlotCrc(const char* slot, size_t value_bytes) {
  char buffer[kSlotHeaderBytes + kMaxValueBytes];
  const size_t covered = kCrcAt - kVersionAt;
  memcpy(buffer, slot + kVersionAt, covered);
  memcpy(buffer + covered, slot + kSlotHeaderBytes, value_bytes);
  return Crc32c(buffer, covered + value_bytes);
}

}  // namespace

void EncodeSlot(char* slot, size_t value_bytes, uint64_t lock, uint64_t version, uint64_t key, uint16_t table,
                bool valid, const char* value) {
  Store<uint64_t>(slot, lock);
  Store<uint64_t>(slot + kVersionAt, version);
  Store<uint64_t>(slot + kKeyAt, key);
  Store<uint16_t>(slot + kTableAt, table);
  slot[kFlagsAt] = static_cast<char>(valid ? kValid : 0);
  slot[kFlagsAt + 1] = 0;
  if (value != nullptr) {
    memmove(slot + kSlotHeaderBytes, value, value_bytes);
  } else {
    memset(slot + kSlotHeaderBytes, 0, value_bytes);
  }
  SealSlot(slot, value_bytes);
}

void SealSlot(char* slot, size_t value_bytes) { Store<uint32_t>(slot + kCrcAt, SlotCrc(slot, value_bytes)); }

bool DecodeSlot(const char* slot, size_t value_bytes, Record* out) {
  if (value_bytes > kMaxValueBytes) return false;
  if (Load<uint32_t>(slot + kCrcAt) != SlotCrc(slot, value_bytes)) return false;
  const uint8_t flags = static_cast<uint8_t>(slot[kFlagsAt]);
  if ((flags & ~kValid) != 0 || slot[kFlagsAt + 1] != 0) return false;
  out->lock = Load<uint64_t>(slot);
  out->version = Load<uint64_t>(slot + kVersionAt);
  out->key = Load<uint64_t>(slot + kKeyAt);
  out->table = Load<uint16_t>(slot + kTableAt);
  out->valid = (flags & kValid) != 0;
  out->value = slot + kSlotHeaderBytes;
  return true;
}

bool SlotNames(const char* slot, uint16_t table, uint64_t key) {
  return Load<uint64_t>(slot + kKeyAt) == key && Load<uint16_t>(slot + kTableAt) == table;
}

uint64_t SlotLock(const char* slot) { return Load<uint64_t>(slot); }
void SetSlotLock(char* slot, uint64_t lock) { Store<uint64_t>(slot, lock); }

uint64_t NodeLink(const char* node, size_t value_bytes) {
  return Load<uint64_t>(node + kSlotsPerNode * SlotBytes(value_bytes));
}

void SetNodeLink(char* node, size_t value_bytes, uint64_t link) {
  Store<uint64_t>(node + kSlotsPerNode * SlotBytes(value_bytes), link);
}

std::string DescribeRecordLock(uint64_t lock) {
  if (lock == 0) return "free";
  const uint64_t owner = lock & ~kInvisible;
  std::string s = IsHeldLockWord(owner) ? "held by " + DescribeLockWord(owner) : "holding a stray word";
  if (lock & kInvisible) s += " and committing";
  return s;
}

uint64_t BucketOf(uint64_t key, uint16_t table, uint64_t buckets) {
  // A 64-bit finalizer (splitmix64's): keys that differ in any bit land in
  // unrelated buckets, and the table id keeps tables' layouts apart.
  uint64_t x = key ^ (uint64_t{table} * 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return buckets == 0 ? 0 : x % buckets;
}

}  // namespace smart::dtx
