// Daemon::Families: every metric seqpointd exports on /metrics, and the per-run subset it
// uploads by remote-write. Values are in base units (seconds, joules, bytes); see
// metric_family.h for the naming rules `promtool check metrics` holds us to.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "agent/daemon/daemon.h"
#include "seqpoint/features.h"

namespace seqpoint::daemon {
namespace {

struct SelfUsage {
  double cpu_seconds = 0;
  double rss_bytes = 0;
};

// /proc/self/stat fields 14-15 (utime, stime, clock ticks); /proc/self/statm field 2 (pages).
SelfUsage ReadSelfUsage() {
  SelfUsage u;
  std::ifstream stat("/proc/self/stat");
  std::string text;
  std::getline(stat, text, '\0');  // reports a read error as badbit, never throws
  size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(text.substr(close + 2));
    std::string f;
    double ticks = 0;
    for (int i = 3; i <= 15 && rest >> f; ++i) {
      if (i >= 14) ticks += std::strtod(f.c_str(), nullptr);
    }
    u.cpu_seconds = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (statm >> size >> resident)
    u.rss_bytes = resident * static_cast<double>(sysconf(_SC_PAGESIZE));
  return u;
}

MetricFamily Gauge(std::string name, std::string help) {
  return MetricFamily{std::move(name), "gauge", std::move(help), {}};
}
MetricFamily Counter(std::string name, std::string help) {
  return MetricFamily{std::move(name), "counter", std::move(help), {}};
}

}  // namespace

std::vector<MetricFamily> Daemon::Families(bool for_upload) {
  auto info =
      Gauge("seqpoint_run_info", "A run watched on this node (value 1): its key and state.");
  auto proj = Gauge("seqpoint_run_projection",
                    "Projected whole-run total of a metric from the SeqPoints, in base units.");
  auto low = Gauge("seqpoint_run_projection_low", "Lower end of the projection's 95% interval.");
  auto high = Gauge("seqpoint_run_projection_high", "Upper end of the projection's 95% interval.");
  auto actual = Gauge("seqpoint_run_actual",
                      "Total of a cheap metric measured on every iteration: iteration time "
                      "(probe timestamps), and energy where a source is present (the node's "
                      "energy over the run's iterations, interpolated between counter samples "
                      "taken every runs.energy_sample_interval_ms; only while the run owns the "
                      "node, shared equally among its ranks).");
  auto error = Gauge("seqpoint_run_self_check_error_ratio",
                     "(projected - actual) / actual of a cheap metric (time, energy), the actual "
                     "less what measuring added (seqpoint_run_observer_excess): the live "
                     "confidence figure.");
  auto within = Gauge("seqpoint_run_self_check_within_interval",
                      "1 when the cheap metric's actual total lies inside the 95% interval.");
  auto excess = Gauge("seqpoint_run_observer_excess",
                      "What measuring added to the run's actual total (base units), estimated "
                      "from the observer-effect ratio; 0 while no slowdown is flagged.");
  auto oe_ratio = Gauge("seqpoint_run_observer_effect_ratio",
                        "Median over control/treated pairs of the collector-measured iteration's "
                        "time over the control's (each relative to its SL's mean time), per "
                        "counter group held (group=\"all\": every pair); 1 = no perturbation.");
  auto oe_low = Gauge("seqpoint_run_observer_effect_ratio_low",
                      "Lower end of the observer-effect ratio's distribution-free 95% interval.");
  auto oe_high = Gauge("seqpoint_run_observer_effect_ratio_high",
                       "Upper end of the observer-effect ratio's distribution-free 95% interval.");
  auto oe_pairs = Gauge("seqpoint_run_observer_effect_pairs",
                        "Measured iterations with a shadow behind the observer-effect ratio.");
  auto oe_flag = Gauge("seqpoint_run_observer_effect_flagged",
                       "1 when measured iterations are slower than their shadows by more than "
                       "runs.observer_effect_threshold_pct (the interval's lower end).");
  auto perturbed = Gauge("seqpoint_run_projection_perturbed",
                         "1 when a projection was fed by measured iterations the observer-effect "
                         "check found slowed by the measurement.");
  auto dropped = Gauge("seqpoint_run_collector_dropped",
                       "1 for a collector the run stopped using because it perturbed the "
                       "training (runs.observer_effect_action = \"drop\").");
  auto energy_iters = Counter("seqpoint_run_energy_iterations_total",
                              "Iterations given a share of the node's energy.");
  auto energy_unattr =
      Counter("seqpoint_run_energy_unattributed_iterations_total",
              "Timed iterations without energy: reason=shared (another run's process was alive), "
              "uncovered (counter read failed, or the iteration is older than the sample ring).");
  auto iters = Counter("seqpoint_run_iterations_total", "Iterations observed in the run.");
  auto measured = Counter("seqpoint_run_measured_iterations_total",
                          "Iterations measured by the collectors (the SeqPoints' cost).");
  auto unobserved = Counter("seqpoint_run_unobserved_iterations_total",
                            "Iteration indices never observed (agent down, events lost).");
  auto points = Gauge("seqpoint_run_seqpoints", "SeqPoints chosen so far.");
  auto allowed = Gauge("seqpoint_run_selector_budget_iterations",
                       "Iterations the selector may measure in this run now.");
  auto bins = Gauge("seqpoint_run_selector_bins", "SL bins of the run's online selector.");
  for (const auto& [id, tracker] : runs_->runs()) {
    RunSnapshot s = tracker->Snapshot(1'000'000'000);
    const std::string run = std::to_string(id);
    info.Add({{"run", run}, {"key", s.run.key}, {"state", std::string(RunStateName(s.run.state))}},
             1);
    for (const Projection& p : s.projections) {
      BaseUnit b = ToBaseUnit(p.metric, p.unit);
      Labels l = {{"run", run}, {"metric", b.name}, {"unit", b.unit}};
      proj.Add(l, p.total * b.scale);
      low.Add(l, p.low * b.scale);
      high.Add(l, p.high * b.scale);
      if (std::isfinite(p.actual)) actual.Add(l, p.actual * b.scale);
      perturbed.Add({{"run", run}, {"metric", b.name}}, p.perturbed ? 1 : 0);
    }
    for (const SelfCheck& c : tracker->self_checks()) {
      if (!c.valid) continue;
      BaseUnit b = ToBaseUnit(c.metric, c.unit);
      error.Add({{"run", run}, {"metric", b.name}}, c.error);
      within.Add({{"run", run}, {"metric", b.name}}, c.within_interval ? 1 : 0);
      excess.Add({{"run", run}, {"metric", b.name}}, c.observer_excess * b.scale);
    }
    const ObserverEffect& oe = tracker->observer_effect(config_.run_observer_threshold_pct / 100);
    std::vector<const ObserverEstimate*> estimates = {&oe.all};
    for (const ObserverEstimate& e : oe.by_group) estimates.push_back(&e);
    for (const ObserverEstimate* e : estimates) {
      if (e->pairs == 0) continue;
      Labels l = {{"run", run}, {"group", e->group.empty() ? "all" : e->group}};
      oe_ratio.Add(l, e->ratio);
      oe_low.Add(l, e->low);
      oe_high.Add(l, e->high);
      oe_pairs.Add(l, static_cast<double>(e->pairs));
    }
    oe_flag.Add({{"run", run}}, oe.flagged ? 1 : 0);
    for (const std::string& c : tracker->dropped_collectors()) {
      dropped.Add({{"run", run}, {"collector", c}}, 1);
    }
    if (energy_) {
      energy_iters.Add({{"run", run}}, static_cast<double>(tracker->energy_iterations()));
      energy_unattr.Add({{"run", run}, {"reason", "shared"}},
                        static_cast<double>(tracker->energy_shared()));
      energy_unattr.Add({{"run", run}, {"reason", "uncovered"}},
                        static_cast<double>(tracker->energy_uncovered()));
    }
    iters.Add({{"run", run}}, static_cast<double>(s.run.iterations));
    measured.Add({{"run", run}}, static_cast<double>(tracker->measured_iterations()));
    unobserved.Add({{"run", run}}, static_cast<double>(s.run.unobserved));
    points.Add({{"run", run}}, static_cast<double>(s.seqpoints.size()));
    allowed.Add({{"run", run}}, static_cast<double>(std::min<uint64_t>(tracker->selector_allowed(),
                                                                       config_.run_budget)));
    bins.Add({{"run", run}}, tracker->selector_bins());
  }
  std::vector<MetricFamily> out = {info,  proj,     low,      high,   actual,  error,   within,
                                   iters, measured, oe_ratio, oe_low, oe_high, oe_flag, perturbed};
  if (for_upload) return out;
  for (auto* f : {&unobserved, &points, &allowed, &bins, &excess, &oe_pairs, &dropped,
                  &energy_iters, &energy_unattr}) {
    out.push_back(std::move(*f));
  }
  if (energy_) {
    const EnergySamplerStats& e = energy_->stats();
    Labels l = {{"source", std::string(energy_->source_name())}};
    out.push_back(Gauge("seqpoint_energy_source_info",
                        "The energy counter read for energy on every iteration (value 1).")
                      .Add({{"source", std::string(energy_->source_name())},
                            {"description", energy_->Describe()}},
                           1));
    out.push_back(Gauge("seqpoint_energy_sample_interval_seconds",
                        "How often the energy counter is read (runs.energy_sample_interval_ms) "
                        "while training processes are watched.")
                      .Add(l, static_cast<double>(energy_interval_ms_) / 1e3));
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
  }

  out.push_back(Gauge("seqpoint_build_info", "seqpointd's version (value 1).")
                    .Add({{"version", SEQPOINT_VERSION}}, 1));
  out.push_back(Gauge("seqpoint_runs_active", "Runs being watched.")
                    .Add({}, static_cast<double>(runs_->runs().size())));
  out.push_back(Counter("seqpoint_runs_closed_total", "Runs closed since seqpointd started.")
                    .Add({}, static_cast<double>(runs_->runs_closed())));
  out.push_back(Counter("seqpoint_runs_crashed_total",
                        "Of the runs closed, those closed as crashed (a process killed by a "
                        "signal, a non-zero exit status, or an exit inside an iteration).")
                    .Add({}, static_cast<double>(runs_->runs_crashed())));
  out.push_back(Gauge("seqpoint_processes_watched", "Training processes attached.")
                    .Add({}, static_cast<double>(runs_->processes())));
  out.push_back(Gauge("seqpoint_probe_up", "1 when the iteration probes are loaded.")
                    .Add({}, source_ ? 1 : 0));
  if (source_) {
    SourceStats s = source_->stats();
    Labels l = {{"source", std::string(source_->name())}};
    out.push_back(Counter("seqpoint_probe_events_total", "Iteration events delivered.")
                      .Add(l, static_cast<double>(s.events)));
    out.push_back(Counter("seqpoint_probe_lost_events_total",
                          "Iteration events dropped before delivery (ring buffer full).")
                      .Add(l, static_cast<double>(s.lost)));
    out.push_back(Counter("seqpoint_probe_anomalies_total",
                          "Unmatched begin/end, duplicate or out-of-range iteration events.")
                      .Add(l, static_cast<double>(s.anomalies)));
  }
  auto up = Gauge("seqpoint_collector_up", "1 when the collector opened on the last process.");
  auto meas = Counter("seqpoint_collector_measurements_total", "Collector measurements by result.");
  auto cost = Counter("seqpoint_collector_cost_seconds_total",
                      "Wall time spent in the collector's Begin and End.");
  for (const auto& [name, t] : runs_->collector_totals()) {
    up.Add({{"collector", name}, {"state", t.state}}, t.state == "open" ? 1 : 0);
    meas.Add({{"collector", name}, {"result", "ok"}}, static_cast<double>(t.ok));
    meas.Add({{"collector", name}, {"result", "failed"}}, static_cast<double>(t.failed));
    cost.Add({{"collector", name}}, t.cost_us * 1e-6);
  }
  out.push_back(std::move(up));
  out.push_back(std::move(meas));
  out.push_back(std::move(cost));
  if (uploader_) {
    const UploaderStats& u = uploader_->stats();
    out.push_back(Counter("seqpoint_upload_sent_batches_total", "Remote-write requests accepted.")
                      .Add({}, static_cast<double>(u.sent_batches)));
    out.push_back(Counter("seqpoint_upload_sent_samples_total", "Samples accepted by the endpoint.")
                      .Add({}, static_cast<double>(u.sent_samples)));
    out.push_back(Counter("seqpoint_upload_failures_total", "Failed attempts, retried later.")
                      .Add({}, static_cast<double>(u.failures)));
    out.push_back(Counter("seqpoint_upload_rejected_batches_total",
                          "Batches the endpoint refused with a 4xx (dropped).")
                      .Add({}, static_cast<double>(u.rejected_batches)));
    out.push_back(Counter("seqpoint_upload_dropped_batches_total",
                          "Batches dropped because the spool was full (oldest first).")
                      .Add({}, static_cast<double>(u.dropped_batches)));
    out.push_back(Gauge("seqpoint_upload_backoff_seconds", "Current retry delay; 0 when healthy.")
                      .Add({}, static_cast<double>(u.backoff_ms) / 1000.0));
    out.push_back(Gauge("seqpoint_upload_last_success_timestamp_seconds",
                        "Unix time of the last accepted request.")
                      .Add({}, u.last_success_unix));
    if (auto spool = uploader_->spool(); spool.ok()) {
      out.push_back(Gauge("seqpoint_upload_spool_batches", "Batches waiting in the spool.")
                        .Add({}, static_cast<double>(spool->batches)));
      out.push_back(Gauge("seqpoint_upload_spool_bytes", "Bytes waiting in the spool.")
                        .Add({}, static_cast<double>(spool->bytes)));
    }
  }
  const ControlServerStats& cs = control_->stats();
  out.push_back(Counter("seqpoint_control_requests_total", "Control socket requests.")
                    .Add({}, static_cast<double>(cs.requests)));
  out.push_back(Counter("seqpoint_control_refused_total",
                        "Control clients refused (credentials or client limit).")
                    .Add({}, static_cast<double>(cs.refused)));
  out.push_back(Counter("seqpoint_store_errors_total", "Failed writes to the state database.")
                    .Add({}, static_cast<double>(runs_->store_errors())));
  out.push_back(Counter("seqpoint_config_reloads_total", "Successful SIGHUP reloads.")
                    .Add({}, static_cast<double>(reloads_)));
  SelfUsage self = ReadSelfUsage();
  out.push_back(Counter("seqpoint_agent_cpu_seconds_total", "CPU time used by seqpointd.")
                    .Add({}, self.cpu_seconds));
  out.push_back(Gauge("seqpoint_agent_resident_memory_bytes", "seqpointd's resident set size.")
                    .Add({}, self.rss_bytes));
  out.push_back(Gauge("seqpoint_agent_start_time_seconds", "Unix time seqpointd started.")
                    .Add({}, static_cast<double>(started_unix_)));
  return out;
}

}  // namespace seqpoint::daemon
