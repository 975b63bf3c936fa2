// The execution phase of a SMART-DTX transaction (transaction.h): fetching
// every item, locking read-write ones, following bucket chains and growing
// them for inserts.
#include <algorithm>
#include <cstring>

#include "db_internal.h"
#include "smart/crc32c.h"
#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "transaction.h"
#include "tx_internal.h"

namespace smart::dtx {

Status Transaction::execute() {
  if (!active_) return Status::InvalidArgument("dtx: execute() outside a transaction");
  // A commit of this task that failed midway keeps the task's undo record
  // for its recovery: no transaction may begin before it is settled.
  if (__builtin_expect(log_slot_->unsettled, 0)) return abort_with(refuse_if_unsettled());
  bool lookups = false;
  for (Item* it : items_) lookups |= it->lookup_pending;
  if (lookups) {
    // add() prefetched the items' cache entries; let them load.
    this_task::yield();
    for (Item* it : items_) {
      if (!it->lookup_pending) continue;
      it->lookup_pending = false;
      it->located = db_.cache_->find(it->table, it->key, &it->at);
    }
  }
  // Items whose lock CAS went out this round: a round that fails may have
  // taken any of them, and the abort must release them (by a CAS from this
  // transaction's own word, which leaves a lock of another alone).
  auto give_back_round = [this](Status why) {
    for (Item* it : items_) {
      if (it->step == kLockRead) it->locked = true;
    }
    return abort_with(why);
  };
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
        it->step = kLockRead;
        s = issue_cas(it->word, slot, 0, it->lock_word);
        if (s.ok()) s = issue_read(it->image, slot, t.slot_bytes());
      }
      if (!s.ok()) return give_back_round(s);
    }
    if (!issued) break;
    Status s = wait();
    if (!s.ok()) return give_back_round(s);
    // Every lock this round took is ours before any item can fail the
    // transaction, so that the abort releases all of them.
    for (Item* it : items_) {
      if (it->step == kLockRead && it->word[0] == 0) {
        it->locked = true;
        if (locked_at_ns_ == 0) locked_at_ns_ = MonotonicNs();
      }
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
  switch (it.step) {
    case kNodeRead: {
      if (it.chain_length < kMaxChainNodes) it.chain[it.chain_length++] = it.node;
      int free_slot = -1;
      bool torn = false;
      for (int i = 0; i < kSlotsPerNode; ++i) {
        const char* slot = it.buffer + i * t.slot_bytes();
        // Only a slot that names the key, or a candidate free slot for an
        // insert, is decoded: a slot of another key, whole or torn, is not
        // this item's business (its CRC costs more than the rest of the scan).
        const bool names = SlotNames(slot, it.table, it.key);
        if (!names && (it.kind != kInsert || free_slot >= 0)) continue;
        Record r;
        if (!DecodeSlot(slot, vb, &r)) {
          // A damaged slot of another key is neither free nor this key: an
          // insert passes it by instead of waiting for it to read whole.
          if (!names && damaged(t, it.node, i, slot)) continue;
          torn = true;
          break;
        }
        if (r.valid && names) {
          it.located = true;
          it.at = Locator{it.table, static_cast<uint16_t>(i), it.node};
          db_.cache_->put(it.table, it.key, it.at);
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
        db_.cache_->erase(it.table, it.key);
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
        db_.cache_->erase(it.table, it.key);
        it.located = false;
        it.at = Locator();
        it.step = kStart;
        return refetch("a cached slot that keeps changing");
      }
      if ((r.lock & kInvisible) != 0) {
        // Being committed by another transaction: its new value is landing.
        ++stats_->invisible_waits;
        bool recovered = false;
        Status s = suspect(SlotAddress(t, 0, it.at), r.lock, &recovered);
        if (!s.ok()) return s;
        if (it.invisible_since == 0) it.invisible_since = MonotonicNs();
        if (!recovered && MonotonicNs() - it.invisible_since > 2 * db_.options().lease.lease_ns) {
          return Status::TimedOut("dtx: " + Name(it.table, it.key) + " stays being committed (lock " +
                                  DescribeRecordLock(r.lock) + ") for longer than two leases");
        }
        // Bounded by time (two leases), not by a count of re-reads: a
        // committer that is only descheduled, or a stopped one whose lease
        // has not run out yet, can take longer than any fixed number of
        // quick re-reads on a loaded machine.
        this_task::yield();
        it.step = kSlotRead;
        return Status::OK();
      }
      it.free_when_read = r.lock == 0;
      it.read_version = r.version;
      // An insert that found its key keeps what it read: commit() refuses a
      // change to it.
      if (it.kind == kInsert) memcpy(it.before, it.image, t.slot_bytes());
      it.step = kDone;
      return Status::OK();
    }
    case kLockRead:
    case kHeldRead: {
      if (it.step == kLockRead && it.word[0] != 0) {
        bool recovered = false;
        Status s = suspect(SlotAddress(t, 0, it.at), it.word[0], &recovered);
        if (!s.ok()) return s;
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
        if (it.kind != kInsert) db_.cache_->erase(it.table, it.key);
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
// link word, then the link the primary now holds written to the backups,
// by the winner and by a loser alike (so that one grower's death between
// the two writes is repaired by the next; an insert into an overflow node
// writes its chain's links to the backups again, and SweepDeadLocks repairs
// the rest). A node whose link CAS lost stays unused.
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
  word[1] = word[0] == 0 ? spare + 1 : word[0];
  if (word[1] - 1 >= t.spec.overflow_nodes) {
    return Status::Internal("dtx: " + Name(it.table, it.key) + ": bucket node " + std::to_string(it.node) +
                            " links to node " + std::to_string(word[1] - 1) + " (a corrupt chain)");
  }
  FaultPoint("dtx.chain.linked");
  for (size_t r = 1; r < t.replicas.size(); ++r) {
    s = issue_write(&word[1], NodeAddress(t, r, it.node) + link_at, sizeof(uint64_t));
    if (!s.ok()) return s;
  }
  if (t.replicas.size() > 1) {
    s = wait();
    if (!s.ok()) return s;
  }
  // Read the chain's last node again; the walk goes on from there.
  it.chain_length--;
  it.step = kNodeRead;
  return Status::OK();
}

}  // namespace smart::dtx

namespace smart::dtx {

namespace {
// Identical failed reads of a slot with no lock on it before it counts as
// damaged. A slot being written carries its writer's lock, and a read that
// caught a lock-free slot mid-write sees it whole at the next read.
constexpr int kDamagedAfterReads = 8;
constexpr size_t kMaxDamageWatches = 4096;
}  // namespace

bool Transaction::damaged(const TableInfo& t, uint64_t node, int slot, const char* bytes) {
  if (SlotLock(bytes) != 0) return false;
  Database::ThreadState& ts = db_.thread_state_for_recovery();
  // Torn reads that were only torn leave entries behind: a bound keeps them
  // from piling up (a damaged slot is then counted again from the start).
  if (ts.damage.size() >= kMaxDamageWatches) ts.damage.clear();
  const uint32_t crc = Crc32c(bytes, t.slot_bytes());
  Database::ThreadState::DamageWatch& w = ts.damage[std::make_tuple(t.spec.id, node, slot)];
  if (w.seen > 0 && w.crc == crc) {
    ++w.seen;
  } else {
    w = Database::ThreadState::DamageWatch{crc, 1};
  }
  if (w.seen == kDamagedAfterReads) {
    LogPrintf(LogLevel::kWarn,
              "dtx/%s: table %u node %llu slot %d fails its check with no lock on it, %d reads in a row: damaged; "
              "inserts into its bucket chain pass it by",
              db_.options().name.c_str(), static_cast<unsigned>(t.spec.id), static_cast<unsigned long long>(node),
              slot, kDamagedAfterReads);
  }
  return w.seen >= kDamagedAfterReads;
}

}  // namespace smart::dtx
