// Recovery of a dead client's transaction (recovery.h, DESIGN.md).
#include "recovery.h"

#include <cstring>
#include <vector>

#include "db_internal.h"
#include "smart/fault_injection.h"
#include "smart/remote_lock.h"
#include "smart/task.h"
#include "undo_log.h"

namespace smart::dtx {

namespace {

using Buffers = Database::ThreadState::RecoveryBuffers;

// The calling task's registered buffers.
Buffers& TaskBuffers(Database& db) {
  Database::ThreadState& ts = db.thread_state_for_recovery();
  if (ts.recovery.empty()) ts.recovery.resize(kMaxTasksPerThread);
  const int task = this_task::id();
  Buffers& b = ts.recovery[static_cast<size_t>(task >= 0 && task < kMaxTasksPerThread ? task : 0)];
  if (b.log == nullptr) {
    size_t slot = 0;
    for (const TableInfo& t : db.tables()) slot = std::max(slot, t.slot_bytes());
    Initiator& in = db.initiator();
    b.log = static_cast<char*>(in.alloc_cache(kLogSlotBytes));
    b.slot = static_cast<char*>(in.alloc_cache(slot));
    b.word = static_cast<uint64_t*>(in.alloc_cache(2 * sizeof(uint64_t)));
    b.claim = static_cast<uint64_t*>(in.alloc_cache(2 * sizeof(uint64_t)));
    b.fence = static_cast<uint64_t*>(in.alloc_cache(sizeof(uint64_t)));
    if (!b.log || !b.slot || !b.word || !b.claim || !b.fence) {
      b = Buffers();
      throw Error("dtx: the initiator cache is exhausted; raise initiator_cache_size");
    }
  }
  return b;
}

size_t SlotBytesOf(const void* db, uint16_t table) {
  const TableInfo* t = static_cast<const Database*>(db)->table(table);
  return t == nullptr ? 0 : t->slot_bytes();
}

// CAS of a lock word from `expected` to 0; *released when it was.
Status Release(Initiator& in, uint64_t* word, GlobalAddress slot, uint64_t expected, bool* released) {
  Status s = in.compare_and_swap(word, slot, expected, 0, Option::kSync);
  *released = s.ok() && word[0] == expected;
  return s;
}

// Fences, on every blade of the database, the client whose log area header
// (with its session map) is `header`; `who` names it in errors.
Status FenceFromMap(Database& db, Buffers& b, const uint64_t* header, const std::string& who) {
  for (int blade = 0; blade < db.blades(); ++blade) {
    SessionId session;
    if (!DecodeSessionMapWord(header[kLogAreaSessionsOffset / 8 + blade], &session)) continue;
    bool ended = false;
    Status s = FenceSession(db.initiator(), static_cast<node_t>(blade), session, b.fence, db.options().lease, &ended);
    if (!s.ok()) {
      return Status(s.code(), "dtx: cannot fence " + who + " on blade " + std::to_string(blade) + ": " + s.message());
    }
  }
  return Status::OK();
}

// Fences the client that holds session `session` on blade `on` everywhere:
// its log area there (found through the blade's log directory) holds its
// session map. A session whose area is gone or of another incarnation is
// of a client that is gone.
Status FenceClient(Database& db, Buffers& b, node_t on, SessionId session, const std::string& who) {
  Initiator& in = db.initiator();
  Status s = in.read(b.word, db.log_directory(on) + 8 * uint64_t{session.slot}, sizeof(uint64_t), Option::kSync);
  if (!s.ok()) return s;
  const uint64_t entry = b.word[0];
  if (entry == 0 || LogDirectoryIncarnation(entry) != session.incarnation) return Status::OK();
  s = in.read(b.log, GlobalAddress(on, LogDirectoryOffset(entry)), kLogAreaHeaderBytes, Option::kSync);
  if (!s.ok()) return s;
  uint64_t header[kLogAreaHeaderBytes / 8];
  memcpy(header, b.log, sizeof(header));
  if (header[0] != kLogAreaMagic) return Status::OK();
  return FenceFromMap(db, b, header, who);
}

}  // namespace

Status RecoverLock(Database& db, GlobalAddress found, uint64_t found_lock, RecoveryReport* report) {
  *report = RecoveryReport();
  Initiator& in = db.initiator();
  Buffers& b = TaskBuffers(db);
  const uint64_t owner = found_lock & ~kInvisible;
  if (!IsHeldLockWord(owner)) {
    return Status::Internal("dtx: recovery of a lock word that names no owner (" + DescribeRecordLock(found_lock) + ")");
  }
  const LockOwner o = DecodeLockWord(owner);
  const node_t blade = static_cast<node_t>(found.node);

  // The owner's log area on this blade, through the blade's log directory.
  uint64_t header[kLogAreaHeaderBytes / 8] = {};
  GlobalAddress area;
  Status s = in.read(b.word, db.log_directory(blade) + 8 * uint64_t{o.session.slot}, sizeof(uint64_t), Option::kSync);
  if (!s.ok()) return s;
  const uint64_t entry = b.word[0];
  if (entry != 0 && LogDirectoryIncarnation(entry) == o.session.incarnation) {
    area = GlobalAddress(blade, LogDirectoryOffset(entry));
    s = in.read(b.log, area, kLogAreaHeaderBytes, Option::kSync);
    if (!s.ok()) return s;
    memcpy(header, b.log, sizeof(header));
  }
  const GlobalAddress claim_at(header[kLogAreaClaimAddressOffset / 8]);
  if (header[0] != kLogAreaMagic || static_cast<int>(claim_at.node) >= db.blades()) {
    // No log area of the owner's incarnation (its session slot was taken by
    // a new client, DESIGN.md): no undo record and no claim to find; only
    // the lock can be released.
    bool released = false;
    s = Release(in, b.word, found, found_lock, &released);
    report->released += released;
    return s;
  }

  // One recoverer at a time settles the owner's transactions, whichever of
  // its locks it met on whichever blade: every log area of the owner names
  // one claim (the one on blade 0). A recoverer decides from the locks it
  // reads and then writes whole slots, which no CAS makes conditional; one
  // acting on what it read before another released the records would write
  // old images over commits made since. That holds for a lock released for
  // want of an undo record too (the record may have reached only some
  // blades), so the record is read under the claim as well. A recoverer
  // that dies holding the claim is taken over after its lease (or at once,
  // its session ended), and the next one redoes the work.
  RemoteLock claim(in, claim_at, b.claim, db.options().lease);
  LockAcquireInfo taken;
  s = claim.acquire(&taken);
  if (!s.ok()) return s;
  struct Unclaim {
    RemoteLock& lock;
    ~Unclaim() {
      if (lock.held()) (void)lock.release();
    }
  } unclaim{claim};
  // A claim taken over from a recoverer that stood still for its lease: it
  // may be only stopped, with roll-back writes posted to any replica's
  // blade. The claim's own take-over fenced it where the claim lives; it is
  // fenced on every other blade too before this recovery writes anything.
  if (taken.took_over && !taken.by_session && IsHeldLockWord(taken.previous)) {
    s = FenceClient(db, b, claim_at.node, DecodeLockWord(taken.previous).session, "the recoverer " +
                    DescribeLockWord(taken.previous) + " whose claim on " + DescribeLockWord(owner) + " was taken over");
    if (!s.ok()) return s;
  }
  // Before each write or release: a recoverer that stood still for a lease
  // may have lost the claim to another, which redoes the work and may be
  // acting on the locks this one would change; it must stop.
  auto still_claimed = [&claim, owner]() -> Status {
    Status c = claim.renew_if_due();
    if (c.code() == Status::Code::kLockLost) {
      return Status::Retry("dtx: the recovery of " + DescribeLockWord(owner) + " was taken over: " + c.ToString());
    }
    return c;
  };

  // The owner may be only paused, with writes of its commit posted or
  // about to be: it is fenced (FenceSession, the framework's one fence) on
  // every blade before anything it left is read to decide, by the session
  // map of its log area (its lock words name its session on one blade; a
  // live owner's session on another is not ended by losing this one). A
  // session that ended already is not fenced again, and a recovery of this
  // client's own transaction fences nothing.
  s = FenceFromMap(db, b, header, "the owner " + DescribeLockWord(owner));
  if (!s.ok()) return s;

  // The owner's undo record.
  UndoRecord undo;
  bool have_undo = false;
  if (o.thread < header[1] && o.task < header[2]) {
    s = in.read(b.log, area + LogSlotOffset(static_cast<int>(header[2]), o.thread, o.task), kLogSlotBytes,
                Option::kSync);
    if (!s.ok()) return s;
    const std::string problem = DecodeUndo(b.log, kLogSlotBytes, SlotBytesOf, &db, &undo);
    have_undo = problem.empty();
    if (!have_undo) report->why_no_undo = "its log slot on memory node " + std::to_string(blade) + ": " + problem;
  } else {
    report->why_no_undo = "thread " + std::to_string(o.thread) + " task " + std::to_string(o.task) +
                          " lies outside its log area (" + std::to_string(header[1]) + " rows of " +
                          std::to_string(header[2]) + " tasks)";
  }
  if (have_undo) {
    have_undo = false;
    for (const UndoItem& i : undo.items) have_undo = have_undo || i.lock == owner;
    if (!have_undo) {
      report->why_no_undo = "the record in its log slot (tx " + std::to_string(undo.tx_id) + ", " +
                            std::to_string(undo.items.size()) + " item(s)) names other locks (first: " +
                            (undo.items.empty() ? std::string("none") : DescribeLockWord(undo.items[0].lock)) + ")";
    }
  }
  report->found_undo = have_undo;
  if (!have_undo) {
    // Locked before the owner's undo record was written (nothing changed in
    // place), or left by a commit that had completed (the record is new on
    // every replica): either way, only the lock remains.
    s = still_claimed();
    if (!s.ok()) return s;
    bool released = false;
    s = Release(in, b.word, found, found_lock, &released);
    report->released += released;
    return s;
  }

  // Which of the transaction's records the owner still holds, and whether
  // every replica of each already holds the new version.
  struct Held {
    const UndoItem* item;
    const TableInfo* table;
    uint64_t lock;  // as found on the primary
  };
  std::vector<Held> held;
  bool forward = true;
  for (const UndoItem& i : undo.items) {
    const TableInfo* t = db.table(i.at.table);
    if (t == nullptr || i.at.node >= t->total_nodes()) {
      return Status::Internal("dtx: an undo record of " + DescribeLockWord(owner) + " names a slot outside its table");
    }
    Record before;
    if (!DecodeSlot(i.before.data(), t->spec.value_bytes, &before)) {
      return Status::Internal("dtx: an undo image of " + DescribeLockWord(owner) + " does not decode");
    }
    s = in.read(b.slot, SlotAddress(*t, 0, i.at), t->slot_bytes(), Option::kSync);
    if (!s.ok()) return s;
    const uint64_t lock = SlotLock(b.slot);
    if ((lock & ~kInvisible) != i.lock) continue;  // released already: not this recovery's
    held.push_back(Held{&i, t, lock});
    for (size_t r = 0; r < t->replicas.size() && forward; ++r) {
      if (r > 0) {
        s = in.read(b.slot, SlotAddress(*t, r, i.at), t->slot_bytes(), Option::kSync);
        if (!s.ok()) return s;
      }
      Record now;
      // The commit's image: one version on (a write or delete), or the live
      // record an insert put into a free slot (an insert's version is at
      // least the wall clock; a roll-back leaves the slot free).
      forward = DecodeSlot(b.slot, t->spec.value_bytes, &now) &&
                (before.valid ? now.version == before.version + 1 : now.valid && now.version > before.version);
    }
  }
  FaultPoint("dtx.recovery.decided");
  report->rolled_forward = forward && !held.empty();
  report->rolled_back = !forward;
  for (const Held& h : held) {
    const TableInfo& t = *h.table;
    if (!forward) {
      // Every replica gets the image from before with version + 2 (never the
      // old version: a reader that saw the new one must fail validation),
      // the primary keeping the lock until the release below.
      Record before;
      DecodeSlot(h.item->before.data(), t.spec.value_bytes, &before);
      for (size_t r = 0; r < t.replicas.size(); ++r) {
        s = still_claimed();
        if (!s.ok()) return s;
        // Between the claim's check and the write: the window the fence of
        // a recoverer whose claim was taken over closes.
        if (r > 0 || &h != &held.front()) FaultPoint("dtx.recovery.rolling_back");
        EncodeSlot(b.slot, t.spec.value_bytes, r == 0 ? h.lock : 0, before.version + 2, before.key, before.table,
                   before.valid, before.value);
        s = in.write(b.slot, SlotAddress(t, r, h.item->at), t.slot_bytes(), Option::kSync);
        if (!s.ok()) return s;
        ++report->restored;
      }
    }
    s = still_claimed();
    if (!s.ok()) return s;
    bool released = false;
    s = Release(in, b.word, SlotAddress(t, 0, h.item->at), h.lock, &released);
    if (!s.ok()) return s;
    report->released += released;
  }
  // The lock found may belong to a later transaction of the owner than the
  // undo record (locked before its own record was written).
  s = still_claimed();
  if (!s.ok()) return s;
  bool released = false;
  s = Release(in, b.word, found, found_lock, &released);
  report->released += released;
  return s;
}

Status RepairChainLinks(Database& db, int* repaired) {
  *repaired = 0;
  Initiator& in = db.initiator();
  Buffers& b = TaskBuffers(db);
  for (const TableInfo& t : db.tables()) {
    if (t.replicas.size() < 2) continue;
    const uint64_t link_at = kSlotsPerNode * t.slot_bytes();
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      Status s = in.read(b.word, NodeAddress(t, 0, n) + link_at, sizeof(uint64_t), Option::kSync);
      if (!s.ok()) return s;
      const uint64_t link = b.word[0];
      if (link == 0) continue;
      if (link - 1 >= t.spec.overflow_nodes) {
        return Status::Internal("dtx: table " + std::to_string(t.spec.id) + " node " + std::to_string(n) +
                                " links to node " + std::to_string(link - 1) + " of " +
                                std::to_string(t.spec.overflow_nodes) + " overflow nodes (a corrupt chain)");
      }
      for (size_t r = 1; r < t.replicas.size(); ++r) {
        s = in.read(&b.word[1], NodeAddress(t, r, n) + link_at, sizeof(uint64_t), Option::kSync);
        if (!s.ok()) return s;
        if (b.word[1] == link) continue;
        // A link is set once and never changes: a backup that lacks it (its
        // grower died between the primary's CAS and the backups' writes)
        // gets the primary's.
        s = in.write(b.word, NodeAddress(t, r, n) + link_at, sizeof(uint64_t), Option::kSync);
        if (!s.ok()) return s;
        ++*repaired;
      }
    }
  }
  return Status::OK();
}

Status SweepDeadLocks(Database& db, int* recovered) {
  *recovered = 0;
  Initiator& in = db.initiator();
  Buffers& b = TaskBuffers(db);
  LeaseOptions session_only = db.options().lease;
  for (const TableInfo& t : db.tables()) {
    const bool whole_nodes = t.node_bytes() <= kLogSlotBytes;
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      if (whole_nodes) {
        Status s = in.read(b.log, NodeAddress(t, 0, n), t.node_bytes(), Option::kSync);
        if (!s.ok()) return s;
      }
      for (int i = 0; i < kSlotsPerNode; ++i) {
        const Locator at{t.spec.id, static_cast<uint16_t>(i), n};
        uint64_t lock = 0;
        if (whole_nodes) {
          lock = SlotLock(b.log + static_cast<size_t>(i) * t.slot_bytes());
        } else {
          Status s = in.read(b.word, SlotAddress(t, 0, at), sizeof(uint64_t), Option::kSync);
          if (!s.ok()) return s;
          lock = b.word[0];
        }
        if (lock == 0 || !IsHeldLockWord(lock & ~kInvisible)) continue;
        LeaseWatch watch(in, t.replicas[0], &b.word[1], session_only);
        bool dead = false;
        Status s = watch.observe(lock & ~kInvisible, &dead);
        if (!s.ok()) return s;
        if (!dead) continue;
        RecoveryReport report;
        s = RecoverLock(db, SlotAddress(t, 0, at), lock, &report);
        // RecoverLock used b.log for the undo record: read the node again.
        if (whole_nodes) {
          s = s.ok() ? in.read(b.log, NodeAddress(t, 0, n), t.node_bytes(), Option::kSync) : s;
        }
        if (!s.ok()) return s;
        ++*recovered;
      }
    }
  }
  return Status::OK();
}

std::string DescribeRecovery(const RecoveryReport& r) {
  std::string s = r.rolled_back ? "rolled back (" + std::to_string(r.restored) + " replicas restored)"
                  : r.rolled_forward ? "rolled forward"
                  : r.found_undo ? "nothing left to undo"
                                 : "no undo record for the lock" +
                                       (r.why_no_undo.empty() ? std::string() : " (" + r.why_no_undo + ")");
  return s + ", " + std::to_string(r.released) + " lock(s) released";
}

}  // namespace smart::dtx
