// What the files of SMART-DTX share and users of the library do not see.
#pragma once

#include <cstdint>
#include <sys/mman.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "smart/status.h"

#include "catalog.h"
#include "database.h"

namespace smart::dtx {

/// Where records were found: (table, key) -> slot, shared by the client's
/// threads. Direct mapped, 8 bytes an entry: a key has one entry, which
/// whatever else maps there overwrites, so a lookup is one memory access and
/// nothing is allocated; a miss costs a bucket read. An entry holds a 24-bit
/// tag of (table, key) rather than the key, so another key can match it
/// (about once in 2^23 lookups of an entry it overwrote): like an entry gone
/// stale (a slot deleted and reused), that is caught by the reader, which
/// checks the key in the slot it reads and then looks in the bucket. 2^21
/// entries, 16 MiB of address space for the whole client, touched as used:
/// small enough to stay mostly in a server's last-level cache, where the
/// miss it saves is a DRAM access of its own.
class AddressCache {
 public:
  static constexpr int kEntriesLog2 = 21;
  AddressCache() {
    // Zeroed pages mapped as used; on 2 MiB pages where the kernel allows
    // (a lookup is then one cache miss rather than a TLB miss and a cache miss).
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("dtx: cannot map the address cache (" + std::to_string(kBytes >> 20) + " MiB)");
    madvise(p, kBytes, MADV_HUGEPAGE);
    entries_ = static_cast<uint64_t*>(p);
  }
  ~AddressCache() { munmap(entries_, kBytes); }
  AddressCache(const AddressCache&) = delete;
  AddressCache& operator=(const AddressCache&) = delete;
  /// Starts loading (table, key)'s entry into the CPU cache, for a find()
  /// after the task has let others run.
  void prefetch(uint16_t table, uint64_t key) const { __builtin_prefetch(&entries_[Index(Hash(table, key))]); }
  bool find(uint16_t table, uint64_t key, Locator* at) const {
    const uint64_t h = Hash(table, key);
    const uint64_t e = __atomic_load_n(&entries_[Index(h)], __ATOMIC_RELAXED);
    if (e == 0 || (e >> kTagShift) != Tag(h)) return false;
    *at = Locator{table, static_cast<uint16_t>((e >> kNodeBits) & 0xff), e & kNodeMask};
    return true;
  }
  void put(uint16_t table, uint64_t key, const Locator& at) {
    if (at.node > kNodeMask || at.slot > 0xff) return;  // not representable: not cached
    const uint64_t h = Hash(table, key);
    __atomic_store_n(&entries_[Index(h)], Tag(h) << kTagShift | uint64_t{at.slot} << kNodeBits | at.node,
                     __ATOMIC_RELAXED);
  }
  void erase(uint16_t table, uint64_t key) {
    const uint64_t h = Hash(table, key);
    uint64_t e = __atomic_load_n(&entries_[Index(h)], __ATOMIC_RELAXED);
    // Only this key's entry; one another thread just put there stays.
    if (e != 0 && (e >> kTagShift) == Tag(h)) {
      __atomic_compare_exchange_n(&entries_[Index(h)], &e, 0, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
  }

 private:
  static constexpr size_t kBytes = sizeof(uint64_t) << kEntriesLog2;
  // An entry: tag (24 bits, never 0) | slot (8) | node (32); 0: empty.
  static constexpr int kNodeBits = 32;
  static constexpr int kTagShift = 40;
  static constexpr uint64_t kNodeMask = (uint64_t{1} << kNodeBits) - 1;
  static uint64_t Hash(uint16_t table, uint64_t key) {
    uint64_t x = key ^ (uint64_t{table} << 56) ^ table;
    x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
    x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  }
  // The index takes the hash's top bits, the tag the next 24 below them.
  static size_t Index(uint64_t h) { return static_cast<size_t>(h >> (64 - kEntriesLog2)); }
  static uint64_t Tag(uint64_t h) { return ((h >> (40 - kEntriesLog2)) & 0xffffff) | 1; }
  uint64_t* entries_ = nullptr;
};

// Each task's undo-log slot (one per task on every blade): the Transaction
// whose undo record it holds until that transaction ends, and a commit whose
// outcome is not settled yet (its writes failed midway: some replicas may
// hold the new images). Until that commit is settled no transaction of the
// task may write the slot: recovery needs the record.
struct TaskLogSlot {
  const Transaction* user = nullptr;
  bool unsettled = false;
  GlobalAddress settle_at;   // a primary the unsettled commit locked
  uint64_t settle_lock = 0;  // its lock word there
  std::string why;           // what failed the commit
};

struct Database::ThreadState {
  DtxStats stats;
  // Registered buffers of recoveries (recovery.cc), one set per task of the
  // thread (a recovery waits for its reads, and the thread's other tasks
  // may recover meanwhile); allocated on a task's first recovery.
  struct RecoveryBuffers {
    char* log = nullptr;         // kLogSlotBytes
    char* slot = nullptr;        // a slot (the widest of the database)
    uint64_t* word = nullptr;    // 2 words
    uint64_t* claim = nullptr;   // 2 words: the recovery claim's scratch
    uint64_t* fence = nullptr;   // 1 word: FenceSession's scratch
  };
  std::vector<RecoveryBuffers> recovery;
  std::vector<TaskLogSlot> log_slots = std::vector<TaskLogSlot>(kMaxTasksPerThread);
  // Counts the thread's transactions for their ids (Transaction::id()).
  uint32_t next_tx_id = 0;
  // Slots that failed their check with no lock on them, by (table, node,
  // slot): the CRC of what was read and how many reads in a row read it.
  struct DamageWatch {
    uint32_t crc = 0;
    int seen = 0;
  };
  std::map<std::tuple<uint16_t, uint64_t, int>, DamageWatch> damage;
};

/// Fills db.images_ with every table's built image: populate() rows placed in
/// their buckets (first free slot along the chain, overflow nodes in order),
/// every slot sealed, loaded rows at version 1. Throws on a duplicate key, a
/// row of an unknown table or too few overflow nodes.
void BuildImages(Database& db);

}  // namespace smart::dtx
