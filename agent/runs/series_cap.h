// Bounded cardinality of the per-run series (issue 12, item 3; the rules: docs/metrics.md,
// "Cardinality"). Every per-run family is labelled by run and by a bounded set of names
// (metric, unit, group, collector, reason, direction, profiler); never by iteration, SL or
// pid, whose values are unbounded (CheckBoundedLabels enforces it, and the tests call it on
// everything exported). A node watching more runs than runs.max_series allows does not grow
// without bound: RunFamilies adds runs' series one run at a time, in run order, and a run that
// would pass the cap is left out whole (never half a run), counted in the ledger: the oldest
// runs keep their series, so what a dashboard shows does not flicker from scrape to scrape.
//
// Threads: the daemon's io_context thread.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "common/status.h"

namespace seqpoint::daemon {

// What the cap did, kept between exports.
struct SeriesLedger {
  uint64_t exported = 0;         // per-run series in the last /metrics export
  uint64_t dropped = 0;          // left out of the last /metrics export by the cap
  std::set<int64_t> overflowed;  // runs left out of any export at least once
};

// Rolls a run's series back when they would pass the cap: Begin() before adding one run's
// samples to `families`, Commit() after.
class SeriesCap {
 public:
  SeriesCap(std::vector<MetricFamily*> families, uint64_t limit)
      : families_(std::move(families)), limit_(limit) {}
  void Begin();
  // Keeps the run's series if they fit, else removes them; false when removed.
  bool Commit();
  uint64_t kept() const { return kept_; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::vector<MetricFamily*> families_;
  std::vector<size_t> before_;
  uint64_t limit_;
  uint64_t kept_ = 0;
  uint64_t dropped_ = 0;
};

// The cap's own families: series exported, the limit, series left out, runs that overflowed.
std::vector<MetricFamily> SeriesFamilies(const SeriesLedger& ledger, uint64_t limit);

// Labels that must never appear on an exported series: their values are unbounded.
inline const std::vector<std::string>& UnboundedLabelNames() {
  static const std::vector<std::string> names = {"pid", "iter",       "iteration", "seq_len",
                                                 "sl",  "step_index", "tid"};
  return names;
}

// The longest label value exported: a value read from the environment is cut at 128 bytes, and
// a run key (launcher prefix + value, or a cgroup path) at this.
inline constexpr size_t kMaxLabelBytes = 256;

// An error naming the family and label when any sample carries an unbounded label, or a label
// value longer than kMaxLabelBytes.
Status CheckBoundedLabels(const std::vector<MetricFamily>& families);

}  // namespace seqpoint::daemon
