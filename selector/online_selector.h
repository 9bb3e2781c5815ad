// Online SeqPoint selection: decides at each iteration's start, with no look-ahead, whether to
// measure it. This is what seqpointd runs on live processes and `seqpoint select --online`
// replays from a trace.
//
// Invariants:
//  - Never exceeds the budget: after t iterations, measured <= min(budget_count,
//    floor(budget_fraction * t)) for whichever caps are set, at every t. The budget lasts a run
//    of unknown length: with per_doubling = k, at most k * t / W iterations are measured in the
//    first window of W = first_window iterations and k more in every doubling of the run after
//    it (k * (1 + log2(t / W)) in all, released evenly inside each window; W = window), plus change_bonus
//    for each change of iteration cost found. A count budget may instead be paced as
//    budget * t / (t + pacing).
//  - Time strata (time_strata.h): fed every iteration's time by OnTime, the selector wants
//    samples per (stratum, window, bin): a new doubling window, the end of the warm-up or a
//    change of cost starts counting afresh, so every stratum and every stretch of the run is
//    measured in its own right.
//  - Re-bins as the SL distribution grows or drifts (at doubling points of the iteration count,
//    every rebin_every iterations, and when an SL outside the binned range arrives). Samples are
//    kept by SL, not by bin, so earlier measurements stay useful after re-binning: each is
//    simply counted in whichever new bin covers its SL.
//  - A bin wants samples in proportion to its share of the cost proxy; an iteration is measured
//    when its bin has fewer samples than it wants (and than max_samples_per_point) and the
//    budget allows. Memory is bounded: histogram + max_bins x max_samples_per_point samples.
// Not thread-safe: one selector per run, fed by one thread. OnIteration is O(1) amortised
// (re-binning is O(distinct SLs x log bins) and happens O(log t + t / rebin_every) times).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "selector/binning.h"
#include "selector/budget_cap.h"
#include "selector/selection.h"
#include "selector/sl_histogram.h"
#include "selector/time_strata.h"

namespace seqpoint::selector {

struct OnlineOptions {
  uint64_t budget_count = 0;     // at most this many measured iterations (0: no count cap)
  // When set, a count budget is released as budget * t / (t + pacing_iterations), so that it
  // lasts a run of unknown length and later drift in iteration cost is sampled too. It then
  // approaches but never reaches the whole budget. 0 (the default): all of it at once, so a
  // budget is spent and its run's state can be aggregated (seqpointd relies on that).
  uint64_t pacing_iterations = 0;
  // Measurements per doubling of the run (0: off); see the file comment. The default of
  // seqpointd and `seqpoint select --online`.
  uint32_t per_doubling = 0;
  uint32_t change_bonus = 8;     // more measurements allowed at each change of cost found
  uint64_t window = 64;          // the first doubling window of the paced budget
  TimeStrataOptions strata;
  double budget_fraction = 0;    // at most this fraction of iterations so far (0: no cap)
  double target_error_pct = 0.5; // cost-proxy representative error the bins aim at
  uint32_t max_bins = 256;
  uint32_t min_samples_per_point = 2;
  uint64_t warmup = 10;          // first iterations counted, never measured
  uint64_t rebin_every = 10000;  // re-bin at least this often (iterations)
  uint32_t counter_groups = 1;   // Decision::group = measured so far % this (run-wide)
  // Past this many samples a point's mean is noise-free enough; stopping there keeps memory
  // bounded (max_bins x this) on runs of any length, whatever the fraction budget allows.
  uint32_t max_samples_per_point = 64;
};

struct Decision {
  bool measure = false;
  uint32_t group = 0;  // counter group to collect (when measure)
};

class OnlineSelector {
 public:
  static Result<OnlineSelector> Create(const OnlineOptions& options);

  // Called at an iteration's start. `iter` is what the selection reports for it and the
  // ordinal OnTime is given for the same iteration.
  Decision OnIteration(uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens);
  // Called when an iteration's time is known (any order, any iteration, measured or not).
  void OnTime(uint64_t iter, uint32_t seq_len, uint32_t batch, double time_ns);
  const TimeStrata& strata() const { return strata_; }

  // The SeqPoints as of now: current bins, each with the samples taken in it.
  // Const: reading it never changes later decisions.
  Selection Current() const;

  uint64_t iterations() const { return histogram_.total(); }
  uint64_t measured() const { return samples_.size(); }
  uint64_t allowed() const { return allowed_; }  // budget cap at this moment
  uint32_t bins() const { return static_cast<uint32_t>(bins_.size()); }
  uint64_t rebins() const { return rebins_; }
  const SlHistogram& histogram() const { return histogram_; }
  size_t MemoryBytes() const;

  // The selector's whole state (histogram, bins, samples, time strata and change detectors) as
  // bytes, and back into a selector created with the same options: what a restart needs
  // instead of replaying every iteration (selector_checkpoint.cpp).
  std::string Checkpoint() const;
  // Into a selector fresh from Create (same options); an image it cannot read is an error.
  Status LoadCheckpoint(std::string_view image);
  void SaveState(StateWriter& w) const;
  bool LoadState(StateReader& r);

  struct Sample {
    uint64_t iter;
    uint32_t seq_len;
    uint32_t group;
  };
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  explicit OnlineSelector(const OnlineOptions& o);
  void EnterStratum(uint64_t key);
  // The (stratum, window) key of an iteration; found afresh only past the stretch of
  // iterations it was last found for, or when the strata changed.
  uint64_t StratumKey(uint64_t iter) {
    if (iter >= key_from_ && iter < key_until_ && strata_.version() == key_version_) return key_;
    return FindStratumKey(iter);
  }
  uint64_t FindStratumKey(uint64_t iter);
  void Rebin();
  uint32_t MaxBinsNow() const;
  int FindBin(uint32_t seq_len) const;
  uint64_t WantedIn(size_t bin);

  OnlineOptions options_;
  BudgetCap cap_;
  uint64_t allowed_ = 0;  // cap_ at the current iteration count and bonus
  SlHistogram histogram_;
  std::vector<SlBucket> buckets_;  // snapshot at the last re-bin
  std::vector<Bin> bins_;
  std::vector<uint64_t> bin_samples_;  // samples per current bin, in the current stratum
  double binned_cost_ = 0;             // total cost proxy of the current bins
  std::vector<Sample> samples_;
  std::vector<uint32_t> samples_in_bucket_;  // in the current stratum
  TimeStrata strata_;
  uint64_t stratum_ = 0;              // the current (stratum, window) key of the last iteration
  uint64_t measured_at_stratum_ = 0;  // samples_.size() when it began
  uint64_t bonus_ = 0;                // change_bonus x changes found
  std::vector<int32_t> bin_of_bucket_;  // SlHistogram bucket index -> current bin
  // WantedIn per bin, for the spendable budget want_budget_ (0: not computed yet).
  std::vector<uint64_t> want_;
  uint64_t want_budget_ = UINT64_MAX;
  // StratumKey holds for iterations [key_from_, key_until_) while the strata are at key_version_.
  uint64_t key_ = 0, key_from_ = 1, key_until_ = 0, key_version_ = 0;
  uint64_t next_rebin_ = 1;
  uint64_t next_periodic_rebin_ = 0;  // the next multiple of rebin_every
  uint64_t rebins_ = 0;
  uint32_t binned_lo_ = UINT32_MAX, binned_hi_ = 0;
};

}  // namespace seqpoint::selector
