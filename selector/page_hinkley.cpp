#include "selector/page_hinkley.h"

#include <algorithm>

namespace seqpoint::selector {

void PageHinkley::Reset() {
  learning_ = true;
  window_.clear();
  ref_ = 0;
  up_ = up_min_ = down_ = down_max_ = 0;
  n_ = up_min_at_ = down_max_at_ = 0;
}

int PageHinkley::Add(double x, double scale) {
  if (learning_) {
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
  if (!(scale > 0)) return 0;
  const double z = std::clamp((x - ref_) / scale, -o_.clip, o_.clip);
  ++n_;
  up_ += z - o_.delta;
  if (up_ < up_min_) {
    up_min_ = up_;
    up_min_at_ = n_;
  }
  down_ += z + o_.delta;
  if (down_ > down_max_) {
    down_max_ = down_;
    down_max_at_ = n_;
  }
  int alarm = 0;
  if (up_ - up_min_ > o_.lambda) {
    alarm = 1;
    since_change_ = n_ - up_min_at_;
  } else if (down_max_ - down_ > o_.lambda) {
    alarm = -1;
    since_change_ = n_ - down_max_at_;
  }
  if (alarm != 0) Reset();
  return alarm;
}

}  // namespace seqpoint::selector
