// Counter groups (issue 4, part 7): when the configured events do not fit one measurement pass
// (a PMU has a handful of counters; a PAPI component takes a limited set per event set), they
// are split into groups, and repeat visits of a SeqPoint rotate through them: visit k of a
// point measures group k mod G. Every event is then measured on some visits without the
// kernel multiplexing (and scaling) inside one iteration.
//
// The split is greedy and keeps the configured order: an event joins the current group when
// the probe accepts the group with it; otherwise it starts a new group; an event the probe
// rejects even alone is dropped with the probe's reason (unknown name, disabled component).
// The probe is the real thing: perf opens (and test-schedules) the group, PAPI adds the events
// to an event set; so what is accepted here is what will be measured.
//
// Threads: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint::collectors {

struct RejectedEvent {
  std::string event;
  Status reason;
};

struct EventGroups {
  std::vector<std::vector<std::string>> groups;  // each non-empty; empty list: nothing fits
  std::vector<RejectedEvent> rejected;           // events that fit no group, with the reason
};

// Returns OK when `group` can be measured in one pass.
using GroupProbe = std::function<Status(std::span<const std::string> group)>;

// max_per_group == 0: no cap beyond what the probe accepts.
EventGroups SplitIntoGroups(std::span<const std::string> events, size_t max_per_group,
                            const GroupProbe& probe);

// The group measured on the `visit`-th measurement (0-based) of a SeqPoint.
inline size_t GroupForVisit(uint64_t visit, size_t group_count) {
  return group_count == 0 ? 0 : static_cast<size_t>(visit % group_count);
}

// "a, b; c" for logs: groups separated by "; ".
std::string DescribeGroups(const EventGroups& groups);

}  // namespace seqpoint::collectors
