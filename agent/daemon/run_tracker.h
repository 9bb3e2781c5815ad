// One run's live state: the online selector fed with every iteration of the run's processes,
// the exact-SL histogram, the cheap metric (iteration time, from the probes' timestamps) of
// every iteration, the collectors' measurements of the chosen ones, and the projections with
// their 95% intervals. Iteration time is known for every iteration, so the tracker also
// projects it from the SeqPoints alone and compares with the actual total: the self-check,
// exported as a live confidence figure.
//
// Iterations are numbered in arrival order across the run's processes (the ordinal). The
// selector sees ordinals; SeqPoints are reported with each process's own iteration index.
//
// Restart: every iteration fed to the selector is logged (IterationLogEntry); Restore() replays
// the log into a fresh selector (it is deterministic), so its state is exactly as before.
//
// Threads: not thread-safe; owned and driven by RunManager on the io_context thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/daemon/run_model.h"
#include "agent/daemon/store.h"
#include "common/status.h"
#include "selector/online_selector.h"

namespace seqpoint::daemon {

struct MeasuredValue {
  std::string metric;
  std::string unit;
  double value = 0;
};

// The self-check: projected vs actual total of the metric measured on every iteration.
struct SelfCheck {
  std::string metric = "time_ns";
  double projected = 0, low = 0, high = 0, actual = 0;
  double error = 0;  // (projected - actual) / actual, per observed iteration
  bool within_interval = false;
  bool valid = false;  // enough data for a figure
};

class RunTracker {
 public:
  static Result<std::unique_ptr<RunTracker>> Create(RunRecord record,
                                                    const selector::OnlineOptions& options);
  // Rebuilds a tracker from the store: record, histogram, measurements and iteration log.
  static Result<std::unique_ptr<RunTracker>> Restore(const RunSnapshot& snapshot,
                                                     const std::vector<Measurement>& measurements,
                                                     const std::vector<IterationLogEntry>& log,
                                                     const selector::OnlineOptions& options);

  // At an iteration's start: feeds the selector once; measure=true when it should be measured
  // (group: the counter group to collect). Again for the same (pid, iter): the first decision.
  selector::Decision Decide(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch,
                            double tokens);
  // At its end: time_ns = end - begin (when begin_ns > 0); `values` are the collectors'
  // measurements (empty unless Decide said so). Decides first when no begin was seen.
  void Complete(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                uint64_t begin_ns, uint64_t end_ns, const std::vector<MeasuredValue>& values);
  // Forgets decisions of iterations that will never complete (process gone).
  void DropPending(pid_t pid);

  // True while the selector may still choose iterations (then begin hooks are worth having).
  bool WantsBegins() const;

  RunRecord& record() { return record_; }
  const RunRecord& record() const { return record_; }
  // Histogram, SeqPoints and projections as of now (projections cached for max_age_ns).
  RunSnapshot Snapshot(int64_t max_age_ns = 0);
  SelfCheck self_check();
  uint64_t measured_iterations() const { return measured_.size(); }
  uint64_t selector_allowed() const { return selector_.allowed(); }
  uint32_t selector_bins() const { return selector_.bins(); }
  size_t MemoryBytes() const;

  // Whether anything waits to be written (else a flush skips the run).
  bool HasUnsaved() const {
    return !new_log_.empty() || !tail_log_.empty() || !new_measurements_.empty() ||
           !cost_deltas_.empty() || record_.updated_unix_ns != saved_at_ns_;
  }
  void MarkSaved() { saved_at_ns_ = record_.updated_unix_ns; }
  // What changed since the last call, for the store (cleared by the call).
  std::vector<Measurement> TakeNewMeasurements();
  std::vector<IterationLogEntry> TakeNewLog();
  std::vector<BinCostRow> TakeCostDeltas();
  // Puts back what a failed store write took, ahead of anything newer.
  void ReturnUnsaved(std::vector<Measurement> measurements, std::vector<IterationLogEntry> log,
                     std::vector<BinCostRow> costs);

 private:
  RunTracker(RunRecord record, selector::OnlineSelector selector,
             const selector::OnlineOptions& options)
      : record_(std::move(record)), selector_(std::move(selector)), options_(options) {}
  struct Pending {
    uint64_t ordinal;
    selector::Decision decision;
  };
  struct MeasuredIteration {
    int32_t pid;
    uint64_t iter;
    uint32_t seq_len, batch;
    std::vector<MeasuredValue> values;
  };
  uint64_t Feed(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, double tokens,
                selector::Decision* decision);
  void AddCost(uint32_t seq_len, const std::string& metric, double value, int64_t now_ns);
  void Recompute(int64_t now_ns);

  RunRecord record_;
  selector::OnlineSelector selector_;
  selector::OnlineOptions options_;
  uint64_t next_ordinal_ = 0;
  std::map<uint64_t, std::pair<pid_t, uint64_t>> sample_ids_;  // chosen ordinal -> (pid, iter)
  std::map<std::pair<pid_t, uint64_t>, Pending> pending_;
  std::map<pid_t, uint64_t> last_iter_;             // per process, to count unobserved indices
  std::map<uint64_t, MeasuredIteration> measured_;  // by ordinal
  std::map<uint32_t, HistogramBin> histogram_;
  int64_t saved_at_ns_ = -1;
  uint64_t timed_iterations_ = 0;
  double actual_time_ns_ = 0;
  std::vector<Measurement> new_measurements_;
  std::vector<IterationLogEntry> new_log_;
  std::map<std::tuple<pid_t, uint32_t, uint32_t>, IterationLogEntry> tail_log_;  // aggregated
  std::map<std::tuple<int64_t, uint32_t, std::string>, BinCostRow> cost_deltas_;
  // Cached projection.
  int64_t computed_at_ns_ = -1;
  bool dirty_ = true;
  std::vector<SeqPointRecord> seqpoints_;
  std::vector<Projection> projections_;
  SelfCheck self_check_;
};

}  // namespace seqpoint::daemon
