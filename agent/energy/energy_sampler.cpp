#include "agent/energy/energy_sampler.h"

#include <time.h>

#include <utility>

namespace seqpoint::daemon {

uint64_t MonotonicNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

Result<std::unique_ptr<EnergySampler>> EnergySampler::Open(
    const collectors::CollectorConfig& config,
    const std::vector<collectors::EnergySourceInfo>& registry, MonotonicClock clock) {
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
    auto sampler = OpenSource(info->factory(config), clock);
    if (sampler.ok()) return sampler;
    skipped += (skipped.empty() ? "" : "; ") + wanted + ": " + sampler.status().message();
  }
  return NotFound("no energy source present (" +
                  (skipped.empty() ? std::string("collectors.energy.sources is empty") : skipped) +
                  ")");
}

Result<std::unique_ptr<EnergySampler>> EnergySampler::OpenSource(
    std::unique_ptr<collectors::EnergySource> source, MonotonicClock clock) {
  if (!source) return InvalidArgument("energy sampler: no source");
  SEQPOINT_RETURN_IF_ERROR(source->Open());
  std::unique_ptr<EnergySampler> s(new EnergySampler(std::move(source), std::move(clock)));
  s->ring_.reserve(kRingSamples);
  s->Sample();  // the first point, so the first iteration has a bracket start
  return s;
}

void EnergySampler::Sample() {
  Read();
  if (on_sample_) on_sample_();
}

void EnergySampler::Read() {
  const uint64_t t0 = clock_();
  Result<double> uj = source_->ReadMicrojoules();
  const uint64_t t1 = clock_();
  ++stats_.reads;
  stats_.read_cost_us += static_cast<double>(t1 - t0) * 1e-3;
  Point p;
  p.t_ns = t0 + (t1 - t0) / 2;  // the read happened somewhere in [t0, t1]: ~3 us wide
  if (size_ > 0 && p.t_ns < At(size_ - 1).t_ns) return;  // time never goes back here
  if (std::exchange(paused_, false) && size_ > 0) Push({t0, 0, false});
  if (uj.ok() && t1 - t0 > kMaxReadNs) {
    ++stats_.slow_reads;
    return;
  }
  if (uj.ok()) {
    p.uj = *uj;
    p.valid = true;
    // The source's contract is a never-decreasing total; a drop is a break, not energy.
    if (size_ > 0 && At(size_ - 1).valid && p.uj < At(size_ - 1).uj) p.valid = false;
  } else {
    ++stats_.failures;
    stats_.last_error = uj.status().message();
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

std::optional<double> EnergySampler::Interpolate(uint64_t t_ns, size_t* bracket_start) const {
  std::optional<size_t> i = Floor(t_ns);
  if (!i) return std::nullopt;
  const Point& a = At(*i);
  *bracket_start = *i;
  if (a.t_ns == t_ns) return a.valid ? std::optional<double>(a.uj) : std::nullopt;
  if (*i + 1 >= size_) return std::nullopt;
  const Point& b = At(*i + 1);
  if (!a.valid || !b.valid) return std::nullopt;
  const double f = static_cast<double>(t_ns - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  return a.uj + f * (b.uj - a.uj);
}

std::optional<double> EnergySampler::EnergyBetween(uint64_t begin_ns, uint64_t end_ns,
                                                   bool counted) {
  if (end_ns < begin_ns) return std::nullopt;
  for (int tries = 0; tries < 3 && (size_ == 0 || At(size_ - 1).t_ns < end_ns); ++tries) {
    Read();  // not Sample(): its callback may be what called this
  }
  size_t first = 0, last = 0;
  std::optional<double> b = Interpolate(begin_ns, &first);
  std::optional<double> e = Interpolate(end_ns, &last);
  if (!b || !e) return std::nullopt;
  for (size_t i = first; i <= last && i < size_; ++i) {
    if (!At(i).valid) return std::nullopt;  // a failed read or reset inside the window
  }
  if (!counted) return *e - *b;
  ++stats_.interpolations;
  for (size_t i : {first, last}) {
    if (i + 1 < size_) stats_.bracket_ns_sum += static_cast<double>(At(i + 1).t_ns - At(i).t_ns);
  }
  return *e - *b;
}

}  // namespace seqpoint::daemon
