#include "collectors/nvml/nvml_energy_window.h"

#include <algorithm>
#include <cstdio>

namespace seqpoint::collectors {
namespace {

std::string Ms(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  return buf;
}

}  // namespace

std::optional<int64_t> EnergyWindowRule::min_window_ns() const {
  if (!period_ || !period_->period_ns) return std::nullopt;
  return *period_->period_ns * kMinUpdates;
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
  if (!period_) return kMeasuring;
  const std::optional<int64_t> min = min_window_ns();
  if (!min) return period_->why_not;
  if (window_ns >= *min) return {};
  return "window " + Ms(static_cast<double>(window_ns)) + " shorter than " +
         std::to_string(kMinUpdates) + " updates of the energy counter (" +
         Ms(static_cast<double>(*period_->period_ns)) +
         (period_->upper_bound ? " each or less" : " each") +
         "): its energy is not known to within 20%";
}

std::string EnergyWindowRule::Describe() const {
  if (!period_) return std::string("no energy per window yet: ") + kMeasuring;
  const std::optional<int64_t> min = min_window_ns();
  if (!min) return "no energy per window: " + period_->why_not;
  return "energy counter updates every " + period_->Describe() + ": energy kept over windows of " +
         Ms(static_cast<double>(*min)) + " or more";
}

}  // namespace seqpoint::collectors
