#include <algorithm>

#include "smart/throttle.h"

namespace smart {

GainCheck::GainCheck(int period_epochs, double min_gain, int first_check_epochs)
    : period_epochs_(std::max(1, period_epochs)), min_gain_(min_gain), until_check_(std::max(1, first_check_epochs)) {}

bool GainCheck::on_epoch(double rate) {
  switch (phase_) {
    case Phase::kOn:
    case Phase::kAside:
      if (--until_check_ <= 0) {
        phase_ = Phase::kCheckOff;
        pairs_ = 0;
      }
      return on();
    case Phase::kCheckOff:
      off_rate_ = rate;
      phase_ = Phase::kCheckOn;
      return on();
    case Phase::kCheckOn:
      break;
  }
  // An off epoch that did nothing loses to an on epoch that did something,
  // and ties with one that did nothing too.
  ratios_[pairs_++] = off_rate_ > 0 ? rate / off_rate_ : (rate > 0 ? min_gain_ + 1 : 1);
  if (pairs_ < kPairs) {
    phase_ = Phase::kCheckOff;
    return on();
  }
  std::sort(ratios_, ratios_ + kPairs);
  last_gain_ = ratios_[kPairs / 2];
  const bool keep = last_gain_ >= min_gain_;
  ++checks_;
  if (!keep) ++asides_;
  streak_ = (checks_ > 1 && keep == last_on_) ? std::min(streak_ + 1, kMaxDoublings) : 0;
  last_on_ = keep;
  until_check_ = period();
  phase_ = keep ? Phase::kOn : Phase::kAside;
  return on();
}

}  // namespace smart
