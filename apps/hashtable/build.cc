// SMART-HT build and open: the first client builds an empty table on each
// memory blade under the named root "hashtable", the others wait until it
// is published and attach to it. The builder renews its claim while it
// builds; a client that finds the builder dead builds the table again (the
// dead builder's half-built memory stays allocated and unused).
#include <algorithm>
#include <chrono>
#include <thread>

#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "smart/named_root.h"
#include "table_internal.h"

namespace smart::hashtable {

GlobalAddress BuildTable(Initiator& in, node_t node, const Geometry& geometry, int capacity_depth,
                         const std::function<void()>& still_mine) {
  GlobalAddress directory;
  capacity_depth = std::max(capacity_depth, geometry.depth);
  Status s = in.alloc_memory(node, DirectoryBytes(capacity_depth), &directory);
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
    FaultPoint("ht.build.subtable");
    if (still_mine) still_mine();
  }
  progress.finish();
  DirectoryHeader header{};
  header.depth_word = EncodeDepthWord(DirectoryShape{geometry.depth, capacity_depth, 0});
  header.groups_per_subtable = geometry.groups;
  header.magic = kDirectoryMagic;
  header.initial_depth = static_cast<uint64_t>(geometry.depth);
  memcpy(buffer, &header, sizeof(header));
  memcpy(buffer + kDirectoryEntriesOffset, entries.data(), 8 * subtables);
  s = in.write(buffer, directory, kDirectoryEntriesOffset + 8 * subtables, Option::kSync);
  if (!s.ok()) throw Error("hash table: writing the directory failed: " + s.ToString());
  return directory;
}

void OpenShard(Initiator& in, node_t node, uint64_t expected_keys, const TableOptions& options,
               HashTable::Shard* shard) {
  const LeaseOptions& lease = options.lease;
  if (options.directory_capacity_depth < 0 || options.directory_capacity_depth > kMaxGlobalDepth) {
    throw Error("hash table: directory_capacity_depth must be within 0.." + std::to_string(kMaxGlobalDepth) + ", got " +
                std::to_string(options.directory_capacity_depth));
  }
  auto* word = static_cast<uint64_t*>(in.alloc_cache(sizeof(DirectoryHeader)));
  if (word == nullptr) throw Error("hash table: the initiator cache is exhausted");
  const std::string name = "memory node " + std::to_string(node);
  shard->node = node;
  NamedRoots roots(in, lease);
  uint64_t root_value = 0;
  // A builder slower than the lease may find its build taken over; it then
  // drops its half-built table and attaches to the one the other client
  // publishes, like any client that came second.
  struct TakenOver {};
  for (;;) {
    RootClaim claim;
    Status s = roots.open(node, kRootName, &claim);
    if (!s.ok()) {
      throw Error("hash table: opening the named root \"" + std::string(kRootName) + "\" on " + name + ": " + s.ToString());
    }
    root_value = claim.value();
    if (!claim.must_build()) break;
    if (claim.took_over()) {
      LogPrintf(LogLevel::kWarn, "hash table: the client building the table on %s died; building it again", name.c_str());
    }
    const Geometry geometry = GeometryFor(expected_keys);
    const uint64_t need = DirectoryBytes(std::max(options.directory_capacity_depth, geometry.depth)) +
                          (uint64_t{1} << geometry.depth) * geometry.subtable_bytes();
    if (need + kChunkSize > in.remote_capacity(node)) {
      throw Error("hash table: " + name + " has " + std::to_string(in.remote_capacity(node) >> 20) +
                  " MiB, too little for a table of " + std::to_string(expected_keys) + " keys (" +
                  std::to_string(need >> 20) + " MiB of buckets before any block); raise capacity in backend.json");
    }
    auto still_mine = [&claim] {
      Status r = claim.renew_if_due();
      if (r.code() == Status::Code::kLockLost) throw TakenOver{};
      if (!r.ok()) throw Error("hash table: renewing the build claim failed: " + r.ToString());
    };
    try {
      const GlobalAddress directory = BuildTable(in, node, geometry, options.directory_capacity_depth, still_mine);
      s = claim.publish(directory.offset);
      if (s.code() == Status::Code::kLockLost) throw TakenOver{};
      if (!s.ok()) throw Error("hash table: publishing the table on " + name + " failed: " + s.ToString());
      root_value = directory.offset;
      break;
    } catch (const TakenOver&) {
      LogPrintf(LogLevel::kWarn,
                "hash table: building the table on %s was taken over by another client (this one was slower than the "
                "lease); attaching to its table instead", name.c_str());
    }
  }
  Status s;
  shard->directory = GlobalAddress(node, root_value);
  s = in.read(word, shard->directory, sizeof(DirectoryHeader), Option::kSync);
  if (!s.ok()) throw Error("hash table: reading the directory on " + name + " failed: " + s.ToString());
  DirectoryHeader header;
  memcpy(&header, word, sizeof(header));
  if (header.magic != kDirectoryMagic || header.groups_per_subtable == 0 || header.groups_per_subtable > kMaxGroupsPerSubtable) {
    throw Error("hash table: the named root \"" + std::string(kRootName) + "\" on " + name +
                " does not lead to a hash table of this version (magic " + std::to_string(header.magic) + ")");
  }
  shard->groups = header.groups_per_subtable;
}

}  // namespace smart::hashtable
