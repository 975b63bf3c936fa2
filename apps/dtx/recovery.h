// Recovery of a transaction whose client died (or stopped for longer than a
// lease) holding record locks: its undo record decides between rolling the
// transaction forward (every replica already holds its new image: release
// the locks) and back (write the images from before, version + 2, on every
// replica, then release). DESIGN.md, "Dead clients", gives the rule and how
// several clients that meet the same owner's locks take turns.
#pragma once

#include <cstdint>
#include <string>

#include "catalog.h"
#include "database.h"
#include "smart/status.h"

namespace smart::dtx {

/// What one recovery did.
struct RecoveryReport {
  bool found_undo = false;   ///< the owner's undo record covers the lock found
  bool rolled_forward = false;
  bool rolled_back = false;
  int released = 0;          ///< locks released
  int restored = 0;          ///< replicas given their image from before
  /// Without found_undo: why the owner's log slot did not cover the lock
  /// (empty, a record that does not decode, or one naming other locks).
  std::string why_no_undo;
};

/// The record at `found` (a primary slot on its blade) is locked with
/// `found_lock` (an owner word, maybe with kInvisible) by a client judged
/// dead. Recovers that client's transaction and releases its locks. Several
/// clients may call it at once: they settle the owner's transactions one at
/// a time (one leased claim per owner, which each of its log areas names,
/// taken before the undo record is read), and a recoverer that
/// died is taken over and its work redone (every step is conditional on
/// what the records hold). Must run in a task (or on a
/// thread) of a client connected to every blade.
Status RecoverLock(Database& db, GlobalAddress found, uint64_t found_lock, RecoveryReport* report);

/// Walks every table's primaries and recovers every lock whose owner's
/// session has ended (a client that died holding locks no one has met
/// since). Locks of live owners are left alone. *recovered: how many locks
/// led to a recovery. Run it when no transaction of this client is in flight.
Status SweepDeadLocks(Database& db, int* recovered);

/// Gives every backup the overflow links its primary holds (a client that
/// died between linking a new overflow node on the primary and on the
/// backups left them without it). *repaired: links written. Run it when no
/// chain of this database is growing, as SweepDeadLocks.
Status RepairChainLinks(Database& db, int* repaired);

/// "rolled back 2 records (4 replicas), released 2 locks" for logs.
std::string DescribeRecovery(const RecoveryReport& r);

}  // namespace smart::dtx
