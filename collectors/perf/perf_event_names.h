// Event names -> perf_event_attr, with the names `perf list` uses for the generic events
// (tools/perf/util/parse-events.c) plus raw PMU events "r<hex>" (config = hex, PERF_TYPE_RAW).
// Whether a hardware event is really countable is only known by opening it: the name table
// says what the name means, perf_event_open says whether this machine has it.
//
// Threads: pure functions over constant tables.
#pragma once

#include <linux/perf_event.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

struct PerfEventSpec {
  std::string name;        // as configured
  perf_event_attr attr{};  // type and config set; the rest is filled by the opener
  bool software = false;   // PERF_TYPE_SOFTWARE: needs no PMU counter
  std::string unit;        // "ns" for the clocks, "count" otherwise
};

// An unknown name is InvalidArgument naming it and listing the accepted forms.
Result<PerfEventSpec> ParsePerfEvent(std::string_view name);

// Every name ParsePerfEvent accepts besides raw events (for --help and error messages).
std::vector<std::string> KnownPerfEventNames();

}  // namespace seqpoint::collectors
