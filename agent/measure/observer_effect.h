// Observer-effect detection: does measuring an iteration slow it down? Iteration time is known
// for every iteration, so the agent can test it on itself, with controls. Of every
// runs.observer_effect_control_every consecutive iterations the selector chooses in a process,
// one, at a pseudo-random position, is a control: it is a SeqPoint sample like the others
// (timed, its energy taken) but no collector runs on it. Each control is paired with the
// nearest treated (collector-measured) iteration of the same process, and
//   r = (time(treated) / ref(SL_treated)) / (time(control) / ref(SL_control))
// with ref(SL) the run's mean iteration time at that SL (it only removes the SL's cost; any
// error in it cancels out, see below).
//
// Why controls and not the unmeasured neighbours: the selector measures early and densely (the
// first 50 iterations after warm-up on the recorded trace in tests/data/agent), and iteration
// time drifts (that trace swings 3x within a few hundred iterations on a loaded node), so
// measured and unmeasured iterations are far apart in time and drift is confounded with the
// perturbation: compared with their unmeasured neighbours, that trace's measured iterations
// read 0.75-0.95 with no perturbation at all. A control is chosen at random among the
// measured iterations, so under no perturbation a pair is exchangeable: log r is symmetric
// around 0, the median of r is 1 whatever the noise, drift or ref, and the order-statistic
// interval of the median is exact (distribution-free).
//
// Estimate: the median of the pair ratios with its distribution-free 95% interval (binomial
// order statistics), for display. Also per counter group key ("perf#1"), over the pairs whose
// treated iteration held that group, so a rotating collector whose one group traps (hardware
// events in a VM) can be told from its others. Collectors that always run together cannot be
// told apart: each of their keys gets the same verdict.
//
// Alarm: the estimate is looked at after every measured iteration, for "all" and for every
// group, for as long as the run lasts, so a fixed-level interval would raise false alarms at a
// rate that grows with the run's length and its number of groups. The flag is an always-valid
// sequential sign test instead (a mixture SPRT): with X_i = [r_i > 1 + threshold] over the n
// pairs so far and S = sum X_i, the evidence
//   E_n = 2^n * 2 * integral_{1/2}^{1} p^S (1-p)^(n-S) dp   (p uniform on [1/2, 1])
// is a nonnegative supermartingale with E_0 = 1 whenever P(r > 1 + threshold) <= 1/2 (no
// slowdown beyond the threshold), so by Ville's inequality P(E_n ever >= 1/a) <= a, however
// often it is looked at. Each of the 1 + G estimates ("all" and the G group keys) gets
// a = kObserverAlpha / (1 + G) (Bonferroni), so the chance that a run without a slowdown is
// ever flagged, on any key, is at most kObserverAlpha. The figures (false alarms per 1,000
// runs, delay at +10/+20/+40%) are measured by bench/observer_effect_bench.cpp on the recorded
// trace.
//
// Threads: plain functions and values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/store/run_model.h"

namespace seqpoint::daemon {

inline constexpr size_t kObserverMinPairs = 8;
// The family-wise false-alarm bound of one run: the chance, over the whole run and every group
// key, that a run whose measurement does not slow it beyond the threshold is flagged.
inline constexpr double kObserverAlpha = 0.01;

// A measured iteration as the estimate needs it.
struct MeasuredTiming {
  uint64_t ordinal = 0;
  int32_t pid = 0;
  uint32_t seq_len = 0;
  double time_ns = 0;  // 0: not timed
  bool control = false;
  std::vector<std::string> groups;  // "collector#group" keys it held (treated only)
};

// One control with its treated partner; times already divided by their SL's ref.
struct ObserverPair {
  double treated = 0;
  double control = 0;
  std::vector<std::string> groups;  // of the treated iteration
};

struct ObserverEstimate {
  std::string group;  // "" for every pair
  uint64_t pairs = 0;
  double ratio = 0;          // median of treated / control
  double low = 0, high = 0;  // distribution-free 95% interval of the median
  bool valid = false;        // pairs >= kObserverMinPairs
  uint64_t above = 0;        // pairs with ratio > 1 + threshold (the sign test's S)
  double evidence = 1;       // the highest E_n of the sequential test over the pairs so far
  double alpha = 0;          // this key's share of kObserverAlpha (flag at evidence >= 1/alpha)
  bool flagged = false;      // evidence >= 1 / alpha
};

struct ObserverEffect {
  ObserverEstimate all;
  std::vector<ObserverEstimate> by_group;  // sorted by group key
  double threshold = 0;                    // as a fraction (0.05 = 5%)
  bool flagged = false;                    // all.flagged or any group flagged
  // Collectors to blame: those with a flagged group key; every collector seen when only the
  // overall estimate is flagged.
  std::vector<std::string> FlaggedCollectors() const;
  // The slowdown of a treated iteration that held `groups`: the largest ratio among its flagged
  // keys (the overall one when only that is flagged); nullptr when it is not taken as perturbed
  // (nothing flagged, or no collector ran on it).
  const ObserverEstimate* SlowdownOf(const std::vector<std::string>& groups) const;
};

// Median and its 95% interval from sorted order statistics.
ObserverEstimate EstimateRatio(std::vector<double> ratios);

// The sequential test's evidence E_n for S of n pairs above the threshold (see above).
double SignTestEvidence(uint64_t above, uint64_t n);

ObserverEffect EstimateObserverEffect(const std::vector<ObserverPair>& pairs, double threshold);

// Pairs each timed control with the nearest (by ordinal) unpaired timed treated iteration of
// its process (treated: it held at least one collector group). `ref` gives an SL's mean iteration
// time (<= 0: unknown, the pair is skipped).
std::vector<ObserverPair> PairControls(std::vector<MeasuredTiming> measured,
                                       const std::function<double(uint32_t)>& ref);

// The measured iterations of a stored run: its measurement rows hold time_ns, an
// "observer:control" row on controls and "group:<collector>" rows on treated iterations.
std::vector<MeasuredTiming> TimingsFrom(const std::vector<Measurement>& measurements);

// Whether the visit-th (0-based) measured iteration of a process is a control: one per block
// of `every` visits, at a position drawn from (block, salt). every < 2: never.
bool IsControlVisit(uint64_t visit, uint32_t every, uint64_t salt);

// Key of a collector's group, and the collector of a key.
std::string GroupKey(const std::string& collector, uint64_t group);
std::string CollectorOfKey(const std::string& key);

}  // namespace seqpoint::daemon
