#include "selector/strata/page_hinkley.h"

#include <algorithm>

namespace seqpoint::selector {

void PageHinkley::Reset() {
  learning_ = true;
  window_.clear();
  ref_ = 0;
  up_ = up_min_ = down_ = down_max_ = 0;
  n_ = up_min_at_ = down_max_at_ = 0;
}

int PageHinkley::Learn(double x) {
  window_.push_back(x);
  if (window_.size() < std::max<uint32_t>(1, o_.learn)) return 0;
  // The median: a stalled iteration in the learning window does not move the level.
  std::nth_element(window_.begin(), window_.begin() + window_.size() / 2, window_.end());
  ref_ = window_[window_.size() / 2];
  window_.clear();
  window_.shrink_to_fit();
  learning_ = false;
  return 0;
}

int PageHinkley::Alarm(int direction, uint64_t since_change) {
  since_change_ = since_change;
  Reset();
  return direction;
}

}  // namespace seqpoint::selector
