// MeasurementController: getting out of a profiler's way (collector_backoff.h): the profiler scan, the
// vendor libraries' busy answers, and the node-wide pause. A back-off or pause closes the
// process's collectors at once, discarding a measurement under way (a profiler arriving
// mid-iteration makes it suspect); StartCollectors opens them again once nothing blocks.
#include "agent/config/log.h"
#include "agent/measure/measurement_controller.h"
#include "common/clock.h"

namespace seqpoint::daemon {
namespace {

std::string Seconds(int64_t ns) { return std::to_string(ns / 1'000'000'000) + " s"; }

}  // namespace

void MeasurementController::StopCollectors(Proc& proc) {
  proc.measuring.reset();  // its end will find no measurement: timed only
  if (!proc.collectors) return;
  proc.collectors->Close();
  proc.collectors.reset();
}

void MeasurementController::NoteBusy(pid_t pid, Proc& proc, const std::string& collector,
                          const Status& status) {
  if (!backoff_.Seen(pid, kBackoffCountersBusy, collector, status.message(), MonotonicNs(),
                     WallNs())) {
    return;
  }
  StopCollectors(proc);
  SEQPOINT_LOG(kWarn, "pid " + std::to_string(pid) + " (run " + std::to_string(proc.run_id) +
                          "): collector " + collector + " says another tool holds the counters (" +
                          status.message() + "); its collectors stop and are tried again after " +
                          Seconds(backoff_.hold_down_ns()) + " (runs.profiler_hold_down_s)");
}

void MeasurementController::ScanProcess(pid_t pid, Proc& proc, int64_t mono, int64_t wall) {
  const ProfilerPatterns& patterns = options_.profilers;
  if (patterns.libraries.empty() && patterns.commands.empty()) return;
  std::optional<ProfilerSighting> s = FindProfiler(options_.proc_root, pid, patterns);
  if (!s || !backoff_.Seen(pid, kBackoffProfiler, s->profiler, s->evidence, mono, wall)) return;
  StopCollectors(proc);
  SEQPOINT_LOG(kWarn, "pid " + std::to_string(pid) + " (run " + std::to_string(proc.run_id) +
                          ") is being profiled (" + s->evidence +
                          "): its collectors stop while the profiler is there, and resume " +
                          Seconds(backoff_.hold_down_ns()) +
                          " after it is last seen (runs.profiler_hold_down_s)");
}

void MeasurementController::ScanProfilers() { ScanProfilers(true); }

void MeasurementController::ScanPid(pid_t pid) {
  Proc* proc = registry_->Find(pid);
  if (proc != nullptr && Live()) ScanProcess(pid, *proc, MonotonicNs(), WallNs());
}

void MeasurementController::ScanProfilers(bool all) {
  const int64_t mono = MonotonicNs();
  const int64_t wall = WallNs();
  bool lifted = false;
  backoff_.Paused(mono, &lifted);
  if (lifted) SEQPOINT_LOG(kInfo, "collectors resume: the pause's duration has passed");
  // A replayed trace's pids are not this node's processes.
  if (Live()) {
    for (auto& [pid, proc] : registry_->all()) {
      if (all || backoff_.active().count(pid) > 0) ScanProcess(pid, proc, mono, wall);
    }
  }
  for (const auto& [pid, b] : backoff_.Expire(mono)) {
    SEQPOINT_LOG(kInfo, "pid " + std::to_string(pid) + ": " + b.profiler + " not seen for " +
                            Seconds(backoff_.hold_down_ns()) +
                            ": its collectors resume at the next chosen iteration (backed off " +
                            Seconds(mono - b.since_mono_ns) + ")");
  }
}

const PauseState& MeasurementController::Pause(std::optional<int64_t> duration_ns) {
  const PauseState& p = backoff_.Pause(duration_ns, MonotonicNs(), WallNs());
  for (auto& [pid, proc] : registry_->all()) StopCollectors(proc);
  SEQPOINT_LOG(kWarn, "collectors paused by command " +
                          (duration_ns ? "for " + std::to_string(*duration_ns / 1'000'000) + " ms"
                                       : std::string("until `seqpoint resume`")) +
                          ": no counter is read on this node meanwhile (iterations still timed)");
  return p;
}

bool MeasurementController::Resume() {
  const bool lifted = backoff_.Resume();
  if (lifted) SEQPOINT_LOG(kInfo, "collectors resume: `seqpoint resume`");
  return lifted;
}

std::map<pid_t, Backoff> MeasurementController::RunBackoffs(int64_t run_id) const {
  std::map<pid_t, Backoff> out;
  for (const auto& [pid, b] : backoff_.active()) {
    auto it = registry_->all().find(pid);
    if (it != registry_->all().end() && it->second.run_id == run_id) out.emplace(pid, b);
  }
  return out;
}

}  // namespace seqpoint::daemon
