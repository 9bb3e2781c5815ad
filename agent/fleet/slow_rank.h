// Which rank of a data-parallel run is slower than its peers at equal SL, by a sequential test
// over steps (issue 23: "a node 10% slower found within 30 s"). One step's verdict
// (straggler.h) names a straggler only when its lag clears 10% of the compute in that one step,
// which a 10% slow rank does in about half the steps on a noisy machine; evidence summed over
// steps separates it from the noise in a few tens of steps.
//
// Per step and rank r, from its compute before the collective c_r (arrival - begin) and its
// tokens t_r:
//   x_r = log(c_r / t_r) - median over r's SL-matched peers q of log(c_q / t_q)
// SL-matched: q's tokens within match_tolerance of r's; a rank with no matched peer in a step is
// not tested in it (a rank fed longer sequences is never compared with shorter ones, so data
// imbalance cannot read as slow hardware; per-token normalisation only absorbs what is left of
// the SL difference inside the tolerance). Comparing ranks within one step cancels what every
// rank shares: the step's collective, the machine's load.
//
// The test is a one-sided CUSUM on z = x / sigma per rank: S = max(0, S + z - k), alarm when
// S > h (Page 1954). k = delta / (2 sigma), delta = log(1 + min_slowdown): tuned to detect a
// slowdown of min_slowdown (10%, the size the published detectors flag). h follows from the
// false-alarm rate asked for, false_alarm_steps (the mean steps between false alarms of one
// healthy rank), by Siegmund's approximation of the in-control run length
//   ARL0 = (exp(2 k b) - 2 k b - 1) / (2 k^2), b = h + 1.166,
// solved for h. One step adds at most h / kMinSteps to S: h assumes normal noise, a scheduler's
// is heavy-tailed, so an alarm needs at least kMinSteps steps of evidence. sigma: the noise of x, taken robustly from the rank's own last kWindow values as
// 1.4826 x the median absolute first difference / sqrt(2), so a level shift (the slowdown
// itself) barely moves it; floored at min_sigma (timer resolution, no division by zero). A rank
// is tested once it has kWarmup values. While alarmed S is capped at 2h, so the alarm clears
// (S back to 0) some h/k steps after the rank recovers. The measured false alarms and detection
// times on a real DDP job are bench/fleet/stragglers.sh's.
// Memory: per rank kWindow doubles. Pure logic; not thread-safe (the StragglerJoin's owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace seqpoint::daemon::fleet {

struct SlowRankOptions {
  double min_slowdown = 0.10;        // the slowdown the test is built to find fastest
  double false_alarm_steps = 1e6;    // mean steps between false alarms of a healthy rank
  double match_tolerance = 0.05;     // peers' tokens within 5%: "equal SL"
  double min_sigma = 0.002;          // 0.2%: below it, timer resolution
};

// One rank's compute before the collective in one step.
struct RankCompute {
  int32_t rank = -1;
  uint64_t tokens = 0;
  uint64_t compute_ns = 0;  // arrival - begin; 0: not measured (the rank is skipped)
};

struct SlowRankState {
  uint64_t tested = 0;    // steps in which the rank had a matched peer
  double cusum = 0;       // S, in sigmas
  double threshold = 0;   // h at the current sigma (0 until warmed up)
  double sigma = 0;       // of x, in log units
  double ratio = 1;       // exp(mean x over the last kWindow tested steps): compute vs peers
  bool slow = false;      // the alarm stands
  uint64_t alarms = 0;    // alarms raised (rising edges)
  uint64_t alarm_step = 0;  // the step whose value raised the last alarm
};

// h such that the one-sided CUSUM with reference k has an in-control mean run length of `arl0`
// steps (Siegmund's approximation), by bisection.
double CusumThreshold(double k, double arl0);

class SlowRankTest {
 public:
  static constexpr size_t kWindow = 64, kWarmup = 16, kMinSteps = 4;

  explicit SlowRankTest(SlowRankOptions options = {}) : options_(options) {}

  // One step of two or more ranks. Returns the ranks whose alarm rose in this step.
  std::vector<int32_t> Step(uint64_t iter, const std::vector<RankCompute>& ranks);

  const std::map<int32_t, SlowRankState>& ranks() const { return states_; }
  void Forget(int32_t rank) {
    states_.erase(rank);
    values_.erase(rank);
  }

 private:
  void Update(int32_t rank, uint64_t iter, double x, std::vector<int32_t>* raised);

  SlowRankOptions options_;
  std::map<int32_t, SlowRankState> states_;
  std::map<int32_t, std::deque<double>> values_;  // the last kWindow values of x
};

}  // namespace seqpoint::daemon::fleet
