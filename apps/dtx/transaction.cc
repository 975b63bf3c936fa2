// The SMART-DTX transaction protocol (transaction.h, DESIGN.md): execution
// with eager locks, the undo record, validation, the coalescent commit and
// abort.
#include "transaction.h"

#include <algorithm>
#include <cstring>

#include "db_internal.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "undo_log.h"

namespace smart::dtx {

namespace {

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

std::string Name(uint16_t table, uint64_t key) {
  return "table " + std::to_string(table) + " key " + std::to_string(key);
}

}  // namespace

struct Transaction::Item {
  uint16_t table = 0;
  uint64_t key = 0;
  int kind = kRead;
  const TableInfo* info = nullptr;
  Step step = kStart;
  bool located = false;
  Locator at;
  uint64_t node = 0;          // node being read (kNodeRead)
  uint64_t chain[kMaxChainNodes];
  int chain_length = 0;
  bool locked = false;        // this transaction holds the primary's lock
  uint64_t lock_word = 0;     // the word it holds it with
  bool exists = false;        // insert: the key was already there
  bool free_when_read = true; // read: no lock was on the record when read
  uint64_t read_version = 0;
  int refetches = 0;
  uint64_t invisible_since = 0;
  // Registered buffers.
  char* buffer = nullptr;     // a node
  char* image = nullptr;      // a slot: read, then the primary's new image
  char* backup = nullptr;     // the backups' new image
  uint64_t* word = nullptr;   // 2 words: CAS result; (lock, version) at validation
  uint64_t* release = nullptr;  // 1 word: a release CAS's result
  char* before = nullptr;     // the slot before the transaction (undo)
};

Transaction::Transaction(Database& db) : db_(db) {
  Database::ThreadState& ts = db_.thread_state();
  stats_ = &ts.stats;
  Initiator& in = db_.initiator();
  log_buffer_ = static_cast<char*>(in.alloc_cache(kLogSlotBytes));
  if (log_buffer_ == nullptr) {
    throw Error("dtx: the initiator cache is exhausted; raise initiator_cache_size");
  }
  const int thread = ThreadId();
  const int task = this_task::id();
  thread_ = thread;
  task_ = task;
  if (thread >= db_.options().threads + 2 || task > db_.options().tasks) {
    throw Error("dtx: a transaction on thread " + std::to_string(thread) + " task " + std::to_string(task) +
                " has no undo-log slot; the database was opened for thread ids below " +
                std::to_string(db_.options().threads + 2) + " and tasks 1.." + std::to_string(db_.options().tasks));
  }
  const uint16_t session = db_.initiator().session(0).slot;
  const uint16_t incarnation = db_.initiator().session(0).incarnation;
  tx_id_ = (uint64_t{session} << 54) | (uint64_t{incarnation} << 40) | (uint64_t(thread & 0xff) << 32) |
           (uint64_t(task & 0xff) << 24);
  lease_ = static_cast<uint32_t>(MonotonicNs());
  owner_words_.assign(static_cast<size_t>(db_.blades()), 0);
  for (int b = 0; b < db_.blades(); ++b) {
    owner_words_[static_cast<size_t>(b)] = EncodeLockWord(RemoteLock::Owner(in, static_cast<node_t>(b)));
  }
}

Transaction::~Transaction() {
  for (Item* it : items_) delete it;
  for (Item* it : pool_) delete it;
}

void Transaction::begin() {
  for (Item* it : items_) pool_.push_back(it);
  items_.clear();
  accesses_.clear();
  active_ = true;
  logged_ = false;
  ++tx_id_;
  lease_ = (lease_ + 1) & static_cast<uint32_t>(kLockLeaseMask);
}

int Transaction::add(uint16_t table, uint64_t key, int kind) {
  const TableInfo* info = db_.table(table);
  if (info == nullptr) throw Error("dtx/" + db_.options().name + ": no table " + std::to_string(table));
  if (items_.size() >= static_cast<size_t>(kMaxItems)) {
    throw Error("dtx: a transaction of more than " + std::to_string(kMaxItems) + " items");
  }
  Item* it;
  if (!pool_.empty() && pool_.back()->buffer != nullptr) {
    it = pool_.back();
    pool_.pop_back();
  } else {
    it = new Item;
    size_t node = 0, slot = 0;
    for (const TableInfo& t : db_.tables()) {
      node = std::max(node, t.node_bytes());
      slot = std::max(slot, t.slot_bytes());
    }
    Initiator& in = db_.initiator();
    it->buffer = static_cast<char*>(in.alloc_cache(node));
    it->image = static_cast<char*>(in.alloc_cache(slot));
    it->backup = static_cast<char*>(in.alloc_cache(slot));
    it->before = static_cast<char*>(in.alloc_cache(slot));
    it->word = static_cast<uint64_t*>(in.alloc_cache(2 * sizeof(uint64_t)));
    it->release = static_cast<uint64_t*>(in.alloc_cache(sizeof(uint64_t)));
    if (!it->buffer || !it->image || !it->backup || !it->before || !it->word || !it->release) {
      delete it;
      throw Error("dtx: the initiator cache is exhausted; raise initiator_cache_size");
    }
  }
  char* buffer = it->buffer;
  char* image = it->image;
  char* backup = it->backup;
  char* before = it->before;
  uint64_t* word = it->word;
  uint64_t* release = it->release;
  *it = Item();
  it->buffer = buffer;
  it->image = image;
  it->backup = backup;
  it->before = before;
  it->word = word;
  it->release = release;
  it->table = table;
  it->key = key;
  it->kind = kind;
  it->info = info;
  Database::ThreadState& ts = db_.thread_state();
  auto found = ts.cache.find(CacheKey{table, key});
  if (found != ts.cache.end() && kind != kInsert) {
    it->located = true;
    it->at = found->second;
  }
  items_.push_back(it);
  return static_cast<int>(items_.size()) - 1;
}

int Transaction::read(uint16_t table, uint64_t key) { return add(table, key, kRead); }
int Transaction::write(uint16_t table, uint64_t key) { return add(table, key, kWrite); }
int Transaction::insert(uint16_t table, uint64_t key) { return add(table, key, kInsert); }
int Transaction::remove(uint16_t table, uint64_t key) { return add(table, key, kDelete); }

char* Transaction::value(int item) { return items_[static_cast<size_t>(item)]->image + kSlotHeaderBytes; }
bool Transaction::exists(int item) const { return items_[static_cast<size_t>(item)]->exists; }
uint64_t Transaction::version(int item) const { return items_[static_cast<size_t>(item)]->read_version; }

uint64_t Transaction::lock_word(node_t blade) {
  // Every transaction's words differ (the lease counter moves per
  // transaction), so a waiter never mistakes a new holder for an old one.
  return owner_words_[blade] | (uint64_t{lease_} << kLockLeaseShift);
}

Status Transaction::issue_read(void* local, GlobalAddress remote, size_t length) {
  ++stats_->rdma_ops;
  return db_.initiator().read(local, remote, length, Option::kNone);
}

Status Transaction::issue_cas(uint64_t* local, GlobalAddress remote, uint64_t expected, uint64_t desired) {
  ++stats_->rdma_ops;
  return db_.initiator().compare_and_swap(local, remote, expected, desired, Option::kNone);
}

Status Transaction::issue_write(const void* local, GlobalAddress remote, size_t length) {
  ++stats_->rdma_ops;
  return db_.initiator().write(local, remote, length, Option::kNone);
}

Status Transaction::wait() {
  ++stats_->round_trips;
  in_flight_ = false;
  return db_.initiator().sync();
}

Status Transaction::execute() {
  if (!active_) return Status::InvalidArgument("dtx: execute() outside a transaction");
  for (;;) {
    bool issued = false;
    for (Item* it : items_) {
      if (it->step == kDone) continue;
      issued = true;
      const TableInfo& t = *it->info;
      Status s;
      if (it->step == kStart && !it->located) {
        it->node = BucketOf(it->key, it->table, t.spec.buckets);
        it->chain_length = 0;
        ++stats_->cache_misses;
        s = issue_read(it->buffer, NodeAddress(t, 0, it->node), t.node_bytes());
        it->step = kNodeRead;
      } else if (it->step == kNodeRead) {
        s = issue_read(it->buffer, NodeAddress(t, 0, it->node), t.node_bytes());
      } else if (it->step == kStart && it->kind == kRead) {
        s = issue_read(it->image, SlotAddress(t, 0, it->at), t.slot_bytes());
        it->step = kSlotRead;
      } else if (it->step == kSlotRead || it->step == kHeldRead) {
        s = issue_read(it->image, SlotAddress(t, 0, it->at), t.slot_bytes());
      } else {  // kStart of a located write, or kLockRead of any: lock and read
        const GlobalAddress slot = SlotAddress(t, 0, it->at);
        it->lock_word = lock_word(slot.node);
        s = issue_cas(it->word, slot, 0, it->lock_word);
        if (s.ok()) s = issue_read(it->image, slot, t.slot_bytes());
        it->step = kLockRead;
      }
      if (!s.ok()) return abort_with(s);
    }
    if (!issued) break;
    Status s = wait();
    if (!s.ok()) return abort_with(s);
    // Every lock this round took is ours before any item can fail the
    // transaction, so that the abort releases all of them.
    for (Item* it : items_) {
      if (it->step == kLockRead && it->word[0] == 0) it->locked = true;
    }
    for (Item* it : items_) {
      if (it->step == kDone) continue;
      s = finish_fetch(*it);
      if (!s.ok()) return abort_with(s);
    }
  }
  return write_undo();
}

// Handles what one round fetched for `it`; sets it->step for the next round.
Status Transaction::finish_fetch(Item& it) {
  const TableInfo& t = *it.info;
  const size_t vb = t.spec.value_bytes;
  auto refetch = [&](const char* why) -> Status {
    if (++it.refetches > kMaxRefetches) {
      return Status::TimedOut("dtx: " + Name(it.table, it.key) + ": gave up after " + std::to_string(kMaxRefetches) +
                              " re-reads (" + why + ")");
    }
    return Status::OK();
  };
  Database::ThreadState& ts = db_.thread_state();
  switch (it.step) {
    case kNodeRead: {
      if (it.chain_length < kMaxChainNodes) it.chain[it.chain_length++] = it.node;
      int free_slot = -1;
      bool torn = false;
      for (int i = 0; i < kSlotsPerNode; ++i) {
        const char* slot = it.buffer + i * t.slot_bytes();
        Record r;
        if (!DecodeSlot(slot, vb, &r)) {
          torn = true;
          break;
        }
        if (r.valid && r.key == it.key && r.table == it.table) {
          it.located = true;
          it.at = Locator{it.table, static_cast<uint16_t>(i), it.node};
          if (ts.cache.size() >= kAddressCacheEntries) ts.cache.clear();
          ts.cache[CacheKey{it.table, it.key}] = it.at;
          if (it.kind == kRead || it.kind == kInsert) {
            // The node read holds the record: use it as the slot read.
            memcpy(it.image, slot, t.slot_bytes());
            it.step = kSlotRead;
            if (it.kind == kInsert) it.exists = true;
            return finish_fetch(it);
          }
          it.step = kLockRead;  // next round: lock it and read it
          return Status::OK();
        }
        if (!r.valid && free_slot < 0) free_slot = i;
      }
      if (torn) {
        ++stats_->torn_reads;
        it.chain_length--;
        return refetch("a bucket node that never reads whole");
      }
      const uint64_t link = NodeLink(it.buffer, vb);
      if (it.kind == kInsert && free_slot >= 0 && it.at.table == 0) {
        // The chain's first free slot; the key may still be further on.
        it.at = Locator{it.table, static_cast<uint16_t>(free_slot), it.node};
        it.word[1] = SlotLock(it.buffer + free_slot * t.slot_bytes());
      }
      if (link != 0) {
        if (link - 1 >= t.spec.overflow_nodes || it.chain_length >= kMaxChainNodes) {
          return Status::Internal("dtx: " + Name(it.table, it.key) + ": bucket node " + std::to_string(it.node) +
                                  " links to node " + std::to_string(link - 1) + " of " +
                                  std::to_string(t.spec.overflow_nodes) + " overflow nodes (a corrupt chain)");
        }
        it.node = t.spec.buckets + (link - 1);
        return Status::OK();
      }
      if (it.kind != kInsert) {
        ts.cache.erase(CacheKey{it.table, it.key});
        return Status::NotFound("dtx: " + Name(it.table, it.key) + " does not exist");
      }
      if (it.at.table == 0) {
        // The chain is full: link a spare node to its end, then read the end
        // again (another insert may have linked one first).
        Status s = grow_chain(it);
        if (!s.ok()) return s;
        return refetch("a bucket chain that keeps filling up");
      }
      if (it.word[1] != 0) {
        // The first free slot is locked: another insert into this chain is in
        // flight (or a delete is committing); inserts take the first free slot
        // one at a time.
        return Status::Retry("dtx: " + Name(it.table, it.key) + ": another insert holds the free slot");
      }
      it.step = kLockRead;
      return Status::OK();
    }
    case kSlotRead: {
      Record r;
      if (!DecodeSlot(it.image, vb, &r)) {
        ++stats_->torn_reads;
        it.step = kSlotRead;
        return refetch("a slot that never reads whole");
      }
      if (!r.valid || r.key != it.key || r.table != it.table) {
        // The cached slot was deleted or reused: look in the bucket again.
        ts.cache.erase(CacheKey{it.table, it.key});
        it.located = false;
        it.at = Locator();
        it.step = kStart;
        return refetch("a cached slot that keeps changing");
      }
      if ((r.lock & kInvisible) != 0) {
        // Being committed by another transaction: its new value is landing.
        ++stats_->invisible_waits;
        if (it.invisible_since == 0) it.invisible_since = MonotonicNs();
        if (MonotonicNs() - it.invisible_since > db_.options().lease.lease_ns) {
          return Status::TimedOut("dtx: " + Name(it.table, it.key) + " stays being committed (lock " +
                                  DescribeRecordLock(r.lock) + ") for longer than a lease");
        }
        this_task::yield();
        it.step = kSlotRead;
        return refetch("a record that stays being committed");
      }
      it.free_when_read = r.lock == 0;
      it.read_version = r.version;
      it.step = kDone;
      return Status::OK();
    }
    case kLockRead:
    case kHeldRead: {
      if (it.step == kLockRead && it.word[0] != 0) {
        return Status::Retry("dtx: " + Name(it.table, it.key) + " is locked (" + DescribeRecordLock(it.word[0]) +
                             ")");
      }
      it.locked = true;
      Record r;
      if (!DecodeSlot(it.image, vb, &r)) {
        ++stats_->torn_reads;
        it.step = kHeldRead;
        return refetch("a locked slot that never reads whole");
      }
      const bool mine = it.kind == kInsert ? !r.valid : (r.valid && r.key == it.key && r.table == it.table);
      if (!mine) {
        // The slot changed between the bucket read (or the cache entry) and
        // the lock: let it go and look again.
        ++stats_->rdma_ops;
        const GlobalAddress slot = SlotAddress(t, 0, it.at);
        Status s = db_.initiator().compare_and_swap(it.release, slot, it.lock_word, 0, Option::kPost);
        it.locked = false;
        in_flight_ = true;
        if (!s.ok()) return s;
        if (it.kind != kInsert) ts.cache.erase(CacheKey{it.table, it.key});
        it.located = false;
        it.at = Locator();
        it.step = kStart;
        return refetch("a slot that changed under its lock");
      }
      memcpy(it.before, it.image, t.slot_bytes());
      SetSlotLock(it.before, 0);
      it.read_version = r.version;
      if (it.kind == kInsert) {
        memset(it.image + kSlotHeaderBytes, 0, vb);
      }
      it.step = kDone;
      return Status::OK();
    }
    default:
      return Status::Internal("dtx: an item in an unexpected step");
  }
}

// Takes a spare overflow node (FAA on the table's counter in the primary's
// catalog) and links it to the end of `it`'s chain: CAS on the primary's
// link word, then the same link written to the backups. A node whose link
// CAS lost stays unused.
Status Transaction::grow_chain(Item& it) {
  const TableInfo& t = *it.info;
  uint64_t* word = it.word;
  Initiator& in = db_.initiator();
  ++stats_->rdma_ops;
  Status s = in.fetch_and_add(word, t.overflow_counter, 1, Option::kSync);
  ++stats_->round_trips;
  if (!s.ok()) return s;
  const uint64_t spare = word[0];
  if (spare >= t.spec.overflow_nodes) {
    return Status::OutOfMemory("dtx: " + Name(it.table, it.key) + ": table " + std::to_string(it.table) +
                               " has used all its " + std::to_string(t.spec.overflow_nodes) +
                               " overflow nodes; give it more buckets or overflow nodes");
  }
  const uint64_t link_at = kSlotsPerNode * t.slot_bytes();
  ++stats_->rdma_ops;
  s = in.compare_and_swap(word, NodeAddress(t, 0, it.node) + link_at, 0, spare + 1, Option::kSync);
  ++stats_->round_trips;
  if (!s.ok()) return s;
  if (word[0] == 0) {
    word[1] = spare + 1;
    for (size_t r = 1; r < t.replicas.size(); ++r) {
      s = issue_write(&word[1], NodeAddress(t, r, it.node) + link_at, sizeof(uint64_t));
      if (!s.ok()) return s;
    }
    if (t.replicas.size() > 1) {
      s = wait();
      if (!s.ok()) return s;
    }
  }
  // Read the chain's last node again; the walk goes on from there.
  it.chain_length--;
  it.step = kNodeRead;
  return Status::OK();
}

// Sends the undo record of every record this transaction will write to each
// blade holding a replica of one, without waiting: commit() waits before it
// writes any record in place.
Status Transaction::write_undo() {
  UndoRecord record;
  record.tx_id = tx_id_;
  std::vector<node_t> blades;
  for (Item* it : items_) {
    if (it->kind == kRead || it->exists || !it->locked) continue;
    record.items.push_back(UndoItem{it->at, std::string(it->before, it->info->slot_bytes())});
    for (node_t b : it->info->replicas) {
      if (std::find(blades.begin(), blades.end(), b) == blades.end()) blades.push_back(b);
    }
  }
  if (record.items.empty()) return Status::OK();
  if (UndoBytes(record.items) > kLogSlotBytes) {
    return abort_with(Status::InvalidArgument("dtx: the undo record of " + std::to_string(record.items.size()) +
                                              " items needs " + std::to_string(UndoBytes(record.items)) +
                                              " bytes; a log slot holds " + std::to_string(kLogSlotBytes)));
  }
  const size_t length = EncodeUndo(record, log_buffer_);
  for (node_t b : blades) {
    Status s = issue_write(log_buffer_, db_.log_slot(b, thread_, task_), length);
    if (!s.ok()) return abort_with(s);
  }
  Status s = db_.initiator().post_request();
  if (!s.ok()) return abort_with(s);
  in_flight_ = true;
  logged_ = true;
  return Status::OK();
}

// Checks that what the transaction read is still current: read items keep
// their version and carry no other transaction's lock; inserts find no other
// copy of their key and no racing insert in their chain.
Status Transaction::validate(bool* needed) {
  *needed = false;
  bool writes = false;
  int reads = 0;
  for (Item* it : items_) {
    if (it->kind != kRead && !it->exists) writes = true;
    if (it->kind == kRead || it->exists) ++reads;
  }
  // A lone read of a record no one held needs no second look: it read a
  // committed value at one instant.
  if (!writes && reads == 1 && items_.size() == 1 && items_[0]->free_when_read) return Status::OK();
  int longest_chain = 0;
  for (Item* it : items_) {
    if (it->kind == kRead || it->exists) {
      Status s = issue_read(it->word, SlotAddress(*it->info, 0, it->at), 2 * sizeof(uint64_t));
      if (!s.ok()) return s;
      *needed = true;
    } else if (it->kind == kInsert) {
      longest_chain = std::max(longest_chain, it->chain_length);
    }
  }
  for (int c = 0; c < std::max(longest_chain, 1); ++c) {
    bool issued = c == 0 && *needed;
    for (Item* it : items_) {
      if (it->kind != kInsert || it->exists || c >= it->chain_length) continue;
      Status s = issue_read(it->buffer, NodeAddress(*it->info, 0, it->chain[c]), it->info->node_bytes());
      if (!s.ok()) return s;
      issued = true;
    }
    if (!issued) break;
    *needed = true;
    Status s = wait();
    if (!s.ok()) return s;
    for (Item* it : items_) {
      if (c == 0 && (it->kind == kRead || it->exists)) {
        const uint64_t lock = it->word[0];
        const uint64_t version = it->word[1];
        if (version != it->read_version) {
          return Status::Retry("dtx: " + Name(it->table, it->key) + " moved from version " +
                               std::to_string(it->read_version) + " to " + std::to_string(version));
        }
        bool ours = false;
        for (Item* other : items_) ours = ours || (other->locked && (lock & ~kInvisible) == other->lock_word);
        if (lock != 0 && !ours) {
          return Status::Retry("dtx: " + Name(it->table, it->key) + " is " + DescribeRecordLock(lock));
        }
      }
      if (it->kind != kInsert || it->exists || c >= it->chain_length) continue;
      const TableInfo& t = *it->info;
      for (int i = 0; i < kSlotsPerNode; ++i) {
        if (it->chain[c] == it->at.node && i == it->at.slot) continue;
        Record r;
        if (!DecodeSlot(it->buffer + i * t.slot_bytes(), t.spec.value_bytes, &r)) {
          return Status::Retry("dtx: " + Name(it->table, it->key) + ": its bucket was being written");
        }
        if (r.valid && r.key == it->key && r.table == it->table) {
          return Status::Retry("dtx: " + Name(it->table, it->key) + " was inserted by another transaction");
        }
        if (!r.valid && r.lock != 0) {
          return Status::Retry("dtx: " + Name(it->table, it->key) + ": another insert into its bucket is in flight");
        }
      }
    }
  }
  return Status::OK();
}

Status Transaction::commit() {
  if (!active_) return Status::InvalidArgument("dtx: commit() outside a transaction");
  bool validated = false;
  Status s = validate(&validated);
  if (!s.ok()) return abort_with(s);
  std::vector<Item*> writes;
  for (Item* it : items_) {
    if (it->kind != kRead && !it->exists) writes.push_back(it);
  }
  if (!writes.empty()) {
    FaultPoint("dtx.commit.validated");
    if (in_flight_) {
      // The undo record must be on every blade before any record changes.
      s = wait();
      if (!s.ok()) return abort_with(s);
    }
    for (Item* it : writes) {
      const TableInfo& t = *it->info;
      const size_t vb = t.spec.value_bytes;
      EncodeSlot(it->image, vb, it->lock_word | kInvisible, it->read_version + 1, it->key, it->table,
                 it->kind != kDelete, it->image + kSlotHeaderBytes);
      memcpy(it->backup, it->image, t.slot_bytes());
      SetSlotLock(it->backup, 0);
      for (size_t r = 0; r < t.replicas.size(); ++r) {
        s = issue_write(r == 0 ? it->image : it->backup, SlotAddress(t, r, it->at), t.slot_bytes());
        if (!s.ok()) return abort_with(s);
      }
    }
    s = wait();
    if (!s.ok()) {
      // Some replicas may hold the new images: the records stay locked and
      // committing, for recovery to roll back or forward from the undo log.
      for (Item* it : writes) it->locked = false;
      return abort_with(s);
    }
    Database::ThreadState& ts = db_.thread_state();
    for (Item* it : writes) {
      ++stats_->rdma_ops;
      s = db_.initiator().compare_and_swap(it->release, SlotAddress(*it->info, 0, it->at), it->lock_word | kInvisible,
                                           0, Option::kNone);
      if (!s.ok()) break;
      it->locked = false;
      if (it->kind == kDelete) {
        ts.cache.erase(CacheKey{it->table, it->key});
      } else if (it->kind == kInsert) {
        if (ts.cache.size() >= kAddressCacheEntries) ts.cache.clear();
        ts.cache[CacheKey{it->table, it->key}] = it->at;
      }
    }
    Status posted = db_.initiator().post_request();
    in_flight_ = true;
    if (s.ok()) s = posted;
    if (!s.ok()) {
      // Committed on every replica; a release that could not be posted
      // leaves its lock to the lease.
      ++stats_->failed;
      active_ = false;
      return s;
    }
  }
  accesses_.clear();
  for (Item* it : items_) {
    TxAccess a;
    a.table = it->table;
    a.key = it->key;
    a.version = it->read_version;
    if (it->kind == kRead || it->exists || it->kind == kWrite || it->kind == kDelete) accesses_.push_back(a);
    if (it->kind != kRead && !it->exists) {
      a.write = true;
      a.version = it->read_version + 1;
      a.deleted = it->kind == kDelete;
      a.inserted = it->kind == kInsert;
      accesses_.push_back(a);
    }
  }
  ++stats_->committed;
  active_ = false;
  (void)validated;
  return Status::OK();
}

void Transaction::release_locks() {
  bool any = false;
  for (Item* it : items_) {
    if (!it->locked) continue;
    ++stats_->rdma_ops;
    Status s = db_.initiator().compare_and_swap(it->release, SlotAddress(*it->info, 0, it->at), it->lock_word, 0,
                                                Option::kNone);
    it->locked = false;
    if (s.ok()) any = true;
  }
  if (any && db_.initiator().post_request().ok()) in_flight_ = true;
}

Status Transaction::abort_with(Status why) {
  release_locks();
  if (why.code() == Status::Code::kRetry) {
    ++stats_->aborted_conflict;
  } else if (why.code() == Status::Code::kNotFound) {
    ++stats_->aborted_logical;
  } else {
    ++stats_->failed;
  }
  active_ = false;
  return why;
}

void Transaction::abort() {
  if (!active_) return;
  release_locks();
  ++stats_->aborted_logical;
  active_ = false;
}

Status Transaction::flush() {
  if (!in_flight_) return Status::OK();
  return wait();
}

}  // namespace smart::dtx
