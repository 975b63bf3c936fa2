// Fuzz target: SMART-HT's parsers of remote bytes, which any client or a
// corrupt memory blade may have written: bucket headers and slot words, a
// key's candidate buckets as an insert reads them (IndexCandidates,
// ChooseEmptySlot), a key-value block named by a slot, and the directory's
// depth word. Each must answer within the bytes it was given; a slot an
// insert chooses is an empty one of the candidates; a block it accepts holds
// its key and value inside the block; a depth word it accepts fits the blade.
//
// Input: a 128-byte bucket pair, the depth word and a blade capacity (8
// bytes each, also read as a key's hash), then block bytes.
#include <cstring>
#include <memory>
#include <string_view>

#include "fuzz_check.h"
#include "layout.h"
#include "table_internal.h"

using namespace smart::hashtable;

namespace {

uint64_t Word(const uint8_t* p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

// Checks a block of exactly `length` bytes, in a buffer of that size.
void Block(const uint8_t* bytes, size_t length, uint8_t tag) {
  std::unique_ptr<char[]> block(new char[length == 0 ? 1 : length]);
  memcpy(block.get(), bytes, length);
  if (CheckBlock(block.get(), length, tag) != BlockCheck::kValid) return;
  const char* end = block.get() + length;
  const std::string_view key = BlockKey(block.get()), value = BlockValue(block.get());
  FuzzCheck(key.data() >= block.get() && key.data() + key.size() <= end, "an accepted block's key lies outside it");
  FuzzCheck(value.data() >= block.get() && value.data() + value.size() <= end,
            "an accepted block's value lies outside it");
}

// The pair read for both of a key's hashes (the same pair twice, or two
// copies of it at different addresses): the candidates are listed once
// each, within the words read, and a chosen slot is empty and not frozen.
void Candidates(const uint8_t* pair, uint64_t primary, uint64_t secondary) {
  uint64_t words[2 * kBucketPairSize / 8];
  memcpy(words, pair, kBucketPairSize);
  memcpy(words + kBucketPairSize / 8, pair, kBucketPairSize);
  const KeyHash h{primary, secondary};
  View v;
  v.words = words;
  v.first_index = primary >> 32;
  v.second_index = secondary >> 32;
  v.pair_offset[0] = 1 << 20;
  v.pair_offset[1] = (primary & 1) ? v.pair_offset[0] : v.pair_offset[0] + 4096;
  const bool stale = IndexCandidates(h, &v);
  FuzzCheck(v.count >= 2 && v.count <= kCandidateBuckets, "a view lists fewer than two or more than four buckets");
  for (int b = 0; b < v.count; ++b) {
    FuzzCheck(v.word_base[b] >= 0 && v.word_base[b] + 1 + kSlotsPerBucket <= 32, "a candidate bucket lies outside the words read");
    for (int c = 0; c < b; ++c) FuzzCheck(v.bucket_offset[c] != v.bucket_offset[b], "a bucket is listed twice");
  }
  if (stale || v.torn()) return;
  const SlotChoice c = ChooseEmptySlot(v);
  if (c.frozen || c.bucket < 0) return;
  FuzzCheck(c.bucket < v.count && c.slot >= 0 && c.slot < kSlotsPerBucket, "an insert chose a slot outside the view");
  const uint64_t slot = v.slot(c.bucket, c.slot);
  FuzzCheck(SlotEmpty(slot) && !SlotFrozen(slot), "an insert chose a full or frozen slot");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kFixed = kBucketPairSize + 16;
  if (size < kFixed) return 0;
  const uint8_t* rest = data + kFixed;
  const size_t rest_size = size - kFixed;
  const uint64_t dir_bits = Word(data + kBucketPairSize) >> 20;  // any key's directory bits
  for (size_t b = 0; b < kBucketPairSize / kBucketSize; ++b) {
    const uint64_t header = Word(data + b * kBucketSize);
    if (HeaderAccepts(header, dir_bits)) {
      FuzzCheck(HeaderDepth(header) <= kMaxGlobalDepth, "a header of an impossible depth accepts a key");
    }
    for (int j = 0; j < kSlotsPerBucket; ++j) {
      const uint64_t slot = Word(data + b * kBucketSize + 8 + 8 * static_cast<size_t>(j));
      (void)SlotAgreesWithHeader(slot, header);
      FuzzCheck(EncodeSlot(DecodeSlot(slot)) == SlotUnfrozen(slot), "a slot word does not decode to its fields");
      if (SlotEmpty(slot)) continue;
      const size_t length = SlotBlockLength(slot);
      FuzzCheck(length <= static_cast<size_t>(kMaxBlockUnits) * kBlockUnit, "a slot names a block longer than a block can be");
      if (length <= rest_size) Block(rest, length, SlotTag(slot));
    }
  }
  Candidates(data, Word(data + kBucketPairSize), Word(data + kBucketPairSize + 8));
  // The block bytes as they are, whatever length the slots claim.
  Block(rest, rest_size, static_cast<uint8_t>(rest_size > 2 ? rest[2] & 0xf : 0));

  const DirectoryShape shape = DecodeDepthWord(Word(data + kBucketPairSize));
  const uint64_t capacity = Word(data + kBucketPairSize + 8);
  if (DepthWordValid(shape, capacity)) {
    FuzzCheck(shape.depth <= shape.capacity_depth && shape.capacity_depth <= kMaxGlobalDepth,
              "an accepted depth word has an impossible depth");
    FuzzCheck(shape.entries_offset == 0 ||
                  (shape.entries_offset < capacity && (uint64_t{8} << shape.capacity_depth) <= capacity - shape.entries_offset),
              "an accepted depth word puts its entries beyond the blade");
  }
  return 0;
}
