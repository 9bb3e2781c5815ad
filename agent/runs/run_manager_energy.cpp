// RunManager and the node's energy (energy_sampler.h, energy_attribution.h): an iteration's
// energy is its share of the node's over its probe timestamps, interpolated in the sampler's
// ring; it is never read on the iteration path. An iteration whose end is past the last sample,
// or whose window another run's process may still report an iteration in, is parked and
// settled after a later periodic sample (the sampler's on_sample callback), or at its run's
// close. A data-parallel step gets its run's whole share over the step (step_feeder.h).
#include <algorithm>

#include "agent/runs/run_manager.h"

namespace seqpoint::daemon {

void RunManager::set_energy_sampler(EnergySampler* sampler) {
  energy_ = sampler;
  if (energy_ != nullptr) energy_->set_on_sample([this] { SettleParked(); });
}

std::optional<double> RunManager::EnergyOrPark(int64_t run_id, RunTracker& tracker,
                                               const IterationEnd& e, bool whole, bool* later) {
  *later = false;
  if (energy_ == nullptr || e.begin_ns == 0 || e.end_ns < e.begin_ns) return std::nullopt;
  if (energy_->Covers(e.end_ns)) {
    bool wait = false;
    std::optional<double> uj = NodeEnergy(run_id, tracker, e, whole, /*last_try=*/false, &wait);
    if (!wait) return uj;
  }
  // End records arrive up to a poll interval after the end, usually before the next periodic
  // sample: reading the counter here would put a vendor call on every iteration. Bounded: past
  // a ring's worth of samples, the oldest parked iteration is settled (without, if uncovered).
  *later = true;
  parked_.push_back({run_id, e, whole});
  if (parked_.size() > EnergySampler::kRingSamples) SettleParked(parked_.front().run_id);
  return std::nullopt;
}

void RunManager::SettleParked(std::optional<int64_t> run) {
  std::vector<Parked> waiting = std::move(parked_);
  parked_.clear();  // nothing below parks again
  const uint64_t last = energy_ != nullptr ? energy_->last_sample_ns() : 0;
  uint64_t oldest = UINT64_MAX;
  for (const Parked& p : waiting) {
    auto t = runs_.find(p.run_id);
    if (t == runs_.end()) continue;
    const bool closing = run && p.run_id == *run;
    const bool covered = energy_ != nullptr && energy_->Covers(p.span.end_ns);
    const bool stale = last > p.span.end_ns + EnergyAttribution::kShareWaitNs;
    std::optional<double> uj;
    if (covered) {
      bool wait = false;
      uj = NodeEnergy(p.run_id, *t->second, p.span, p.whole, closing || stale, &wait);
      if (wait) {
        parked_.push_back(p);
        oldest = std::min(oldest, p.span.begin_ns);
        continue;
      }
    } else if (closing) {
      t->second->CountEnergyUnattributed(/*shared=*/false);  // never covered
    } else {
      parked_.push_back(p);
      oldest = std::min(oldest, p.span.begin_ns);
      continue;
    }
    t->second->SettleEnergy(p.span.pid, p.span.iter, uj);
  }
  // Iterations older than every window still to come or waiting are no sharers any more.
  attribution_.Prune(std::min(oldest, MonotonicNowNs()));
}

std::optional<double> RunManager::NodeEnergy(int64_t run_id, RunTracker& tracker,
                                             const IterationEnd& e, bool whole, bool last_try,
                                             bool* wait) {
  *wait = false;
  if (energy_ == nullptr || e.begin_ns == 0 || e.end_ns < e.begin_ns) return std::nullopt;
  std::vector<EnergyPiece> pieces;
  if (attribution_.Share(run_id, e.pid, whole, e.begin_ns, e.end_ns, &pieces) ==
      EnergyAttribution::Outcome::kWait) {
    if (!last_try) {
      *wait = true;
    } else {
      tracker.CountEnergyUnattributed(/*shared=*/true);
    }
    return std::nullopt;
  }
  // From the ring only: the sampler never reads the counter here (energy_sampler.h).
  std::optional<double> uj = energy_->EnergyOver(pieces);
  if (!uj) tracker.CountEnergyUnattributed(/*shared=*/false);
  return uj;
}

}  // namespace seqpoint::daemon
