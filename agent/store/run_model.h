// The daemon's picture of a run, as stored (store.h), served (control, /metrics) and uploaded.
// A run is the ranks of one training job on this node, grouped by runs.group_by; its key is the
// grouping value (e.g. the SEQPOINT_RUN_ID of its processes). Plain values, copied freely.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace seqpoint::daemon {

enum class RunState {
  kActive,    // processes are being watched
  kFinished,  // every process exited normally, or left no trace for runs.idle_timeout_s
  kCrashed,   // a process died of a signal or a non-zero exit
  // Its stored state could not be restored at a start (a damaged checkpoint or log, a format
  // this build cannot read): closed without its processes' later iterations, its stored totals
  // kept; end_reason says why (docs/failure-modes.md). Older daemons read it as finished.
  kSetAside,
};
std::string_view RunStateName(RunState s);
RunState ParseRunState(std::string_view s);  // unknown reads as kFinished

struct RunRecord {
  int64_t id = 0;   // store row id, stable across restarts
  std::string key;  // grouping value, unique among runs of this node
  RunState state = RunState::kActive;
  std::string end_reason;  // "exited", "signal 9 (pid 123)", "idle", ...
  int64_t started_unix_ns = 0;
  int64_t updated_unix_ns = 0;
  int64_t ended_unix_ns = 0;  // 0 while active
  std::vector<int32_t> pids;  // processes seen in this run
  uint64_t iterations = 0;    // iterations observed (begin + end)
  uint64_t max_iter = 0;      // highest iteration index seen
  uint64_t unobserved = 0;    // iteration indices skipped (daemon down, lost events)
  // Of `unobserved`: iterations a process ran before the probes attached (it was running
  // already), as far as its start time allows; the rest are gaps between observed iterations.
  uint64_t unobserved_before_attach = 0;
};

// Exact-SL histogram: count of observed iterations per padded sequence length, with the
// per-iteration cheap metrics (time; energy where a source is present) summed so the cost of
// an SL can be read back.
struct HistogramBin {
  uint32_t seq_len = 0;
  uint64_t count = 0;
  double time_ns_sum = 0;
  double energy_uj_sum = 0;   // over the energy_count iterations that were given an energy
  uint64_t energy_count = 0;  // (energy_sampler.h; not while another run shares the node)
  uint64_t time_count = 0;    // iterations of time_ns_sum (0 with time_ns_sum > 0: not stored)
};

// Iterations of a run are numbered in arrival order across its processes (the run's ordinal,
// what the selector sees); users see the process's own iteration index and its pid.
struct SeqPointRecord {
  uint64_t iter = 0;            // representative iteration (the process's own index)
  std::vector<uint64_t> iters;  // every iteration measured for this point
  std::vector<int32_t> pids;    // process of each of iters
  uint32_t seq_len = 0;
  double weight = 0;                // iterations it stands for
  uint32_t bin_lo = 0, bin_hi = 0;  // SL range it covers
};

struct Measurement {
  uint64_t ordinal = 0;  // the run's iteration number (selector's view)
  int32_t pid = 0;
  uint64_t iter = 0;  // the process's iteration index
  uint32_t seq_len = 0;
  uint32_t batch = 0;
  std::string metric;
  std::string unit;
  double value = 0;
  // The device the value came from (collectors::Sample::device: a GPU's UUID, "<uuid>/gi<G>/
  // ci<C>" under MIG, a PCI bus id, a RAPL zone, "node"); "" for a process's own value.
  std::string device{};
  // False on rows stored before schema 9, which did not record the device: unknown, not "".
  bool device_recorded{true};
};

// A gauge's reading over one SL bin of the run's SeqPoints: the time-weighted mean of its
// measured iterations (weights: their wall time) and the highest of them.
struct GaugeBin {
  uint32_t bin_lo = 0, bin_hi = 0;
  double mean = 0;
  double peak = std::numeric_limits<double>::quiet_NaN();
  uint32_t peak_seq_len = 0;  // the SL of the iteration that read the peak
  uint64_t samples = 0;
};

// A metric's whole-run projection with its 95% interval; `actual` is the total measured on
// every iteration (cheap metrics only, NaN otherwise): their gap is the live self-check.
struct Projection {
  std::string metric;
  std::string unit;
  double total = 0, low = 0, high = 0;
  double actual = std::numeric_limits<double>::quiet_NaN();
  uint64_t measured = 0;  // iterations whose measurement fed this projection
  // Fed by measured iterations that the run's observer-effect check found slowed by the
  // measurement (observer_effect.h): the values may be inflated too.
  bool perturbed = false;
  // The same over the iterations after the warm-up (NaN: not known, e.g. a stored v2 run).
  double steady_total = std::numeric_limits<double>::quiet_NaN();
  double steady_low = std::numeric_limits<double>::quiet_NaN();
  double steady_high = std::numeric_limits<double>::quiet_NaN();
  // False when the measured samples cannot bound the metric (too few events, or one sample
  // outweighs the rest): `high` is then +inf, and the total an estimate nothing bounds (not a floor:
  // one sample of a few can stand far above the truth); the CLI prints only `low`.
  bool bounded = true;
  // The part of total/low/high that stands for the run's unobserved iterations (agent down,
  // events lost): estimated from the observed ones, widened by how the run's cost moved over
  // time (docs/estimators.md). 0 when every iteration was observed.
  double gap_total = 0, gap_low = 0, gap_high = 0;
  // How the metric combines over iterations (selector::MetricKind): 0 a delta (total/low/high
  // a whole-run total), 1 a gauge (memory, power, clocks, utilisation: total/low/high its
  // time-weighted mean over the run and that mean's 95% interval, never a sum).
  uint8_t kind = 0;
  double peak = std::numeric_limits<double>::quiet_NaN();  // gauges: highest measured value
  std::vector<GaugeBin> bins{};                             // gauges: per SL bin
  // Non-empty: the agent cannot stand behind this projection (selector::WholeRunProjection::
  // unreliable, a code from a bounded set, and the sentence `show` prints). It is flagged and
  // left out: no value in /metrics or uploads, only the reason.
  std::string left_out{}, left_out_detail{};
};

// One iteration as the selector was fed it, in order: replaying these rebuilds the selector's
// exact state after a restart (the online selector is deterministic). Once a run's selector can
// no longer measure (its count budget is spent), the order no longer matters (only the
// histogram and the samples do), so iterations are then logged aggregated: `repeat` iterations
// of one (pid, seq_len, batch) with their summed tokens. That keeps the log at the budget phase
// plus a few entries per flush, whatever the run's length.
struct IterationLogEntry {
  int32_t pid = 0;
  uint32_t seq_len = 0;
  uint64_t iter = 0;  // the (last) iteration index
  uint32_t batch = 0;
  uint32_t repeat = 0;  // 0 or 1: one iteration; n > 1: n iterations, tokens summed
  double tokens = 0;
  // Its time (summed when aggregated); 0: not known when the entry was saved (in flight at a
  // flush, or no begin timestamp). Replayed into the time strata after a restart.
  double time_ns = 0;
  // kIterationLogUnmeasurable: fed without a begin (the begin hooks were off), so the selector
  // could not choose it; a replay passes the same to the selector (online_selector.h).
  uint32_t flags = 0;
};
inline constexpr uint32_t kIterationLogUnmeasurable = 1;
// kIterationLogOverBudget: chosen, but declined as over runs.max_overhead (the cost behind that
// was measured live; a replay declines it too).
inline constexpr uint32_t kIterationLogOverBudget = 2;
// On disk only through iteration_log_codec.h (older memcpy'd layouts are read there).
// The layout before time_ns (schema v2 and older): read, never written.
struct IterationLogEntryV2 {
  int32_t pid = 0;
  uint32_t seq_len = 0;
  uint64_t iter = 0;
  uint32_t batch = 0;
  uint32_t repeat = 0;
  double tokens = 0;
};
static_assert(sizeof(IterationLogEntryV2) == 32, "iteration log record layout is on disk");

// A run a start could not restore (RunManager::Resume): it is set aside, the daemon goes on.
struct SetAsideRun {
  int64_t id = 0;
  std::string key;
  std::string reason;  // the load or restore error
  int64_t unix_ns = 0;  // when it was set aside
};

struct RunSnapshot {
  RunRecord run;
  std::vector<HistogramBin> histogram;
  std::vector<SeqPointRecord> seqpoints;
  std::vector<Projection> projections;
};

}  // namespace seqpoint::daemon
