// SMART-HT build and open: the first client builds an empty table on each
// memory blade (claiming root entry 0 by CAS), the others wait until it is
// published and attach to it.
#include <algorithm>
#include <chrono>
#include <thread>

#include "smart/bench.h"
#include "table_internal.h"

namespace smart::hashtable {

GlobalAddress BuildTable(Initiator& in, node_t node, const Geometry& geometry) {
  GlobalAddress directory;
  Status s = in.alloc_memory(node, kDirectorySize, &directory);
  if (!s.ok()) throw Error("hash table: cannot allocate the directory on memory node " + std::to_string(node) + ": " + s.ToString());
  char* buffer = static_cast<char*>(in.alloc_cache(kBuildBufferSize));
  if (buffer == nullptr) throw Error("hash table: the initiator cache is too small to build a table; raise initiator_cache_size");
  const uint64_t subtables = uint64_t{1} << geometry.depth;
  std::vector<uint64_t> entries(subtables);
  const uint64_t groups_per_buffer = kBuildBufferSize / kGroupSize;
  Progress progress("building the hash table on memory node " + std::to_string(node), subtables);
  for (uint64_t i = 0; i < subtables; ++i) {
    GlobalAddress sub;
    s = in.alloc_memory(node, geometry.subtable_bytes(), &sub);
    if (!s.ok()) throw Error("hash table: cannot allocate a subtable on memory node " + std::to_string(node) + ": " + s.ToString());
    entries[i] = EncodeDirEntry(sub.offset, geometry.depth);
    auto* w = reinterpret_cast<uint64_t*>(buffer);
    for (uint64_t b = 0; b < groups_per_buffer * kBucketsPerGroup; ++b) {
      w[b * 8] = EncodeBucketHeader(geometry.depth, i);
      for (int j = 0; j < kSlotsPerBucket; ++j) w[b * 8 + 1 + j] = EmptySlot(geometry.depth);
    }
    for (uint64_t g0 = 0; g0 < geometry.groups; g0 += groups_per_buffer) {
      const uint64_t groups = std::min(groups_per_buffer, geometry.groups - g0);
      s = in.write(buffer, sub + g0 * kGroupSize, groups * kGroupSize, Option::kSync);
      if (!s.ok()) throw Error("hash table: building a subtable failed: " + s.ToString());
    }
    progress.update(i + 1);
  }
  progress.finish();
  DirectoryHeader header{static_cast<uint64_t>(geometry.depth), geometry.groups, kDirectoryMagic,
                         static_cast<uint64_t>(geometry.depth)};
  memcpy(buffer, &header, sizeof(header));
  memcpy(buffer + kDirectoryEntriesOffset, entries.data(), 8 * subtables);
  s = in.write(buffer, directory, kDirectoryEntriesOffset + 8 * subtables, Option::kSync);
  if (!s.ok()) throw Error("hash table: writing the directory failed: " + s.ToString());
  return directory;
}

void OpenShard(Initiator& in, node_t node, uint64_t expected_keys, HashTable::Shard* shard) {
  auto* word = static_cast<uint64_t*>(in.alloc_cache(64));
  if (word == nullptr) throw Error("hash table: the initiator cache is exhausted");
  const std::string name = "memory node " + std::to_string(node);
  shard->node = node;
  const GlobalAddress root(node, kRootEntryOffset + 8 * kRootEntryIndex);
  Status s = in.compare_and_swap(word, root, 0, kRootEntryBuilding, Option::kSync);
  if (!s.ok()) throw Error("hash table: reading root entry 0 of " + name + ": " + s.ToString());
  uint64_t root_value = word[0];
  if (root_value == 0) {
    const Geometry geometry = GeometryFor(expected_keys);
    const uint64_t need = kDirectorySize + (uint64_t{1} << geometry.depth) * geometry.subtable_bytes();
    if (need + kChunkSize > in.remote_capacity(node)) {
      throw Error("hash table: " + name + " has " + std::to_string(in.remote_capacity(node) >> 20) +
                  " MiB, too little for a table of " + std::to_string(expected_keys) + " keys (" +
                  std::to_string(need >> 20) + " MiB of buckets before any block); raise capacity in backend.json");
    }
    const GlobalAddress directory = BuildTable(in, node, geometry);
    s = in.set_root_entry(node, kRootEntryIndex, directory.offset);
    if (!s.ok()) throw Error("hash table: publishing the table failed: " + s.ToString());
    root_value = directory.offset;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (root_value == kRootEntryBuilding) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error("hash table: " + name + " has been building its table for 10 minutes");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = in.get_root_entry(node, kRootEntryIndex, &root_value);
    if (!s.ok()) throw Error("hash table: reading root entry 0 failed: " + s.ToString());
  }
  shard->directory = GlobalAddress(node, root_value);
  s = in.read(word, shard->directory, sizeof(DirectoryHeader), Option::kSync);
  if (!s.ok()) throw Error("hash table: reading the directory failed: " + s.ToString());
  DirectoryHeader header;
  memcpy(&header, word, sizeof(header));
  if (header.magic != kDirectoryMagic || header.groups_per_subtable == 0) {
    throw Error("hash table: root entry 0 of " + name +
                " does not lead to a hash table (another application's memory blade?)");
  }
  shard->groups = header.groups_per_subtable;
}

}  // namespace smart::hashtable
