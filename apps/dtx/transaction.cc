// The SMART-DTX transaction protocol (transaction.h, DESIGN.md): execution
// with eager locks, the undo record, validation, the coalescent commit and
// abort.
#include "transaction.h"

#include <algorithm>
#include <cstring>

#include "db_internal.h"
#include "tx_internal.h"
#include "recovery.h"
#include "smart/logging.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "undo_log.h"

namespace smart::dtx {

struct Transaction::Watch {
  std::unique_ptr<LeaseWatch> lease;
  int scratch = 0;   // -1: none (a dead holder's entry)
  bool dead = false;
  bool by_session = false;
};

Transaction::Transaction(Database& db) : db_(db) {
  Database::ThreadState& ts = db_.thread_state();
  stats_ = &ts.stats;
  Initiator& in = db_.initiator();
  log_buffer_ = static_cast<char*>(in.alloc_cache(kLogSlotBytes));
  watch_scratch_ = static_cast<uint64_t*>(in.alloc_cache(kMaxWatches * sizeof(uint64_t)));
  for (int i = kMaxWatches - 1; i >= 0; --i) free_scratch_.push_back(i);
  if (log_buffer_ == nullptr || watch_scratch_ == nullptr) {
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
  locked_at_ns_ = 0;
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
  static_cast<ItemState&>(*it) = ItemState();
  it->table = table;
  it->key = key;
  it->kind = kind;
  it->info = info;
  // The cache entry is most likely not in the CPU's caches: execute() looks
  // it up after letting the thread's other tasks run while it loads.
  if (kind != kInsert) {
    db_.cache_->prefetch(table, key);
    it->lookup_pending = true;
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

// `lock` (another's) blocks the record at `slot`. Watches its holder; once
// the holder's session is gone or its word stood still for a lease, recovers
// its transaction (recovery.h) and sets *recovered.
Status Transaction::suspect(GlobalAddress slot, uint64_t lock, bool* recovered) {
  *recovered = false;
  const uint64_t owner = lock & ~kInvisible;
  if (!IsHeldLockWord(owner)) return Status::OK();  // not an owner: nothing to recover from
  const node_t node = static_cast<node_t>(slot.node);
  auto key = std::make_pair(node, owner);
  auto found = watches_.find(key);
  if (found == watches_.end()) {
    if (free_scratch_.empty() || watches_.size() >= 4 * kMaxWatches) {
      // Forgetting is safe: a forgotten holder is watched again.
      for (auto& [k, w] : watches_) {
        if (w->scratch >= 0) free_scratch_.push_back(w->scratch);
      }
      watches_.clear();
    }
    auto w = std::make_unique<Watch>();
    w->scratch = free_scratch_.back();
    free_scratch_.pop_back();
    w->lease = std::make_unique<LeaseWatch>(db_.initiator(), node, &watch_scratch_[w->scratch], db_.options().lease);
    found = watches_.emplace(key, std::move(w)).first;
  }
  Watch& w = *found->second;
  if (!w.dead) {
    bool dead = false;
    Status s = w.lease->observe(owner, &dead);
    if (!s.ok()) return s;
    if (!dead) return Status::OK();
    // The holder's transaction is over: every other lock with this word (a
    // record its undo record does not name, e.g. it died before the record
    // landed) is recovered as soon as it is met, without a lease of its own.
    // Each transaction's words differ, so no later transaction of a holder
    // that was only stopped is taken for this one.
    w.dead = true;
    w.by_session = w.lease->by_session();
    w.lease.reset();
    free_scratch_.push_back(w.scratch);
    w.scratch = -1;
  }
  const bool by_session = w.by_session;
  RecoveryReport report;
  Status s = RecoverLock(db_, slot, lock, &report);
  if (!s.ok()) return s;
  ++stats_->recoveries;
  LogPrintf(LogLevel::kWarn, "dtx/%s: %s %s; recovered its transaction: %s", db_.options().name.c_str(),
            DescribeLockWord(owner).c_str(), by_session ? "left (its session ended)" : "stood still for a lease",
            DescribeRecovery(report).c_str());
  *recovered = true;
  return Status::OK();
}

// A CAS of each held lock onto itself: kLockLost (the locks still ours are
// released by the abort) when a recoverer took any of them.
Status Transaction::check_locks_still_held() {
  for (Item* it : items_) {
    if (!it->locked) continue;
    Status s = issue_cas(it->word, SlotAddress(*it->info, 0, it->at), it->lock_word, it->lock_word);
    if (!s.ok()) return s;
  }
  Status s = wait();
  if (!s.ok()) return s;
  std::string lost;
  for (Item* it : items_) {
    if (!it->locked || it->word[0] == it->lock_word) continue;
    it->locked = false;
    if (lost.empty()) lost = Name(it->table, it->key) + " is now " + DescribeRecordLock(it->word[0]);
  }
  if (!lost.empty()) return Status::LockLost("dtx: this transaction's locks were taken over: " + lost);
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
    record.items.push_back(UndoItem{it->at, std::string(it->before, it->info->slot_bytes()), it->lock_word});
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
  for (Item* it : items_) {
    if (it->kind == kRead || it->exists) {
      Status s = issue_read(it->word, SlotAddress(*it->info, 0, it->at), 2 * sizeof(uint64_t));
      if (!s.ok()) return s;
      *needed = true;
    }
  }
  // Inserts read their chain again node by node, following links that
  // appeared since execution (another insert may have grown the chain and
  // put the same key in the new node).
  for (int c = 0;; ++c) {
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
          bool recovered = false;
          Status s = suspect(SlotAddress(*it->info, 0, it->at), lock, &recovered);
          if (!s.ok()) return s;
          return Status::Retry("dtx: " + Name(it->table, it->key) + " is " + DescribeRecordLock(lock));
        }
      }
      if (it->kind != kInsert || it->exists || c >= it->chain_length) continue;
      const TableInfo& t = *it->info;
      const uint64_t link = NodeLink(it->buffer, t.spec.value_bytes);
      if (c == it->chain_length - 1 && link != 0) {
        if (link - 1 >= t.spec.overflow_nodes || it->chain_length >= kMaxChainNodes) {
          return Status::Internal("dtx: " + Name(it->table, it->key) + ": a bucket chain that links to node " +
                                  std::to_string(link - 1) + " (a corrupt or endless chain)");
        }
        it->chain[it->chain_length++] = t.spec.buckets + (link - 1);
      }
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
    if (locked_at_ns_ != 0 && MonotonicNs() - locked_at_ns_ > db_.options().lease.lease_ns / 4) {
      // Held long enough that a waiter may have taken this transaction for
      // dead and recovered it: make sure every lock is still ours before
      // writing anything in place.
      s = check_locks_still_held();
      if (!s.ok()) return abort_with(s);
    }
    if (in_flight_) {
      // The undo record must be on every blade before any record changes.
      s = wait();
      if (!s.ok()) return abort_with(s);
    }
    for (Item* it : writes) {
      const TableInfo& t = *it->info;
      const size_t vb = t.spec.value_bytes;
      it->new_version = NewVersion(*it);
      EncodeSlot(it->image, vb, it->lock_word | kInvisible, it->new_version, it->key, it->table,
                 it->kind != kDelete, it->image + kSlotHeaderBytes);
      memcpy(it->backup, it->image, t.slot_bytes());
      SetSlotLock(it->backup, 0);
      for (size_t r = 0; r < t.replicas.size() && s.ok(); ++r) {
        FaultPoint("dtx.commit.write");
        s = issue_write(r == 0 ? it->image : it->backup, SlotAddress(t, r, it->at), t.slot_bytes());
      }
      if (!s.ok()) break;
    }
    if (s.ok()) s = wait();
    if (!s.ok()) {
      // Some replicas may hold the new images: the records stay locked and
      // committing, for recovery to roll back or forward from the undo log.
      for (Item* it : writes) it->locked = false;
      return abort_with(s);
    }
    FaultPoint("dtx.commit.release");
    for (Item* it : writes) {
      ++stats_->rdma_ops;
      s = db_.initiator().compare_and_swap(it->release, SlotAddress(*it->info, 0, it->at), it->lock_word | kInvisible,
                                           0, Option::kNone);
      if (!s.ok()) break;
      it->locked = false;
      if (it->kind == kDelete) {
        db_.cache_->erase(it->table, it->key);
      } else if (it->kind == kInsert) {
        db_.cache_->put(it->table, it->key, it->at);
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
      a.version = it->new_version;
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
  if (why.code() == Status::Code::kRetry || why.code() == Status::Code::kLockLost) {
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
