// See slow_rank_view.h.
#include "agent/fleet/slow_rank_view.h"

#include <algorithm>
#include <cmath>

namespace seqpoint::daemon::fleet {
namespace {

// A floor as JSON: null while warming up (0) or when no slowdown is found in time (infinite):
// never a number the test cannot stand behind.
nlohmann::json Floor(double floor) {
  return floor > 0 && std::isfinite(floor) ? nlohmann::json(floor) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json SlowRanksJson(const StragglerCounts& counts, double floor_steps) {
  nlohmann::json ranks = nlohmann::json::array(), slow = nlohmann::json::array();
  double worst = 0;
  bool known = !counts.slow.empty();
  for (const auto& [rank, s] : counts.slow) {
    const nlohmann::json id = rank >= 0 ? nlohmann::json(rank) : nlohmann::json(nullptr);
    if (s.slow) slow.push_back(id);
    worst = std::max(worst, s.floor);
    known = known && s.floor > 0;
    ranks.push_back(
        {{"rank", id},
         {"tested", s.tested},
         {"seen", s.seen},
         {"sigma", s.threshold > 0 ? nlohmann::json(s.sigma) : nlohmann::json(nullptr)},
         {"compute_ratio", s.ratio},
         {"slow", s.slow},
         {"alarms", s.alarms},
         {"alarm_step", s.alarms > 0 ? nlohmann::json(s.alarm_step) : nlohmann::json(nullptr)},
         {"detectable_slowdown", Floor(s.floor)}});
  }
  return {{"method",
           "one-sided CUSUM per rank on log(compute per token before the collective) minus its "
           "SL-matched peers' median, in units of its long-run noise; detectable_slowdown: the "
           "smallest slowdown found within floor_steps steps in 9 cases of 10 at that noise"},
          {"floor_steps", floor_steps},
          {"steps", counts.steps},
          {"detectable_slowdown", known ? Floor(worst) : nlohmann::json(nullptr)},
          {"slow", slow},
          {"ranks", ranks}};
}

}  // namespace seqpoint::daemon::fleet
