#include "agent/source/source_metrics.h"

#include <string>

namespace seqpoint::daemon {

std::vector<MetricFamily> SourceFamilies(const IterationSource* source) {
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_probe_up", "1 when the iteration probes are loaded.")
                    .Add({}, source != nullptr ? 1 : 0));
  if (source == nullptr) return out;
  const SourceStats s = source->stats();
  const Labels l = {{"source", std::string(source->name())}};
  out.push_back(Counter("seqpoint_probe_events_total", "Iteration events delivered.")
                    .Add(l, static_cast<double>(s.events)));
  out.push_back(Counter("seqpoint_probe_lost_events_total",
                        "Iteration events dropped before delivery (ring buffer full).")
                    .Add(l, static_cast<double>(s.lost)));
  out.push_back(Counter("seqpoint_probe_anomalies_total",
                        "Unmatched begin/end, duplicate or out-of-range iteration events.")
                    .Add(l, static_cast<double>(s.anomalies)));
  return out;
}

}  // namespace seqpoint::daemon
