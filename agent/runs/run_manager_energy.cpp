// RunManager and the node's energy (energy_sampler.h, energy_attribution.h): an iteration's
// energy is the node's over its probe timestamps, interpolated in the sampler's ring; it is
// never read on the iteration path. An iteration whose end is past the last sample is parked
// and settled after the sampler's next periodic sample (its on_sample callback), or at its
// run's close. A data-parallel step gets the node's whole energy over the step.
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
  if (energy_->Covers(e.end_ns)) return NodeEnergy(run_id, tracker, e, whole);
  // End records arrive up to a poll interval after the end, usually before the next periodic
  // sample: reading the counter here would put a vendor call on every iteration. Bounded: past
  // a ring's worth of samples, the oldest parked iteration is settled (without, if uncovered).
  *later = true;
  parked_.push_back({run_id, e, whole});
  if (parked_.size() > EnergySampler::kRingSamples) SettleParked(parked_.front().run_id);
  return std::nullopt;
}

void RunManager::SettleParked(std::optional<int64_t> run) {
  std::vector<Parked> keep;
  std::vector<Parked> now;
  for (Parked& p : parked_) {
    const bool covered = energy_ != nullptr && energy_->Covers(p.span.end_ns);
    (covered || (run && p.run_id == *run) ? now : keep).push_back(p);
  }
  parked_ = std::move(keep);  // before settling: nothing below parks again
  for (const Parked& p : now) {
    auto t = runs_.find(p.run_id);
    if (t == runs_.end()) continue;
    std::optional<double> uj;
    if (energy_ != nullptr && energy_->Covers(p.span.end_ns)) {
      uj = NodeEnergy(p.run_id, *t->second, p.span, p.whole);
    } else {
      t->second->CountEnergyUnattributed(/*shared=*/false);  // never covered
    }
    t->second->SettleEnergy(p.span.pid, p.span.iter, uj);
  }
}

std::optional<double> RunManager::NodeEnergy(int64_t run_id, RunTracker& tracker,
                                             const IterationEnd& e, bool whole) {
  if (energy_ == nullptr || e.begin_ns == 0 || e.end_ns < e.begin_ns) return std::nullopt;
  std::optional<uint32_t> k = attribution_.Divisor(run_id, e.begin_ns, e.end_ns);
  if (!k) {
    tracker.CountEnergyUnattributed(/*shared=*/true);
    return std::nullopt;
  }
  std::optional<double> uj = energy_->EnergyBetween(e.begin_ns, e.end_ns);
  if (!uj) {
    tracker.CountEnergyUnattributed(/*shared=*/false);
    return std::nullopt;
  }
  return whole ? *uj : *uj / *k;
}

}  // namespace seqpoint::daemon
