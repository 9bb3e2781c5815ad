#include "agent/energy/energy_metrics.h"

#include <string>

namespace seqpoint::daemon {

std::vector<MetricFamily> EnergyFamilies(const EnergySampler& sampler, int64_t interval_ms) {
  const EnergySamplerStats& e = sampler.stats();
  const std::string source(sampler.source_name());
  const Labels l = {{"source", source}};
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_energy_source_info",
                      "The energy counter read for energy on every iteration (value 1).")
                    .Add({{"source", source}, {"description", sampler.Describe()}}, 1));
  out.push_back(Gauge("seqpoint_energy_sample_interval_seconds",
                      "How often the energy counter is read (runs.energy_sample_interval_ms) "
                      "while training processes are watched.")
                    .Add(l, static_cast<double>(interval_ms) / 1e3));
  out.push_back(Counter("seqpoint_energy_reads_total", "Energy counter reads.")
                    .Add(l, static_cast<double>(e.reads)));
  out.push_back(Counter("seqpoint_energy_read_failures_total",
                        "Energy counter reads that failed (no iteration spans one).")
                    .Add(l, static_cast<double>(e.failures)));
  out.push_back(Counter("seqpoint_energy_slow_reads_total",
                        "Energy counter reads left out because they took over 1 ms (the "
                        "daemon was preempted): their timestamp is too uncertain.")
                    .Add(l, static_cast<double>(e.slow_reads)));
  out.push_back(
      Counter("seqpoint_energy_read_seconds_total", "Wall time spent reading the energy counter.")
          .Add(l, e.read_cost_us * 1e-6));
  if (e.interpolations > 0) {
    out.push_back(
        Gauge("seqpoint_energy_interpolation_bracket_seconds",
              "Mean width of the counter-sample brackets that iteration timestamps fell in: "
              "the time resolution of per-iteration energy (exact under constant power; the "
              "firmware's own update period, ~1-100 ms, bounds it too).")
            .Add(l, e.bracket_ns_sum / (2.0 * static_cast<double>(e.interpolations)) * 1e-9));
  }
  return out;
}

}  // namespace seqpoint::daemon
