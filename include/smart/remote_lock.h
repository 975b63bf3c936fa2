/// @file
/// A lock on remote memory with an owner and a lease.
///
/// The lock is one 8-byte word on a memory blade, taken and released with
/// one-sided CAS. A held word names its owner (the client's session on that
/// blade, its thread and task) and carries a lease counter that the holder
/// moves forward while it works (renew). There is no clock shared between
/// clients, so a waiter judges the holder by progress on its own clock: a
/// word that did not change for a whole lease means the holder stopped. Where
/// the memory blade knows better, it says so sooner: when a client's session
/// ends (its process died, its TCP connection closed) the blade clears the
/// session's alive bit in its session table, and a waiter that reads it takes
/// the lock over at once.
///
/// Safety of a take-over. A holder that was only slow (paused, swapped out)
/// finds out at its next renew() or release(): both are CASes on the word,
/// and they fail with Status kLockLost once another client took over. A
/// holder must call renew() before each write of a critical section that a
/// take-over could have overtaken; the new holder (told by `took_over`)
/// finishes or undoes what the old one left half done. A holder paused after
/// its renew() is what fencing is for: right after its take-over CAS (so
/// only the winner does, and only for a lock it really took), the new holder
/// has the blade end the old holder's session (FenceSession), and only then
/// does acquire() return. Over verbs the blade revokes the session's memory
/// windows and destroys its queue pairs, so the paused holder's later work
/// requests, even ones it had posted before it stopped, fail at the NIC.
/// Over shm every client maps the pool and the blade cannot take it back:
/// the fence is soft, carried out by the paused client's own provider, which
/// checks its session word right before it carries out each WRITE or atomic.
/// What is left there is a client stopped between that check and its copy
/// (a few instructions); the fence closes every window wider than that.
///
/// Lock word layout (0: free; bit 63 is never set in a held word, so users
/// may give words with bit 63 set a meaning of their own):
/// @verbatim
///   bits  0-9   session slot on the blade (1..1023)
///   bits 10-23  session incarnation
///   bits 24-31  thread id
///   bits 32-39  task id
///   bits 40-62  lease counter
/// @endverbatim
#pragma once

#include <cstdint>
#include <string>

#include "smart/common.h"
#include "smart/initiator.h"
#include "smart/status.h"

namespace smart {

class BackoffGuard;

/// The owner and lease a held lock word carries.
struct LockOwner {
  SessionId session;  ///< the client's session on the word's blade
  uint8_t thread = 0;  ///< thread id
  uint8_t task = 0;  ///< task id
  uint32_t lease = 0;  ///< 23 bits, wraps
};

constexpr uint64_t kLockFree = 0;  ///< a free lock word
constexpr int kLockLeaseShift = 40;  ///< first bit of the lease counter
constexpr uint64_t kLockLeaseMask = (uint64_t{1} << 23) - 1;  ///< the lease counter's bits, shifted down

/// The lock word of `owner`.
uint64_t EncodeLockWord(const LockOwner& owner);
/// The owner a lock word names.
LockOwner DecodeLockWord(uint64_t word);
/// True for a word a live or dead holder could have written: not free, bit 63
/// clear, a session slot in range.
bool IsHeldLockWord(uint64_t word);
/// "session 3 (incarnation 7), thread 2, task 1, lease 12" for messages.
std::string DescribeLockWord(uint64_t word);
/// `word` with its lease counter moved one forward.
uint64_t NextLease(uint64_t word);

/// When a take-over by lease ends the old holder's session (FenceSession).
enum class FenceMode : uint8_t {
  kNever,      ///< never (unsafe against paused holders; for tests)
  kWhereHard,  ///< on verbs only, where the blade stops the session's requests at the NIC
  kAlways,     ///< on every transport; on shm the fence is the holder's own provider (soft)
};

/// How long a lease lasts and how long waiters wait.
struct LeaseOptions {
  /// A holder whose word did not move for this long is taken to be dead. A
  /// holder renews after a quarter of it (renew_if_due). A waiter can only
  /// tell that the word stood still when it looked at it at least every half
  /// lease (LeaseWatch).
  uint64_t lease_ns = 2000000000;
  /// How often a waiter re-reads the holder's session word.
  uint64_t session_check_ns = 10000000;
  /// Longest acquire() waits for a live holder; 0: as long as it lives.
  uint64_t max_wait_ns = 0;
  /// Whether a take-over by lease ends the old holder's session first (see
  /// the file's description). Never for a holder of the taker's own session.
  FenceMode fence = FenceMode::kAlways;
  /// How long a waiter waits for the blade to carry out a fence; past it the
  /// take-over goes ahead unfenced, with a warning.
  uint64_t fence_wait_ns = 1000000000;
};

/// The framework's fence, the one step every take-over by lease goes
/// through before the new holder writes: asks memory node `node` to end
/// `session` (one CAS setting the fence bit in its session word, which can
/// only land on that very session) and waits until the blade did (*ended),
/// or options.fence_wait_ns passed (kTimedOut). Over verbs the blade revokes the session's memory windows and
/// destroys its queue pairs, so its later requests fail at the NIC. Over shm
/// (a soft fence) the session's own provider sees the bit and refuses its
/// WRITEs and atomics from then on (PeerMemory::guard_session); a write it
/// had already begun to copy can still land. Does nothing per
/// options.fence, or for a session of this client. `scratch`: 8 bytes of
/// the initiator's registered cache, private to the calling task. Errors:
/// the READ's or CAS's own (the node cannot be reached).
Status FenceSession(Initiator& initiator, node_t node, SessionId session, uint64_t* scratch,
                    const LeaseOptions& options, bool* ended);

/// Tells a waiter when the holder of a word it keeps observing is gone.
class LeaseWatch {
 public:
  /// `scratch`: 8 bytes of the initiator's registered cache, private to the
  /// calling task.
  LeaseWatch(Initiator& initiator, node_t node, uint64_t* scratch, const LeaseOptions& options);

  /// Feeds the word's current value. *dead: its holder's session ended, or
  /// the value stood still for a whole lease: every observation over a lease
  /// saw it, none more than half a lease after the one before (a watcher
  /// that looked away longer cannot tell a word that stood still from one
  /// that moved and came back). A value that is not a held lock word (e.g. a
  /// state of the caller's own) can only expire.
  Status observe(uint64_t observed, bool* dead);
  /// Time since the current value was first seen.
  uint64_t unchanged_ns() const;
  /// Time since observe() last ran (0 before it ever did): past half a lease
  /// the watch has lost track of the word and starts over at its next look.
  uint64_t since_observed_ns() const;
  /// The last `dead` came from the session table, not the lease.
  bool by_session() const { return by_session_; }
  /// For the client that just took `word` over by lease (its CAS replaced
  /// it): FenceSession on the session that held it; warns (and goes on
  /// unfenced) when the node cannot be reached or did not end the session
  /// in time. Does nothing for a word that is not a held lock word.
  void fence(uint64_t word);
  /// The last fence() saw the holder's session end.
  bool fenced() const { return fenced_; }

 private:
  Status session_alive(uint64_t word, bool* alive);

  Initiator& initiator_;
  node_t node_;
  uint64_t* scratch_;
  LeaseOptions options_;
  uint64_t last_ = 0;
  bool seen_ = false;
  uint64_t since_ns_ = 0;
  uint64_t observed_ns_ = 0;  // when observe() last ran
  uint64_t last_check_ns_ = 0;
  bool by_session_ = false;
  bool fenced_ = false;
};

/// What acquire() found on its way to the lock.
struct LockAcquireInfo {
  bool took_over = false;    ///< the previous holder died holding the lock
  uint64_t previous = 0;     ///< its lock word
  bool by_session = false;   ///< its death was seen in the session table
  bool fenced = false;       ///< its lease ran out and the blade fenced its session first
  uint64_t waited_ns = 0;  ///< time spent waiting
};

/// A leased lock on one remote 8-byte word (see the file's description).
class RemoteLock {
 public:
  /// `word`: the 8-byte aligned lock word. `scratch`: 16 bytes of the
  /// initiator's registered cache, private to the calling task while the lock
  /// is in use. The owner is this client's session on word.node, the calling
  /// thread and task.
  RemoteLock(Initiator& initiator, GlobalAddress word, uint64_t* scratch, const LeaseOptions& options = {});
  /// As above with the owner given (saves the session look-up, which locks a
  /// mutex, on paths that take many locks).
  RemoteLock(Initiator& initiator, GlobalAddress word, uint64_t* scratch, const LockOwner& owner,
             const LeaseOptions& options = {});

  /// Waits until this task holds the lock (or, see try_acquire, finds a word
  /// with bit 63 set: then returns OK with held() false). `guard`, when given, paces the
  /// retries with conflict avoidance. A word holding something that is not a
  /// lock word (random bytes) is treated as a holder that stopped: taken over
  /// once it stood still for a whole lease; info->previous says what it was.
  /// Errors: the verbs' own; kTimedOut after max_wait_ns, naming the holder.
  Status acquire(LockAcquireInfo* info = nullptr, BackoffGuard* guard = nullptr);
  /// One attempt (a single CAS, plus a session read when the word changed).
  /// A word with bit 63 set is a state of the caller's own (e.g. "published"):
  /// it is reported through last_seen() and never taken over.
  Status try_acquire(bool* acquired, LockAcquireInfo* info = nullptr);
  /// The word as the last attempt found it.
  uint64_t last_seen() const { return last_seen_; }
  /// Moves the lease forward; kLockLost when another client took over.
  Status renew();
  /// renew() if a quarter of the lease passed since the last one.
  Status renew_if_due();
  /// Frees the word; kLockLost (and the word untouched) when another client
  /// took over meanwhile.
  Status release();

  /// True while this object holds the lock.
  bool held() const { return held_; }
  /// The word as this holder last wrote it.
  uint64_t word() const { return word_; }
  /// Where the lock word is.
  GlobalAddress address() const { return address_; }
  /// The initiator the lock posts through.
  Initiator& initiator() const { return initiator_; }
  /// The 16 bytes of registered scratch the lock uses (free between calls).
  uint64_t* scratch() const { return scratch_; }

  /// The owner (session, thread, task) the calling thread and task use on
  /// `node`; the lease counter is the lock's own.
  static LockOwner Owner(Initiator& initiator, node_t node);

 private:
  Status cas(uint64_t expected, uint64_t desired, uint64_t* old);

  Initiator& initiator_;
  GlobalAddress address_;
  uint64_t* scratch_;
  LeaseOptions options_;
  uint64_t mine_;  // owner word with lease 0
  // The lease counter of this lock's next word. Every word it writes (an
  // acquisition or a renewal) takes the next value, so its words do not
  // come back until the 23-bit counter wraps: a waiter that saw a word
  // earlier never mistakes a later acquisition for a holder that stood
  // still. It starts at a random value.
  uint32_t next_lease_;
  uint64_t word_ = 0;
  uint64_t last_seen_ = 0;
  bool held_ = false;
  uint64_t renewed_ns_ = 0;
  LeaseWatch watch_;
};

/// Nanoseconds of the steady clock (lease timing).
uint64_t MonotonicNs();

}  // namespace smart
