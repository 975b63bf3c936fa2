// What the rooms of SMART-DTX share and users of the library do not see.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "catalog.h"
#include "database.h"

namespace smart::dtx {

/// Where records were found: (table, key) -> slot. Entries can go stale (a
/// slot deleted and reused); a reader checks the key it finds.
struct CacheKey {
  uint16_t table;
  uint64_t key;
  bool operator==(const CacheKey& o) const { return table == o.table && key == o.key; }
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return std::hash<uint64_t>()(k.key * 31 + k.table); }
};

/// Bound on the address cache of one thread; past it the cache starts over.
constexpr size_t kAddressCacheEntries = size_t{1} << 22;

struct Database::ThreadState {
  std::unordered_map<CacheKey, Locator, CacheKeyHash> cache;
  DtxStats stats;
  uint32_t next_tx = 0;
  // Registered buffers of recoveries run by this thread (recovery.cc).
  char* recovery_log = nullptr;
  char* recovery_slot = nullptr;
  uint64_t* recovery_word = nullptr;
};

/// Fills db.images_ with every table's built image: populate() rows placed in
/// their buckets (first free slot along the chain, overflow nodes in order),
/// every slot sealed, loaded rows at version 1. Throws on a duplicate key, a
/// row of an unknown table or too few overflow nodes.
void BuildImages(Database& db);

}  // namespace smart::dtx
