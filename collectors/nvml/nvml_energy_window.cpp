#include "collectors/nvml/nvml_energy_window.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace seqpoint::collectors {
namespace {

int64_t Mid(const EnergyRead& r) { return r.t0_ns + (r.t1_ns - r.t0_ns) / 2; }

std::string Ms(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  return buf;
}

}  // namespace

bool EnergyUpdateProbe::Add(const EnergyRead& r) {
  if (last_ && r.mj != last_->mj) {
    // The counter moved between the two reads' instants: placed midway.
    const int64_t at = Mid(*last_) + (Mid(r) - Mid(*last_)) / 2;
    if (changes_ == 0) first_change_ns_ = at;
    last_change_ns_ = at;
    ++changes_;
  }
  last_ = r;
  return done();
}

std::optional<int64_t> EnergyUpdateProbe::period_ns() const {
  if (changes_ < 2) return std::nullopt;
  return std::max<int64_t>(0, (last_change_ns_ - first_change_ns_) / (changes_ - 1));
}

EnergyUpdatePeriod MeasureEnergyUpdatePeriod(const std::function<Result<uint64_t>()>& read,
                                             const std::function<int64_t()>& now_ns,
                                             int64_t spacing_ns) {
  EnergyUpdatePeriod out;
  EnergyUpdateProbe probe;
  const int64_t start = now_ns();
  auto last_read = std::chrono::steady_clock::now();
  while (!probe.done() && out.reads < EnergyUpdateProbe::kProbeMaxReads &&
         now_ns() - start < EnergyUpdateProbe::kProbeMaxNs) {
    if (out.reads > 0 && spacing_ns > 0) {  // real time, whichever clock stamps the reads
      const auto since = std::chrono::steady_clock::now() - last_read;
      if (since < std::chrono::nanoseconds(spacing_ns)) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(spacing_ns) - since);
      }
    }
    last_read = std::chrono::steady_clock::now();
    EnergyRead r;
    r.t0_ns = now_ns();
    Result<uint64_t> mj = read();
    r.t1_ns = now_ns();
    ++out.reads;
    if (!mj.ok()) {
      out.why_not =
          "the energy counter's update period could not be measured: " + mj.status().message();
      out.spent_ns = now_ns() - start;
      return out;
    }
    r.mj = *mj;
    probe.Add(r);
  }
  out.spent_ns = now_ns() - start;
  out.period_ns = probe.period_ns();
  if (!out.period_ns) {
    out.why_not = "the energy counter changed " + std::to_string(probe.changes()) + " time(s) in " +
                  std::to_string(out.reads) + " reads over " +
                  Ms(static_cast<double>(out.spent_ns)) + " at open: its update period is unknown";
  }
  return out;
}

std::optional<int64_t> EnergyWindowRule::min_window_ns() const {
  if (!period_.period_ns) return std::nullopt;
  return *period_.period_ns * kMinUpdates;
}

bool EnergyWindowRule::ReadAtBegin() const {
  const std::optional<int64_t> min = min_window_ns();
  if (!min) return false;
  if (recent_.size() < kRecentWindows) return true;  // still learning the windows' lengths
  return std::any_of(recent_.begin(), recent_.end(), [&](int64_t w) { return w >= *min / 2; });
}

void EnergyWindowRule::Saw(int64_t window_ns) {
  recent_.push_back(window_ns);
  while (recent_.size() > kRecentWindows) recent_.pop_front();
}

std::string EnergyWindowRule::WhyLeftOut(int64_t window_ns) const {
  const std::optional<int64_t> min = min_window_ns();
  if (!min) return period_.why_not;
  if (window_ns >= *min) return {};
  return "window " + Ms(static_cast<double>(window_ns)) + " shorter than " +
         std::to_string(kMinUpdates) + " updates of the energy counter (" +
         Ms(static_cast<double>(*period_.period_ns)) +
         " each): its energy is not known to within 20%";
}

std::string EnergyWindowRule::Describe() const {
  const std::optional<int64_t> min = min_window_ns();
  if (!min) return "no energy per window: " + period_.why_not;
  return "energy counter updates every " + Ms(static_cast<double>(*period_.period_ns)) +
         " (measured at open: " + std::to_string(EnergyUpdateProbe::kProbeChanges) +
         " changes in " + std::to_string(period_.reads) + " reads over " +
         Ms(static_cast<double>(period_.spent_ns)) + "): energy kept over windows of " +
         Ms(static_cast<double>(*min)) + " or more";
}

}  // namespace seqpoint::collectors
