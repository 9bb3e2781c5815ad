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

#include <cstdint>
#include <vector>

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
  // alarm the detector resets and learns the new level.
  int Add(double x, double scale);
  // Reference level (median of the learning window); 0 while learning.
  double reference() const { return learning_ ? 0 : ref_; }
  bool learning() const { return learning_; }
  // Observations since the last alarm at which the change most likely began (the extremum of
  // the sum that alarmed), for the alarm just returned.
  uint64_t since_change() const { return since_change_; }
  void Reset();

 private:
  PageHinkleyOptions o_;
  bool learning_ = true;
  std::vector<double> window_;
  double ref_ = 0;
  double up_ = 0, up_min_ = 0, down_ = 0, down_max_ = 0;
  uint64_t n_ = 0, up_min_at_ = 0, down_max_at_ = 0, since_change_ = 0;
};

}  // namespace seqpoint::selector
