// The slow-rank verdicts of one data-parallel run (straggler.h, slow_rank.h) as `seqpoint show`
// prints them: which rank the sequential test holds slower than its peers at equal SL now, and
// what a verdict of "no slow rank" means on this job: none slower than the detection floor
// within floor_steps steps, at the noise its ranks measured (SlowRankState::floor). The same
// values are on /metrics (straggler_metrics.h); this is the per-rank detail an operator reads.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/fleet/straggler.h"

namespace seqpoint::daemon::fleet {

// {"method", "floor_steps", "steps", "detectable_slowdown" (the largest of the ranks' floors;
// null while one warms up or finds nothing in time), "slow" (ranks alarmed now), "ranks": [{rank
// (null: unknown), tested, seen, sigma, compute_ratio, slow, alarms, alarm_step (null: none),
// detectable_slowdown}]}.
nlohmann::json SlowRanksJson(const StragglerCounts& counts, double floor_steps);

}  // namespace seqpoint::daemon::fleet
