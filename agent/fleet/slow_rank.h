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
// solved for h. sigma: the noise of x as the CUSUM sums it. Step times are not independent: on a
// shared machine a healthy rank runs 10-25% slower than its peers for tens of steps at a time (a
// CPU hog beside it, the scheduler's placement), so the noise of a sum over n steps is larger
// than sqrt(n) times the noise of one step, and a test built on the per-step noise alone called
// those stretches slowdowns (19 false alarms in 20,653 healthy rank-steps of recorded runs,
// bench/fleet/slow_rank_replay.sh; 2 with the long-run noise below). So sigma is the long-run
// noise, by overlapping batch means (Meketon and Schmeiser 1984): over the last kNoiseWindow
// values, the differences of the means of every two adjacent runs of kBatch steps, 1.4826 x their
// median absolute value / sqrt(2) x sqrt(kBatch), robust the same way as the per-step estimate (a
// level shift, the slowdown itself, moves 2 kBatch - 1 differences of many, not the median); never
// below the per-step noise (1.4826 x the median absolute first difference of x / sqrt(2)), and
// floored at min_sigma (timer resolution, no division by zero). A rank is tested once it has
// kWarmup values. One step adds at most kHuber to S (a Huber-type cap on z - k: a scheduler's noise
// is heavy-tailed, 2-4% of steps beyond 4 sigma under contention, where the normal model behind h
// expects none) and at most h / kMinSteps. While alarmed S is capped at 2h, so the alarm clears
// (S back to 0) some h/k steps after the rank recovers. What this cannot do: a healthy rank
// slowed 10% or more for stretches much longer than kBatch steps (a neighbour that comes and goes
// every few seconds) is, to any test fast enough to find a 10% slowdown in tens of steps, a slow
// rank; the long-run noise only absorbs such stretches as far as the window has seen them. The
// measured false alarms and detection times on real DDP jobs are bench/fleet/stragglers.sh's
// (live) and bench/fleet/slow_rank_replay.sh's (recorded, replayed).
// Memory: per rank kNoiseWindow doubles. Pure logic; not thread-safe (the StragglerJoin's owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace seqpoint::daemon::fleet {

struct SlowRankOptions {
  double min_slowdown = 0.10;      // the slowdown the test is built to find fastest
  double false_alarm_steps = 1e6;  // mean steps between false alarms of a healthy rank
  double match_tolerance = 0.05;   // peers' tokens within 5%: "equal SL"
  double min_sigma = 0.002;        // 0.2%: below it, timer resolution
  double floor_steps = 100;        // the detection floor's horizon (SlowRankState::floor)
};

// One rank's compute before the collective in one step.
struct RankCompute {
  int32_t rank = -1;
  uint64_t tokens = 0;
  uint64_t compute_ns = 0;  // arrival - begin; 0: not measured (the rank is skipped)
};

struct SlowRankState {
  uint64_t tested = 0;      // steps in which the rank had a matched peer
  double cusum = 0;         // S, in sigmas
  double threshold = 0;     // h at the current sigma (0 until warmed up)
  double sigma = 0;         // of x, in log units
  double ratio = 1;         // exp(mean x over the last kWindow tested steps): compute vs peers
  bool slow = false;        // the alarm stands
  uint64_t alarms = 0;      // alarms raised (rising edges)
  uint64_t alarm_step = 0;  // the step whose value raised the last alarm
  uint64_t seen = 0;        // steps the rank was in (tested or not: no matched peer, unmeasured)
  // The detection floor at the current sigma: the smallest slowdown (1.2: 20% slower) the test
  // finds within floor_steps of the job's steps in about 9 cases of 10 (DetectionFloor over the
  // tested steps among them: floor_steps x tested / seen); 0 until warmed up, infinity: none.
  double floor = 0;
};

// h such that the one-sided CUSUM with reference k has an in-control mean run length of `arl0`
// steps (Siegmund's approximation), by bisection.
double CusumThreshold(double k, double arl0);

// The mean steps the test (reference k, threshold h, one step adding at most `cap`) takes to
// alarm on a rank whose z has mean `mu` (in sigmas), by Siegmund's approximation for unit-variance
// steps with the mean drift min(mu - k, cap) (Wald's h / drift beyond the cap).
double CusumDelay(double mu, double k, double h, double cap);

// The detection floor: the smallest slowdown factor f (>= 1) that the test finds within `steps`
// tested steps in about 9 cases of 10: the mean delay, CusumDelay(log f / sigma, ...), plus 1.28
// standard deviations of the first passage of a random walk with that drift and unit variance
// over h + 1.166 (inverse Gaussian); by bisection on log f. What an operator reads "no slow
// rank" as: none slower than f within `steps` steps, at this rank's noise. The delay does not
// count the warm-up, and the noise is the long-run one as the window saw it: a job whose noise
// grows after the floor was read (a neighbour that comes and goes) is found later. Measured on
// the replayed recordings with slowdowns injected (slow_rank_replay_test): docs/fleet.md.
double DetectionFloor(double sigma, double k, double h, double cap, double steps);

class SlowRankTest {
 public:
  // kWindow: the steps `ratio` averages; kNoiseWindow, kBatch: the long-run noise's.
  static constexpr size_t kWindow = 64, kNoiseWindow = 256, kBatch = 8, kWarmup = 64, kMinSteps = 4;
  static constexpr double kHuber = 3;
  // The long-run noise is robust to the slowdown it looks for only past 6 batches (slow_rank.cpp).
  static_assert(kWarmup >= 6 * kBatch && kNoiseWindow >= kWarmup && kNoiseWindow >= kWindow);

  explicit SlowRankTest(SlowRankOptions options = {}) : options_(options) {}

  // One step of two or more ranks. Returns the ranks whose alarm rose in this step.
  std::vector<int32_t> Step(uint64_t iter, const std::vector<RankCompute>& ranks);

  const std::map<int32_t, SlowRankState>& ranks() const { return states_; }
  void Forget(int32_t rank) {
    states_.erase(rank);
    values_.erase(rank);
    seen_.erase(rank);
  }

 private:
  void Update(int32_t rank, uint64_t iter, double x, std::vector<int32_t>* raised);

  SlowRankOptions options_;
  std::map<int32_t, SlowRankState> states_;
  std::map<int32_t, std::deque<double>> values_;  // the last kNoiseWindow values of x
  std::map<int32_t, uint64_t> seen_;              // steps each rank was in
};

}  // namespace seqpoint::daemon::fleet
