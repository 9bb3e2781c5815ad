// The runs' metrics: per run, its projections with intervals, self-check, observer effect,
// energy attribution and selector state; and the run manager's own counters (runs, processes,
// collectors, state-store writes). Names and labels: docs/metrics.md.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/runs/run_manager.h"
#include "agent/runs/series_cap.h"
#include "agent/store/run_model.h"
#include "collectors/gpu/memory_fit.h"

namespace seqpoint::daemon {

// At which SL a run would run out of GPU memory (issue 20): for each GPU memory gauge of the
// run (the process's own, nvml:gpu<i>:proc_mem_used; else the GPU's, :mem_used / :vram_used),
// its per-SL-bin peaks and a line through them (collectors/gpu/memory_fit.h) solved for the
// GPU's capacity, the peak of the same GPU's :mem_total / :vram_total gauge. Without that gauge
// the capacity is unknown and `fit.why` says so.
struct GpuMemoryOutlook {
  std::string metric;           // the memory gauge
  bool process = false;         // the process's own memory (else the whole GPU's)
  std::string capacity_metric;  // the capacity gauge; empty: none reported
  double capacity_bytes = 0;    // 0: unknown
  std::vector<GaugeBin> bins;   // the gauge's per-SL-bin peaks
  collectors::MemoryFit fit;
};
std::vector<GpuMemoryOutlook> GpuMemoryOutlooks(const std::vector<Projection>& projections);

struct RunMetricsOptions {
  double observer_threshold = 0;   // runs.observer_effect_threshold_pct / 100
  uint64_t budget = 0;             // runs.budget: the cap reported beside the selector's allowance
  bool energy = false;             // an energy sampler runs: export the attribution counters
  uint64_t max_series = 20000;     // runs.max_series (series_cap.h)
  SeriesLedger* ledger = nullptr;  // what the cap did; null: not recorded
  std::string node;                // the `node` label (NodeName())
};

// `for_upload`: only the families uploaded by remote-write (the projections and what judges them),
// every series carrying its run's attribution labels (launcher, job_id, job_name, step,
// world_size, node), so a series is found by job without a join.
std::vector<MetricFamily> RunFamilies(RunManager& runs, const RunMetricsOptions& options,
                                      bool for_upload);
std::vector<MetricFamily> RunManagerFamilies(const RunManager& runs);
// Collectors stopped for profilers, busy counters or a pause (collector_backoff.h).
std::vector<MetricFamily> BackoffFamilies(const RunManager& runs);

}  // namespace seqpoint::daemon
