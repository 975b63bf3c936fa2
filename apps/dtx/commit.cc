// The end of a SMART-DTX transaction (transaction.h, DESIGN.md): the undo
// record, validation, the coalescent commit, and settling a commit whose
// writes failed midway, so that commit() reports what really happened.
#include <algorithm>
#include <cstring>

#include "db_internal.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/remote_lock.h"
#include "transaction.h"
#include "tx_internal.h"
#include "undo_log.h"

namespace smart::dtx {

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
// writes any record in place. The task's one log slot must not hold another
// transaction's record that recovery may still need.
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
  TaskLogSlot& slot = *log_slot_;
  if (slot.user != nullptr && slot.user != this) {
    return abort_with(Status::InvalidArgument(
        "dtx: thread " + std::to_string(thread_) + " task " + std::to_string(task_) +
        " has another transaction in its undo-log slot that is not over (a second Transaction of the task: use "
        "one per task)"));
  }
  if (UndoBytes(record.items) > kLogSlotBytes) {
    return abort_with(Status::InvalidArgument("dtx: the undo record of " + std::to_string(record.items.size()) +
                                              " items needs " + std::to_string(UndoBytes(record.items)) +
                                              " bytes; a log slot holds " + std::to_string(kLogSlotBytes)));
  }
  slot.user = this;
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
        const char* bytes = it->buffer + i * t.slot_bytes();
        Record r;
        if (!DecodeSlot(bytes, t.spec.value_bytes, &r)) {
          // A slot of another key that stays damaged is no insert of this
          // key in flight (an insert holds its slot's lock while it writes).
          if (!SlotNames(bytes, it->table, it->key) && damaged(t, it->chain[c], i, bytes)) continue;
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

// Queues, for an insert into an overflow node, the links that lead to it on
// every backup: the chain's growth wrote them after the primary's link CAS,
// and a grower that died between the two left them out. A link never
// changes once set, so writing it again is harmless.
Status Transaction::queue_backup_links(Item& it) {
  const TableInfo& t = *it.info;
  if (it.at.node < t.spec.buckets || t.replicas.size() < 2) return Status::OK();
  for (int c = 0; c + 1 < it.chain_length && it.chain[c] != it.at.node; ++c) {
    const uint64_t link = it.chain[c + 1] - t.spec.buckets + 1;
    it.link_words[c] = link;
    for (size_t r = 1; r < t.replicas.size(); ++r) {
      Status s = issue_write(&it.link_words[c], NodeAddress(t, r, it.chain[c]) + kSlotsPerNode * t.slot_bytes(),
                             sizeof(uint64_t));
      if (!s.ok()) return s;
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
    if (it->kind == kInsert && it->exists &&
        memcmp(it->image + kSlotHeaderBytes, it->before + kSlotHeaderBytes, it->info->spec.value_bytes) != 0) {
      return abort_with(Status::InvalidArgument(
          "dtx: " + Name(it->table, it->key) +
          " exists already, and the transaction changed its insert item's value; an insert never overwrites a "
          "record: write() it to change it"));
    }
    if (it->kind != kRead && !it->exists) writes.push_back(it);
  }
  if (!writes.empty()) {
    FaultPoint("dtx.commit.validated");
    if (locked_at_ns_ != 0 && MonotonicNs() - locked_at_ns_ > db_.options().lease.lease_ns / 4) {
      // Held long enough that a waiter may have taken this transaction for
      // dead and recovered it: make sure every lock is still ours before
      // writing anything in place. A holder that stops after this check is
      // what the recoverer's fence is for.
      s = check_locks_still_held();
      if (!s.ok()) return abort_with(s);
    }
    if (in_flight_) {
      // The undo record must be on every blade before any record changes.
      s = wait();
      if (!s.ok()) return abort_with(s);
    }
    FaultPoint("dtx.commit.checked");
    for (Item* it : writes) {
      const TableInfo& t = *it->info;
      const size_t vb = t.spec.value_bytes;
      it->new_version = NewVersion(*it);
      EncodeSlot(it->image, vb, it->lock_word | kInvisible, it->new_version, it->key, it->table,
                 it->kind != kDelete, it->image + kSlotHeaderBytes);
      memcpy(it->backup, it->image, t.slot_bytes());
      SetSlotLock(it->backup, 0);
      if (it->kind == kInsert) s = queue_backup_links(*it);
      for (size_t r = 0; r < t.replicas.size() && s.ok(); ++r) {
        FaultPoint("dtx.commit.write");
        s = issue_write(r == 0 ? it->image : it->backup, SlotAddress(t, r, it->at), t.slot_bytes());
      }
      if (!s.ok()) break;
    }
    if (s.ok()) s = wait();
    if (!s.ok()) {
      // Some replicas may hold the new images: the records stay locked and
      // committing, and only the undo record can tell what to do with them.
      for (Item* it : writes) it->locked = false;
      return settle_failed_commit(s, writes);
    }
    FaultPoint("dtx.commit.release");
    for (Item* it : writes) {
      ++stats_->rdma_ops;
      s = db_.initiator().compare_and_swap(it->release, SlotAddress(*it->info, 0, it->at), it->lock_word | kInvisible,
                                           0, Option::kNone);
      if (!s.ok()) break;
      it->locked = false;
    }
    Status posted = db_.initiator().post_request();
    in_flight_ = true;
    if (!s.ok() || !posted.ok()) {
      // Committed on every replica all the same: a lock whose release could
      // not be posted is released by whoever meets it (its undo record
      // shows every replica new: roll forward).
      for (Item* it : writes) it->locked = false;
      LogPrintf(LogLevel::kWarn, "dtx/%s: committed, but releasing its locks failed (%s); they are left to recovery",
                db_.options().name.c_str(), (!s.ok() ? s : posted).ToString().c_str());
    }
  }
  committed(writes);
  return Status::OK();
}

// The commit's records are new on every replica (or it wrote none).
void Transaction::committed(const std::vector<Item*>& writes) {
  for (Item* it : writes) {
    if (it->kind == kDelete) {
      db_.cache_->erase(it->table, it->key);
    } else if (it->kind == kInsert) {
      db_.cache_->put(it->table, it->key, it->at);
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
  end_slot_use();
  active_ = false;
}

// The commit's writes failed after some may have landed, so whether it took
// effect is unknown: only its undo record can settle it (recovery.h: forward
// when every replica holds the new images, else back). It cannot be settled
// over the queue pair that just failed (a failed request leaves it broken),
// so the records stay locked and committing for whoever meets them, and the
// task's log slot keeps the record: its next execute()
// refuses to begin (this client cannot settle it: its lock words name
// sessions it may no longer have), so nothing writes the slot before.
Status Transaction::settle_failed_commit(const Status& why, const std::vector<Item*>& writes) {
  TaskLogSlot& slot = *log_slot_;
  slot.unsettled = true;
  slot.settle_at = SlotAddress(*writes.front()->info, 0, writes.front()->at);
  slot.settle_lock = writes.front()->lock_word | kInvisible;
  slot.why = why.ToString();
  ++stats_->unknown;
  active_ = false;
  return Status::OutcomeUnknown("dtx: the commit failed midway (" + why.ToString() +
                                "): some replicas may hold its writes; it may or may not have taken effect, and "
                                "the recovery of its locks decides");
}

Status Transaction::refuse_if_unsettled() {
  const TaskLogSlot& slot = *log_slot_;
  return Status::PeerFailed("dtx: thread " + std::to_string(thread_) + " task " + std::to_string(task_) +
                            " cannot begin a transaction: its last commit failed midway (" + slot.why +
                            ") and only a recovery can settle it, from the undo record this task must not "
                            "overwrite; open the client again (a new Initiator and Database): its old sessions "
                            "end and the recovery of their locks settles that commit");
}

}  // namespace smart::dtx
