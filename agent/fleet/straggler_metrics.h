// The straggler verdicts of a node's data-parallel runs (straggler.h) as Prometheus families:
// counts per run, never per step, so a run's series do not grow with its length.
//
//   seqpoint_run_collective_steps_total{run,node,fleet_job}             steps judged
//   seqpoint_run_straggler_steps_total{run,node,fleet_job,cause}        steps with a straggler
//   seqpoint_run_straggler_lag_seconds_total{run,node,fleet_job,cause}  their lags, summed
//   seqpoint_run_rank_last_arrival_steps_total{run,node,fleet_job,rank,cause}
//                                                                      steps each rank straggled
//   seqpoint_run_rank_slower_than_peers{run,node,fleet_job,rank}     1 while the sequential test
//                                                                      (slow_rank.h) alarms, else 0
//   seqpoint_run_rank_compute_ratio{run,node,fleet_job,rank}         compute per token vs peers
//   seqpoint_run_rank_detectable_slowdown{run,node,fleet_job,rank}   its detection floor
//                                                                      (slow_rank.h:
//                                                                      DetectionFloor)
//   seqpoint_run_detectable_slowdown{run,node,fleet_job}             the largest of its ranks'
// cause is "data" or "hardware". Shares over a window are the rules' (seqpoint-fleet-rules.yml:
// seqpoint_fleet:rank_last_arrival_share:ratio). Cardinality: ranks 0..kMaxStragglerRanks-1 have
// their own series; others (and ranks whose number is unknown) share rank="other" (the slow-rank
// gauges show the slowest of them, the floor the largest). A run adds at most 1 + 2 + 2 +
// (kMaxStragglerRanks + 1) x 5 + 1 = 91 series, and only the causes and ranks that occurred; runs
// are added within `max_series` (series_cap.h), a run's series left out whole past it. Threads: the
// caller's (the daemon's io_context).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/fleet/straggler.h"
#include "agent/metrics/metric_family.h"
#include "agent/runs/series_cap.h"

namespace seqpoint::daemon::fleet {

inline constexpr int32_t kMaxStragglerRanks = 16;  // a node's ranks: one per GPU, 16 at most

struct RunStragglers {
  int64_t run = 0;
  std::string fleet_job;  // FleetJob(run key, job labels)
  StragglerCounts counts;
};

// The rank label of a rank number: "0".."15", else "other".
std::string RankLabel(int32_t rank);

std::vector<MetricFamily> StragglerFamilies(const std::vector<RunStragglers>& runs,
                                            const std::string& node, uint64_t max_series,
                                            SeriesLedger* ledger = nullptr);

}  // namespace seqpoint::daemon::fleet
