#include "layout.h"

#include "smart/common.h"
#include "smart/crc32c.h"

namespace smart::hashtable {

namespace {


inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

constexpr uint64_t kSeedPrimary = 0x243f6a8885a308d3ull;
constexpr uint64_t kSeedSecondary = 0x13198a2e03707344ull;
constexpr uint64_t kSeedShard = 0xa4093822299f31d0ull;

}  // namespace


void EncodeBlock(std::string_view key, std::string_view value, uint8_t tag, size_t units, char* out,
                 uint8_t flags) {
  const size_t length = units * kBlockUnit;
  BlockHeader h;
  h.key_length = static_cast<uint16_t>(key.size());
  h.tag = tag;
  h.flags = flags;
  h.value_length = static_cast<uint32_t>(value.size());
  memcpy(out, &h, sizeof(h));
  memcpy(out + sizeof(h), key.data(), key.size());
  memcpy(out + sizeof(h) + key.size(), value.data(), value.size());
  const size_t used = sizeof(h) + key.size() + value.size();
  memset(out + used, 0, length - used - kBlockTrailer);
  const uint32_t crc = Crc32c(out, length - kBlockTrailer);
  memcpy(out + length - kBlockTrailer, &crc, kBlockTrailer);
}

BlockCheck CheckBlock(const char* block, size_t length, uint8_t expected_tag) {
  // A slot of random bytes can claim a block of no units: too short to
  // hold even a header and a checksum, it is no block.
  if (length < sizeof(BlockHeader) + kBlockTrailer) return BlockCheck::kTorn;
  uint32_t stored;
  memcpy(&stored, block + length - kBlockTrailer, kBlockTrailer);
  if (Crc32c(block, length - kBlockTrailer) != stored) return BlockCheck::kTorn;
  const auto* h = reinterpret_cast<const BlockHeader*>(block);
  if (sizeof(BlockHeader) + h->key_length + h->value_length + kBlockTrailer > length) return BlockCheck::kTorn;
  if ((h->tag & 0xf) != expected_tag) return BlockCheck::kWrongTag;
  return BlockCheck::kValid;
}

namespace {

// HashBytes of one buffer under kSeeds seeds at once: the loads and the
// loop are shared, each seed's chain of mixes is the one HashBytes runs.
template <int kSeeds>
inline void HashBytesMulti(const void* data, size_t length, const uint64_t (&seeds)[kSeeds], uint64_t (&out)[kSeeds]) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h[kSeeds];
  for (int k = 0; k < kSeeds; ++k) h[k] = seeds[k] ^ (length * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    memcpy(&word, p + i, 8);
    for (int k = 0; k < kSeeds; ++k) h[k] = Mix(h[k] ^ word) + 0x9e3779b97f4a7c15ull;
  }
  if (i < length) {
    uint64_t word = 0;
    memcpy(&word, p + i, length - i);
    word ^= uint64_t{0xff} << 56;
    for (int k = 0; k < kSeeds; ++k) h[k] = Mix(h[k] ^ word) + 0x9e3779b97f4a7c15ull;
  }
  for (int k = 0; k < kSeeds; ++k) out[k] = Mix(h[k]);
}

inline int ShardFromHash(uint64_t h, int shards) {
  return static_cast<int>(((h >> 32) * static_cast<uint64_t>(shards)) >> 32);
}

}  // namespace

uint64_t HashBytes(const void* data, size_t length, uint64_t seed) {
  const uint64_t seeds[1] = {seed};
  uint64_t out[1];
  HashBytesMulti<1>(data, length, seeds, out);
  return out[0];
}

KeyHash HashKey(std::string_view key) {
  if (key.size() == 8) {
    // The common 8-byte key: HashBytes' one full word, unrolled.
    uint64_t word;
    memcpy(&word, key.data(), 8);
    constexpr uint64_t kLengthMix = 8 * 0x9e3779b97f4a7c15ull;
    return KeyHash{Mix(Mix(kSeedPrimary ^ kLengthMix ^ word) + 0x9e3779b97f4a7c15ull),
                   Mix(Mix(kSeedSecondary ^ kLengthMix ^ word) + 0x9e3779b97f4a7c15ull)};
  }
  static constexpr uint64_t kSeeds[2] = {kSeedPrimary, kSeedSecondary};
  uint64_t out[2];
  HashBytesMulti<2>(key.data(), key.size(), kSeeds, out);
  return KeyHash{out[0], out[1]};
}

int ShardOf(std::string_view key, int shards) {
  if (shards <= 1) return 0;
  return ShardFromHash(HashBytes(key.data(), key.size(), kSeedShard), shards);
}

KeyHash HashKeyAndShard(std::string_view key, int shards, int* shard) {
  if (shards <= 1) {
    *shard = 0;
    return HashKey(key);
  }
  static constexpr uint64_t kSeeds[3] = {kSeedPrimary, kSeedSecondary, kSeedShard};
  uint64_t out[3];
  HashBytesMulti<3>(key.data(), key.size(), kSeeds, out);
  *shard = ShardFromHash(out[2], shards);
  return KeyHash{out[0], out[1]};
}

void BucketIndices(const KeyHash& hash, uint64_t groups, uint64_t* first, uint64_t* second) {
  *first = BucketIndex(hash.primary, groups);
  *second = BucketIndex(hash.secondary, groups);
  // Same index: take the neighbour (the other main bucket of the group,
  // or the next group's), so a key always has two distinct main buckets.
  if (*second == *first) *second = (*first + 1) % (2 * groups);
}

uint64_t Geometry::subtable_bytes() const {
  return (groups * kGroupSize + kChunkSize - 1) / kChunkSize * kChunkSize;
}

Geometry GeometryFor(uint64_t keys) {
  if (keys == 0) keys = 1;
  const uint64_t slots = keys + keys / 3;
  const uint64_t groups = (slots + kSlotsPerGroup - 1) / kSlotsPerGroup;
  Geometry g{0, 0};
  while ((groups >> g.depth) > kMaxGroupsPerSubtable && g.depth < kMaxInitialDepth) ++g.depth;
  g.groups = (groups + (uint64_t{1} << g.depth) - 1) >> g.depth;
  if (g.groups < kMinGroupsPerSubtable) g.groups = kMinGroupsPerSubtable;
  return g;
}

}  // namespace smart::hashtable
