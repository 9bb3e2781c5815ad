// The collectors' one typed configuration (docs/architecture.md, Conventions: leveldb Options). Every field has an
// in-class default and a comment; its TOML key is `collectors.<name>.<field>` as listed by
// CollectorConfigKeys(), which the daemon uses for --print-default-config and validation, and
// SetCollectorOption() applies one key, so the two never drift.
//
// Threads: a plain value, copied into each collector at construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

// `enabled` unset means: the registry's default for that collector (CollectorInfo).
struct PerfOptions {
  std::optional<bool> enabled;  // collectors.perf.enabled (default: on)
  // Event names: perf's generic names (software: task-clock, cpu-clock, page-faults,
  // minor-faults, major-faults, context-switches, cpu-migrations; hardware: cycles,
  // instructions, cache-references, cache-misses, branch-instructions, branch-misses,
  // ref-cycles, stalled-cycles-frontend, stalled-cycles-backend; hardware cache events such as
  // L1-dcache-load-misses, LLC-load-misses) or a raw PMU event "r<hex>". Software events are
  // measured on every visit; hardware events are split into groups that fit the PMU.
  std::vector<std::string> events = {"task-clock",       "page-faults", "context-switches",
                                     "cpu-migrations",   "cycles",      "instructions",
                                     "cache-references", "cache-misses"};
  int64_t max_events_per_group = 0;  // hardware events per group; 0: probe what the PMU takes
  bool inherit = true;               // count threads and children created after Open (perf inherit)
  bool exclude_kernel = false;       // count user space only (needed when not root, paranoid >= 2)
  // Leave hardware events out where counting them makes context switches trap (VMs):
  // perf/pmu_trap_probe.h. Measured once per process, at the first Open with hardware events.
  bool pmu_trap_check = true;
  // Count the software events in the iteration probes themselves (probes/probe_counters.h):
  // windows exactly probe to probe, no user-space wake-up. Where the kernel or the events do not
  // allow it, and for hardware events, this collector counts in user space from the begin
  // wake-up instead.
  bool in_probe = true;
};

struct PapiOptions {
  std::optional<bool> enabled;  // collectors.papi.enabled (default: off; needs `events`)
  // PAPI event names of any component: presets (PAPI_TOT_INS), perf_event natives
  // (perf::TASK-CLOCK), rocm / rocp_sdk, cuda, nvml, rocm_smi, sde (sde:::Lib::counter).
  std::vector<std::string> events;
};

struct RocmSmiOptions {
  std::optional<bool> enabled;  // collectors.rocm_smi.enabled (default: on)
};

class NvmlEnergyPeriods;  // collectors/nvml/nvml_energy_periods.h
std::shared_ptr<NvmlEnergyPeriods> MakeNvmlEnergyPeriods();

struct NvmlOptions {
  std::optional<bool> enabled;                // collectors.nvml.enabled (default: on)
  std::string library = "libnvidia-ml.so.1";  // dlopen name or path of NVML
  std::vector<int64_t> field_ids;  // extra nvmlDeviceGetFieldValues ids (NVML_FI_*), e.g. 1..
  // Not a key: the GPUs' energy-counter update periods, each measured once off the event loop
  // and shared by every collector made from copies of this config (one daemon).
  std::shared_ptr<NvmlEnergyPeriods> energy_periods = MakeNvmlEnergyPeriods();
};

struct RaplOptions {
  std::optional<bool> enabled;  // collectors.rapl.enabled (default: off; `energy` uses RAPL)
};

struct EnergyOptions {
  std::optional<bool> enabled;  // collectors.energy.enabled (default: on)
  // Sources in order of preference; the first one present is used for energy_uj.
  std::vector<std::string> sources = {"gpu_metrics", "rocm_smi", "nvml", "rapl"};
};

struct CollectorConfig {
  std::string sysfs_root = "/sys";  // collectors.sysfs_root: tests inject a fixture tree
  std::string proc_root = "/proc";  // collectors.proc_root: tests inject a fixture tree
  PerfOptions perf;
  PapiOptions papi;
  RocmSmiOptions rocm_smi;
  NvmlOptions nvml;
  RaplOptions rapl;
  EnergyOptions energy;
};

// Documentation of one key.
struct CollectorKeyDoc {
  std::string_view key;       // "collectors.perf.events"
  std::string_view type;      // "boolean" | "integer" | "string" | "array of strings" | ...
  std::string default_value;  // TOML literal
  std::string_view doc;       // one line
};
std::vector<CollectorKeyDoc> CollectorConfigKeys();

// A TOML value as the daemon's parser hands it over.
using CollectorOptionValue =
    std::variant<bool, int64_t, std::string, std::vector<std::string>, std::vector<int64_t>>;

// Sets one key ("collectors.perf.events"). Unknown keys and wrong types are InvalidArgument
// errors naming the key and the expected type.
Status SetCollectorOption(CollectorConfig* config, std::string_view key,
                          const CollectorOptionValue& value);

}  // namespace seqpoint::collectors
