#include "agent/metrics/endpoint_metrics.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> EndpointFamilies(const MetricsServer& server) {
  const MetricsServerStats& s = server.stats();
  std::vector<MetricFamily> out;
  out.push_back(Counter("seqpoint_metrics_scrapes_total", "Requests for /metrics answered.")
                    .Add({}, static_cast<double>(s.scrapes)));
  out.push_back(Gauge("seqpoint_metrics_connections",
                      "Connections to /metrics open now (at most metrics.max_connections).")
                    .Add({}, static_cast<double>(server.connections())));
  out.push_back(Counter("seqpoint_metrics_refused_total",
                        "Connections to /metrics answered 503 because every one of "
                        "metrics.max_connections was mid-request.")
                    .Add({}, static_cast<double>(s.rejected)));
  out.push_back(
      Counter("seqpoint_metrics_closed_total",
              "Connections to /metrics closed by seqpointd: reason idle_for_new (idle, closed "
              "to make room for a new one), idle_timeout (metrics.idle_timeout_ms), "
              "header_timeout (metrics.header_timeout_ms).")
          .Add({{"reason", "idle_for_new"}}, static_cast<double>(s.idle_closed))
          .Add({{"reason", "idle_timeout"}}, static_cast<double>(s.idle_timed_out))
          .Add({{"reason", "header_timeout"}}, static_cast<double>(s.header_timed_out)));
  return out;
}

}  // namespace seqpoint::daemon
