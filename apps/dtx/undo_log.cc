// Undo records: encoding and a decoder for bytes another client wrote
// (layout in undo_log.h).
#include "undo_log.h"

#include <cstring>

#include "smart/crc32c.h"

namespace smart::dtx {

namespace {

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

}  // namespace

size_t UndoBytes(const std::vector<UndoItem>& items) {
  size_t n = kUndoHeaderBytes;
  for (const UndoItem& i : items) n += kUndoItemHeaderBytes + i.before.size();
  return n;
}

size_t EncodeUndo(const UndoRecord& r, char* out) {
  const size_t length = UndoBytes(r.items);
  Store<uint32_t>(out, kUndoMagic);
  Store<uint16_t>(out + 4, static_cast<uint16_t>(r.items.size()));
  Store<uint16_t>(out + 6, 0);
  Store<uint64_t>(out + 8, r.tx_id);
  Store<uint32_t>(out + 20, static_cast<uint32_t>(length));
  char* p = out + kUndoHeaderBytes;
  for (const UndoItem& i : r.items) {
    Store<uint16_t>(p, i.at.table);
    Store<uint16_t>(p + 2, i.at.slot);
    Store<uint32_t>(p + 4, 0);
    Store<uint64_t>(p + 8, i.at.node);
    Store<uint64_t>(p + 16, i.lock);
    memcpy(p + kUndoItemHeaderBytes, i.before.data(), i.before.size());
    p += kUndoItemHeaderBytes + i.before.size();
  }
  Store<uint32_t>(out + 16, 0);
  Store<uint32_t>(out + 16, Crc32c(out, length));
  return length;
}

std::string DecodeUndo(const char* in, size_t length, size_t (*slot_bytes_of)(const void*, uint16_t),
                       const void* context, UndoRecord* out) {
  if (length < kUndoHeaderBytes) return "a log slot of " + std::to_string(length) + " bytes";
  const uint32_t magic = Load<uint32_t>(in);
  if (magic == 0) return "empty";
  if (magic != kUndoMagic) return "no undo-record magic";
  const uint16_t count = Load<uint16_t>(in + 4);
  // Reserved fields are written as 0: anything else is not a record this
  // code wrote (and would not encode back to the same bytes).
  if (Load<uint16_t>(in + 6) != 0) return "a non-zero reserved field in the header";
  const uint32_t total = Load<uint32_t>(in + 20);
  if (total < kUndoHeaderBytes || total > length) {
    return "a record length of " + std::to_string(total) + " in a slot of " + std::to_string(length);
  }
  if (total > kLogSlotBytes) return "a record length of " + std::to_string(total) + " beyond a log slot";
  {
    // The CRC covers the whole record with its own field read as 0.
    char copy[kLogSlotBytes];
    memcpy(copy, in, total);
    Store<uint32_t>(copy + 16, 0);
    if (Load<uint32_t>(in + 16) != Crc32c(copy, total)) return "a CRC mismatch (a torn or partial record)";
  }
  out->tx_id = Load<uint64_t>(in + 8);
  out->items.clear();
  size_t at = kUndoHeaderBytes;
  for (uint16_t i = 0; i < count; ++i) {
    if (total - at < kUndoItemHeaderBytes) return "item " + std::to_string(i) + " runs past the record";
    UndoItem item;
    item.at.table = Load<uint16_t>(in + at);
    item.at.slot = Load<uint16_t>(in + at + 2);
    if (Load<uint32_t>(in + at + 4) != 0) return "item " + std::to_string(i) + " has a non-zero reserved field";
    item.at.node = Load<uint64_t>(in + at + 8);
    item.lock = Load<uint64_t>(in + at + 16);
    const size_t bytes = slot_bytes_of(context, item.at.table);
    if (bytes == 0) return "item " + std::to_string(i) + " names table " + std::to_string(item.at.table);
    if (item.at.slot >= kSlotsPerNode) return "item " + std::to_string(i) + " names slot " + std::to_string(item.at.slot);
    at += kUndoItemHeaderBytes;
    if (total - at < bytes) return "item " + std::to_string(i) + " runs past the record";
    item.before.assign(in + at, bytes);
    at += bytes;
    out->items.push_back(std::move(item));
  }
  if (at != total) return "the record has " + std::to_string(total - at) + " bytes after its last item";
  return "";
}

}  // namespace smart::dtx
