// What the rooms of SMART-DTX share and users of the library do not see.
#pragma once

#include <cstdint>
#include <sys/mman.h>

#include <string>
#include <vector>

#include "smart/status.h"

#include "catalog.h"
#include "database.h"

namespace smart::dtx {

/// Where records were found: (table, key) -> slot, one thread's. Direct
/// mapped: a key has one entry, which whatever else maps there overwrites,
/// so a lookup is one memory access and nothing is allocated; a miss costs
/// a bucket read. Entries can go stale (a slot deleted and reused); a
/// reader checks the key it finds. 2^21 entries, 32 MiB of address space,
/// touched as used.
class AddressCache {
 public:
  static constexpr int kEntriesLog2 = 21;
  AddressCache() {
    // Zeroed pages mapped as used; on 2 MiB pages where the kernel allows
    // (a lookup is then one cache miss rather than a TLB miss and a cache miss).
    const size_t bytes = sizeof(Entry) << kEntriesLog2;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("dtx: cannot map the address cache (" + std::to_string(bytes >> 20) + " MiB)");
    madvise(p, bytes, MADV_HUGEPAGE);
    entries_ = static_cast<Entry*>(p);
  }
  ~AddressCache() { munmap(entries_, sizeof(Entry) << kEntriesLog2); }
  AddressCache(const AddressCache&) = delete;
  AddressCache& operator=(const AddressCache&) = delete;
  bool find(uint16_t table, uint64_t key, Locator* at) const {
    const Entry& e = entries_[Index(table, key)];
    if (e.where == 0 || e.key != key || static_cast<uint16_t>(e.where >> 48) != table) return false;
    *at = Locator{table, static_cast<uint16_t>((e.where >> 40) & 0xff), e.where & kNodeMask};
    return true;
  }
  void put(uint16_t table, uint64_t key, const Locator& at) {
    if (at.node > kNodeMask || at.slot > 0xff || table == 0) return;  // not representable: not cached
    entries_[Index(table, key)] = Entry{key, uint64_t{table} << 48 | uint64_t{at.slot} << 40 | at.node};
  }
  void erase(uint16_t table, uint64_t key) {
    Entry& e = entries_[Index(table, key)];
    if (e.key == key && static_cast<uint16_t>(e.where >> 48) == table) e = Entry{};
  }

 private:
  static constexpr uint64_t kNodeMask = (uint64_t{1} << 40) - 1;
  struct Entry {
    uint64_t key = 0;
    uint64_t where = 0;  // table << 48 | slot << 40 | node; 0: empty
  };
  static size_t Index(uint16_t table, uint64_t key) {
    uint64_t x = key ^ (uint64_t{table} << 56);
    x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
    x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return static_cast<size_t>((x ^ (x >> 33)) >> (64 - kEntriesLog2));
  }
  Entry* entries_ = nullptr;
};

struct Database::ThreadState {
  AddressCache cache;
  DtxStats stats;
  uint32_t next_tx = 0;
  // Registered buffers of recoveries (recovery.cc), one set per task of the
  // thread (a recovery waits for its reads, and the thread's other tasks
  // may recover meanwhile); allocated on a task's first recovery.
  struct RecoveryBuffers {
    char* log = nullptr;         // kLogSlotBytes
    char* slot = nullptr;        // a slot (the widest of the database)
    uint64_t* word = nullptr;    // 2 words
    uint64_t* claim = nullptr;   // 2 words: the recovery claim's scratch
  };
  std::vector<RecoveryBuffers> recovery;
};

/// Fills db.images_ with every table's built image: populate() rows placed in
/// their buckets (first free slot along the chain, overflow nodes in order),
/// every slot sealed, loaded rows at version 1. Throws on a duplicate key, a
/// row of an unknown table or too few overflow nodes.
void BuildImages(Database& db);

}  // namespace smart::dtx
