#include "agent/control/control_metrics.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> ControlFamilies(const ControlServerStats& cs) {
  std::vector<MetricFamily> out;
  out.push_back(Counter("seqpoint_control_requests_total", "Control socket requests.")
                    .Add({}, static_cast<double>(cs.requests)));
  out.push_back(Counter("seqpoint_control_refused_total",
                        "Control clients refused (credentials or client limit).")
                    .Add({}, static_cast<double>(cs.refused)));
  return out;
}

}  // namespace seqpoint::daemon
