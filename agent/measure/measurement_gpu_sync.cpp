// MeasurementController: where a measured window's GPU values end (collectors/gpu/sync_window.h).
// EndMeasurement ends the CPU collectors at the iteration's end marker and hands the GPU
// collectors (nvml, rocm_smi, gpu_metrics) to the rule: decided at once when the process's
// latest CUDA/HIP sync returned in the window's tail; else the window waits (one per process)
// and is checked every gpu_sync_check_ns on the source's io_context until a sync comes (read
// then, the values handed over late) or the bound passes (flagged, left out). A window still
// waiting when the process's next measured window begins, or when it exits, is decided there.
#include <algorithm>

#include "agent/config/log.h"
#include "agent/measure/measurement_controller.h"
#include "common/clock.h"

namespace seqpoint::daemon {

std::optional<collectors::SyncReading> MeasurementController::SyncMarkOf(pid_t pid,
                                                                         std::string* why) {
  if (source_ == nullptr) {
    *why = "no iteration source";
    return std::nullopt;
  }
  Result<collectors::SyncReading> mark = source_->GpuSyncMark(pid);
  if (!mark.ok()) {
    *why = mark.status().message();
    return std::nullopt;
  }
  return *mark;
}

bool MeasurementController::DecideGpuWindow(pid_t pid, bool cut,
                                            std::vector<collectors::Sample>* values) {
  auto it = gpu_waiting_.find(pid);
  if (it == gpu_waiting_.end()) return true;
  GpuWaiting& w = it->second;
  Proc* proc = registry_->Find(pid);
  if (proc == nullptr || !proc->collectors ||
      !proc->collectors->Measuring(collectors::IsGpuTimelineCollector)) {
    // Its collectors were closed meanwhile (a back-off, a pause): nothing to read.
    ++windows_.gpu().cut_short;
    windows_.gpu().last_flag = std::string(collectors::kNotClosedBySync) +
                               ": the process's collectors closed before a sync";
    gpu_waiting_.erase(it);
    return true;
  }
  std::string why;
  const std::optional<collectors::SyncReading> mark = SyncMarkOf(pid, &why);
  const collectors::SyncVerdict verdict = w.window.Check(MonotonicNs(), mark, why);
  if (verdict == collectors::SyncVerdict::kWaiting && !cut) return false;
  std::vector<collectors::Sample> gpu =
      Tally(pid, *proc, proc->collectors->End(collectors::IsGpuTimelineCollector), nullptr);
  GpuWaiting done = std::move(w);
  gpu_waiting_.erase(it);
  if (verdict != collectors::SyncVerdict::kClosed) {
    FlagGpuWindow(done, gpu, /*cut=*/verdict == collectors::SyncVerdict::kWaiting);
    return true;
  }
  GpuWindowCounts& counts = windows_.gpu();
  if (done.window.lag_ns() <= 0) {
    ++counts.closed_at_end;
  } else {
    ++counts.closed_at_sync;
    counts.lag_ns_sum += done.window.lag_ns();
    counts.lag_ns_max = std::max(counts.lag_ns_max, done.window.lag_ns());
  }
  if (values != nullptr) {
    *values = std::move(gpu);
  } else if (!gpu.empty() &&
             (!on_late_values_ || !on_late_values_(pid, done.run_id, done.iter, gpu))) {
    // The sync came, but the iteration is gone (its run closed): nothing to add them to.
    --(done.window.lag_ns() <= 0 ? counts.closed_at_end : counts.closed_at_sync);
    ++counts.no_iteration;
  }
  return true;
}

void MeasurementController::FlagGpuWindow(const GpuWaiting& w,
                                          const std::vector<collectors::Sample>& values,
                                          bool cut) {
  GpuWindowCounts& counts = windows_.gpu();
  std::string note;
  if (cut) {
    ++counts.cut_short;
    note = std::string(collectors::kNotClosedBySync) +
           ": the process's next measured window or its exit came before any sync";
  } else if (w.window.why().find("no sync probe") != std::string::npos) {
    ++counts.no_sync_probe;
    note = w.window.why();
  } else {
    ++counts.not_closed;
    note = w.window.why();
  }
  // Said once per reason and run in the log (a loop that never syncs would say it per window);
  // always counted, and the latest note is in `seqpoint status`.
  const bool first = counts.last_flag != note;
  counts.last_flag = note;
  if (first) {
    SEQPOINT_LOG(kInfo, "run " + std::to_string(w.run_id) + ", iteration " +
                            std::to_string(w.iter) + ": " + note + ": " +
                            std::to_string(values.size()) +
                            " GPU value(s) left out (seqpoint_gpu_windows_total)");
  }
}

void MeasurementController::CheckGpuWindows() {
  std::vector<pid_t> pids;
  for (const auto& [pid, w] : gpu_waiting_) pids.push_back(pid);
  for (pid_t pid : pids) (void)DecideGpuWindow(pid, /*cut=*/false);
}

void MeasurementController::ScheduleGpuCheck() {
  if (gpu_check_scheduled_ || gpu_waiting_.empty() || source_ == nullptr) return;
  std::weak_ptr<bool> alive = alive_;
  gpu_check_scheduled_ = source_->CallAfter(options_.gpu_sync_check_ns, [this, alive] {
    auto a = alive.lock();
    if (!a || !*a) return;
    gpu_check_scheduled_ = false;
    CheckGpuWindows();
    ScheduleGpuCheck();
  });
}

}  // namespace seqpoint::daemon
