// The one collector interface (issue 4): what the agent measures on the chosen iterations (the
// SeqPoints) and the cheap telemetry it reads on every one.
//
// Life cycle, always in this order, from one thread (the agent's measurement thread):
//   Open(target) -> { [SelectGroup(g)] -> Begin() -> End() }* -> Close()
// - Open attaches to a target: a process and all its threads (Target::pid > 0), or device-wide
//   (pid == 0; Target::device picks one device, empty = every device the collector finds).
//   A vendor path that is absent on this node (no GPU, no library, no PMU) returns NotFound or
//   Unsupported: "not present here", which CollectorSet reports as absent, never as a failure.
// - Begin/End bracket one measured iteration. End returns named values with units, each over
//   the Begin..End window: counters are deltas, gauges (power, temperature, clocks, memory) are
//   the reading at End. A value the collector cannot vouch for (counter gone backwards past a
//   wrap it cannot prove, device disappeared, EAGAIN from a driver) is left out and the
//   returned Status names it: never a crash, never a wrong number.
// - Counter groups: a collector whose configured events do not fit one pass exposes
//   group_count() > 1; SelectGroup(g) before Begin picks which group the next measurement
//   holds (CollectorSet rotates g = visit % group_count across repeat visits of a SeqPoint).
//
// Sample names are "<collector>:<event>" (e.g. "perf:task-clock", "papi:PAPI_TOT_INS",
// "rocm_smi:gpu0:power"), except the node's energy, "energy_uj" (docs/trace-csv.md
// names it as a trace metric column). Units are SI-ish strings: "ns", "count", "uJ", "W", "MHz",
// "C", "bytes", "%", "ratio".
//
// Threads: a Collector is not thread-safe; one thread drives it. Collectors never throw: code
// that calls throwing libraries catches locally (CollectorSet also guards every call).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

// What a collector attaches to.
struct Target {
  pid_t pid = 0;       // > 0: this process and every thread it has or creates; 0: device-wide
  std::string device;  // device-wide collectors: "" = all devices, else an index ("0") or a
                       // PCI address ("0000:0c:00.0"); ignored by process collectors
};

// Whom a sample belongs to. A process sample (task-clock, faults, PAPI events of an attached
// process) is that process's alone, so a data-parallel step adds its ranks' samples. A device
// sample (a GPU's energy, power, utilisation, clocks, memory; a RAPL zone; the node's energy)
// is the device's, whoever reads it: a step takes it once per device, never summed over ranks.
enum class SampleScope : uint8_t { kProcess, kDevice };
// How a sample combines over iterations. A delta (time, energy, counts) is the amount over the
// Begin..End window: it adds up, so it is projected as a whole-run total. A gauge (power,
// clocks, temperature, utilisation, memory in use, ratios, NVML field values) is a reading: it
// is reported as a mean, never summed into a total.
enum class SampleKind : uint8_t { kDelta, kGauge };

std::string_view SampleScopeName(SampleScope scope);  // "process", "device"
std::string_view SampleKindName(SampleKind kind);     // "delta", "gauge"

// One named value with its unit, its scope and its kind. Every collector sets scope and kind
// (the defaults, a process delta, are perf's and PAPI's); device samples also name the device
// by a stable id: the GPU's UUID or PCI bus id, the RAPL zone, "node" for the node's energy.
struct Sample {
  std::string name;
  double value = 0;
  std::string unit;
  SampleScope scope = SampleScope::kProcess;
  SampleKind kind = SampleKind::kDelta;
  // Every device sample; also a process's value read on one device (NVML's proc_mem_used).
  std::string device{};
};

// A device-scoped sample; a process-scoped one is the plain aggregate {name, value, unit}.
inline Sample DeviceSample(std::string name, double value, std::string unit, SampleKind kind,
                           std::string device) {
  return Sample{std::move(name),      value, std::move(unit),
                SampleScope::kDevice, kind,  std::move(device)};
}

// Scope and kind for a sample that arrives without them (a replayed trace column, a value
// read back from the store): from its name and unit, as the collectors set them. Names of the
// GPU collectors ("nvml:gpu0:power", "rocm_smi:gpu1:vram_used"), "rapl:*" and "energy_uj" are
// device samples (device = the name's device part); gauge units ("W", "MHz", "C", "%",
// "ratio", "bytes", "value") are gauges.
void InferScopeAndKind(Sample& sample);

class Collector {
 public:
  virtual ~Collector() = default;

  // Registry name ("perf", "papi", "rocm_smi", "nvml", "rapl", "energy").
  virtual std::string_view name() const = 0;

  virtual Status Open(const Target& target) = 0;
  virtual Status Begin() = 0;
  // Samples over the window since Begin(). Values left out (see file comment) are named by
  // warnings(); an error Status means the whole measurement is void.
  virtual Result<std::vector<Sample>> End() = 0;
  virtual void Close() = 0;

  // Counter groups (see file comment). Defaults: one group.
  virtual size_t group_count() const { return 1; }
  virtual Status SelectGroup(size_t group) {
    return group == 0 ? Status::Ok() : InvalidArgument("collector has a single counter group");
  }
  virtual size_t current_group() const { return 0; }

  // Non-fatal problems of the last End() (values left out, events dropped at Open), as one
  // line for logs and `seqpoint status`; empty when none.
  virtual std::string warnings() const { return {}; }
  // One line describing what is open (devices, events, groups, energy source), for logs.
  virtual std::string Describe() const { return std::string(name()); }
};

// True for the statuses that mean "this vendor path is not present on this node".
inline bool IsAbsent(const Status& s) {
  return s.code() == ErrorCode::kNotFound || s.code() == ErrorCode::kUnsupported;
}

// A vendor library answered that its counters are busy or locked by another tool (NVML's
// NVML_ERROR_IN_USE, ROCm SMI's RSMI_STATUS_BUSY): a profiler holds them. The agent then backs
// off that process's collectors (agent/measure/collector_backoff.h) instead of retrying each
// iteration. Unavailable, so callers that do not know the marker treat it as a transient error.
inline constexpr std::string_view kCountersBusyMarker = "counters busy: ";
inline Status CountersBusy(const std::string& m) {
  return Unavailable(std::string(kCountersBusyMarker) + m);
}
inline bool IsCountersBusy(const Status& s) {
  return s.code() == ErrorCode::kUnavailable &&
         s.message().find(kCountersBusyMarker) != std::string::npos;  // also under WithContext
}

}  // namespace seqpoint::collectors
