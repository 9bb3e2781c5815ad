#include "agent/energy/energy_sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

namespace seqpoint::daemon {

Result<std::unique_ptr<EnergySampler>> EnergySampler::Open(
    const collectors::CollectorConfig& config,
    const std::vector<collectors::EnergySourceInfo>& registry, MonotonicClock clock,
    bool own_thread) {
  std::string skipped;
  for (const std::string& wanted : config.energy.sources) {
    const collectors::EnergySourceInfo* info = nullptr;
    for (const auto& s : registry) {
      if (s.name == wanted) info = &s;
    }
    if (info == nullptr) {
      skipped += (skipped.empty() ? "" : "; ") + wanted + ": not an energy source of this build";
      continue;
    }
    auto sampler = OpenSource(info->factory(config), clock, own_thread);
    if (sampler.ok()) return sampler;
    skipped += (skipped.empty() ? "" : "; ") + wanted + ": " + sampler.status().message();
  }
  return NotFound("no energy source present (" +
                  (skipped.empty() ? std::string("collectors.energy.sources is empty") : skipped) +
                  ")");
}

Result<std::unique_ptr<EnergySampler>> EnergySampler::OpenSource(
    std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock, bool own_thread) {
  auto reader = std::make_unique<EnergyReader>(std::move(source), std::move(clock));
  SEQPOINT_RETURN_IF_ERROR(reader->Open());
  std::unique_ptr<EnergySampler> s(new EnergySampler(std::move(reader)));
  s->ring_.reserve(kRingSamples);
  // Calibrates (here, or first thing on the reader's thread); its last read is the first
  // sample, so the first iteration has a bracket start.
  s->reader_->Start(own_thread);
  s->Drain();  // the calibration's last read, when it was on this thread
  return s;
}

void EnergySampler::Sample() {
  const uint64_t entered = MonotonicNowNs();  // real time: what the loop spends, not a stamp
  if (!reader_->Request()) ++stats_.skipped;
  const bool filed = Drain();
  stats_.loop_ns += static_cast<double>(MonotonicNowNs() - entered);
  if (filed && on_sample_) on_sample_();
}

bool EnergySampler::SampleUntil(uint64_t t_ns, uint64_t max_wait_ns) {
  const uint64_t start = MonotonicNowNs();
  for (;;) {
    Sample();
    if (Covers(t_ns) || !reader_->own_thread()) return Covers(t_ns);
    if (MonotonicNowNs() - start >= max_wait_ns) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool EnergySampler::Drain() {
  std::vector<EnergyRead> reads = reader_->Take();
  if (!reads.empty() && !stats_.calibration.done) stats_.calibration = reader_->calibration();
  for (const EnergyRead& r : reads) File(r);
  stats_.read_cost_us = static_cast<double>(reader_->read_ns()) * 1e-3;
  return !reads.empty();
}

void EnergySampler::File(const EnergyRead& r) {
  ++stats_.reads;
  const uint64_t took = r.t1_ns - r.t0_ns;
  stats_.max_read_ns = std::max(stats_.max_read_ns, took);
  const uint64_t update = stats_.calibration.update_ns;
  if (took > kMaxReadNs) {
    ++stats_.slow_reads;
    // Longer than an update of the counter: it may hold either of two updates, its instant
    // unknown by more than one. Left out: the bracket around it just widens.
    if (took > update) {
      ++stats_.unplaced;
      return;
    }
  }
  // The value is the counter's at an instant in [t0 - U, t1] (energy_reader.h).
  const uint64_t lo = r.t0_ns > update ? r.t0_ns - update : 0;
  Point p;
  p.t_ns = lo + (r.t1_ns - lo) / 2;
  p.h_ns = (r.t1_ns - lo) / 2;
  if (size_ > 0 && p.t_ns < At(size_ - 1).t_ns) return;  // time never goes back here
  if (std::exchange(paused_, false) && size_ > 0) Push({p.t_ns, 0, 0, false});
  if (r.ok) {
    p.uj = r.uj;
    p.valid = true;
    // The source's contract is a never-decreasing total; a drop is a break, not energy.
    if (size_ > 0 && At(size_ - 1).valid && p.uj < At(size_ - 1).uj) p.valid = false;
  } else {
    ++stats_.failures;
    stats_.last_error = r.error;
  }
  Push(p);
}

void EnergySampler::Push(const Point& p) {
  if (ring_.size() < kRingSamples) {
    ring_.push_back(p);
    ++size_;
  } else {
    ring_[head_] = p;
    head_ = (head_ + 1) % ring_.size();
  }
}

std::optional<size_t> EnergySampler::Floor(uint64_t t_ns) const {
  if (size_ == 0 || At(0).t_ns > t_ns) return std::nullopt;
  size_t lo = 0, hi = size_ - 1;  // At(lo).t <= t_ns
  while (lo < hi) {
    size_t mid = lo + (hi - lo + 1) / 2;
    if (At(mid).t_ns <= t_ns) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::optional<EnergySampler::Interp> EnergySampler::Interpolate(uint64_t t_ns) const {
  std::optional<size_t> i = Floor(t_ns);
  if (!i) return std::nullopt;
  const Point& a = At(*i);
  if (a.t_ns == t_ns) return a.valid ? std::optional<Interp>({*i, 0, a.uj}) : std::nullopt;
  if (*i + 1 >= size_) return std::nullopt;
  const Point& b = At(*i + 1);
  if (!a.valid || !b.valid) return std::nullopt;
  const double f = static_cast<double>(t_ns - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  return Interp{*i, f, a.uj + f * (b.uj - a.uj)};
}

std::optional<double> EnergySampler::Estimate(const std::vector<EnergyPiece>& pieces,
                                              double* relative, double* duration_ns,
                                              double* bracket_ns) const {
  double sum = 0, duration = 0;
  *bracket_ns = 0;
  // The error is a linear combination of the samples' time errors: their coefficients.
  std::vector<std::pair<size_t, double>> coef;
  for (const EnergyPiece& piece : pieces) {
    if (piece.to_ns < piece.from_ns) return std::nullopt;
    std::optional<Interp> b = Interpolate(piece.from_ns), e = Interpolate(piece.to_ns);
    if (!b || !e) return std::nullopt;
    for (size_t i = b->i; i <= e->i && i < size_; ++i) {
      if (!At(i).valid) return std::nullopt;  // a failed read or reset inside the window
    }
    sum += piece.weight * (e->uj - b->uj);
    duration += piece.weight * static_cast<double>(piece.to_ns - piece.from_ns);
    for (const Interp* x : {&*b, &*e}) {
      const double sign = x == &*e ? piece.weight : -piece.weight;
      coef.push_back({x->i, sign * (1 - x->f)});
      if (x->f > 0) coef.push_back({x->i + 1, sign * x->f});
      if (x->i + 1 < size_) *bracket_ns += static_cast<double>(At(x->i + 1).t_ns - At(x->i).t_ns);
    }
  }
  std::sort(coef.begin(), coef.end());
  double err_ns = 0;
  for (size_t k = 0; k < coef.size();) {
    double c = 0;
    const size_t i = coef[k].first;
    for (; k < coef.size() && coef[k].first == i; ++k) c += coef[k].second;
    err_ns += std::fabs(c) * static_cast<double>(At(i).h_ns);
  }
  *relative = duration > 0 ? err_ns / duration : 0;
  *duration_ns = duration;
  return sum;
}

std::optional<double> EnergySampler::EnergyOver(const std::vector<EnergyPiece>& pieces,
                                                double* relative) {
  double rel = 0, duration = 0, bracket_ns = 0;
  std::optional<double> uj =
      pieces.empty() ? std::nullopt : Estimate(pieces, &rel, &duration, &bracket_ns);
  if (relative != nullptr) *relative = rel;
  if (!uj) {
    ++stats_.uncovered;
    return uj;
  }
  ++stats_.interpolations;
  stats_.bracket_ns_sum += bracket_ns / static_cast<double>(pieces.size());
  stats_.uncertainty_sum += rel;
  stats_.duration_ns_sum += duration;
  if (rel > kMaxRelativeUncertainty) ++stats_.smeared;
  return uj;
}

std::optional<double> EnergySampler::EnergyBetween(uint64_t begin_ns, uint64_t end_ns, bool counted,
                                                   double* relative) {
  if (end_ns < begin_ns) return std::nullopt;
  const std::vector<EnergyPiece> whole = {{begin_ns, end_ns, 1}};
  if (counted) return EnergyOver(whole, relative);
  double rel = 0, duration = 0, bracket_ns = 0;
  std::optional<double> uj = Estimate(whole, &rel, &duration, &bracket_ns);
  if (relative != nullptr) *relative = rel;
  return uj;
}

}  // namespace seqpoint::daemon
