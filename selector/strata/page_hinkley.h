// A two-sided Page-Hinkley change detector on standardized observations (docs/estimators.md,
// "Drift"). Each observation is z = (x - mean) / scale, clipped to +-clip so that one stalled
// iteration (a GC pause, a page-in) cannot raise an alarm alone; the cumulative sums
//   U_t = sum (z_i - delta),  L_t = sum (z_i + delta)
// alarm when U_t - min U > lambda (the cost went up) or max L - L_t > lambda (down).
// With clipped standard-normal noise, delta = 1 and lambda = 20, a false alarm would come once
// per ~e^(2 delta lambda) observations; real iteration times are heavier-tailed and drift a
// little all the time, so the defaults were chosen on recorded PyTorch runs (docs/estimators.md:
// a CPU halved by another process is found within ~10 iterations). A shift of s standard
// deviations is found after about lambda / (min(s, clip) - delta) observations.
//
// The reference mean is learnt from the first `learn` observations after each reset (their
// median), so the detector follows the level it was reset at. Not thread-safe; O(1) per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "selector/state_codec.h"

namespace seqpoint::selector {

struct PageHinkleyOptions {
  double delta = 1.0;   // allowance, in standard deviations
  double lambda = 20;   // alarm threshold, in standard deviations
  double clip = 3;      // |z| is clipped to this
  uint32_t learn = 16;  // observations that set the reference level after a reset
};

class PageHinkley {
 public:
  explicit PageHinkley(PageHinkleyOptions o = {}) : o_(o) {}

  // `x` in the units of `scale` (> 0). Returns +1 (up), -1 (down) or 0 (no change). After an
  // alarm the detector resets and learns the new level. Inline: it runs twice for every
  // iteration of a run (the detector of all iterations and its SL octave's).
  int Add(double x, double scale) {
    if (learning_) return Learn(x);
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
    if (up_ - up_min_ > o_.lambda) return Alarm(1, n_ - up_min_at_);
    if (down_max_ - down_ > o_.lambda) return Alarm(-1, n_ - down_max_at_);
    return 0;
  }
  // Reference level (median of the learning window); 0 while learning.
  double reference() const { return learning_ ? 0 : ref_; }
  bool learning() const { return learning_; }
  // Observations since the last alarm at which the change most likely began (the extremum of
  // the sum that alarmed), for the alarm just returned.
  uint64_t since_change() const { return since_change_; }
  void Reset();
  // The state as bytes and back (selector_checkpoint.cpp); Load is false on a short image.
  void SaveState(StateWriter& w) const;
  bool LoadState(StateReader& r);

 private:
  int Learn(double x);  // while learning: the reference level from the first observations
  int Alarm(int direction, uint64_t since_change);  // reset after an alarm; returns direction

  PageHinkleyOptions o_;
  bool learning_ = true;
  std::vector<double> window_;
  double ref_ = 0;
  double up_ = 0, up_min_ = 0, down_ = 0, down_max_ = 0;
  uint64_t n_ = 0, up_min_at_ = 0, down_max_at_ = 0, since_change_ = 0;
};

}  // namespace seqpoint::selector
