// What the files of the transaction protocol share (transaction.cc,
// fetch.cc, commit.cc): the kinds and steps of an item, bounds, and the item itself.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "catalog.h"
#include "db_internal.h"
#include "transaction.h"

namespace smart::dtx {

enum Kind { kRead = 0, kWrite = 1, kInsert = 2, kDelete = 3 };
// Where an item is in its fetch.
enum Step {
  kStart,      // nothing issued yet
  kNodeRead,   // a bucket or overflow node was read into `buffer`
  kSlotRead,   // the slot was read into `image` (read items)
  kLockRead,   // lock CAS into word[0] and the slot into `image`
  kHeldRead,   // the slot re-read into `image` while holding its lock
  kDone,
};

constexpr int kMaxItems = 32;
// Re-reads of one item (torn slots, records being committed, stale cache
// entries) before the transaction gives up with an error.
constexpr int kMaxRefetches = 100000;
constexpr int kMaxChainNodes = 64;
// Lock holders one task watches at once.
constexpr int kMaxWatches = 32;

inline std::string Name(uint16_t table, uint64_t key) {
  return "table " + std::to_string(table) + " key " + std::to_string(key);
}


// What an item starts each use with (Transaction::add resets just this).
struct ItemState {
  uint16_t table = 0;
  uint64_t key = 0;
  int kind = kRead;
  const TableInfo* info = nullptr;
  Step step = kStart;
  bool located = false;
  bool lookup_pending = false;  // the address cache is still to be asked
  Locator at;
  uint64_t node = 0;          // node being read (kNodeRead)
  int chain_length = 0;       // of `chain`
  bool locked = false;        // this transaction holds the primary's lock
  uint64_t lock_word = 0;     // the word it holds it with
  bool exists = false;        // insert: the key was already there
  bool free_when_read = true; // read: no lock was on the record when read
  uint64_t read_version = 0;
  uint64_t new_version = 0;   // the version its commit writes
  int refetches = 0;
  uint64_t invisible_since = 0;
};

struct Transaction::Item : ItemState {
  uint64_t chain[kMaxChainNodes];  // the nodes read so far, chain_length of them
  // Registered buffers, kept from one use to the next.
  char* buffer = nullptr;     // a node
  char* image = nullptr;      // a slot: read, then the primary's new image
  char* backup = nullptr;     // the backups' new image
  uint64_t* word = nullptr;   // 2 words: CAS result; (lock, version) at validation
  uint64_t* release = nullptr;  // 1 word: a release CAS's result
  char* before = nullptr;     // the slot before the transaction (undo); an
                              // insert that found its key: the record read
  uint64_t* link_words = nullptr;  // kMaxChainNodes words: links an insert rewrites on backups
};

// The transaction is over: its undo record is no longer needed (unless its
// commit is unsettled, which keeps the slot).
inline void Transaction::end_slot_use() {
  TaskLogSlot& slot = *log_slot_;
  if (slot.user == this && !slot.unsettled) slot.user = nullptr;
}

// The version a commit gives a record it writes: one past the version it
// overwrote. An insert takes at least the wall clock's nanoseconds: a key
// deleted from one slot and inserted again into another would otherwise
// start over from the new slot's counter, and a history could not order the
// key's versions (commits on one host's clock come out in commit order).
inline uint64_t NewVersion(const Transaction::Item& it) {
  if (it.kind != kInsert) return it.read_version + 1;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  return std::max(it.read_version + 1, ns);
}

}  // namespace smart::dtx
