// MeasurementController and the observer effect (observer_effect.h): after each timed
// iteration the run's estimate is consulted; once flagged it is logged once, and with
// observer_drop the collectors it blames are dropped for the rest of that run (time and energy
// go on), and with observer_node_drop_s > 0 from the node's later runs until the drop expires.
#include <cstdio>

#include "agent/config/log.h"
#include "agent/measure/measurement_controller.h"
#include "agent/runs/run_tracker.h"
#include "common/clock.h"

namespace seqpoint::daemon {

void MeasurementController::CheckObserverEffect(int64_t run_id, RunTracker& tracker) {
  const ObserverEffect& oe = tracker.observer_effect(options_.observer_threshold);
  if (!tracker.TakeObserverUpdate() || !oe.flagged) return;  // costs a compare per iteration
  std::vector<std::string> blamed = oe.FlaggedCollectors();
  if (tracker.FirstObserverWarning()) {
    std::string who;
    for (const std::string& c : blamed) who += (who.empty() ? "" : ", ") + c;
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, "%.2fx (95%% interval %.2f-%.2f, %llu pairs)", oe.all.ratio,
                  oe.all.low, oe.all.high, static_cast<unsigned long long>(oe.all.pairs));
    SEQPOINT_LOG(
        kWarn,
        "run " + std::to_string(run_id) + " (" + tracker.record().key +
            "): collector-measured iterations take " + ratio +
            " the time of the control iterations: measuring perturbs the "
            "training (collectors: " +
            (who.empty() ? std::string("none open") : who) +
            "); projections of their metrics are marked perturbed, time and energy corrected" +
            (options_.observer_drop ? ""
                                    : " (runs.observer_effect_action = "
                                      "\"drop\" would stop them)"));
  }
  if (!options_.observer_drop) return;
  bool dropped_now = false;
  const bool node_wide = options_.observer_node_drop_s > 0;
  for (const std::string& c : blamed) {
    if (node_wide) {
      node_dropped_[c] = {run_id, WallNs() + options_.observer_node_drop_s * 1'000'000'000};
    }
    if (!tracker.dropped_collectors().insert(c).second) continue;
    dropped_now = true;
    SEQPOINT_LOG(kWarn, "run " + std::to_string(run_id) + ": dropping collector " + c +
                            " for the rest of the run" +
                            (node_wide ? " and for the node's runs of the next " +
                                             std::to_string(options_.observer_node_drop_s) +
                                             " s (runs.observer_effect_node_drop_s)"
                                       : std::string()) +
                            " (runs.observer_effect_action = \"drop\")");
  }
  if (!dropped_now) return;
  for (auto& [pid, p] : registry_->all()) {
    if (p.run_id != run_id || !p.collectors) continue;
    if (p.measuring) {
      p.rebuild = true;  // after this measurement
    } else {
      p.collectors->Close();
      p.collectors.reset();
    }
  }
}

void MeasurementController::ApplyNodeDrops(int64_t run_id, RunTracker& tracker) const {
  for (const auto& [collector, drop] : node_dropped()) {
    tracker.dropped_collectors().insert(collector);
    SEQPOINT_LOG(kInfo, "run " + std::to_string(run_id) + ": collector " + collector +
                            " not used: it perturbed run " + std::to_string(drop.run_id) +
                            " on this node (the drop expires in " +
                            std::to_string((drop.until_unix_ns - WallNs()) / 1'000'000'000) +
                            " s, runs.observer_effect_node_drop_s; SIGHUP tries it again now)");
  }
}

std::map<std::string, NodeDrop> MeasurementController::node_dropped() const {
  std::map<std::string, NodeDrop> out;
  const int64_t now = WallNs();
  for (const auto& [collector, drop] : node_dropped_) {
    if (drop.until_unix_ns > now) out.emplace(collector, drop);
  }
  return out;
}

void MeasurementController::Reconfigure(MeasureOptions options) {
  options_ = std::move(options);
  backoff_.set_hold_down_ns(options_.profiler_hold_down_s * 1'000'000'000);
  if (!node_dropped_.empty()) {
    SEQPOINT_LOG(kInfo,
                 "reload: collectors dropped for perturbing earlier runs are tried again "
                 "in new runs");
  }
  node_dropped_.clear();
}

}  // namespace seqpoint::daemon
