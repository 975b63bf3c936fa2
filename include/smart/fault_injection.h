/// @file
/// Fault injection for tests: stop, kill or slow a client at an exact point
/// of an algorithm, or fail one of its work requests, deterministically.
///
/// Faults are configured by the environment variable SMART_FAULTS (read by
/// SmartConfig::ApplyEnvironment, installed when the transport opens), as
/// rules separated by ';':
///
/// @verbatim
///   ACTION@TARGET[#N[+]]
///     ACTION  kill          SIGKILL to this process
///             stop          SIGSTOP to this process (SIGCONT resumes it)
///             exit=CODE     _exit(CODE)
///             delay=Tus|Tms sleep T microseconds / milliseconds
///             fail          the work request is not carried out and
///                           completes with a remote access error, as a
///                           NIC reports a bad rkey (work requests only)
///     TARGET  point:NAME    the named point FaultPoint(NAME) in the code
///             read | write | cas | faa | any
///                           the work requests of that opcode this process
///                           posts (any: all of them); the action happens
///                           before the list holding the request is posted
///             posted:read | posted:write | posted:cas | posted:faa | posted:any
///                           the same requests, but the action (not fail)
///                           happens right after the list holding the
///                           request was handed to the transport: the
///                           request is in flight, its completion not yet
///                           seen (on shm it is carried out at the next
///                           poll, so a stop there holds it unexecuted)
///     #N      fire on the Nth hit (default 1); such a rule fires once
///     #N+     fire on every Nth hit: the Nth, the 2Nth, ... (e.g. delay every
///             third CAS with 'delay=50us@cas#3+', so that the windows between
///             a read and the CAS that depends on it stay open)
///
/// e.g. SMART_FAULTS='stop@point:ht.split.frozen', 'fail@read#100;kill@cas#5'
/// or 'stop@posted:write#3'.
/// @endverbatim
///
/// Named points in the code (cheap when SMART_FAULTS is unset: one branch
/// on a flag):
/// - SMART-HT (apps/hashtable): ht.split.locked, ht.split.frozen,
///   ht.split.rewriting, ht.split.publishing (a split); ht.insert.claiming,
///   ht.insert.claimed (an insert of an absent key, before and after the CAS
///   that claims its slot); ht.load.claiming (a load's claim);
///   ht.write.casing (an update's slot CAS, before it); ht.rmw.modifying and
///   ht.rmw.casing (a read-modify-write before and after its freshness
///   check); ht.remove.casing, ht.remove.duplicate_removed (a delete);
///   ht.build.subtable (building the table); ht.directory.read (a directory
///   refresh, between reading its header and its entries); ht.retry (each
///   retry of an operation past its first 64).
/// - SMART-BT (apps/btree): bt.lock.taken, bt.lock.taken_over (a page lock
///   taken over by lease, before the fence); bt.leaf.locked;
///   bt.leaf.write_checked, bt.split.leaf.write_checked,
///   bt.internal.write_checked (after a page write's lease check, before its
///   post) and the same with write_posted (after the post, before its
///   completion); bt.split.leaf.sibling_written, bt.split.leaf.linked,
///   bt.split.internal.sibling_written, bt.split.internal.linked,
///   bt.root.written (splits); bt.retry.
/// - SMART-DTX (apps/dtx): dtx.commit.validated, dtx.commit.checked (after
///   the lock check, before the in-place writes), dtx.commit.write (before
///   each), dtx.commit.release; dtx.chain.linked (a chain's new overflow
///   link on the primary, before the backups); dtx.recovery.decided (a
///   recovery that chose to roll forward or back, before it writes or
///   releases anything) and dtx.recovery.rolling_back (after the claim's
///   check, before each replica write of a roll-back but the first).
/// - The framework: lock.acquire.wait (a RemoteLock::acquire that found the
///   lock held, before each pause); initiator.doorbell (before a doorbell is
///   rung); blade.handshake.thread
///   (a memory blade about to start the thread of a connection whose
///   client proved the key).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace smart {

/// What a rule does when it fires (ACTION).
enum class FaultAction { kKill, kStop, kExit, kDelay, kFail };  ///< kill, stop, exit=CODE, delay=T, fail
/// Where a rule fires (TARGET): a named point or work requests of an opcode.
enum class FaultTarget { kPoint, kRead, kWrite, kCas, kFaa, kAnyRequest };  ///< point:NAME, read, write, cas, faa, any

/// One rule of SMART_FAULTS, parsed.
struct FaultRule {
  FaultAction action = FaultAction::kKill;  ///< ACTION
  FaultTarget target = FaultTarget::kPoint;  ///< TARGET
  std::string point;        ///< for kPoint
  uint64_t nth = 1;         ///< fires on this hit
  bool repeat = false;      ///< and on every nth hit after it
  bool after_post = false;  ///< posted:OP: act once the request is posted
  uint64_t delay_ns = 0;    ///< kDelay
  int exit_code = 0;        ///< kExit
  std::string text;         ///< the rule as written, for messages
};

/// Parses SMART_FAULTS. Throws smart::Error naming the bad rule and what was
/// expected.
std::vector<FaultRule> ParseFaultRules(const std::string& text);
/// Makes `rules` the process's faults (replacing earlier ones); an empty
/// list disarms every point.
void InstallFaultRules(const std::vector<FaultRule>& rules);
/// For tests: runs `hook` each time any thread reaches the named point, in
/// the task that reached it (so the hook may yield to hold that task at the
/// point while others run), before the point's rules. Replaces the point's
/// earlier hook; an empty hook removes it. Hooks stay when rules change.
void SetFaultPointHook(const std::string& point, std::function<void()> hook);
/// True when some installed rule targets work requests.
bool HasWorkRequestFaults();

namespace fault_internal {
extern std::atomic<bool> g_points_armed;
void HitPoint(const char* name);
}  // namespace fault_internal

/// A named point: fires the rule that names it, on its Nth hit.
inline void FaultPoint(const char* name) {
  if (__builtin_expect(fault_internal::g_points_armed.load(std::memory_order_relaxed), 0)) {
    fault_internal::HitPoint(name);
  }
}

}  // namespace smart
