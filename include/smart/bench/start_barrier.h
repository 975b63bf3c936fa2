/// @file
/// A synchronized start for several compute blades: each process that runs
/// a bench against the same memory blades waits until all of them arrived,
/// so that their timed phases overlap and their rates can be added up
/// (`--sync GROUP:N` on hashtable_bench, btree_bench, smallbank_bench and
/// tatp_bench).
///
/// The barrier lives on memory node 0: a named root `sync/GROUP` whose value
/// is an 8-byte counter. Each compute blade adds one (FAA), then re-reads it
/// until it reaches N. A blade that gives up waiting marks the group
/// abandoned (only while it is still short), so that no blade of it starts
/// without the others. A group name serves one run: a counter already at N
/// is an error, so runs against a long-lived memory blade need a new name
/// each (a run id, a time stamp). Each name takes one of the blade's
/// kMaxNamedRoots (64) registry entries for as long as the blade runs.
#pragma once

#include <cstdint>
#include <string>

#include "smart/initiator.h"
#include "smart/status.h"

namespace smart {

/// What `--sync GROUP:N` names.
struct StartGroup {
  std::string name;  ///< group name: letters, digits, '.', '_', '-'
  int size = 0;      ///< compute blades in it (at least 1)
};

/// Parses `GROUP:N`. Throws smart::Error naming what is wrong.
StartGroup ParseStartGroup(const std::string& text);

/// Arrives at `group`'s barrier on memory node 0 and waits until all
/// group.size compute blades did, at most `timeout_ns`. `*arrival` (when
/// not null) is this blade's place in the order of arrival, from 0. Errors:
/// kTimedOut naming how many of how many arrived (the group is then
/// abandoned); kInvalidArgument when the group already had all its blades
/// (a name used twice) or was abandoned by another; the initiator's.
/// Call from a thread that is not running tasks (the bench's main thread).
Status WaitForStartGroup(Initiator& initiator, const StartGroup& group, uint64_t timeout_ns, int* arrival = nullptr);

/// For a bench's main thread: WaitForStartGroup, then (when `verbose`) one
/// line on the log with this blade's place and its arrival and start times
/// (CLOCK_REALTIME, ns), headed by `program`. Does nothing when group.size
/// is 0. Throws smart::Error with the wait's error when it fails (the
/// caller heads it with the program's name).
void JoinStartGroup(Initiator& initiator, const StartGroup& group, double timeout_s, const std::string& program,
                    bool verbose);

/// For a bench's main thread, `--start-file PATH` (one host, no shared
/// memory blade needed): creates PATH.ready, then waits until PATH exists,
/// at most `timeout_s`, so that a script starts the timed runs of several
/// processes together after all of them loaded (test/bench/ab_ratio.sh).
/// Does nothing when `path` is empty. Throws smart::Error naming the file
/// when it cannot create it or the wait times out.
void WaitForStartFile(const std::string& path, double timeout_s, const std::string& program, bool verbose);

}  // namespace smart
