// SMART-HT stalls: what an operation does when it stops making progress.
//
// An operation retries when it loses a race (a CAS), meets a split under
// way (frozen slots, a bucket header that rejects its key until the new
// subtable is published) or reads a block that fails its checksum. Each of
// these ends quickly while every client is alive and the remote memory
// makes sense. When one does not end, either a client died holding the
// resize lock in the middle of a split, or the remote structure is corrupt
// (random bytes in a bucket or a block). The first is repaired: a stalled
// operation takes the dead client's lock and finishes its split. The second
// is reported: after retry_timeout_ns the operation fails with kTimedOut
// and says what it kept meeting, instead of looping forever.
#include "smart/fault_injection.h"
#include "table_internal.h"

namespace smart::hashtable {

void RetryBound::next_slow() {
  FaultPoint("ht.retry");
  const uint64_t now = MonotonicNs();
  if (last_ns_ == 0) {
    last_ns_ = now;
    return;
  }
  // Only the time the operation spent retrying counts: a gap between two
  // attempts counts for at most kCountedGapNs. A process that was stopped
  // (SIGSTOP, a debugger) or descheduled for seconds meanwhile gets a fresh
  // look at the table when it runs again, instead of giving up at once on
  // slots that another client has long since unfrozen.
  retrying_ns_ += std::min(now - last_ns_, kCountedGapNs);
  last_ns_ = now;
  const TableOptions& options = ops_.options();
  if (retrying_ns_ > options.retry_timeout_ns) {
    status_ = Status::TimedOut("hash table: gave up after " + std::to_string(retrying_ns_ / 1000000) + " ms and " +
                               std::to_string(attempts_) + " attempts on memory node " + std::to_string(sh_.node) +
                               ": " + why +
                               " (no split under way could be finished; the table's remote memory may be corrupt)");
    return;
  }
  HashTable::ThreadContext& tc = ops_.tc();
  if (now - tc.last_help_ns < options.lease.session_check_ns) return;
  tc.last_help_ns = now;
  Status s = ops_.help_stalled_split(si_, sh_);
  if (!s.ok()) status_ = s;
}

}  // namespace smart::hashtable
