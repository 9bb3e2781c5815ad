// CollectorSet runs every opened collector around one measured iteration and keeps, per
// collector, its health and cost (exported later as Prometheus metrics, node_exporter style:
// success and duration per collector). One failing collector never stops the others: each
// call is made for every collector, its Status recorded, and any exception a collector lets
// escape is caught here and recorded as an internal error.
//
// States: a collector whose Open says "not present here" (NotFound/Unsupported) is kAbsent
// and never called again until the next Open; a collector whose Open failed otherwise is
// kFailed (the error is kept for `seqpoint status`); only kOpen collectors are measured.
//
// Threads: not thread-safe; one measurement thread drives it. stats() is read by the same
// thread (the exporter copies it through the agent's own synchronisation).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/collector.h"

namespace seqpoint::collectors {

enum class CollectorState { kClosed, kOpen, kAbsent, kFailed };
std::string_view CollectorStateName(CollectorState state);

struct CollectorStats {
  std::string name;
  CollectorState state = CollectorState::kClosed;
  Status open_status;                // why it is absent or failed
  std::string description;           // Collector::Describe() after Open and each End
  uint64_t measurements_ok = 0;      // End() returned samples
  uint64_t measurements_failed = 0;  // Begin() or End() failed
  Status last_status;                // of the last measurement
  std::string last_warnings;         // Collector::warnings() after the last End()
  double last_cost_us = 0;           // Begin() + End() wall time of the last measurement
  double total_cost_us = 0;          // over all measurements
};

// One collector's result for one measured iteration.
struct CollectorReading {
  std::string collector;
  Status status;                // OK, or why this collector has no samples this time
  std::vector<Sample> samples;  // empty unless status is OK
  size_t group = 0;             // the counter group this measurement holds
  size_t group_count = 1;
};

class CollectorSet {
 public:
  CollectorSet() = default;
  CollectorSet(CollectorSet&&) = default;
  CollectorSet& operator=(CollectorSet&&) = default;
  ~CollectorSet() { Close(); }

  void Add(std::unique_ptr<Collector> collector);

  // Opens every collector on `target`; the outcome of each is in stats().
  void Open(const Target& target);
  // Starts a measurement: for `visit` (the k-th measurement of this SeqPoint, 0-based) each
  // collector measures counter group visit % group_count.
  void Begin(uint64_t visit = 0);
  // Ends the measurement started by Begin(): one reading per open collector.
  std::vector<CollectorReading> End();
  // Ends only the collectors `which` selects (by name), leaving the others measuring: the GPU
  // collectors of a window that closes at the process's next CUDA sync end later than the CPU
  // ones (collectors/gpu/sync_window.h). A collector already ended gives no reading.
  std::vector<CollectorReading> End(const std::function<bool(std::string_view)>& which);
  // Whether a collector `which` selects was begun and not ended yet.
  bool Measuring(const std::function<bool(std::string_view)>& which) const;
  void Close();

  const std::vector<CollectorStats>& stats() const { return stats_; }
  size_t open_count() const;

 private:
  struct Entry {
    std::unique_ptr<Collector> collector;
    Status begin_status;
    double begin_cost_us = 0;
    bool begun = false;  // Begin() ran and End() has not yet
  };
  std::vector<CollectorReading> EndSome(const std::function<bool(std::string_view)>& which,
                                        bool begun_only);
  std::vector<Entry> entries_;
  std::vector<CollectorStats> stats_;  // parallel to entries_
};

}  // namespace seqpoint::collectors
