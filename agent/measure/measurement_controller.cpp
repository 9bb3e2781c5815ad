// MeasurementController: opening, beginning and ending the collectors of a chosen iteration,
// and the collectors' totals. Back-off: measurement_backoff.cpp; observer effect:
// measurement_observer.cpp.
#include "agent/measure/measurement_controller.h"

#include <algorithm>

#include "agent/config/log.h"
#include "agent/runs/run_tracker.h"
#include "common/clock.h"

namespace seqpoint::daemon {

MeasurementController::MeasurementController(ProcessRegistry* registry, CollectorSetFactory factory,
                                             MeasureOptions options)
    : registry_(registry),
      factory_(std::move(factory)),
      options_(std::move(options)),
      backoff_(options_.profiler_hold_down_s * 1'000'000'000) {}

bool MeasurementController::OpenCollectors(pid_t pid, Proc& proc, RunTracker& tracker) {
  proc.collectors = std::make_unique<collectors::CollectorSet>();
  const std::set<std::string>& dropped = tracker.dropped_collectors();
  // Events the source counts at the probes are left out of the user-space collectors.
  const std::vector<std::string> in_probes =
      source_ != nullptr ? source_->ProbeCounterEvents(pid) : std::vector<std::string>{};
  for (auto& c : factory_()) {
    LeaveEventsToProbes(*c, in_probes);
    if (!dropped.count(std::string(c->name()))) proc.collectors->Add(std::move(c));
  }
  proc.collectors->Open(collectors::Target{pid, ""});
  for (const auto& st : proc.collectors->stats()) {
    CollectorTotals& t = totals_[st.name];
    t.state = std::string(collectors::CollectorStateName(st.state));
    t.last_error = st.state == collectors::CollectorState::kFailed ? st.open_status.message() : "";
    t.description = st.description;
    // What each collector measures for this process, once: for a GPU which values a window can
    // give (the energy counter's update period, GPM supported or why not).
    if (st.state == collectors::CollectorState::kOpen) {
      SEQPOINT_LOG(kInfo, "pid " + std::to_string(pid) + ": " + st.description);
    }
  }
  for (const auto& st : proc.collectors->stats()) {
    if (collectors::IsCountersBusy(st.open_status)) {
      NoteBusy(pid, proc, st.name, st.open_status);
      return false;
    }
  }
  return true;
}

void MeasurementController::StartCollectors(pid_t pid, Proc& proc, RunTracker& tracker,
                                            uint64_t iter, uint32_t group) {
  // A profiler holds the counters, or the node is paused: timed, no collector (the back-off
  // closed them already).
  // The previous window's GPU collectors are still out, waiting for a sync: decided now, before
  // they begin again (kept if a sync came, else cut short).
  (void)DecideGpuWindow(pid, /*cut=*/true);
  if (backoff_.Blocks(pid, MonotonicNs())) return;
  if (proc.rebuild && proc.collectors) {
    proc.collectors->Close();
    proc.collectors.reset();
  }
  proc.rebuild = false;
  if (!proc.collectors && factory_ && !OpenCollectors(pid, proc, tracker)) return;
  if (!proc.collectors) return;
  const bool any_open =
      std::any_of(proc.collectors->stats().begin(), proc.collectors->stats().end(),
                  [](const auto& st) { return st.state == collectors::CollectorState::kOpen; });
  if (any_open && Live()) {
    windows_.UserSpaceStart(proc.begin_probe_ns, static_cast<uint64_t>(MonotonicNs()));
  }
  proc.collectors->Begin(group);
  proc.measuring = iter;
}

MeasurementController::Measured MeasurementController::EndMeasurement(
    pid_t pid, Proc& proc, std::optional<int64_t> cpu_end_ns) {
  Measured out;
  const uint64_t iter = proc.measuring.value_or(0);
  proc.measuring.reset();
  if (!proc.collectors) return out;
  if (!cpu_end_ns) {  // discarded: nothing of it is reported, the GPU values least of all
    out.values = Tally(pid, proc, proc.collectors->End(), &out.groups);
    std::erase_if(out.values, collectors::IsGpuTimelineSample);
    return out;
  }
  // The CPU collectors end at the end marker, whatever the GPU's verdict.
  out.values =
      Tally(pid, proc,
            proc.collectors->End([](std::string_view c) {
              return !collectors::IsGpuTimelineCollector(c);
            }),
            &out.groups);
  // A collector answered busy: the back-off closed the set (its GPU window with it).
  if (!proc.collectors || !proc.collectors->Measuring(collectors::IsGpuTimelineCollector)) {
    return out;
  }
  GpuWaiting& w = gpu_waiting_[pid];
  w = GpuWaiting{proc.run_id, iter, collectors::SyncWindow(options_.gpu_sync)};
  w.window.EndCpu(*cpu_end_ns);
  std::vector<collectors::Sample> gpu;
  if (DecideGpuWindow(pid, /*cut=*/false, &gpu)) {
    for (collectors::Sample& s : gpu) out.values.push_back(std::move(s));
  } else {
    ScheduleGpuCheck();
  }
  return out;
}

std::vector<collectors::Sample> MeasurementController::Tally(
    pid_t pid, Proc& proc, const std::vector<collectors::CollectorReading>& readings,
    std::vector<CounterGroup>* groups) {
  std::vector<collectors::Sample> values;
  const auto& stats = proc.collectors->stats();
  for (const collectors::CollectorReading& r : readings) {
    CollectorTotals& t = totals_[r.collector];
    for (const auto& st : stats) {
      if (st.name != r.collector) continue;
      t.cost_us += st.last_cost_us;
      t.description = st.description;
      t.warnings = st.last_warnings;
    }
    if (!r.status.ok()) {
      ++t.failed;
      t.last_error = r.status.message();
      continue;
    }
    ++t.ok;
    for (const collectors::Sample& s : r.samples) values.push_back(s);
  }
  // Which counter group each collector held (a failed one still ran its Begin): the observer
  // effect is estimated per group.
  if (groups != nullptr) {
    for (const collectors::CollectorReading& r : readings) {
      groups->push_back({r.collector, static_cast<uint32_t>(r.group)});
    }
  }
  for (const collectors::CollectorReading& r : readings) {
    if (collectors::IsCountersBusy(r.status)) {
      NoteBusy(pid, proc, r.collector, r.status);
      break;
    }
  }
  return values;
}

void MeasurementController::DiscardUnfinished(pid_t pid, Proc& proc) {
  if (proc.measuring) (void)EndMeasurement(pid, proc);
}

MeasurementController::Measured MeasurementController::EndIteration(pid_t pid, Proc& proc,
                                                                    uint64_t iter, bool* measured) {
  // No end marker given: its delivery stands for it (late by the source's delivery time).
  return EndIteration(pid, proc, iter, static_cast<uint64_t>(MonotonicNs()), measured);
}

MeasurementController::Measured MeasurementController::EndIteration(pid_t pid, Proc& proc,
                                                                    uint64_t iter, uint64_t end_ns,
                                                                    bool* measured) {
  // A window waiting for its sync is checked at each of the process's ends too (a source
  // without a timer decides it here).
  (void)DecideGpuWindow(pid, /*cut=*/false);
  Measured m;
  *measured = proc.measuring && *proc.measuring == iter;
  if (*measured) {
    m = EndMeasurement(pid, proc,
                       end_ns > 0 ? static_cast<int64_t>(end_ns) : std::optional<int64_t>());
  }
  if (*measured && proc.probe_counters && proc.probe_counters->iter == iter) {
    windows_.TakeProbeCounters(*proc.probe_counters, &m.values);
  }
  proc.probe_counters.reset();
  return m;
}

void MeasurementController::CloseIfSpent(Proc& proc) {
  // A GPU window still waiting keeps the set open: the next call after its verdict closes it.
  for (const auto& [pid, w] : gpu_waiting_) {
    if (registry_->Find(pid) == &proc) return;
  }
  if (!proc.collectors || proc.measuring) return;
  proc.collectors->Close();
  proc.collectors.reset();
}

void MeasurementController::ProcessExited(pid_t pid, Proc& proc) {
  DiscardUnfinished(pid, proc);
  (void)DecideGpuWindow(pid, /*cut=*/true);  // a sync before its exit still closes it
  if (proc.collectors) proc.collectors->Close();
  proc.collectors.reset();
  backoff_.Forget(pid);
}

}  // namespace seqpoint::daemon
