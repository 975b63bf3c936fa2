#include "smart/transport/shm/nic_model.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "smart/status.h"
#include "smart/task.h"

namespace smart::shm {

void NicLock::lock() {
  for (int spins = 0;; ++spins) {
    if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
    if (spins >= 64) {
      sched_yield();
      spins = 0;
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

bool NicDoorbell::ring(int thread, uint64_t handoff_cycles) {
  std::lock_guard<NicLock> hold(lock_);
  const bool handoff = last_thread_ >= 0 && last_thread_ != thread;
  if (handoff) {
    handoffs_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t until = Cycles() + handoff_cycles;
    while (Cycles() < until) {
    }
  }
  last_thread_ = thread;
  return handoff;
}

NicModel::NicModel(const Params& params, double cycles_per_ns, uint64_t latency_cycles)
    : params_(params), latency_cycles_(latency_cycles) {
  if (!(params.rate_mops > 0)) throw Error("shm.nic_model.rate_mops must be positive");
  if (params.wr_cache_entries < 1) throw Error("shm.nic_model.wr_cache_entries must be at least 1");
  if (params.shared_doorbells < 1) throw Error("shm.nic_model.shared_doorbells must be at least 1");
  if (params.wr_miss_ns < 0 || params.doorbell_handoff_ns < 0) {
    throw Error("shm.nic_model.wr_miss_ns and doorbell_handoff_ns must not be negative");
  }
  base_cycles_ = 1000.0 / params.rate_mops * cycles_per_ns;
  miss_cycles_ = params.wr_miss_ns * cycles_per_ns;
  handoff_cycles_ = static_cast<uint64_t>(std::llround(params.doorbell_handoff_ns * cycles_per_ns));
  for (int i = 0; i < params.shared_doorbells; ++i) doorbells_.push_back(std::make_unique<NicDoorbell>());
}

double NicModel::request_cycles(uint64_t outstanding) const {
  if (outstanding <= params_.wr_cache_entries) return base_cycles_;
  const double miss = static_cast<double>(outstanding - params_.wr_cache_entries) / static_cast<double>(outstanding);
  return base_cycles_ + miss * miss_cycles_;
}

void NicModel::expire(uint64_t now) {
  while (!in_flight_.empty() && in_flight_.front().due <= now) {
    outstanding_ -= in_flight_.front().count;
    in_flight_.pop_front();
  }
}

uint64_t NicModel::admit(uint64_t now, uint32_t count) {
  std::lock_guard<NicLock> hold(lock_);
  expire(now);
  outstanding_ += count;
  const uint64_t work = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(request_cycles(outstanding_) * count)));
  const uint64_t done = std::max(now, busy_until_) + work;
  busy_until_ = done;
  in_flight_.push_back(Batch{done + latency_cycles_, count});
  return done;
}

uint64_t NicModel::outstanding(uint64_t now) {
  std::lock_guard<NicLock> hold(lock_);
  expire(now);
  return outstanding_;
}

NicDoorbell* NicModel::doorbell_for_new_qp(bool has_thread_domain) {
  if (has_thread_domain) return nullptr;
  const uint32_t i = next_doorbell_.fetch_add(1, std::memory_order_relaxed);
  return doorbells_[i % doorbells_.size()].get();
}

uint64_t NicModel::handoffs() const {
  uint64_t sum = 0;
  for (const auto& d : doorbells_) sum += d->handoffs();
  return sum;
}

std::string NicModel::description() const {
  char text[256];
  snprintf(text, sizeof(text),
           "NIC model: %.3g M requests/s, %llu cached work requests (+%.3g ns a miss), %d shared doorbells "
           "(%.3g ns a handoff)",
           params_.rate_mops, static_cast<unsigned long long>(params_.wr_cache_entries), params_.wr_miss_ns,
           params_.shared_doorbells, params_.doorbell_handoff_ns);
  return text;
}

}  // namespace smart::shm
