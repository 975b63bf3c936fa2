// An RNIC's limits, modelled on the shm transport (`shm.nic_model`, off by
// default; docs/nic_model.md). Three effects the paper measures on
// ConnectX-6 do not exist when a CPU copies the bytes itself:
//
//   - a message-rate cap: the device carries out one request at a time,
//     each taking 1 / rate_mops microseconds of device time;
//   - a work-request cache: while more requests are outstanding on the
//     device than it keeps on chip, a request misses with the probability
//     (outstanding - entries) / outstanding, and a miss costs wr_miss_ns
//     more device time (its WQE and QP context fetched over PCIe);
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
#include <memory>
#include <string>
#include <vector>

#include "smart/config.h"

namespace smart::shm {

class NicDoorbell {
 public:
  // Rings the doorbell for thread `thread`: waits for any other thread
  // ringing it, then spins `handoff_cycles` if another thread rang it last.
  // Returns whether that handoff was paid.
  bool ring(int thread, uint64_t handoff_cycles);
  uint64_t handoffs() const { return handoffs_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<bool> locked_{false};
  int last_thread_ = -1;
  std::atomic<uint64_t> handoffs_{0};
};

class NicModel {
 public:
  using Params = decltype(SmartConfig{}.shm.nic_model);

  // Throws smart::Error naming a parameter out of range.
  NicModel(const Params& params, double cycles_per_ns);

  // Admits `count` requests posted at cycle `now`: they queue behind every
  // request admitted before. Returns the cycle at which the device has
  // carried out the last of them.
  uint64_t admit(uint64_t now, uint32_t count);
  // `count` admitted requests left the device (their completions polled).
  void retire(uint64_t count) { outstanding_.fetch_sub(count, std::memory_order_relaxed); }
  // Expected device cycles of one request while `outstanding` requests
  // (itself included) are on the device.
  double request_cycles(uint64_t outstanding) const;
  uint64_t outstanding() const { return outstanding_.load(std::memory_order_relaxed); }

  // The doorbell of a new queue pair: nullptr (its own, free to ring) with
  // a thread domain, else the next shared one, round robin.
  NicDoorbell* doorbell_for_new_qp(bool has_thread_domain);
  uint64_t handoff_cycles() const { return handoff_cycles_; }
  // The shared doorbells' handoffs so far, summed.
  uint64_t handoffs() const;

  std::string description() const;

 private:
  Params params_;
  double base_cycles_;  // device time of a request the cache holds
  double miss_cycles_;  // extra device time of a miss
  uint64_t handoff_cycles_;
  std::vector<std::unique_ptr<NicDoorbell>> doorbells_;
  std::atomic<uint32_t> next_doorbell_{0};
  alignas(64) std::atomic<uint64_t> busy_until_{0};  // cycle at which the device is idle
  alignas(64) std::atomic<uint64_t> outstanding_{0};
};

}  // namespace smart::shm
