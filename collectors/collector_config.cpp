// One table drives both the key documentation and SetCollectorOption, so they never drift.
#include "collectors/collector_config.h"

#include <functional>

namespace seqpoint::collectors {
namespace {

std::string TomlString(const std::string& s) { return "\"" + s + "\""; }

std::string TomlStrings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + TomlString(v[i]);
  return out + "]";
}

std::string TomlBool(const std::optional<bool>& b, bool registry_default) {
  return b.value_or(registry_default) ? "true" : "false";
}

using Setter = std::function<Status(CollectorConfig*, const CollectorOptionValue&)>;

struct KeyEntry {
  CollectorKeyDoc doc;
  Setter set;
};

// Points *out at the value when it holds a T; otherwise an error naming the expected type.
template <typename T>
Status Want(const CollectorOptionValue& v, std::string_view type, const T** out) {
  *out = std::get_if<T>(&v);
  return *out ? Status::Ok() : InvalidArgument("expected " + std::string(type));
}

template <typename Section>
Setter SetEnabled(Section CollectorConfig::*section) {
  return [section](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
    const bool* b = nullptr;
    SEQPOINT_RETURN_IF_ERROR(Want(v, "a boolean", &b));
    (c->*section).enabled = *b;
    return Status::Ok();
  };
}

Setter SetString(std::string* (*field)(CollectorConfig*)) {
  return [field](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
    const std::string* s = nullptr;
    SEQPOINT_RETURN_IF_ERROR(Want(v, "a string", &s));
    if (s->empty()) return InvalidArgument("expected a non-empty string");
    *field(c) = *s;
    return Status::Ok();
  };
}

Setter SetStrings(std::vector<std::string>* (*field)(CollectorConfig*)) {
  return [field](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
    const std::vector<std::string>* s = nullptr;
    SEQPOINT_RETURN_IF_ERROR(Want(v, "an array of strings", &s));
    *field(c) = *s;
    return Status::Ok();
  };
}

std::vector<KeyEntry> Keys() {
  const CollectorConfig d;
  return {
      {{"collectors.sysfs_root", "string", TomlString(d.sysfs_root),
        "root of sysfs for every collector (tests inject a fixture tree)"},
       SetString([](CollectorConfig* c) { return &c->sysfs_root; })},
      {{"collectors.proc_root", "string", TomlString(d.proc_root),
        "root of procfs for every collector (tests inject a fixture tree)"},
       SetString([](CollectorConfig* c) { return &c->proc_root; })},
      {{"collectors.perf.enabled", "boolean", TomlBool(d.perf.enabled, true),
        "perf_event_open counters on every thread of the target"},
       SetEnabled(&CollectorConfig::perf)},
      {{"collectors.perf.events", "array of strings", TomlStrings(d.perf.events),
        "perf event names (software events on every visit, hardware events in groups)"},
       SetStrings([](CollectorConfig* c) { return &c->perf.events; })},
      {{"collectors.perf.max_events_per_group", "integer",
        std::to_string(d.perf.max_events_per_group),
        "hardware events per counter group; 0 probes what the PMU schedules"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const int64_t* n = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "an integer", &n));
         if (*n < 0 || *n > 64) return InvalidArgument("expected an integer in 0..64");
         c->perf.max_events_per_group = *n;
         return Status::Ok();
       }},
      {{"collectors.perf.inherit", "boolean", d.perf.inherit ? "true" : "false",
        "also count threads and child processes the target creates after attach"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const bool* b = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "a boolean", &b));
         c->perf.inherit = *b;
         return Status::Ok();
       }},
      {{"collectors.perf.exclude_kernel", "boolean", d.perf.exclude_kernel ? "true" : "false",
        "count user space only (needed without root when perf_event_paranoid >= 2)"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const bool* b = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "a boolean", &b));
         c->perf.exclude_kernel = *b;
         return Status::Ok();
       }},
      {{"collectors.perf.pmu_trap_check", "boolean", d.perf.pmu_trap_check ? "true" : "false",
        "before counting hardware events, time a context switch with and without one; when "
        "counting makes it >= 2x and >= 2 us dearer (a hypervisor trapping PMU access), count "
        "software events only"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const bool* b = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "a boolean", &b));
         c->perf.pmu_trap_check = *b;
         return Status::Ok();
       }},
      {{"collectors.perf.in_probe", "boolean", d.perf.in_probe ? "true" : "false",
        "count the software events (at most 4) in the iteration probes at begin and end, so the "
        "window is exactly the iteration's; false, or where the kernel cannot, count them in "
        "user space from the begin wake-up (with exclude_kernel they always are)"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const bool* b = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "a boolean", &b));
         c->perf.in_probe = *b;
         return Status::Ok();
       }},
      {{"collectors.papi.enabled", "boolean", TomlBool(d.papi.enabled, false),
        "PAPI event sets (needs collectors.papi.events)"},
       SetEnabled(&CollectorConfig::papi)},
      {{"collectors.papi.events", "array of strings", TomlStrings(d.papi.events),
        "PAPI event names of any component (papi_native_avail lists them)"},
       SetStrings([](CollectorConfig* c) { return &c->papi.events; })},
      {{"collectors.rocm_smi.enabled", "boolean", TomlBool(d.rocm_smi.enabled, true),
        "AMD GPU energy, power, busy %, clocks, VRAM, temperature via ROCm SMI"},
       SetEnabled(&CollectorConfig::rocm_smi)},
      {{"collectors.nvml.enabled", "boolean", TomlBool(d.nvml.enabled, true),
        "NVIDIA GPU energy, power, utilization, clocks, memory via NVML (dlopen)"},
       SetEnabled(&CollectorConfig::nvml)},
      {{"collectors.nvml.library", "string", TomlString(d.nvml.library),
        "NVML library name or path passed to dlopen"},
       SetString([](CollectorConfig* c) { return &c->nvml.library; })},
      {{"collectors.nvml.field_ids", "array of integers", "[]",
        "extra NVML field ids (NVML_FI_*) read with nvmlDeviceGetFieldValues"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const std::vector<int64_t>* ids = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "an array of integers", &ids));
         for (int64_t id : *ids) {
           if (id <= 0 || id > 100000) return InvalidArgument("field ids are positive integers");
         }
         c->nvml.field_ids = *ids;
         return Status::Ok();
       }},
      {{"collectors.rapl.enabled", "boolean", TomlBool(d.rapl.enabled, false),
        "per-domain RAPL energy from /sys/class/powercap"},
       SetEnabled(&CollectorConfig::rapl)},
      {{"collectors.energy.enabled", "boolean", TomlBool(d.energy.enabled, true),
        "energy_uj per iteration from the best energy source present"},
       SetEnabled(&CollectorConfig::energy)},
      {{"collectors.energy.sources", "array of strings", TomlStrings(d.energy.sources),
        "energy sources in order of preference: gpu_metrics, rocm_smi, nvml, rapl"},
       [](CollectorConfig* c, const CollectorOptionValue& v) -> Status {
         const std::vector<std::string>* s = nullptr;
         SEQPOINT_RETURN_IF_ERROR(Want(v, "an array of strings", &s));
         for (const std::string& name : *s) {
           if (name != "gpu_metrics" && name != "rocm_smi" && name != "nvml" && name != "rapl") {
             return InvalidArgument("unknown energy source '" + name +
                                    "': use gpu_metrics, rocm_smi, nvml or rapl");
           }
         }
         c->energy.sources = *s;
         return Status::Ok();
       }},
  };
}

}  // namespace

std::vector<CollectorKeyDoc> CollectorConfigKeys() {
  std::vector<CollectorKeyDoc> out;
  for (KeyEntry& e : Keys()) out.push_back(e.doc);
  return out;
}

Status SetCollectorOption(CollectorConfig* config, std::string_view key,
                          const CollectorOptionValue& value) {
  for (KeyEntry& e : Keys()) {
    if (e.doc.key == key) {
      return e.set(config, value).WithContext("config key " + std::string(key));
    }
  }
  return InvalidArgument("unknown config key '" + std::string(key) +
                         "': `seqpointd --print-default-config` lists the collectors.* keys");
}

}  // namespace seqpoint::collectors
