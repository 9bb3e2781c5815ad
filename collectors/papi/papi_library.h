// PAPI, process-wide: one PAPI_library_init per process, component and event discovery, and
// event names resolved to (code, component) with errors that carry the reason PAPI gives,
// including a disabled component's own disabled_reason ("Error libpfm4 no default PMU found").
//
// Threads: EnsurePapi() is safe from any thread (a function-local static); the rest is called
// from the agent's measurement thread only (PAPI is not initialised for threads here).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

struct PapiComponent {
  int index = -1;
  std::string name;  // "perf_event", "sde", "rocm_smi", "cuda", "nvml", ...
  std::string description;
  bool disabled = false;
  std::string disabled_reason;
  bool delayed_init = false;  // disabled only until its first event access (PAPI_EDELAY_INIT)
  bool attach = false;        // can attach an event set to another process
  int counters = 0;           // num_cntrs (hardware counters; -1/0 when not meaningful)
};

struct PapiEvent {
  std::string name;
  int code = 0;
  int component = -1;
};

// Initialises libpapi once; later calls return the first outcome.
Status EnsurePapi();

// "PAPI_ENOEVNT (Event does not exist)".
std::string PapiErrorText(int code);

Result<std::vector<PapiComponent>> ListPapiComponents();
Result<PapiComponent> PapiComponentInfo(int index);

// Native and preset events of one component, at most `max` (PAPI_enum_cmp_event).
Result<std::vector<std::string>> ListPapiEvents(int component, size_t max);

// Resolves a configured name. Unknown names and names of disabled components are errors that
// say which (NotFound / Unsupported), quoting PAPI's reason and how to list valid names.
Result<PapiEvent> ResolvePapiEvent(std::string_view name);

}  // namespace seqpoint::collectors
