// Typed bookkeeping of a measured iteration: which counter group each collector held. It
// travels beside the samples (never as a sample): the observer effect is estimated per
// (collector, group), and the step join keeps one per collector whatever the rank count.
// The store keeps it as "group:<collector>" measurement rows (RunTracker writes and reads
// them; nothing else parses them).
#pragma once

#include <cstdint>
#include <string>

namespace seqpoint::daemon {

struct CounterGroup {
  std::string collector;
  uint32_t group = 0;
  bool operator==(const CounterGroup&) const = default;
};

}  // namespace seqpoint::daemon
