#include "agent/runs/run_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "agent/source/run_key.h"

namespace seqpoint::daemon {
namespace {

// The run's attribution labels on every uploaded series of it (those with a run label); on
// /metrics they are on seqpoint_run_info alone, joined by run, as Prometheus's info metrics are.
void AddAttribution(std::vector<MetricFamily>& families,
                    const std::map<std::string, Labels>& by_run) {
  for (MetricFamily& f : families) {
    if (f.name == "seqpoint_run_info") continue;  // carries them already
    for (MetricSample& s : f.samples) {
      auto run = std::find_if(s.labels.begin(), s.labels.end(),
                              [](const auto& l) { return l.first == "run"; });
      if (run == s.labels.end()) continue;
      auto it = by_run.find(run->second);
      if (it == by_run.end()) continue;
      s.labels.insert(s.labels.end(), it->second.begin(), it->second.end());
    }
  }
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<GpuMemoryOutlook> GpuMemoryOutlooks(const std::vector<Projection>& projections) {
  // By GPU (the name's "<collector>:gpu<i>" part): the process's memory where measured, else
  // the GPU's; the capacity of that GPU.
  std::map<std::string, const Projection*> process, device;
  std::map<std::string, const Projection*> capacity;
  for (const Projection& p : projections) {
    if (p.kind != 1) continue;
    const size_t colon = p.metric.rfind(':');
    if (colon == std::string::npos) continue;
    const std::string gpu = p.metric.substr(0, colon);
    if (EndsWith(p.metric, ":proc_mem_used")) process[gpu] = &p;
    if (EndsWith(p.metric, ":mem_used") || EndsWith(p.metric, ":vram_used")) device[gpu] = &p;
    if (EndsWith(p.metric, ":mem_total") || EndsWith(p.metric, ":vram_total")) capacity[gpu] = &p;
  }
  for (const auto& [gpu, p] : process) device.erase(gpu);
  std::vector<GpuMemoryOutlook> out;
  for (const auto* set : {&process, &device}) {
    for (const auto& [gpu, p] : *set) {
      GpuMemoryOutlook o;
      o.metric = p->metric;
      o.process = set == &process;
      o.bins = p->bins;
      if (auto c = capacity.find(gpu); c != capacity.end() && std::isfinite(c->second->peak)) {
        o.capacity_metric = c->second->metric;
        o.capacity_bytes = c->second->peak;
      }
      // Each bin's peak at the SL that read it: where the memory was needed.
      std::vector<collectors::MemoryPoint> points;
      for (const GaugeBin& b : p->bins) {
        if (b.samples == 0 || !std::isfinite(b.peak)) continue;
        points.push_back(
            {static_cast<double>(b.peak_seq_len > 0 ? b.peak_seq_len : b.bin_hi), b.peak});
      }
      o.fit = collectors::FitMemory(points, o.capacity_bytes);
      if (o.capacity_bytes <= 0) {
        o.fit.why = "the GPU's memory capacity is not reported (no " + gpu + ":mem_total or " +
                    gpu + ":vram_total sample): no SL at which it runs out can be given";
      }
      out.push_back(std::move(o));
    }
  }
  return out;
}

std::vector<MetricFamily> RunFamilies(RunManager& runs, const RunMetricsOptions& options,
                                      bool for_upload) {
  auto info = Gauge("seqpoint_run_info",
                    "A run watched on this node (value 1): its key, state, the launcher and job id "
                    "(job_id) it came from (runs.group_by), the job's step, name and world size "
                    "as its launcher set them (empty when not set), and the node; and every "
                    "layer that launched it: the Slurm job and step, the Kubernetes namespace "
                    "and pod, the launcher's run (torchrun, MPI).");
  auto proj = Gauge("seqpoint_run_projection",
                    "Projected whole-run total of a metric from the SeqPoints, in base units.");
  auto low = Gauge("seqpoint_run_projection_low", "Lower end of the projection's 95% interval.");
  auto high = Gauge("seqpoint_run_projection_high",
                    "Upper end of the projection's 95% interval; +Inf when the measured samples "
                    "cannot bound the metric (seqpoint_run_projection_bounded 0).");
  auto steady = Gauge("seqpoint_run_projection_steady_state",
                      "Projected total over the iterations after the warm-up (the warm-up is "
                      "found from every iteration's time and projected from its own samples).");
  auto bounded = Gauge("seqpoint_run_projection_bounded",
                       "0 when the measured samples cannot bound the metric (fewer than three "
                       "non-zero values, or one outweighs the rest, or fewer than 3 degrees of "
                       "freedom): the total is then an estimate nothing bounds, not a floor.");
  auto gap = Gauge("seqpoint_run_projection_unobserved",
                   "The part of the projected total that stands for the run's unobserved "
                   "iterations (agent down, events lost), estimated from the observed ones.");
  auto gmean = Gauge("seqpoint_run_gauge_mean",
                     "Time-weighted mean over the run of a gauge metric (memory in use, power, "
                     "clocks, utilisation, GPU activity): its measured iterations weighted by "
                     "their wall time, projected over the run's time strata; in base units. "
                     "Gauges are never summed into seqpoint_run_projection.");
  auto gmean_low =
      Gauge("seqpoint_run_gauge_mean_low", "Lower end of the gauge mean's 95% interval.");
  auto gmean_high = Gauge("seqpoint_run_gauge_mean_high",
                          "Upper end of the gauge mean's 95% interval; +Inf when the samples "
                          "cannot bound it (seqpoint_run_gauge_bounded 0).");
  auto gbounded = Gauge("seqpoint_run_gauge_bounded",
                        "0 when the gauge's measured samples cannot bound its mean (fewer than "
                        "3 degrees of freedom): only the mean and the peak are known.");
  auto gpeak = Gauge("seqpoint_run_gauge_peak",
                     "Highest value of a gauge metric over the run's measured iterations.");
  auto mem_exceed = Gauge("seqpoint_run_gpu_memory_exceed_seq_len",
                          "SL at which the run's GPU memory (the per-SL-bin peaks of the "
                          "process's GPU memory, fitted by a line) would reach the GPU's "
                          "capacity; only where the fit holds (3 or more bins, R^2 >= 0.9). "
                          "extrapolated=\"1\": beyond twice the largest SL measured.");
  auto mcost = Gauge("seqpoint_run_measurement_cost_seconds",
                     "The trainer's added time per measured iteration (base units), at least: "
                     "the low end of its 95% interval, 0 where that covers no slowdown, by how "
                     "it is known: source=observer (the observer-effect check's controls) or "
                     "measured (measured iterations against their SL's mean time).");
  auto moverhead = Gauge("seqpoint_run_measurement_overhead_ratio",
                         "Share of the run's timed time that measuring added, at least (the "
                         "cost per measured iteration's low end x measured iterations / the "
                         "iterations' time); runs.max_overhead caps it.");
  auto mlost = Counter("seqpoint_run_measurement_candidates_lost_total",
                       "Iterations the selector would have measured but could not: "
                       "reason=end_only (fed without a begin: the hooks were off) or "
                       "over_overhead (thinned by runs.max_overhead).");
  auto mend_only = Counter("seqpoint_run_end_only_iterations_total",
                           "Iterations fed without a begin event (begin hooks off): timed from "
                           "their end alone, never measured.");
  auto warmup = Gauge("seqpoint_run_warmup_iterations",
                      "Iterations of the run's warm-up, found from every iteration's time.");
  auto strata = Gauge("seqpoint_run_time_strata",
                      "Time strata of the run (warm-up, doubling windows, changes of cost), "
                      "each projected from its own measurements.");
  auto changes = Counter("seqpoint_run_cost_changes_total",
                         "Changes of iteration cost found by the drift detector (Page-Hinkley on "
                         "every iteration's time), by direction.");
  auto actual = Gauge("seqpoint_run_actual",
                      "Total of a cheap metric measured on every iteration: iteration time "
                      "(probe timestamps), and energy where a source is present (the node's "
                      "energy over the run's iterations, interpolated between counter samples "
                      "taken every runs.energy_sample_interval_ms; shared with the runs whose "
                      "iterations overlap it in time), and the process's CPU time where its "
                      "processes are live (every thread's, its CPU clock read every 10 ms and "
                      "interpolated).");
  auto error = Gauge("seqpoint_run_self_check_error_ratio",
                     "(projected - actual) / actual of a cheap metric (time, energy, process "
                     "CPU time), the actual less what measuring added "
                     "(seqpoint_run_observer_excess): the live confidence figure.");
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
  auto left_out = Gauge("seqpoint_run_projection_left_out",
                        "1 for a projection the agent cannot stand behind, left out of "
                        "seqpoint_run_projection and its interval, with its reason: "
                        "self_check_missed (a cheap metric's projection misses the total "
                        "measured on every iteration by more than its 95% interval allows); "
                        "0, reason empty, for a projection that stands.");
  auto dropped = Gauge("seqpoint_run_collector_dropped",
                       "1 for a collector the run stopped using because it perturbed the "
                       "training (runs.observer_effect_action = \"drop\").");
  auto energy_iters = Counter("seqpoint_run_energy_iterations_total",
                              "Iterations given a share of the node's energy.");
  auto energy_unattr = Counter(
      "seqpoint_run_energy_unattributed_iterations_total",
      "Timed iterations without energy: reason=shared (another run's process overlapped it and "
      "reported no iteration past it within 60 s), "
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
  auto backed_off = Gauge("seqpoint_run_collectors_backed_off",
                          "Processes of the run whose collectors are stopped: reason=profiler (a "
                          "profiler maps its library into the process or runs it; profiler= "
                          "what was seen) or counters_busy (a vendor library said another tool "
                          "holds the counters; profiler= the collector); 0, profiler empty, "
                          "while they run.");
  std::vector<MetricFamily*> all = {
      &info,         &proj,          &low,        &high,      &steady,     &bounded,    &warmup,
      &strata,       &changes,       &actual,     &error,     &within,     &excess,     &oe_ratio,
      &oe_low,       &oe_high,       &oe_pairs,   &oe_flag,   &perturbed,  &left_out,   &dropped,
      &energy_iters, &energy_unattr, &iters,      &measured,  &unobserved, &gap,        &points,
      &allowed,      &bins,          &backed_off, &gmean,     &gmean_low,  &gmean_high, &gbounded,
      &gpeak,        &mem_exceed,    &mcost,      &moverhead, &mlost,      &mend_only};
  SeriesCap cap(all, options.max_series);
  std::map<std::string, Labels> attribution;  // run -> labels every uploaded series carries
  for (const auto& [id, tracker] : runs.runs()) {
    cap.Begin();
    RunSnapshot s = tracker->Snapshot(1'000'000'000);
    const std::string run = std::to_string(id);
    const RunAttribution who = AttributionOf(s.run.key);
    const RunJobLabels job = runs.JobLabels(id);
    Labels info_labels = {{"run", run},
                          {"key", s.run.key.substr(0, kMaxLabelBytes)},
                          {"state", std::string(RunStateName(s.run.state))},
                          {"launcher", who.launcher},
                          {"job_id", who.job},  // not "job": Prometheus's own label
                          {"step", who.step},
                          {"job_name", job.job_name},
                          {"world_size", job.world_size},
                          {"node", options.node}};
    // Every layer that launched the job (the scheduler's and the launcher's: run_key.h).
    const Labels layers = LaunchLayerLabels(job);
    info_labels.insert(info_labels.end(), layers.begin(), layers.end());
    info.Add(info_labels, 1);
    Labels& upload_labels = attribution[run];
    Labels attributed = {{"launcher", who.launcher},
                         {"job_id", who.job},
                         {"step", who.step},
                         {"job_name", job.job_name},
                         {"world_size", job.world_size},
                         {"node", options.node}};
    attributed.insert(attributed.end(), layers.begin(), layers.end());
    for (const auto& [k, v] : attributed) {
      if (!v.empty()) upload_labels.emplace_back(k, v);  // an empty label is no label
    }
    // Processes by reason and what was seen (never by pid); 0 with profiler="" when none, so
    // an alert can tell "running" from "not exported".
    std::map<std::pair<std::string, std::string>, double> held;
    for (const auto& [pid, b] : runs.RunBackoffs(id)) held[{b.reason, b.profiler}] += 1;
    for (const char* reason : {kBackoffProfiler, kBackoffCountersBusy}) {
      bool any = false;
      for (const auto& [what, n] : held) {
        if (what.first != reason) continue;
        backed_off.Add({{"run", run}, {"reason", reason}, {"profiler", what.second}}, n);
        any = true;
      }
      if (!any) backed_off.Add({{"run", run}, {"reason", reason}, {"profiler", ""}}, 0);
    }
    for (const Projection& p : s.projections) {
      BaseUnit b = ToBaseUnit(p.metric, p.unit);
      Labels l = {{"run", run}, {"metric", b.name}, {"unit", b.unit}};
      if (p.kind == 1) {  // a gauge: its mean and peak, never a total
        gmean.Add(l, p.total * b.scale);
        gmean_low.Add(l, p.low * b.scale);
        gmean_high.Add(l, p.high * b.scale);
        gbounded.Add({{"run", run}, {"metric", b.name}}, p.bounded ? 1 : 0);
        if (std::isfinite(p.peak)) gpeak.Add(l, p.peak * b.scale);
        continue;
      }
      // Flagged: the reason, never the value. 0 with an empty reason when it stands, so an
      // alert can tell "kept" from "not exported".
      left_out.Add({{"run", run}, {"metric", b.name}, {"reason", p.left_out}},
                   p.left_out.empty() ? 0 : 1);
      if (!p.left_out.empty()) {
        if (std::isfinite(p.actual)) actual.Add(l, p.actual * b.scale);
        continue;
      }
      proj.Add(l, p.total * b.scale);
      low.Add(l, p.low * b.scale);
      high.Add(l, p.high * b.scale);
      if (std::isfinite(p.actual)) actual.Add(l, p.actual * b.scale);
      perturbed.Add({{"run", run}, {"metric", b.name}}, p.perturbed ? 1 : 0);
      bounded.Add({{"run", run}, {"metric", b.name}}, p.bounded ? 1 : 0);
      if (std::isfinite(p.steady_total)) steady.Add(l, p.steady_total * b.scale);
      gap.Add(l, p.gap_total * b.scale);  // 0 while every iteration was seen
    }
    for (const GpuMemoryOutlook& m : GpuMemoryOutlooks(s.projections)) {
      if (!m.fit.supported || !m.fit.exceed_sl) continue;
      mem_exceed.Add(
          {{"run", run}, {"metric", m.metric}, {"extrapolated", m.fit.extrapolated ? "1" : "0"}},
          *m.fit.exceed_sl);
    }
    // The same age as the projections above: one scrape, one recompute, one instant.
    for (const SelfCheck& c : tracker->self_checks(1'000'000'000)) {
      if (!c.valid) continue;
      BaseUnit b = ToBaseUnit(c.metric, c.unit);
      error.Add({{"run", run}, {"metric", b.name}}, c.error);
      within.Add({{"run", run}, {"metric", b.name}}, c.within_interval ? 1 : 0);
      excess.Add({{"run", run}, {"metric", b.name}}, c.observer_excess * b.scale);
    }
    const ObserverEffect& oe = tracker->observer_effect(options.observer_threshold);
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
    if (options.energy) {
      energy_iters.Add({{"run", run}}, static_cast<double>(tracker->energy_iterations()));
      energy_unattr.Add({{"run", run}, {"reason", "shared"}},
                        static_cast<double>(tracker->energy_shared()));
      energy_unattr.Add({{"run", run}, {"reason", "uncovered"}},
                        static_cast<double>(tracker->energy_uncovered()));
    }
    const MeasurementCost mc = tracker->measurement_cost();
    if (mc.source != "none") {
      mcost.Add({{"run", run}, {"source", mc.source}}, mc.per_measured_ns * 1e-9);
      moverhead.Add({{"run", run}}, mc.share);
    }
    mlost.Add({{"run", run}, {"reason", "end_only"}}, static_cast<double>(mc.missed));
    mlost.Add({{"run", run}, {"reason", "over_overhead"}}, static_cast<double>(mc.over_budget));
    mend_only.Add({{"run", run}}, static_cast<double>(mc.end_only));
    const selector::TimeStrata& ts = tracker->strata();
    warmup.Add({{"run", run}}, static_cast<double>(ts.warmup_end()));
    strata.Add({{"run", run}}, static_cast<double>(ts.Strata().size()));
    double up = 0, down = 0;
    for (const selector::TimeChange& c : ts.changes()) (c.direction > 0 ? up : down) += 1;
    changes.Add({{"run", run}, {"direction", "slower"}}, up);
    changes.Add({{"run", run}, {"direction", "faster"}}, down);
    iters.Add({{"run", run}}, static_cast<double>(s.run.iterations));
    measured.Add({{"run", run}}, static_cast<double>(tracker->measured_iterations()));
    unobserved.Add({{"run", run}}, static_cast<double>(s.run.unobserved));
    points.Add({{"run", run}}, static_cast<double>(s.seqpoints.size()));
    allowed.Add({{"run", run}}, static_cast<double>(std::min<uint64_t>(tracker->selector_allowed(),
                                                                       options.budget)));
    bins.Add({{"run", run}}, tracker->selector_bins());
    if (!cap.Commit() && options.ledger != nullptr) options.ledger->overflowed.insert(id);
  }
  if (options.ledger != nullptr && !for_upload) {
    options.ledger->exported = cap.kept();
    options.ledger->dropped = cap.dropped();
  }
  // Uploaded too: whatever a whole-run total stands on, including what was never seen.
  std::vector<MetricFamily> out = {info,       proj,     low,       high,       steady,  bounded,
                                   gap,        actual,   error,     within,     iters,   measured,
                                   unobserved, oe_ratio, oe_low,    oe_high,    oe_flag, perturbed,
                                   left_out,   gmean,    gmean_low, gmean_high, gpeak};
  if (for_upload) {
    AddAttribution(out, attribution);
    return out;
  }
  for (auto* f : {&gbounded, &mem_exceed, &mcost, &moverhead, &mlost, &mend_only, &warmup, &strata,
                  &changes, &points, &allowed, &bins, &excess, &oe_pairs, &dropped, &energy_iters,
                  &energy_unattr, &backed_off}) {
    out.push_back(std::move(*f));
  }
  return out;
}

std::vector<MetricFamily> RunManagerFamilies(const RunManager& runs) {
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_runs_active", "Runs being watched.")
                    .Add({}, static_cast<double>(runs.runs().size())));
  out.push_back(Counter("seqpoint_runs_closed_total", "Runs closed since seqpointd started.")
                    .Add({}, static_cast<double>(runs.runs_closed())));
  out.push_back(Counter("seqpoint_runs_crashed_total",
                        "Of the runs closed, those closed as crashed (a process killed by a "
                        "signal, a non-zero exit status, or an exit inside an iteration).")
                    .Add({}, static_cast<double>(runs.runs_crashed())));
  out.push_back(Gauge("seqpoint_processes_watched", "Training processes attached.")
                    .Add({}, static_cast<double>(runs.processes())));
  auto up = Gauge("seqpoint_collector_up",
                  "1 while the collector measures on this node: it opened on the last process "
                  "(state) and nothing stops it (reason: \"\"). 0 with the reason it does not: "
                  "open_failed, absent (no such hardware or library here), paused (`seqpoint "
                  "pause`), observer_effect (a node-wide drop after it slowed a run, "
                  "runs.observer_effect_node_drop_s).");
  const std::map<std::string, NodeDrop> dropped = runs.node_dropped();
  const bool paused = runs.backoff().pause().paused;
  auto meas = Counter("seqpoint_collector_measurements_total", "Collector measurements by result.");
  auto cost = Counter("seqpoint_collector_cost_seconds_total",
                      "Wall time spent in the collector's Begin and End.");
  for (const auto& [name, t] : runs.collector_totals()) {
    const std::string reason = t.state == "failed"   ? "open_failed"
                               : t.state == "absent" ? "absent"
                               : paused              ? "paused"
                               : dropped.count(name) ? "observer_effect"
                               : t.state != "open"   ? t.state
                                                     : "";
    up.Add({{"collector", name}, {"state", t.state}, {"reason", reason}}, reason.empty() ? 1 : 0);
    meas.Add({{"collector", name}, {"result", "ok"}}, static_cast<double>(t.ok));
    meas.Add({{"collector", name}, {"result", "failed"}}, static_cast<double>(t.failed));
    cost.Add({{"collector", name}}, t.cost_us * 1e-6);
  }
  out.push_back(std::move(up));
  out.push_back(std::move(meas));
  out.push_back(std::move(cost));
  out.push_back(Counter("seqpoint_store_errors_total", "Failed writes to the state database.")
                    .Add({}, static_cast<double>(runs.store_errors())));
  return out;
}

}  // namespace seqpoint::daemon

namespace seqpoint::daemon {

std::vector<MetricFamily> BackoffFamilies(const RunManager& runs) {
  const CollectorBackoff& b = runs.backoff();
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_collectors_paused",
                      "1 while `seqpoint pause` holds every collector of the node stopped "
                      "(iterations are still timed).")
                    .Add({}, b.pause().paused ? 1 : 0));
  auto started = Counter("seqpoint_collector_backoffs_total",
                         "Back-offs begun: a process's collectors stopped because a profiler was "
                         "seen on it (reason=profiler) or a vendor library said its counters are "
                         "busy (reason=counters_busy); each lasts until none is seen for "
                         "runs.profiler_hold_down_s.");
  for (const char* reason : {kBackoffProfiler, kBackoffCountersBusy}) {
    auto it = b.stats().started.find(reason);
    started.Add({{"reason", reason}},
                it == b.stats().started.end() ? 0 : static_cast<double>(it->second));
  }
  out.push_back(std::move(started));
  out.push_back(Counter("seqpoint_collector_pauses_total", "`seqpoint pause` commands received.")
                    .Add({}, static_cast<double>(b.stats().pauses)));
  return out;
}

}  // namespace seqpoint::daemon
