// Online SeqPoint selection: decides at each iteration's start, with no look-ahead, whether to
// measure it. This is what seqpointd runs on live processes and `seqpoint select --online`
// replays from a trace.
//
// Invariants:
//  - Never exceeds the budget: after t iterations, measured <= min(budget_count,
//    floor(budget_fraction * t)) for whichever caps are set, at every t. The budget lasts a run
//    of unknown length: with per_doubling = k, at most k * t / W iterations are measured in the
//    first window of W = first_window iterations and k more in every doubling of the run after
//    it (k * (1 + log2(t / W)) in all, released evenly inside each window; W = window), plus
//    change_bonus for each change of iteration cost found. A count budget may instead be paced as
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
#include "selector/strata/time_strata.h"

namespace seqpoint::selector {

struct OnlineOptions {
  uint64_t budget_count = 0;  // at most this many measured iterations (0: no count cap)
  // When set, a count budget is released as budget * t / (t + pacing_iterations), so that it
  // lasts a run of unknown length and later drift in iteration cost is sampled too. It then
  // approaches but never reaches the whole budget. 0 (the default): all of it at once, so a
  // budget is spent and its run's state can be aggregated (seqpointd relies on that).
  uint64_t pacing_iterations = 0;
  // Measurements per doubling of the run (0: off); see the file comment. The default of
  // seqpointd and `seqpoint select --online`.
  uint32_t per_doubling = 0;
  uint32_t change_bonus = 8;  // more measurements allowed at each change of cost found
  uint64_t window = 64;       // the first doubling window of the paced budget
  TimeStrataOptions strata;
  double budget_fraction = 0;     // at most this fraction of iterations so far (0: no cap)
  double target_error_pct = 0.5;  // cost-proxy representative error the bins aim at
  uint32_t max_bins = 256;
  uint32_t min_samples_per_point = 2;
  uint64_t warmup = 10;          // first iterations counted, never measured
  uint64_t rebin_every = 10000;  // re-bin at least this often (iterations)
  uint32_t counter_groups = 1;   // Decision::group = measured so far % this (run-wide)
  // A budget set by accuracy: a stratum (time_strata.h, per doubling window) is measured no
  // further once the relative half-width of the 95% interval of its total time,
  // 1.96 * sqrt(pooled within-SL variance / n) / mean time (n: its measured iterations; CLT
  // sample sizing as in STEM+ROOT), is at most this. Every iteration's time is known (OnTime),
  // so the variance is the stratum's own (N - k degrees of freedom for N iterations in k SL
  // buckets; below 8 it is unknown and the stratum goes on). 0: off (runs.target_error).
  double target_rel_error = 0;
  // Before the target can stop a stratum or the overhead budget thin it by its backstop.
  uint32_t min_samples_per_stratum = 4;
  // WantsNext looks this many iterations ahead for a free slot: hooks armed now reach the
  // trainer only after the daemon has read the records in flight (batched end records are read
  // at least every probes.poll_interval_ms), so they are armed a little before the slot opens
  // (and from a run's first iteration: a short run is seen only in batches otherwise).
  uint64_t hook_lead = 16;
  // A budget set by overhead, amortised over the run: measured iterations may cost at most this
  // share of the run's time (the sum of OnTime's times, every process's iterations) by the end
  // of each doubling window, at set_measurement_cost() per measured iteration, but for the
  // run's first overhead_floor and each stratum's min_samples_per_stratum (OverheadSpent).
  // 0: off (runs.max_overhead). The selector
  // picks as it would without it; a pick the budget cannot pay for is thinned (skipped and
  // counted as taken), never deferred to a later iteration: each stratum keeps a share of its
  // picks, drawn at random at one rate per stratum, so what is measured stays a random subset
  // of the stratum's design (see OnIteration).
  double max_overhead = 0;
  // The first this many measurements of a run are never held back by max_overhead: a run of
  // very short iterations (where one measurement costs many iterations' time) still gets some.
  uint32_t overhead_floor = 8;
  // Past this many samples a point's mean is noise-free enough; stopping there keeps memory
  // bounded (max_bins x this) on runs of any length, whatever the fraction budget allows.
  uint32_t max_samples_per_point = 64;
};

struct Decision {
  bool measure = false;
  uint32_t group = 0;  // counter group to collect (when measure)
  // It would have been measured, but it came without a begin (OnIteration's can_measure):
  // "cannot measure", neither a sample nor a decline (the next candidate is taken instead).
  bool missed = false;
  // It was picked, but thinned by the overhead budget (max_overhead): not measured, yet counted
  // as taken (its bin's want is met and its budget slot used), so no later iteration is taken
  // in its place. Logged, so that a replay thins it too (the cost behind it was measured live
  // and is not replayed).
  bool over_budget = false;
};

class OnlineSelector {
 public:
  static Result<OnlineSelector> Create(const OnlineOptions& options);

  // Called at an iteration's start. `iter` is what the selection reports for it and the
  // ordinal OnTime is given for the same iteration. can_measure = false: the iteration is
  // known only from its end (the begin hooks were off), so nothing could measure it: it is
  // counted like any iteration (histogram, strata, budget pace) but never chosen, and a
  // candidate lost that way changes no want (the sample is not biased by it; missed()).
  // A replay must pass the same can_measure to reach the same decisions (the iteration log
  // records it).
  // over_budget = true: thinned by the overhead budget, as decided live (a replay).
  Decision OnIteration(uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                       bool can_measure = true, bool over_budget = false);
  // What measuring one iteration costs the trainer, ns (0: unknown, no overhead cap). Not part
  // of the state: a restore replays the logged over-budget decisions instead.
  void set_measurement_cost(double ns) { measurement_cost_ns_ = ns; }
  double measurement_cost() const { return measurement_cost_ns_; }
  double run_time_ns() const { return run_time_ns_; }  // the sum of OnTime's times
  // Whether the current stratum's time is as precise as target_rel_error asks (the relative
  // half-width now, in *half_width when given; +inf while unknown).
  bool StratumPreciseEnough(double* half_width = nullptr) const;
  // Whether one more measurement would pass the overhead budget: the share of the run's time
  // the current stratum may spend up to, its window's end (set as it began, at the mean
  // iteration time so far), or where that is unknown (a run's first window, no windows) the
  // share of its time so far. The backstop of thinning.
  bool OverheadSpent() const {
    const double limit =
        stratum_budget_ns_ > 0 ? stratum_budget_ns_ : options_.max_overhead * run_time_ns_;
    return options_.max_overhead > 0 && measurement_cost_ns_ > 0 &&
           samples_.size() >= options_.overhead_floor &&
           static_cast<double>(samples_.size() + 1) * measurement_cost_ns_ > limit;
  }
  // Whether the next iteration could be chosen: past the warm-up (less hook_lead), and the
  // budget has a free slot within hook_lead iterations of the next one. Begin hooks (and counters)
  // are worth arming only then: with a paced budget the slots open now and then (its next step is
  // known), and between them an iteration costs the probes only.
  bool WantsNext() const;
  // Called when an iteration's time is known (any order, any iteration, measured or not).
  void OnTime(uint64_t iter, uint32_t seq_len, uint32_t batch, double time_ns);
  // The process CPU time over an iteration OnTime was given (it comes later: sampled, not read
  // on the iteration path): into the time strata's cells (TimeStrata::AddCpu).
  bool OnCpu(uint64_t iter, uint32_t seq_len, double cpu_ns) {
    return strata_.AddCpu(iter, seq_len, cpu_ns);
  }
  const TimeStrata& strata() const { return strata_; }

  // The SeqPoints as of now: current bins, each with the samples taken in it.
  // Const: reading it never changes later decisions.
  Selection Current() const;

  uint64_t iterations() const { return histogram_.total(); }
  uint64_t measured() const { return samples_.size(); }
  uint64_t allowed() const { return allowed_; }  // budget cap at this moment
  uint32_t bins() const { return static_cast<uint32_t>(bins_.size()); }
  uint64_t rebins() const { return rebins_; }
  // Since this selector was created or loaded (not in its checkpoint): iterations fed with
  // can_measure = false, and of those the candidates lost ("cannot measure").
  uint64_t unmeasurable() const { return unmeasurable_; }
  uint64_t missed() const { return missed_; }
  uint64_t over_budget() const { return over_budget_; }
  // Picks thinned by the overhead budget over the whole run (in the checkpoint), and the share
  // of the current stratum's picks that is kept (1: no thinning).
  uint64_t thinned() const { return thinned_; }
  double keep_share() const { return keep_; }
  // Since created or loaded: of the thinned, those the backstop thinned where the draw kept
  // them (thinned by position, not at random).
  uint64_t backstopped() const { return backstopped_; }
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
  // Iterations picked so far, measured or thinned: what the budget's pace and the bins' wants
  // count, so that a thinned pick is never taken again later.
  uint64_t Picks() const { return samples_.size() + thinned_; }
  // As a stratum begins: the share of its picks the overhead budget can pay for (keep_) and
  // the overhead the run may have spent by its window's end (stratum_budget_ns_).
  void SetKeepShare(uint64_t iter);
  // Whether this pick (past overhead_floor measurements) is thinned: 0 no, 1 by the stratum's
  // draw, 2 by the backstop (OverheadSpent) where the draw kept it.
  int ThinCause(uint64_t iter) const;
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
  uint64_t stratum_ = 0;                // the current (stratum, window) key of the last iteration
  uint64_t measured_at_stratum_ = 0;    // samples_.size() when it began
  uint64_t thinned_ = 0;                // picks thinned by max_overhead, whole run
  uint64_t thinned_at_stratum_ = 0;     // thinned_ when the stratum began
  double keep_ = 1;                     // share of this stratum's picks kept (max_overhead)
  double stratum_budget_ns_ = 0;        // its overhead budget by its window's end (0: unknown)
  uint64_t bonus_ = 0;                  // change_bonus x changes found
  std::vector<int32_t> bin_of_bucket_;  // SlHistogram bucket index -> current bin
  // WantedIn per bin, for the spendable budget want_budget_ (0: not computed yet).
  std::vector<uint64_t> want_;
  uint64_t want_budget_ = UINT64_MAX;
  // StratumKey holds for iterations [key_from_, key_until_) while the strata are at key_version_.
  uint64_t key_ = 0, key_from_ = 1, key_until_ = 0, key_version_ = 0;
  uint64_t next_rebin_ = 1;
  uint64_t next_periodic_rebin_ = 0;  // the next multiple of rebin_every
  uint64_t rebins_ = 0;
  uint64_t unmeasurable_ = 0, missed_ = 0, over_budget_ = 0, backstopped_ = 0;
  // The current stratum's iteration times per SL bucket (n, sum, sum of squares) and their
  // totals, for target_rel_error; reset when a stratum begins. In the checkpoint (v3).
  struct TimeSums {
    double n = 0, sum = 0, sumsq = 0;
  };
  std::vector<TimeSums> stratum_times_;
  TimeSums stratum_total_;
  double within_ss_ = 0;          // sum over buckets of sumsq - sum^2 / n
  uint64_t stratum_buckets_ = 0;  // buckets with n > 0 (rebuilt from stratum_times_ at a load)
  double run_time_ns_ = 0;
  double measurement_cost_ns_ = 0;
  uint32_t binned_lo_ = UINT32_MAX, binned_hi_ = 0;
};

}  // namespace seqpoint::selector
