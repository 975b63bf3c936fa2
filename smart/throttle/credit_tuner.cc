#include <algorithm>

#include "smart/throttle.h"

namespace smart {

CreditTuner::CreditTuner(const WorkReqThrotConfig& config, int unbounded)
    : config_(config), unbounded_(unbounded), bound_(std::min(config.initial_credit, unbounded)),
      best_bound_(bound_) {}

int CreditTuner::on_epoch(double completed) {
  if (!training_) {
    if (++execution_epochs_ >= config_.execution_epochs) {
      // Re-train so the bound follows changes in load.
      training_ = true;
      best_ = 0;
      bound_ = std::min(config_.initial_credit, unbounded_);
      best_bound_ = bound_;
    }
    return bound_;
  }
  if (bound_ >= unbounded_) {
    // The unbounded epoch ends training: it wins unless the best finite
    // bound was better by more than inf_credit_weight.
    if (best_ < completed * config_.inf_credit_weight) {
      bound_ = unbounded_;
    } else {
      bound_ = best_bound_;
    }
    training_ = false;
    execution_epochs_ = 0;
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
