// See sync_window.h.
#include "collectors/gpu/sync_window.h"

#include <algorithm>

namespace seqpoint::collectors {

std::string_view SyncVerdictName(SyncVerdict v) {
  switch (v) {
    case SyncVerdict::kWaiting:
      return "waiting for a sync";
    case SyncVerdict::kClosed:
      return "closed by a sync";
    case SyncVerdict::kNotClosed:
      return kNotClosedBySync;
  }
  return "?";
}

void SyncWindow::EndCpu(int64_t cpu_end_ns) {
  cpu_end_ns_ = cpu_end_ns;
  sync_ns_ = -1;
  verdict_ = SyncVerdict::kWaiting;
  why_.clear();
}

SyncVerdict SyncWindow::Check(int64_t now_ns, const std::optional<SyncReading>& mark,
                              const std::string& no_probe_why) {
  if (verdict_ != SyncVerdict::kWaiting) return verdict_;
  if (cpu_end_ns_ < 0) {
    verdict_ = SyncVerdict::kNotClosed;
    why_ = std::string(kNotClosedBySync) + ": no CPU end was given";
    return verdict_;
  }
  if (!mark) {
    verdict_ = SyncVerdict::kNotClosed;
    why_ = std::string(kNotClosedBySync) + ": no sync probe on the process" +
           (no_probe_why.empty() ? "" : " (" + no_probe_why + ")");
    return verdict_;
  }
  // The latest return is in the window's tail (the GPU had caught up at the end), or after the
  // end (a sync came after it; the first one came no later than this one).
  // A return past the bound does not count, however soon it is seen: the verdict is the
  // marks', not the checking thread's timing.
  if (mark->count > 0 && mark->last_ns >= cpu_end_ns_ - options_.tail_ns &&
      mark->last_ns <= cpu_end_ns_ + options_.bound_ns) {
    verdict_ = SyncVerdict::kClosed;
    sync_ns_ = mark->last_ns;
    return verdict_;
  }
  if (now_ns - cpu_end_ns_ > options_.bound_ns ||
      (mark->count > 0 && mark->last_ns > cpu_end_ns_ + options_.bound_ns)) {
    verdict_ = SyncVerdict::kNotClosed;
    why_ = std::string(kNotClosedBySync) + ": no CUDA/HIP sync within " +
           std::to_string(options_.bound_ns / 1'000'000) +
           " ms of the window's CPU end (the GPU may still have been running its work)";
  }
  return verdict_;
}

bool IsGpuTimelineSample(const Sample& s) {
  if (s.scope != SampleScope::kDevice) return false;
  for (std::string_view prefix : {"nvml:", "rocm_smi:", "gpu_metrics:"}) {
    if (std::string_view(s.name).starts_with(prefix)) return true;
  }
  return false;
}

bool IsGpuTimelineCollector(std::string_view collector) {
  return collector == "nvml" || collector == "rocm_smi" || collector == "gpu_metrics";
}

std::string ApplySyncVerdict(const SyncWindow& window, std::vector<Sample>* samples) {
  if (window.verdict() == SyncVerdict::kClosed) return "";
  const size_t before = samples->size();
  std::erase_if(*samples, IsGpuTimelineSample);
  const size_t removed = before - samples->size();
  if (removed == 0) return "";
  const std::string why = window.verdict() == SyncVerdict::kWaiting
                              ? std::string(kNotClosedBySync) + ": still waiting for one"
                              : window.why();
  return why + ": " + std::to_string(removed) + " GPU value(s) left out";
}

}  // namespace seqpoint::collectors
