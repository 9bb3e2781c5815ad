#include "collectors/counter_groups.h"

namespace seqpoint::collectors {

EventGroups SplitIntoGroups(std::span<const std::string> events, size_t max_per_group,
                            const GroupProbe& probe) {
  EventGroups out;
  std::vector<std::string> current;
  auto flush = [&] {
    if (!current.empty()) out.groups.push_back(std::move(current));
    current.clear();
  };
  for (const std::string& event : events) {
    bool duplicate = false;
    for (const auto& g : out.groups) {
      for (const auto& e : g) duplicate |= (e == event);
    }
    for (const auto& e : current) duplicate |= (e == event);
    if (duplicate) {
      out.rejected.push_back(
          {event, InvalidArgument("event '" + event + "' is configured twice; remove one")});
      continue;
    }
    if (!current.empty() && (max_per_group == 0 || current.size() < max_per_group)) {
      std::vector<std::string> candidate = current;
      candidate.push_back(event);
      if (probe(candidate).ok()) {
        current = std::move(candidate);
        continue;
      }
    }
    // Does it fit alone? If not, no group will take it.
    std::vector<std::string> alone = {event};
    Status s = probe(alone);
    if (!s.ok()) {
      out.rejected.push_back({event, s});
      continue;
    }
    flush();
    current = std::move(alone);
  }
  flush();
  return out;
}

std::string DescribeGroups(const EventGroups& groups) {
  std::string out;
  for (size_t g = 0; g < groups.groups.size(); ++g) {
    if (g) out += "; ";
    for (size_t i = 0; i < groups.groups[g].size(); ++i) {
      if (i) out += ", ";
      out += groups.groups[g][i];
    }
  }
  return out;
}

}  // namespace seqpoint::collectors
