// The SMART-DTX transaction protocol (transaction.h, DESIGN.md): items,
// locks and their holders, and abort (execution is in fetch.cc, the undo
// record, validation and commit in commit.cc).
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
  next_tx_count_ = &ts.next_tx_id;
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
  log_slot_ = &ts.log_slots[static_cast<size_t>(task)];
  if (thread >= db_.options().threads + 2 || task > db_.options().tasks) {
    throw Error("dtx: a transaction on thread " + std::to_string(thread) + " task " + std::to_string(task) +
                " has no undo-log slot; the database was opened for thread ids below " +
                std::to_string(db_.options().threads + 2) + " and tasks 1.." + std::to_string(db_.options().tasks));
  }
  const uint16_t session = db_.initiator().session(0).slot;
  const uint16_t incarnation = db_.initiator().session(0).incarnation;
  tx_id_base_ = (uint64_t{session} << 54) | (uint64_t{incarnation} << 40) | (uint64_t(thread & 0xff) << 32);
  tx_id_ = tx_id_base_;
  lease_ = static_cast<uint32_t>(MonotonicNs());
  owner_words_.assign(static_cast<size_t>(db_.blades()), 0);
  for (int b = 0; b < db_.blades(); ++b) {
    owner_words_[static_cast<size_t>(b)] = EncodeLockWord(RemoteLock::Owner(in, static_cast<node_t>(b)));
  }
}

Transaction::~Transaction() {
  // An unsettled commit stays the task's to settle (its log slot keeps the
  // record), whichever Transaction of the task runs next.
  TaskLogSlot& slot = *log_slot_;
  if (slot.user == this) slot.user = nullptr;
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
  // The thread's tasks share one count: ids stay unique for 2^32 of the
  // thread's transactions, however they are spread over its tasks.
  tx_id_ = tx_id_base_ | (*next_tx_count_)++;
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
    it->link_words = static_cast<uint64_t*>(in.alloc_cache(kMaxChainNodes * sizeof(uint64_t)));
    if (!it->buffer || !it->image || !it->backup || !it->before || !it->word || !it->release || !it->link_words) {
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

// Makes room for a new watch. Forgetting is safe (a forgotten holder is
// watched again), but a holder that stopped is only found dead by a watch
// that kept looking at it for a whole lease: under contention every live
// transaction's lock word is a holder of its own, and clearing them all
// whenever the table filled up kept the watch of a stopped holder from
// ever lasting a lease. So what goes first is what no longer helps: watches
// not looked at for half a lease (they start over anyway), then, if none,
// the youngest half of the live ones; verdicts of death go only when the
// table is full of them.
void Transaction::forget_watches() {
  const uint64_t stale_ns = db_.options().lease.lease_ns / 2;
  auto drop = [this](decltype(watches_)::iterator it) {
    if (it->second->scratch >= 0) free_scratch_.push_back(it->second->scratch);
    return watches_.erase(it);
  };
  for (auto it = watches_.begin(); it != watches_.end();) {
    const Watch& w = *it->second;
    it = (!w.dead && w.lease->since_observed_ns() > stale_ns) ? drop(it) : std::next(it);
  }
  if (!free_scratch_.empty() && watches_.size() < 4 * kMaxWatches) return;
  // One look at the clock for all of them: the younger half (at least one)
  // goes, whatever time passes meanwhile.
  std::vector<std::pair<uint64_t, decltype(watches_)::iterator>> live;
  for (auto it = watches_.begin(); it != watches_.end(); ++it) {
    if (!it->second->dead) live.emplace_back(it->second->lease->unchanged_ns(), it);
  }
  if (!live.empty()) {
    const size_t younger = (live.size() + 1) / 2;
    std::nth_element(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(younger) - 1, live.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < younger; ++i) drop(live[i].second);
  }
  if (!free_scratch_.empty() && watches_.size() < 4 * kMaxWatches) return;
  for (auto it = watches_.begin(); it != watches_.end();) it = it->second->dead ? drop(it) : std::next(it);
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
    if (free_scratch_.empty() || watches_.size() >= 4 * kMaxWatches) forget_watches();
    if (free_scratch_.empty()) {
      return Status::Internal("dtx: no room to watch the holder of a lock (" + std::to_string(watches_.size()) +
                              " watches kept)");
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
  LogPrintf(LogLevel::kWarn, "dtx/%s: %s %s (met on memory node %d at 0x%llx); recovered its transaction: %s",
            db_.options().name.c_str(), DescribeLockWord(owner).c_str(),
            by_session ? "left (its session ended)" : "stood still for a lease", static_cast<int>(slot.node),
            static_cast<unsigned long long>(slot.offset), DescribeRecovery(report).c_str());
  *recovered = true;
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
  end_slot_use();
  active_ = false;
  return why;
}

void Transaction::abort() {
  if (!active_) return;
  release_locks();
  ++stats_->aborted_logical;
  end_slot_use();
  active_ = false;
}

Status Transaction::flush() {
  if (!in_flight_) return Status::OK();
  return wait();
}

}  // namespace smart::dtx
