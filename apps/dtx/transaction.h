// SMART-DTX transactions: serializable, one-sided, over replicated records.
//
// A task (coroutine) runs one Transaction at a time:
//
//   Transaction& tx = ...;            // one per task, reused
//   tx.begin();
//   int a = tx.write(kChecking, 7);   // read-write item
//   int b = tx.read(kSavings, 7);     // read-only item
//   Status s = tx.execute();          // fetches (and locks) what was added
//   if (!s.ok()) ...                  // aborted already: kRetry conflict,
//                                     // kNotFound a missing key, else an error
//   tx.value<Balance>(a)->amount += 1;
//   s = tx.commit();                  // OK: committed on every replica
//
// execute() may be called again after adding more items. An application
// that decides to give up calls abort(). After commit() or any abort the
// transaction holds no lock.
//
// Protocol (FORD's, with fewer work requests; apps/dtx/DESIGN.md):
//   execution   read-only items: READ the slot (address cached) or the
//               bucket node; read-write items: lock CAS and slot READ in one
//               doorbell when the address is cached, else a bucket READ
//               first. The undo record goes to the blades while the
//               transaction computes.
//   validation  read-only items: READ (lock, version); abort when the
//               version moved or another transaction holds the lock.
//               Inserts: the bucket again (no other copy, no racing insert).
//   commit      one WRITE per replica of each written record (primary with
//               lock|kInvisible, backups with lock 0), one wait; then the
//               primaries' locks released by CAS without waiting.
//   abort       releases, by CAS, only the locks this transaction took.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "catalog.h"
#include "database.h"
#include "smart/remote_lock.h"
#include "smart/status.h"

namespace smart::dtx {

struct TaskLogSlot;

/// What a committed transaction read and wrote (for history checks).
struct TxAccess {
  uint16_t table = 0;
  uint64_t key = 0;
  uint64_t version = 0;  ///< read: the version read; write: the version written
  bool write = false;
  bool deleted = false;  ///< a write that removed the record
  bool inserted = false; ///< a write that created it
};

class Transaction {
 public:
  /// `db` must outlive it. Takes registered buffers from the initiator's
  /// cache: create it once per task and reuse it (create, use and destroy
  /// it on its task's thread: its undo-log slot is that task's).
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  /// Starts a transaction (the previous one must have ended).
  void begin();
  /// Adds an item; returns its handle. read: read-only; write: read-write
  /// of an existing record; insert: a record that must not exist yet (see
  /// exists()); remove: a record deleted at commit.
  int read(uint16_t table, uint64_t key);
  int write(uint16_t table, uint64_t key);
  int insert(uint16_t table, uint64_t key);
  int remove(uint16_t table, uint64_t key);

  /// Fetches every item added since the last call. On failure the
  /// transaction is already aborted: kRetry a conflict, kNotFound a missing
  /// key, anything else an error (a dead blade, a corrupt bucket).
  Status execute();
  /// The item's value (the table's value_bytes); writable for write and
  /// insert items.
  char* value(int item);
  template <typename T>
  T* value_as(int item) {
    return reinterpret_cast<T*>(value(item));
  }
  /// An insert item found its key already present: the item then reads the
  /// record, the insert does nothing, and a commit after the application
  /// changed the item's value fails with kInvalidArgument (an insert never
  /// overwrites; write() the key to change it).
  bool exists(int item) const;
  /// The version the item was read at.
  uint64_t version(int item) const;

  /// Validates and commits. OK: committed on every replica. kRetry or
  /// kLockLost: a conflict, aborted, nothing written. kOutcomeUnknown: the
  /// commit's writes failed midway (a blade unreachable, this client
  /// fenced): it may or may not have taken effect; its records stay locked
  /// until a recovery decides, which this client cannot make (open the
  /// client again: its old sessions end and others recover them); until
  /// then the task's execute() fails rather than overwrite the undo record
  /// the recovery needs. Any other error: aborted, nothing of it took
  /// effect.
  Status commit();
  /// Gives up (an application decision); counted as a logical abort.
  void abort();

  /// Waits for the lock releases a finished transaction left in flight
  /// (call before the task ends).
  Status flush();

  /// The items of the last committed transaction.
  const std::vector<TxAccess>& accesses() const { return accesses_; }
  /// Id of the current (or last) transaction, unique among the clients of
  /// the blades: this client's session and incarnation on blade 0, the
  /// thread, and a count of the thread's transactions (2^32 before it
  /// repeats).
  uint64_t id() const { return tx_id_; }

  struct Item;

 private:
  int add(uint16_t table, uint64_t key, int kind);
  Status finish_fetch(Item& it);
  Status validate(bool* needed);
  Status grow_chain(Item& it);
  Status suspect(GlobalAddress slot, uint64_t lock, bool* recovered);
  void forget_watches();
  Status check_locks_still_held();
  Status write_undo();
  Status queue_backup_links(Item& it);
  void committed(const std::vector<Item*>& writes);
  Status settle_failed_commit(const Status& why, const std::vector<Item*>& writes);
  Status refuse_if_unsettled();  // the error of a task whose last commit is unsettled
  void end_slot_use();
  bool damaged(const TableInfo& t, uint64_t node, int slot, const char* bytes);
  Status abort_with(Status why);
  void release_locks();
  uint64_t lock_word(node_t blade);
  Status issue_read(void* local, GlobalAddress remote, size_t length);
  Status issue_cas(uint64_t* local, GlobalAddress remote, uint64_t expected, uint64_t desired);
  Status issue_write(const void* local, GlobalAddress remote, size_t length);
  Status wait();

  Database& db_;
  DtxStats* stats_;
  int thread_ = 0;
  int task_ = 0;
  std::vector<Item*> items_;
  std::vector<Item*> pool_;
  std::vector<TxAccess> accesses_;
  std::vector<uint64_t> owner_words_;  // per blade: our owner word with lease 0
  TaskLogSlot* log_slot_ = nullptr;     // this task's undo-log slot (its thread's state)
  uint32_t* next_tx_count_ = nullptr;   // the thread's count of transactions (id())
  uint64_t tx_id_base_ = 0;             // id() without the thread's count
  char* log_buffer_;        // kLogSlotBytes, registered
  uint64_t tx_id_ = 0;
  uint32_t lease_ = 0;
  bool active_ = false;
  bool logged_ = false;
  bool in_flight_ = false;  // posted work requests no wait covered yet
  uint64_t locked_at_ns_ = 0;  // when this transaction took its first lock
  // Holders this task waits for, judged by their lease (LeaseWatch).
  struct Watch;
  std::map<std::pair<node_t, uint64_t>, std::unique_ptr<Watch>> watches_;
  uint64_t* watch_scratch_ = nullptr;  // kMaxWatches registered words
  std::vector<int> free_scratch_;
};

}  // namespace smart::dtx
