#include <algorithm>

#include "smart/throttle.h"

namespace smart {

CreditTuner::CreditTuner(const WorkReqThrotConfig& config, int unbounded)
    : config_(config), unbounded_(unbounded), bound_(std::min(config.initial_credit, unbounded)),
      best_bound_(bound_) {}

int CreditTuner::decide(bool finite) {
  training_ = false;
  verifying_ = false;
  execution_epochs_ = 0;
  if (finite) {
    bound_ = best_bound_;
    quiet_ = 0;
  } else {
    bound_ = unbounded_;
    // No gain found: train less often, up to kMaxQuietDoublings times less.
    quiet_ = std::min(quiet_ + 1, kMaxQuietDoublings);
  }
  return bound_;
}

int CreditTuner::on_epoch(double completed) {
  if (!training_) {
    if (++execution_epochs_ >= execution_period()) {
      // Re-train so the bound follows changes in load.
      training_ = true;
      best_ = 0;
      bound_ = std::min(config_.initial_credit, unbounded_);
      best_bound_ = bound_;
    }
    return bound_;
  }
  if (verifying_) {
    // Epochs alternate: the best finite bound, then unbounded.
    if (bound_ != unbounded_) {
      pair_finite_ = completed;
      bound_ = unbounded_;
      return bound_;
    }
    ratios_[pairs_++] = completed > 0 ? pair_finite_ / completed : 0;
    if (pairs_ < kVerifyPairs) {
      bound_ = best_bound_;
      return bound_;
    }
    std::sort(ratios_, ratios_ + kVerifyPairs);
    return decide(ratios_[kVerifyPairs / 2] > config_.inf_credit_weight);
  }
  if (bound_ >= unbounded_) {
    // The unbounded epoch ends the sweep: it wins unless the best finite
    // bound was better by more than inf_credit_weight. The best of several
    // noisy epochs beats one epoch by chance, so a finite bound must then
    // win again, in epochs that alternate with unbounded ones.
    if (best_ < completed * config_.inf_credit_weight) return decide(false);
    verifying_ = true;
    pairs_ = 0;
    bound_ = best_bound_;
    return bound_;
  }
  if (completed > best_) {
    best_ = completed;
    best_bound_ = bound_;
  }
  if (bound_ >= config_.max_credit) {
    bound_ = unbounded_;
  } else {
    bound_ = std::min({bound_ + config_.credit_step, config_.max_credit, unbounded_});
  }
  return bound_;
}

}  // namespace smart
