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
                        "Energy counter reads that took over 1 ms (a slow source, or the reader "
                        "was preempted): kept, their timestamp as uncertain as the read was long, "
                        "unless longer than the counter's update period too "
                        "(seqpoint_energy_reads_left_out_total).")
                    .Add(l, static_cast<double>(e.slow_reads)));
  out.push_back(Counter("seqpoint_energy_reads_left_out_total",
                        "Energy counter reads left out: longer than 1 ms and than the counter's "
                        "update period, so the value may be either of two updates.")
                    .Add(l, static_cast<double>(e.unplaced)));
  out.push_back(Counter("seqpoint_energy_reads_skipped_total",
                        "Sampling ticks that found the previous read still in flight (a slow or "
                        "hung source): no read was queued behind it.")
                    .Add(l, static_cast<double>(e.skipped)));
  out.push_back(Counter("seqpoint_energy_read_seconds_total",
                        "Wall time spent reading the energy counter, on the reader's own thread.")
                    .Add(l, e.read_cost_us * 1e-6));
  out.push_back(Counter("seqpoint_energy_loop_seconds_total",
                        "Wall time the daemon's event loop spent in the energy sampler (filing "
                        "finished reads; it never waits for one).")
                    .Add(l, e.loop_ns * 1e-9));
  if (e.calibration.done) {
    out.push_back(Gauge("seqpoint_energy_update_period_seconds",
                        "The energy source's own update period, measured at open from reads "
                        "100 us apart (an upper bound when no two changes were seen by on-time "
                        "reads): a value is up to this old when read, and iterations inherit "
                        "that uncertainty.")
                      .Add(l, static_cast<double>(e.calibration.update_ns) * 1e-9));
  }
  out.push_back(Counter("seqpoint_energy_smeared_iterations_total",
                        "Iterations given energy whose worst-case error under constant power "
                        "exceeds 10% of it (an update period and the reads' duration, against "
                        "the iteration's): the value is spread over its neighbours, their sums "
                        "stay exact.")
                    .Add(l, static_cast<double>(e.smeared)));
  if (e.interpolations > 0) {
    out.push_back(
        Gauge("seqpoint_energy_interpolation_bracket_seconds",
              "Mean width of the counter-sample brackets that iteration timestamps fell in: "
              "the time resolution of per-iteration energy (exact under constant power).")
            .Add(l, e.bracket_ns_sum / (2.0 * static_cast<double>(e.interpolations)) * 1e-9));
    out.push_back(Gauge("seqpoint_energy_uncertainty_ratio",
                        "Mean worst-case relative error under constant power of the iterations "
                        "given energy (over 0.1: smeared).")
                      .Add(l, e.uncertainty_sum / static_cast<double>(e.interpolations)));
  }
  return out;
}

}  // namespace seqpoint::daemon
