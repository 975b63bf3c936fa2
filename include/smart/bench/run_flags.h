/// @file
/// The flags every bench shares for pacing a run, starting it together with
/// other compute blades or processes, and the lease of the store's locks:
/// --sync GROUP:N, --sync-timeout, --start-file, --idle-us, --lease-ms.
/// For the framework's own programs: it includes CLI11, so it is not
/// installed (command_line.h neither).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "smart/bench/start_barrier.h"
#include "smart/remote_lock.h"

namespace smart {

/// --sync, --sync-timeout, --start-file, --idle-us and --lease-ms on a
/// bench's command line.
class RunFlags {
 public:
  /// Adds the five flags to `app`. `sync_effect` ends --sync's help: what
  /// the group's blades do about loading; `idle_after` what a coroutine
  /// idles after ("operation", "committed transaction").
  void add_to(CLI::App& app, const std::string& sync_effect, const std::string& idle_after) {
    app.add_option("--sync", sync_,
                   "GROUP:N: start the run together with the other N-1 compute blades of GROUP (one group name per "
                   "run); " + sync_effect);
    app.add_option("--sync-timeout", sync_timeout_, "seconds to wait for the start group or file (default 600)")
        ->check(CLI::Range(0.1, 86400.0));
    app.add_option("--start-file", start_file_,
                   "PATH: after the load, create PATH.ready and start the run once PATH exists (processes on one "
                   "host started together by a script, e.g. test/bench/ab_ratio.sh)");
    idle_ = app.add_option("--idle-us", idle_us_,
                           "microseconds each coroutine idles after each " + idle_after +
                               ", to lower the load (default: IDLE_USEC, else 0)")
                ->check(CLI::Range(uint64_t{0}, uint64_t{10000000}));
    app.add_option("--lease-ms", lease_ms_,
                   "milliseconds a lock holder's word may stand still before others take it for dead and fence it "
                   "(default 2000; every client of a store should use the same; longer on slow or emulated hosts, "
                   "where a live client may stall that long)")
        ->check(CLI::Range(uint64_t{100}, uint64_t{3600000}));
  }
  /// The group --sync names (size 0: none). Throws smart::Error for a bad one.
  StartGroup group() const { return sync_.empty() ? StartGroup{} : ParseStartGroup(sync_); }
  /// Seconds to wait for the group.
  double sync_timeout() const { return sync_timeout_; }
  /// After the load: joins `group` (--sync, parsed) and waits for
  /// --start-file; throws smart::Error when either fails.
  void wait_to_start(Initiator& initiator, const StartGroup& group, const std::string& program, bool verbose) const {
    JoinStartGroup(initiator, group, sync_timeout_, program, verbose);
    WaitForStartFile(start_file_, sync_timeout_, program, verbose);
  }
  /// --idle-us when given, else `configured` (IDLE_USEC's, read with the config).
  uint64_t idle_us(uint64_t configured) const { return idle_ != nullptr && idle_->count() ? idle_us_ : configured; }
  /// Sets the lease of `lease` to --lease-ms when given.
  void apply_lease(LeaseOptions* lease) const {
    if (lease_ms_ != 0) lease->lease_ns = lease_ms_ * 1000000;
  }

 private:
  std::string sync_;
  double sync_timeout_ = 600;
  std::string start_file_;
  uint64_t idle_us_ = 0;
  CLI::Option* idle_ = nullptr;
  uint64_t lease_ms_ = 0;  // 0: the framework's lease
};

}  // namespace smart
