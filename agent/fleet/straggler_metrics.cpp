// See straggler_metrics.h.
#include "agent/fleet/straggler_metrics.h"

#include <algorithm>
#include <cmath>
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
  auto slow = Gauge("seqpoint_run_rank_slower_than_peers",
                    "1 while a sequential test over steps (CUSUM on the rank's long-run noise, "
                    "built for a 10% slowdown) holds this rank's compute before the collective "
                    "slower than its peers' at equal SL (tokens within 5%), else 0; ranks past "
                    "the test's 64-step warm-up.");
  auto ratio = Gauge("seqpoint_run_rank_compute_ratio",
                     "This rank's compute per token before the collective over its peers' at "
                     "equal SL, over its last 64 compared steps (1.10: 10% slower).");
  auto floor = Gauge("seqpoint_run_rank_detectable_slowdown",
                     "The detection floor of this rank: the smallest slowdown of its compute "
                     "against its peers at equal SL (1.2: 20% slower) that the sequential test "
                     "finds within 100 of the run's steps in 9 cases of 10, at the rank's measured "
                     "long-run noise; absent while warming up or when none is.");
  auto run_floor = Gauge("seqpoint_run_detectable_slowdown",
                         "The run's detection floor: the largest of its ranks' (a verdict of no "
                         "slow rank means none slower than this within 100 steps).");
  std::vector<MetricFamily*> all = {&steps, &straggled, &lag,   &by_rank,
                                    &slow,  &ratio,     &floor, &run_floor};
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
    std::map<std::string, SlowRankState> tested;  // rank="other" holds the slowest of its ranks
    for (const auto& [rank, st] : r.counts.slow) {
      if (st.threshold == 0) continue;  // still warming up
      auto [it, fresh] = tested.emplace(RankLabel(rank), st);
      if (!fresh && (st.slow > it->second.slow || st.ratio > it->second.ratio)) {
        const double f = std::max(it->second.floor, st.floor);
        it->second = st;
        it->second.floor = f;  // "other"'s floor: the largest of its ranks'
      } else if (!fresh) {
        it->second.floor = std::max(it->second.floor, st.floor);
      }
    }
    for (const auto& [rank, st] : tested) {
      Labels l = base;
      l.emplace_back("rank", rank);
      slow.Add(l, st.slow ? 1 : 0);
      ratio.Add(l, st.ratio);
      if (std::isfinite(st.floor) && st.floor > 0) floor.Add(l, st.floor);
    }
    // The run's floor: its ranks' largest (every rank, "other" too); none while one is not
    // known (warming up) or finds no slowdown in time.
    double worst = 0;
    for (const auto& [rank, st] : r.counts.slow) worst = std::max(worst, st.floor);
    bool known = !r.counts.slow.empty();
    for (const auto& [rank, st] : r.counts.slow) known = known && st.floor > 0;
    if (known && std::isfinite(worst)) run_floor.Add(base, worst);
    cap.Commit();
  }
  if (ledger != nullptr) {
    ledger->exported += cap.kept();
    ledger->dropped += cap.dropped();
  }
  return {steps, straggled, lag, by_rank, slow, ratio, floor, run_floor};
}

}  // namespace seqpoint::daemon::fleet
