#include "agent/runs/series_cap.h"

#include <algorithm>

namespace seqpoint::daemon {

void SeriesCap::Begin() {
  before_.clear();
  for (const MetricFamily* f : families_) before_.push_back(f->samples.size());
}

bool SeriesCap::Commit() {
  uint64_t added = 0;
  for (size_t i = 0; i < families_.size(); ++i) added += families_[i]->samples.size() - before_[i];
  if (kept_ + added <= limit_) {
    kept_ += added;
    return true;
  }
  for (size_t i = 0; i < families_.size(); ++i) families_[i]->samples.resize(before_[i]);
  dropped_ += added;
  return false;
}

std::vector<MetricFamily> SeriesFamilies(const SeriesLedger& ledger, uint64_t limit) {
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_series",
                      "Per-run series on the last /metrics export (labelled run=...), after the "
                      "cap runs.max_series.")
                    .Add({}, static_cast<double>(ledger.exported)));
  out.push_back(Gauge("seqpoint_series_limit", "runs.max_series: the cap on per-run series.")
                    .Add({}, static_cast<double>(limit)));
  out.push_back(Gauge("seqpoint_series_dropped",
                      "Per-run series left out of the last /metrics export by the cap (whole "
                      "runs, newest first).")
                    .Add({}, static_cast<double>(ledger.dropped)));
  out.push_back(Counter("seqpoint_series_overflow_runs_total",
                        "Runs whose series were left out of an export at least once because "
                        "the node passed runs.max_series.")
                    .Add({}, static_cast<double>(ledger.overflowed.size())));
  return out;
}

Status CheckBoundedLabels(const std::vector<MetricFamily>& families) {
  const std::vector<std::string>& banned = UnboundedLabelNames();
  for (const MetricFamily& f : families) {
    for (const MetricSample& s : f.samples) {
      for (const auto& [name, value] : s.labels) {
        if (std::find(banned.begin(), banned.end(), name) != banned.end()) {
          return InvalidArgument(f.name + " has the label '" + name +
                                 "', whose values are unbounded (docs/metrics.md, cardinality)");
        }
        if (value.size() > kMaxLabelBytes) {
          return InvalidArgument(f.name + " has a value of label '" + name + "' of " +
                                 std::to_string(value.size()) + " bytes (at most " +
                                 std::to_string(kMaxLabelBytes) + ")");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace seqpoint::daemon
