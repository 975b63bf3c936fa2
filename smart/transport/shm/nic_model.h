// An RNIC's limits, modelled on the shm transport (`shm.nic_model`, off by
// default; docs/nic_model.md). Three effects the paper measures on
// ConnectX-6 do not exist when a CPU copies the bytes itself:
//
//   - a message-rate cap: the device carries out one request at a time,
//     each taking 1 / rate_mops microseconds of device time;
//   - a work-request cache: while more requests are outstanding on the
//     device (posted, and not yet answered: until their completion is due,
//     whether or not anyone polled it) than it keeps on chip, a request
//     misses with the probability (outstanding - entries) / outstanding, and
//     a miss costs wr_miss_ns more device time (its WQE and QP context
//     fetched over PCIe);
//   - doorbells: queue pairs created without a thread domain share
//     `shared_doorbells` doorbells; ringing one is serialised with every
//     other thread ringing it, and costs doorbell_handoff_ns when another
//     thread rang it last (the register's line and lock change hands).
//
// Device time is virtual: a request's completion is ready when the device
// would have finished it (plus shm.latency_ns), whatever the CPU did in
// between. Doorbell time is real: the ringing thread spins, as it stalls on
// a contended doorbell.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"

namespace smart::shm {

// The lock of the device and of each shared doorbell. It is held for a
// few dozen nanoseconds (a doorbell's for its handoff), so a waiter
// spins instead of sleeping: a futex sleep and wake-up costs tens of
// microseconds on a VM, and with two threads taking turns at the device
// the sleeps fed on themselves (runs at two-thirds of the device's rate
// with a P99 of 60 us, by chance from run to run). Past 64 spins a waiter
// offers its core, in case the holder is off one.
class NicLock {
 public:
  void lock();
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

class NicDoorbell {
 public:
  // Rings the doorbell for thread `thread`: waits for any other thread
  // ringing it, then spins `handoff_cycles` if another thread rang it last.
  // Returns whether that handoff was paid.
  bool ring(int thread, uint64_t handoff_cycles);
  uint64_t handoffs() const { return handoffs_.load(std::memory_order_relaxed); }

 private:
  alignas(64) NicLock lock_;
  int last_thread_ = -1;
  std::atomic<uint64_t> handoffs_{0};
};

class NicModel {
 public:
  using Params = decltype(SmartConfig{}.shm.nic_model);

  // `latency_cycles`: the round trip after the device carried a request
  // out, during which it is still outstanding. Throws smart::Error naming a
  // parameter out of range.
  NicModel(const Params& params, double cycles_per_ns, uint64_t latency_cycles = 0);

  // Admits `count` requests posted at cycle `now`: they queue behind every
  // request admitted before. Returns the cycle at which the device has
  // carried out the last of them (their completions are due a round trip
  // later).
  uint64_t admit(uint64_t now, uint32_t count);
  // Expected device cycles of one request while `outstanding` requests
  // (itself included) are on the device.
  double request_cycles(uint64_t outstanding) const;
  // Requests admitted whose completions are not yet due at cycle `now`.
  uint64_t outstanding(uint64_t now);

  // The doorbell of a new queue pair: nullptr (its own, free to ring) with
  // a thread domain, else the next shared one, round robin.
  NicDoorbell* doorbell_for_new_qp(bool has_thread_domain);
  uint64_t handoff_cycles() const { return handoff_cycles_; }
  // The shared doorbells' handoffs so far, summed.
  uint64_t handoffs() const;

  std::string description() const;

 private:
  // Drops the batches whose completions are due by `now`. Holds lock_.
  void expire(uint64_t now);

  struct Batch {
    uint64_t due;    // cycle its completions are due
    uint32_t count;  // requests
  };

  Params params_;
  double base_cycles_;  // device time of a request the cache holds
  double miss_cycles_;  // extra device time of a miss
  uint64_t handoff_cycles_;
  uint64_t latency_cycles_;
  std::vector<std::unique_ptr<NicDoorbell>> doorbells_;
  std::atomic<uint32_t> next_doorbell_{0};
  // The device: one request at a time, in admission order.
  alignas(64) NicLock lock_;
  uint64_t busy_until_ = 0;    // cycle at which the device is idle
  uint64_t outstanding_ = 0;   // sum of in_flight_'s counts
  std::deque<Batch> in_flight_;  // due times never decrease
};

}  // namespace smart::shm
