// Daemon::HandleControl: the JSON answers of the control protocol (control_protocol.h).
// Active runs are answered from memory (live), closed runs from the state database.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "agent/daemon/daemon.h"
#include "agent/fleet/slow_rank_view.h"
#include "agent/runs/run_metrics.h"
#include "agent/source/run_key.h"
#include "agent/store/measured_devices.h"
#include "common/clock.h"
#include "seqpoint/features.h"

namespace seqpoint::daemon {
namespace {

using nlohmann::json;

// The devices a run's measured values came from (measured_devices.h): GPUs by UUID.
json DevicesJson(const MeasuredDevices& d) {
  json list = json::array();
  for (const MeasuredDevice& x : d.devices) {
    list.push_back({{"device", x.device},
                    {"collectors", x.collectors},
                    {"iterations", x.iterations},
                    {"values", x.values}});
  }
  return list;
}

json AttachedJson(const AttachedProcess& a) {
  return {{"pid", a.pid},     {"comm", a.comm},     {"probe", a.probe},
          {"where", a.where}, {"detail", a.detail}, {"run_started", a.announced}};
}

// The run's time strata: the warm-up found, the strata and the changes of cost.
json StrataJson(const selector::TimeStrata& t) {
  json strata = json::array();
  for (const selector::Stratum& s : t.Strata()) {
    strata.push_back(
        {{"begin", s.begin}, {"kind", std::string(selector::StratumKindName(s.kind))}});
  }
  json changes = json::array();
  for (const selector::TimeChange& c : t.changes()) {
    json bin = c.sl_hi == 0 ? json(nullptr) : json{c.sl_lo, c.sl_hi};
    changes.push_back({{"ordinal", c.ordinal},
                       {"bin", bin},
                       {"direction", c.direction > 0 ? "slower" : "faster"},
                       {"ratio", c.ratio > 0 ? json(c.ratio) : json(nullptr)}});
  }
  return {{"warmup_end", t.warmup_end()},
          {"warmup_settled", t.warmup_settled()},
          {"strata", strata},
          {"changes", changes}};
}

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// The labels of a run beyond its key: the job's name and world size (known while the run is
// active: read from its ranks' environment) and the node.
void AddJobLabels(json& run, const RunJobLabels& job, const std::string& node) {
  run["job_name"] = job.job_name;
  run["world_size"] = job.world_size;
  run["node"] = node;
  for (const auto& [k, v] : LaunchLayerLabels(job)) run[k] = v;
}

// Processes whose collectors are stopped for a profiler or a busy answer (collector_backoff.h).
json BackoffsJson(const std::map<pid_t, Backoff>& backoffs) {
  json out = json::array();
  for (const auto& [pid, b] : backoffs) {
    out.push_back({{"pid", pid},
                   {"reason", b.reason},
                   {"profiler", b.profiler},
                   {"evidence", b.evidence},
                   {"since_unix_ns", b.since_unix_ns}});
  }
  return out;
}

json RunJson(const RunRecord& r) {
  const RunAttribution who = AttributionOf(r.key);
  return {{"id", r.id},
          {"key", r.key},
          {"launcher", who.launcher},
          {"job_id", who.job},
          {"step", who.step},
          {"state", std::string(RunStateName(r.state))},
          {"end_reason", r.end_reason},
          {"started_unix_ns", r.started_unix_ns},
          {"updated_unix_ns", r.updated_unix_ns},
          {"ended_unix_ns", r.ended_unix_ns},
          {"pids", r.pids},
          {"iterations", r.iterations},
          {"max_iter", r.max_iter},
          {"unobserved", r.unobserved},
          // Of `unobserved`: iterations a process ran before the probes attached.
          {"unobserved_before_attach", r.unobserved_before_attach}};
}

std::string Day(int64_t day) {
  std::time_t t = static_cast<std::time_t>(day * 86400);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

json SelfCheckJson(const SelfCheck& c) {
  return {{"metric", c.metric},
          {"unit", c.unit},
          {"projected", c.projected},
          {"low", c.low},
          {"high", c.high},
          {"actual", c.actual},
          {"observer_excess", c.observer_excess},
          {"observer_ratio", c.observer_ratio},
          {"error", c.error},
          {"within_interval", c.within_interval}};
}

json EstimateJson(const ObserverEstimate& e) {
  return {{"group", e.group.empty() ? "all" : e.group},
          {"pairs", e.pairs},
          {"ratio", e.pairs ? Num(e.ratio) : json(nullptr)},
          {"low", e.pairs ? Num(e.low) : json(nullptr)},
          {"high", e.pairs ? Num(e.high) : json(nullptr)},
          {"above_threshold", e.above},
          {"evidence", Num(e.evidence)},
          {"evidence_needed", e.alpha > 0 ? Num(1 / e.alpha) : json(nullptr)},
          {"flagged", e.flagged}};
}

// A data-parallel run's ranks (step_join.h): how many the launcher announced, which are live,
// lagging or stopped (and why), and how many steps were joined, chosen but not whole, or late.
json RanksJson(const StepJoin& j) {
  static const char* const kStatus[] = {"live", "lagging", "stopped"};
  json ranks = json::array();
  for (const auto& [pid, r] : j.ranks()) {
    ranks.push_back({{"pid", pid},
                     {"rank", r.rank >= 0 ? json(r.rank) : json(nullptr)},
                     {"status", kStatus[static_cast<int>(r.status)]},
                     {"iterations", r.iterations},
                     {"late", r.late},
                     {"stopped", r.stopped}});
  }
  return {{"expected", j.expected_ranks() ? json(j.expected_ranks()) : json(nullptr)},
          {"world_size", j.world_size() ? json(j.world_size()) : json(nullptr)},
          {"unseen", j.unseen_ranks()},
          {"lead_pid", j.lead()},
          {"steps", j.steps()},
          {"partial_steps", j.partial_steps()},
          {"late_iterations", j.late_iterations()},
          {"counters_left_out", j.counters_left_out()},
          {"last_left_out", j.last_left_out()},
          {"ranks", ranks}};
}

json ObserverJson(const ObserverEffect& oe, const std::set<std::string>& dropped) {
  json groups = json::array();
  for (const ObserverEstimate& e : oe.by_group) groups.push_back(EstimateJson(e));
  return {{"method",
           "median over control/treated pairs of (time(treated) / mean time of its SL) / "
           "(time(control) / mean time of its SL), distribution-free 95% interval; flagged by "
           "an always-valid sequential sign test of ratio > 1 + threshold (evidence >= "
           "evidence_needed), at most 1% false alarms per run over all looks and groups"},
          {"threshold", oe.threshold},
          {"flagged", oe.flagged},
          {"all", EstimateJson(oe.all)},
          {"groups", groups},
          {"blamed_collectors", oe.flagged ? oe.FlaggedCollectors() : std::vector<std::string>{}},
          {"dropped_collectors", std::vector<std::string>(dropped.begin(), dropped.end())}};
}

json SnapshotJson(const RunSnapshot& s, const std::vector<SelfCheck>& checks) {
  json j;
  j["run"] = RunJson(s.run);
  json hist = json::array();
  for (const HistogramBin& b : s.histogram) {
    hist.push_back({{"seq_len", b.seq_len},
                    {"count", b.count},
                    {"time_ns_mean", b.count ? Num(b.time_ns_sum / b.count) : json(nullptr)},
                    {"energy_uj_mean",
                     b.energy_count ? Num(b.energy_uj_sum / b.energy_count) : json(nullptr)}});
  }
  j["histogram"] = hist;
  json points = json::array();
  for (const SeqPointRecord& p : s.seqpoints) {
    points.push_back({{"iter", p.iter},
                      {"iters", p.iters},
                      {"pids", p.pids},
                      {"seq_len", p.seq_len},
                      {"weight", p.weight},
                      {"bin", {p.bin_lo, p.bin_hi}}});
  }
  j["seqpoints"] = points;
  json proj = json::object();
  json gauges = json::object();
  for (const Projection& p : s.projections) {
    if (p.kind == 1) {  // a gauge: time-weighted mean with its interval, peak, per SL bin
      json bins = json::array();
      for (const GaugeBin& b : p.bins) {
        bins.push_back({{"bin", {b.bin_lo, b.bin_hi}},
                        {"mean", Num(b.mean)},
                        {"peak", Num(b.peak)},
                        {"peak_seq_len", b.peak_seq_len},
                        {"samples", b.samples}});
      }
      gauges[p.metric] = {{"unit", p.unit},
                          {"mean", Num(p.total)},
                          {"low", Num(p.low)},
                          {"high", Num(p.high)},
                          {"bounded", p.bounded},
                          {"peak", Num(p.peak)},
                          {"measured", p.measured},
                          {"perturbed", p.perturbed},
                          {"bins", bins}};
      continue;
    }
    if (!p.left_out.empty()) {  // flagged and left out: why, and the truth where it is known
      proj[p.metric] = {{"unit", p.unit},
                        {"left_out", p.left_out},
                        {"left_out_detail", p.left_out_detail},
                        {"total", nullptr},
                        {"low", nullptr},
                        {"high", nullptr},
                        {"actual", Num(p.actual)},
                        {"measured", p.measured}};
      continue;
    }
    proj[p.metric] = {{"unit", p.unit},
                      {"total", Num(p.total)},
                      {"low", Num(p.low)},
                      {"high", Num(p.high)},
                      {"actual", Num(p.actual)},
                      {"measured", p.measured},
                      {"perturbed", p.perturbed},
                      {"bounded", p.bounded},
                      {"steady_state",
                       {{"total", Num(p.steady_total)},
                        {"low", Num(p.steady_low)},
                        {"high", Num(p.steady_high)}}}};
    // The part of the whole-run total that stands for iterations never observed.
    if (s.run.unobserved > 0) {
      proj[p.metric]["unobserved"] = {{"iterations", s.run.unobserved},
                                      {"total", Num(p.gap_total)},
                                      {"low", Num(p.gap_low)},
                                      {"high", Num(p.gap_high)}};
    }
  }
  j["projections"] = proj;
  j["gauges"] = gauges;
  // GPU memory per SL bin and the SL at which it would run out (run_metrics.h).
  json memory = json::array();
  for (const GpuMemoryOutlook& m : GpuMemoryOutlooks(s.projections)) {
    json bins = json::array();
    for (const GaugeBin& b : m.bins) {
      bins.push_back({{"bin", {b.bin_lo, b.bin_hi}},
                      {"peak_bytes", Num(b.peak)},
                      {"peak_seq_len", b.peak_seq_len}});
    }
    memory.push_back(
        {{"metric", m.metric},
         {"scope", m.process ? "process" : "device"},
         {"capacity_metric", m.capacity_metric},
         {"capacity_bytes", m.capacity_bytes > 0 ? Num(m.capacity_bytes) : json(nullptr)},
         {"bins", bins},
         {"fit",
          {{"supported", m.fit.supported},
           {"bytes_per_sl", m.fit.supported ? Num(m.fit.bytes_per_sl) : json(nullptr)},
           {"intercept_bytes", m.fit.supported ? Num(m.fit.intercept_bytes) : json(nullptr)},
           {"r2", m.fit.supported ? Num(m.fit.r2) : json(nullptr)},
           {"exceed_seq_len",
            m.fit.supported && m.fit.exceed_sl ? Num(*m.fit.exceed_sl) : json(nullptr)},
           {"extrapolated", m.fit.extrapolated},
           {"why", m.fit.why}}}});
  }
  j["gpu_memory"] = memory;
  json all_checks = json::object();
  for (const SelfCheck& c : checks) {
    if (!c.valid) continue;
    all_checks[c.metric] = SelfCheckJson(c);
    if (c.metric == "time_ns") j["self_check"] = SelfCheckJson(c);  // the headline figure
  }
  j["self_checks"] = all_checks;
  return j;
}

}  // namespace

json Daemon::StatusJson() {
  json j;
  j["version"] = SEQPOINT_VERSION;
  j["pid"] = getpid();
  j["started_unix"] = started_unix_;
  j["state_db"] = config_.StateDbPath();
  j["control_socket"] = config_.ControlSocketPath();
  std::string listen = config_.metrics_listen;
  if (metrics_ && listen.rfind(':') != std::string::npos) {  // the port the kernel gave for :0
    listen = listen.substr(0, listen.rfind(':') + 1) + std::to_string(metrics_->port());
  }
  j["metrics_listen"] = listen;
  j["runs_active"] = runs_->runs().size();
  j["runs_closed"] = runs_->runs_closed();
  j["processes"] = runs_->processes();
  j["store_errors"] = runs_->store_errors();
  j["store"] = StoreJson();  // unhealthy while it cannot be written (daemon_store.cpp)
  // Runs this start could not restore (a damaged checkpoint or log, a newer format): set aside,
  // their stored totals kept (docs/failure-modes.md).
  json aside = json::array();
  for (const SetAsideRun& a : runs_->set_aside()) {
    aside.push_back(
        {{"id", a.id}, {"key", a.key}, {"reason", a.reason}, {"unix", a.unix_ns / 1'000'000'000}});
  }
  j["runs_set_aside"] = aside;
  // A failed reload changed nothing (Daemon::Reload): the file on disk is not the config in force.
  j["reload"] = {
      {"reloads", reloads_},
      {"failures", reload_failures_},
      {"last_error", last_reload_error_.empty() ? json(nullptr) : json(last_reload_error_)}};
  if (source_) {
    SourceStats s = source_->stats();
    j["source"] = {{"name", std::string(source_->name())},
                   {"description", s.description},
                   {"events", s.events},
                   {"lost", s.lost},
                   {"anomalies", s.anomalies},
                   {"processes", s.processes},
                   // Events of pids the source never announced: dropped, never a run.
                   {"unannounced_events", runs_->unannounced_events()}};
    const ProbeCounterPathStats& c = s.counters;  // where perf software counters are read
    j["source"]["counters"] = {{"path", c.path},
                               {"why", c.why},
                               {"windows", c.windows},
                               {"flagged", c.flagged},
                               {"implausible", c.implausible},
                               {"read_failures", c.read_failures},
                               {"steal_subtracted", c.steal_subtracted},
                               {"steal_flagged", c.steal_flagged},
                               {"steal_source", c.steal_source},
                               {"steal_why", c.steal_why},
                               {"steal_stale", c.steal_stale},
                               {"arm_failures", c.arm_failures}};
    json attached = json::array();  // how each process is probed (zero-code: what it covers)
    for (const AttachedProcess& a : source_->Attached()) attached.push_back(AttachedJson(a));
    j["source"]["attached"] = attached;
    if (loop_latency_) j["source"]["loop_latency"] = loop_latency_->Json();
  } else {
    j["source"] = nullptr;
    j["source_error"] = source_error_;
  }
  json cols = json::array();
  const std::map<std::string, NodeDrop> dropped = runs_->node_dropped();
  for (const auto& [name, t] : runs_->collector_totals()) {
    json c = {{"name", name},
              {"state", t.state},
              {"ok", t.ok},
              {"failed", t.failed},
              {"cost_us", t.cost_us},
              {"last_error", t.last_error},
              {"description", t.description},  // e.g. per GPU: energy counter period, GPM
              {"warnings", t.warnings},        // values the last measurement left out, and why
              {"dropped_node_wide", nullptr}};
    // Stopped for every run of the node after it slowed one (runs.observer_effect_node_drop_s).
    if (auto d = dropped.find(name); d != dropped.end()) {
      c["dropped_node_wide"] = {{"by_run", d->second.run_id},
                                {"until_unix", d->second.until_unix_ns / 1'000'000'000}};
    }
    cols.push_back(std::move(c));
  }
  j["collectors"] = cols;
  // Measured windows' GPU values: kept when a CUDA/HIP sync closed the window, else left out
  // (agent/measure/measurement_gpu_sync.cpp).
  const GpuWindowCounts& gw = runs_->counter_windows().gpu();
  j["gpu_windows"] = {{"closed_at_end", gw.closed_at_end},
                      {"closed_at_sync", gw.closed_at_sync},
                      {"not_closed", gw.not_closed},
                      {"no_sync_probe", gw.no_sync_probe},
                      {"cut_short", gw.cut_short},
                      {"no_iteration", gw.no_iteration},
                      {"lag_ms_max", static_cast<double>(gw.lag_ns_max) * 1e-6},
                      {"last_flag", gw.last_flag}};
  j["collectors_paused"] = PauseJson();
  j["collectors_backed_off"] = BackoffsJson(runs_->backoff().active());
  if (energy_) {
    const EnergySamplerStats& e = energy_->stats();
    j["energy"] = {
        {"source", std::string(energy_->source_name())},
        {"description", energy_->Describe()},
        {"interval_ms", energy_interval_ms_},
        {"reads", e.reads},
        {"failures", e.failures},
        {"slow_reads", e.slow_reads},
        {"last_error", e.last_error},
        {"mean_bracket_ms", e.interpolations
                                ? json(e.bracket_ns_sum * 1e-6 / (2.0 * e.interpolations))
                                : json(nullptr)},
        // Off the loop, honest about a slow, coarse counter (energy_sampler.h).
        {"update_period_ms", e.calibration.done
                                 ? json(static_cast<double>(e.calibration.update_ns) * 1e-6)
                                 : json(nullptr)},
        {"unplaced", e.unplaced},
        {"skipped", e.skipped},
        {"max_read_ms", static_cast<double>(e.max_read_ns) * 1e-6},
        {"read_s", e.read_cost_us * 1e-6},
        {"loop_s", e.loop_ns * 1e-9},
        {"smeared", e.smeared},
        {"mean_uncertainty", e.interpolations
                                 ? json(e.uncertainty_sum / static_cast<double>(e.interpolations))
                                 : json(nullptr)}};
  } else {
    j["energy"] = {{"source", nullptr}, {"error", energy_error_}};
  }
  if (uploader_) {
    const UploaderStats& u = uploader_->stats();
    json up = {{"url", config_.upload_url},
               {"sent_batches", u.sent_batches},
               {"sent_samples", u.sent_samples},
               {"failures", u.failures},
               {"rejected_batches", u.rejected_batches},
               {"dropped_batches", u.dropped_batches},
               {"backoff_ms", u.backoff_ms},
               {"last_error", u.last_error},
               {"last_success_unix", u.last_success_unix}};
    if (auto spool = uploader_->spool(); spool.ok()) {
      up["spool_batches"] = spool->batches;
      up["spool_bytes"] = spool->bytes;
    }
    // How it is secured, never the secrets themselves.
    up["tls"] = config_.upload_url.rfind("https://", 0) != 0 ? "off"
                : config_.upload_tls_insecure_skip_verify    ? "on, NOT verified"
                : config_.upload_tls_cert_file.empty()       ? "on"
                                                             : "on, client certificate";
    up["auth"] = !config_.upload_bearer_token_file.empty() ? "bearer token"
                 : !config_.upload_basic_auth_user.empty() ? "basic"
                                                           : "none";
    j["upload"] = up;
  } else {
    j["upload"] = nullptr;
  }
  return j;
}

// One function per command, registered in one table: adding a command touches the table and
// its function.
Result<json> Daemon::HandleControl(const ControlRequest& r) {
  using Handler = Result<json> (Daemon::*)(const ControlRequest&);
  static const std::map<std::string, Handler, std::less<>> kHandlers = {
      {"status", &Daemon::ControlStatus},   {"runs", &Daemon::ControlRuns},
      {"show", &Daemon::ControlShow},       {"report", &Daemon::ControlShow},
      {"history", &Daemon::ControlHistory}, {"pause", &Daemon::ControlPause},
      {"resume", &Daemon::ControlResume},
  };
  auto it = kHandlers.find(r.cmd);
  if (it == kHandlers.end()) return InvalidArgument("unknown control command '" + r.cmd + "'");
  // What an answer shows as accepted is saved first: a SIGKILL after it loses none of it
  // (the durability promise, docs/config.md). Only runs that changed are written.
  if (r.cmd == "runs" || r.cmd == "show" || r.cmd == "report") (void)FlushState();
  return (this->*(it->second))(r);
}

Result<json> Daemon::ControlStatus(const ControlRequest&) { return StatusJson(); }

// Active runs from memory, with what only a live run knows; --all adds the stored ones.
Result<json> Daemon::ControlRuns(const ControlRequest& r) {
  json list = json::array();
  for (const auto& [id, t] : runs_->runs()) {
    json run = RunJson(t->record());
    AddJobLabels(run, runs_->JobLabels(id), node_name_);
    run["measured"] = t->measured_iterations();
    SelfCheck c = t->self_check();
    run["self_check_error"] = c.valid ? json(c.error) : json(nullptr);
    run["observer_effect_flagged"] =
        t->observer_effect(config_.run_observer_threshold_pct / 100).flagged;
    run["collectors_backed_off"] = BackoffsJson(runs_->RunBackoffs(id));
    list.push_back(run);
  }
  if (r.all) {
    auto stored = store_->ListRuns(false, r.limit);
    if (!stored.ok()) return stored.status();
    const double threshold = config_.run_observer_threshold_pct / 100;
    for (const RunRecord& rec : *stored) {
      if (rec.state == RunState::kActive && runs_->runs().count(rec.id)) continue;
      json run = RunJson(rec);
      AddJobLabels(run, {}, node_name_);
      // What a finished run measured and its self-check, rebuilt from the store as `show` does.
      auto snap = store_->LoadRun(rec.id);
      auto m = store_->LoadMeasurements(rec.id);
      if (snap.ok() && m.ok()) {
        std::set<uint64_t> ordinals;
        for (const Measurement& x : *m) ordinals.insert(x.ordinal);
        run["measured"] = ordinals.size();
        const ObserverEffect oe = StoredObserverEffect(*snap, *m, threshold);
        run["self_check_error"] = nullptr;
        for (const SelfCheck& c : StoredSelfChecks(*snap, *m, oe)) {
          if (c.metric == "time_ns" && c.valid) run["self_check_error"] = c.error;
        }
        run["observer_effect_flagged"] = oe.flagged;
      }
      list.push_back(run);
    }
  }
  return json{{"runs", list}};
}

// One run: live from memory when active, else rebuilt from the state database. `report` adds
// the measurements and the per-bin cost history.
Result<json> Daemon::ControlShow(const ControlRequest& r) {
  json out;
  int64_t run_id = 0;
  const double threshold = config_.run_observer_threshold_pct / 100;
  if (RunTracker* t = runs_->FindActive(r.run)) {
    std::vector<SelfCheck> checks = t->self_checks();
    out = SnapshotJson(t->Snapshot(), checks);
    AddJobLabels(out["run"], runs_->JobLabels(t->record().id), node_name_);
    out["observer_effect"] = ObserverJson(t->observer_effect(threshold), t->dropped_collectors());
    out["time_strata"] = StrataJson(t->strata());
    {
      // What measuring costs this run (runs.max_overhead, runs.target_error, begin hooks).
      const MeasurementCost c = t->measurement_cost();
      out["measurement_cost"] = {
          {"per_measured_ns", c.source == "none" ? json(nullptr) : json(c.per_measured_ns)},
          {"source", c.source},
          {"total_ns", c.source == "none" ? json(nullptr) : json(c.total_ns)},
          {"share_of_run_time", c.source == "none" ? json(nullptr) : json(c.share)},
          {"max_overhead", c.max_overhead},
          {"target_error", c.target_error},
          {"stratum_half_width", c.stratum_half_width < 0 ? json(nullptr)
                                                          : json(c.stratum_half_width)},
          {"measured", c.measured},
          {"end_only_iterations", c.end_only},
          {"candidates_lost_end_only", c.missed},
          {"candidates_over_overhead", c.over_budget},
          {"begin_hooks_armed", c.hooks_wanted}};
    }
    if (const StepJoin* j = runs_->step_join(t->record().id)) out["ranks"] = RanksJson(*j);
    // Which rank is slower than its peers, and the slowdown "none" rules out (agent/fleet).
    if (const fleet::StragglerJoin* sj = stragglers_.book().join(t->record().id)) {
      out["slow_ranks"] = fleet::SlowRanksJson(sj->counts(), fleet::SlowRankOptions{}.floor_steps);
    }
    if (runs_->energy_sampler() != nullptr) {
      out["energy"] = {{"iterations", t->energy_iterations()},
                       {"unattributed_shared", t->energy_shared()},
                       {"unattributed_uncovered", t->energy_uncovered()}};
    }
    run_id = t->record().id;
    out["collectors_backed_off"] = BackoffsJson(runs_->RunBackoffs(run_id));
    out["collectors_paused"] = PauseJson();
    if (source_) {
      json probes = json::array();
      const std::vector<int32_t>& pids = t->record().pids;
      for (const AttachedProcess& a : source_->Attached()) {
        if (std::find(pids.begin(), pids.end(), a.pid) != pids.end()) {
          probes.push_back(AttachedJson(a));
        }
      }
      out["probes"] = probes;
    }
  } else {
    auto id = store_->FindRun(r.run);
    if (!id.ok()) return id.status();
    if (!id->has_value()) {
      return NotFound("no run '" + r.run + "' on this node (see `seqpoint runs --all`)");
    }
    auto snap = store_->LoadRun(**id);
    if (!snap.ok()) return snap.status();
    auto m = store_->LoadMeasurements(**id);
    if (!m.ok()) return m.status();
    // Rebuilt from the stored controls and groups; the collectors dropped are not stored.
    ObserverEffect oe = StoredObserverEffect(*snap, *m, threshold);
    out = SnapshotJson(*snap, StoredSelfChecks(*snap, *m, oe));
    AddJobLabels(out["run"], {}, node_name_);
    out["observer_effect"] = ObserverJson(oe, std::set<std::string>{});
    run_id = **id;
  }
  if (auto rows = store_->LoadMeasurements(run_id); rows.ok()) {
    const MeasuredDevices devices = SummariseDevices(*rows);
    out["devices"] = DevicesJson(devices);
    out["devices_not_recorded"] = devices.unrecorded;
  }
  if (r.cmd == "report") {
    SEQPOINT_RETURN_IF_ERROR(AddReport(run_id, r.days, out));
  }
  return out;
}

// The run's measured rows and the daily mean iteration time of its most frequent SL bins
// (efficiency over time), over the last `days` days.
Status Daemon::AddReport(int64_t run_id, int64_t days, json& out) {
  auto m = store_->LoadMeasurements(run_id);
  if (!m.ok()) return m.status();
  json meas = json::array();
  for (const Measurement& x : *m) {
    meas.push_back({{"pid", x.pid},
                    {"iter", x.iter},
                    {"seq_len", x.seq_len},
                    {"metric", x.metric},
                    {"unit", x.unit},
                    {"value", x.value},
                    {"device", x.device_recorded ? json(x.device) : json(nullptr)}});
  }
  out["measurements"] = meas;
  // Efficiency over time: daily mean iteration time of the run's most frequent SL bins.
  std::vector<HistogramBin> bins;
  for (const auto& b : out["histogram"]) {
    bins.push_back({b["seq_len"].get<uint32_t>(), b["count"].get<uint64_t>(), 0});
  }
  std::sort(bins.begin(), bins.end(), [](auto& a, auto& b) { return a.count > b.count; });
  json history = json::array();
  const int64_t today = Today();
  std::set<uint32_t> seen;
  for (const HistogramBin& b : bins) {
    if (seen.size() >= 5) break;
    if (!seen.insert(HistoryBin(b.seq_len).first).second) continue;
    auto rows = store_->QueryBinCost(b.seq_len, "time_ns", today - days);
    if (!rows.ok()) return rows.status();
    for (const BinCostRow& row : *rows) {
      history.push_back({{"day", Day(row.day)},
                         {"bin", {row.bin_lo, row.bin_hi}},
                         {"metric", row.metric},
                         {"n", row.n},
                         {"mean", row.n ? row.sum / row.n : 0.0}});
    }
  }
  out["history"] = history;
  return Status::Ok();
}

json Daemon::PauseJson() const {
  const PauseState& p = runs_->backoff().pause();
  return {{"paused", p.paused},
          {"since_unix_ns", p.paused ? json(p.since_unix_ns) : json(nullptr)},
          {"until_unix_ns", p.until_unix_ns ? json(*p.until_unix_ns) : json(nullptr)}};
}

// Collectors off node-wide for site tooling that needs the counters, as `dcgmi profile --pause`.
Result<json> Daemon::ControlPause(const ControlRequest& r) {
  std::optional<int64_t> duration;
  if (r.for_ms > 0) duration = r.for_ms * 1'000'000;
  runs_->PauseCollectors(duration);
  return PauseJson();
}

Result<json> Daemon::ControlResume(const ControlRequest&) {
  const bool was_paused = runs_->ResumeCollectors();
  json out = PauseJson();
  out["was_paused"] = was_paused;
  return out;
}

// One SL's daily cost history of one metric.
Result<json> Daemon::ControlHistory(const ControlRequest& r) {
  const int64_t today = Today();
  auto rows = store_->QueryBinCost(static_cast<uint32_t>(r.seq_len), r.metric, today - r.days);
  if (!rows.ok()) return rows.status();
  json list = json::array();
  for (const BinCostRow& row : *rows) {
    double mean = row.n ? row.sum / row.n : 0.0;
    double var = row.n > 1 ? std::max(0.0, (row.sumsq - row.n * mean * mean) / (row.n - 1)) : 0.0;
    list.push_back({{"day", Day(row.day)},
                    {"bin", {row.bin_lo, row.bin_hi}},
                    {"n", row.n},
                    {"mean", mean},
                    {"stddev", std::sqrt(var)}});
  }
  return json{{"seq_len", r.seq_len}, {"metric", r.metric}, {"days", list}};
}

}  // namespace seqpoint::daemon
