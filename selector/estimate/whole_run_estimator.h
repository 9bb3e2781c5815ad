// The whole-run estimator: from a run's SeqPoints, time strata and measured iterations, the
// projection of every metric over the whole run, with what seqpointd knows beside them
// (docs/estimators.md): the iterations it never saw (the unobserved gap), the observer effect
// (a measured iteration slowed by its measurement), the metric's kind (deltas are totals,
// gauges are time-weighted means), and the self-checks of the metrics known on every
// iteration. seqpointd (agent/runs/run_tracker_projection.cpp) and `seqpoint evaluate
// --online` call this one function, so the CLI's accuracy figures test what /metrics exports.
// Pure: no I/O, no clock; the caller owns every input.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "selector/estimate/stratified_projection.h"
#include "selector/selection.h"
#include "selector/strata/time_strata.h"

namespace seqpoint::selector {

// How a metric combines over iterations. A delta (time, energy, counts) adds up: projected as
// a whole-run total. A gauge (memory in use, power, clocks, utilisation, NVML field values) is
// a reading: never summed; reported as its time-weighted mean over the run and per SL bin, and
// the peak of the measured values.
enum class MetricKind : uint8_t { kDelta = 0, kGauge = 1 };

// The observer effect on one measured iteration: its measurement slowed it by `ratio`
// (a 95% interval [low, high]); agent/measure/observer_effect.h estimates it.
struct Slowdown {
  double ratio = 1, low = 1, high = 1;
};

struct MeasuredValue {
  std::string metric;
  std::string unit;
  double value = 0;
  MetricKind kind = MetricKind::kDelta;
};

struct EstimatorIteration {
  uint64_t ordinal = 0;  // the run's iteration number (the selector's)
  uint32_t seq_len = 0, batch = 0;
  double time_ns = 0;  // 0: not timed
  // Set when the run's observer effect is flagged and this iteration was measured by the
  // collectors it found slowing iterations (never on a control).
  std::optional<Slowdown> slowdown;
  std::vector<MeasuredValue> values;
  double cpu_ns = -1;  // the process's CPU time over it (< 0: not known; kProcessCpuMetric)
};

// A metric known on every iteration (time_ns, energy_uj): its actual total over `count`
// iterations (those that have it).
struct ActualTotal {
  uint64_t count = 0;
  double total = 0;
};

struct WholeRunInput {
  const TimeStrata* strata = nullptr;
  const Selection* selection = nullptr;      // the SeqPoints (its bins) as of now
  std::vector<EstimatorIteration> measured;  // the measured iterations
  uint64_t timed = 0;                        // observed iterations with a time
  uint64_t unobserved = 0;                   // iterations never seen (a gap)
  // The spread of one iteration's time (over the iterations timed: n, sum, sum of squares),
  // for the gap's interval; n < 2: not known.
  uint64_t spread_n = 0;
  double spread_sum = 0, spread_sumsq = 0;
  std::map<std::string, ActualTotal> actual;  // cheap metrics: their actual totals
  // Each SL's first iteration as its own post-stratum (ProjectionFrame; docs/estimators.md,
  // "First occurrences", says why seqpointd leaves it off).
  bool first_occurrences = false;
};

// The process's CPU time over an iteration (all its threads; agent/runs/process_cpu_sampler.h):
// a cheap metric where the agent samples it (known on every iteration, self-checked), and the
// auxiliary of the CPU counters' projections (EstimatorIteration::cpu_ns).
inline constexpr const char* kProcessCpuMetric = "process_cpu_ns";

// A counter of CPU work (perf/PAPI task-clock, cpu-clock, cycles, instructions, cache and
// branch events): projected through the process's CPU time when nearly every iteration has
// one (kMinCpuCoverage), else through time. Not the events that count waits or the OS's doing
// (context switches, migrations, page faults), nor PAPI's software-defined events.
bool IsCpuWorkMetric(const std::string& metric);
// The share of the observed iterations, and of a metric's measured ones, that must have a
// process CPU time for the projection to go through it: the few without (a run's last
// iterations, after its process's last CPU sample) are taken at their cell's CPU per unit of
// time; a run restored from an image without CPU times has too few, and stays on time.
inline constexpr double kMinCpuCoverage = 0.99;
inline constexpr double kMinCpuSampleCoverage = 0.9;

struct BinMean {
  uint32_t bin_lo = 0, bin_hi = 0;
  double mean = 0;            // time-weighted mean of the gauge's measured values in the bin
  double peak = 0;            // the highest of them (GPU memory: what the bin's SLs need)
  uint32_t peak_seq_len = 0;  // the SL of the iteration that read it
  uint64_t samples = 0;
};

struct WholeRunProjection {
  std::string metric, unit;
  MetricKind kind = MetricKind::kDelta;
  // Delta: the whole-run total and its 95% interval. Gauge: the time-weighted mean.
  double total = 0, low = 0, high = 0;
  double steady_total = std::numeric_limits<double>::quiet_NaN();
  double steady_low = std::numeric_limits<double>::quiet_NaN();
  double steady_high = std::numeric_limits<double>::quiet_NaN();
  double actual = std::numeric_limits<double>::quiet_NaN();
  uint64_t samples = 0;
  bool perturbed = false;  // fed by iterations the observer effect slowed (not corrected)
  bool bounded = true;
  double gap_total = 0, gap_low = 0, gap_high = 0;         // the unobserved iterations' part
  double peak = std::numeric_limits<double>::quiet_NaN();  // gauges: the highest measured
  std::vector<BinMean> bins;                               // gauges: per SL bin
  // Deltas: what the ratio went through ("cost" for the cheap metrics, "cpu" for CPU work
  // with process CPU times, else "time"); docs/estimators.md.
  std::string auxiliary;
  uint32_t strata = 0, borrowed = 0;  // time strata with iterations; of them, without samples
  // Why the agent cannot stand behind this projection's interval (empty: it can): a short
  // code from a bounded set (kUnreliableSelfCheck) and the sentence `show` prints. Such a
  // projection is flagged and left out of /metrics and uploads, never printed as a value.
  std::string unreliable, unreliable_detail;
};

// Projected against actual for a metric known on every iteration. Two checks: on the run's
// time strata (`projected`, as the projection), and on strata that do not depend on the
// checked series (`independent_*`: doubling windows only), which is the honest one.
struct WholeRunSelfCheck {
  std::string metric, unit;
  double projected = 0, low = 0, high = 0, actual = 0;
  double observer_excess = 0;  // what measuring added to the actual total (estimated)
  double observer_ratio = 1;
  double error = 0;  // (projected - (actual - excess)) / (actual - excess)
  bool within_interval = false;
  double independent_projected = 0, independent_low = 0, independent_high = 0;
  double independent_error = 0;
  bool independent_within = false;
  bool valid = false;
};

struct WholeRunEstimate {
  std::vector<WholeRunProjection> projections;  // by metric name
  std::vector<WholeRunSelfCheck> self_checks;   // time first, then energy
  // The projection of `metric`, or nullptr when there is none. Not on a temporary: the pointer
  // would outlive the estimate it points into.
  const WholeRunProjection* Find(std::string_view metric) const&;
  const WholeRunProjection* Find(std::string_view metric) const&& = delete;
};

// A cheap metric's projection that misses the total measured on every iteration by more than
// its own 95% interval allows.
inline constexpr const char* kUnreliableSelfCheck = "self_check_missed";

// The cheap metrics: known on every iteration, projected against the cost proxy, corrected
// for the observer effect, self-checked.
bool IsCheapMetric(const std::string& metric);

// How far the mean cost per iteration of the unobserved iterations may lie from the observed
// mean, as factors of it; known = false when no iteration was timed.
struct GapFactors {
  double lo = 0, hi = 0;
  bool known = false;
};
GapFactors UnobservedGapFactors(const TimeStrata& strata, uint64_t unobserved, uint64_t spread_n,
                                double spread_sum, double spread_sumsq);

// The self-check arithmetic, shared by live and stored runs: `projected/low/high` over the
// iterations the check covers (no gap), `actual` less the observer excess.
void SettleSelfCheck(WholeRunSelfCheck& c, double scale);

WholeRunEstimate EstimateWholeRun(const WholeRunInput& in);

}  // namespace seqpoint::selector
