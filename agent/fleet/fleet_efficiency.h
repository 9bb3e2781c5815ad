// The fleet's efficiency signal (issue 23): per run and per SL bin, what its iterations cost
// for the work they did, as counters that Prometheus turns into a cost per unit of work over
// any window (rate(time) / rate(work)), and rules turn into an index against the same job's
// other nodes over the same bins (packaging/prometheus/seqpoint-fleet-rules.yml).
//
// Work: the SL of each iteration (the run's histogram keeps no batch, so the tokens L x B of a
// run with a fixed batch are work x B: the ratio between nodes is the same). Bins: SL octaves
// [2^k, 2^(k+1) - 1], fixed, so two nodes' bins are the same bins whatever each saw. Only a
// run's main bins are exported: the kMainBins octaves with the most work, each with at least
// kMinBinIterations iterations (fewer make no figure anyone should compare). Cost: iteration
// time, and energy where a device gives it (over the iterations that were given an energy).
//
// The fleet job (label fleet_job) is what nodes are compared within: the same training job on
// every node, named by the outermost layer that spans nodes (run_key.h): the launcher's run
// (torchrun's run id, MPI's namespace), else the Slurm job, else the job's name, else the run
// key (a job of one node).
//
// Cardinality (docs/metrics.md): at most kMainBins x 5 series per run (x 3 without energy), runs
// added in run order within what runs.max_series leaves after the per-run families, a run's
// fleet series left out whole past it (series_cap.h). Threads: the daemon's io_context thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "agent/runs/run_manager.h"
#include "agent/runs/series_cap.h"
#include "agent/source/run_key.h"
#include "agent/store/run_model.h"

namespace seqpoint::daemon::fleet {

inline constexpr size_t kMainBins = 3;
inline constexpr uint64_t kMinBinIterations = 20;

struct SlBin {
  uint32_t lo = 0, hi = 0;  // inclusive
  bool operator==(const SlBin&) const = default;
};
// The octave of an SL: [2^k, 2^(k+1) - 1]; SL 0 is no bin ({0, 0}).
SlBin OctaveOf(uint32_t seq_len);
std::string BinLabel(const SlBin& bin);  // "64-127"

// What a run's iterations in one bin cost, summed.
struct BinCost {
  SlBin bin;
  uint64_t iterations = 0;
  double work = 0;    // sum of SL over the timed iterations (those in time_s)
  double time_s = 0;  // sum of iteration time
  uint64_t energy_iterations = 0;
  double energy_work = 0;  // sum of SL over the iterations that were given an energy
  double energy_j = 0;
};

// The run's main bins, the most work first.
std::vector<BinCost> MainBins(const std::vector<HistogramBin>& histogram,
                              size_t max_bins = kMainBins);

// The label nodes are compared within (see above), e.g. "torchrun:abc", "slurm:4242".
std::string FleetJob(const std::string& run_key, const RunJobLabels& job);

struct FleetOptions {
  std::string node;             // the `node` label (NodeName())
  uint64_t max_series = 20000;  // what is left of runs.max_series after the per-run families
  // The cap's ledger of the /metrics export (null: an upload, or not recorded): the fleet series
  // are added to what it says was exported and dropped, after the per-run families' (so
  // seqpoint_series counts every series labelled run).
  SeriesLedger* ledger = nullptr;
};

// seqpoint_fleet_bin_{iterations,work,time_seconds,energy_joules,energy_work}_total per run and
// main bin, labelled run, node, fleet_job, bin.
std::vector<MetricFamily> EfficiencyFamilies(RunManager& runs, const FleetOptions& options);

}  // namespace seqpoint::daemon::fleet
