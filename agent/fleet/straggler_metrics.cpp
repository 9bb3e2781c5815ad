// See straggler_metrics.h.
#include "agent/fleet/straggler_metrics.h"

#include <map>

namespace seqpoint::daemon::fleet {

std::string RankLabel(int32_t rank) {
  return rank >= 0 && rank < kMaxStragglerRanks ? std::to_string(rank) : "other";
}

std::vector<MetricFamily> StragglerFamilies(const std::vector<RunStragglers>& runs,
                                            const std::string& node, uint64_t max_series,
                                            SeriesLedger* ledger) {
  auto steps = Counter("seqpoint_run_collective_steps_total",
                       "Steps of a data-parallel run whose ranks on this node were all timed at "
                       "the step's first collective (the collective probes) and judged.");
  auto straggled = Counter("seqpoint_run_straggler_steps_total",
                           "Judged steps in which one rank arrived last, more than 10% of its "
                           "peers' compute after them; cause data: its extra tokens explain the "
                           "lag, hardware: they do not.");
  auto lag = Counter("seqpoint_run_straggler_lag_seconds_total",
                     "How late those stragglers arrived (after the median of their peers), "
                     "summed: mean lag = rate(lag) / rate(straggler steps).");
  auto by_rank = Counter("seqpoint_run_rank_last_arrival_steps_total",
                         "Judged steps in which this rank was the straggler, by cause (ranks 0-15; "
                         "others and unknown ones: rank=\"other\").");
  std::vector<MetricFamily*> all = {&steps, &straggled, &lag, &by_rank};
  SeriesCap cap(all, max_series);
  for (const RunStragglers& r : runs) {
    if (r.counts.steps == 0) continue;  // not judged (yet): no series that say nothing
    cap.Begin();
    const Labels base = {{"run", std::to_string(r.run)},
                         {"node", node},
                         {"fleet_job", r.fleet_job.substr(0, kMaxLabelBytes)}};
    steps.Add(base, static_cast<double>(r.counts.steps));
    for (size_t c = 0; c < kStragglerCauses; ++c) {
      Labels l = base;
      l.emplace_back("cause", CauseName(static_cast<StragglerCause>(c)));
      straggled.Add(l, static_cast<double>(r.counts.straggler_steps[c]));
      lag.Add(l, r.counts.lag_seconds[c]);
    }
    std::map<std::string, std::array<uint64_t, kStragglerCauses>> ranks;
    for (const auto& [rank, n] : r.counts.last_by_rank) {
      auto& sum = ranks[RankLabel(rank)];
      for (size_t c = 0; c < kStragglerCauses; ++c) sum[c] += n[c];
    }
    for (const auto& [rank, n] : ranks) {
      for (size_t c = 0; c < kStragglerCauses; ++c) {
        if (n[c] == 0) continue;
        Labels l = base;
        l.emplace_back("rank", rank);
        l.emplace_back("cause", CauseName(static_cast<StragglerCause>(c)));
        by_rank.Add(l, static_cast<double>(n[c]));
      }
    }
    cap.Commit();
  }
  if (ledger != nullptr) {
    ledger->exported += cap.kept();
    ledger->dropped += cap.dropped();
  }
  return {steps, straggled, lag, by_rank};
}

}  // namespace seqpoint::daemon::fleet
