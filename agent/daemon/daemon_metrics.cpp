// Daemon::Families: every metric seqpointd exports on /metrics, and the per-run subset it
// uploads by remote-write, gathered from the subsystems that own them. Values are in base units
// (seconds, joules, bytes); names and labels are listed in docs/metrics.md.
#include <time.h>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "agent/control/control_metrics.h"
#include "agent/daemon/daemon.h"
#include "agent/energy/energy_metrics.h"
#include "agent/fleet/fleet_efficiency.h"
#include "agent/fleet/straggler_metrics.h"
#include "agent/metrics/endpoint_metrics.h"
#include "agent/runs/run_metrics.h"
#include "agent/source/source_metrics.h"
#include "agent/upload/upload_metrics.h"
#include "common/procfs.h"
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
  if (auto stat = ReadProcStat("/proc", "self"); stat.ok()) {
    u.cpu_seconds =
        static_cast<double>(stat->utime + stat->stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (statm >> size >> resident)
    u.rss_bytes = resident * static_cast<double>(sysconf(_SC_PAGESIZE));
  return u;
}

}  // namespace

// The daemon's own families: version, reloads, its CPU and memory.
std::vector<MetricFamily> Daemon::AgentFamilies() const {
  std::vector<MetricFamily> out;
  out.push_back(Gauge("seqpoint_build_info", "seqpointd's version (value 1).")
                    .Add({{"version", SEQPOINT_VERSION}}, 1));
  out.push_back(Counter("seqpoint_config_reloads_total", "Successful SIGHUP reloads.")
                    .Add({}, static_cast<double>(reloads_)));
  out.push_back(Counter("seqpoint_config_reload_failures_total",
                        "SIGHUP reloads that failed; each changed nothing (every part kept "
                        "running on the config before it; the log says why).")
                    .Add({}, static_cast<double>(reload_failures_)));
  out.push_back(Gauge("seqpoint_config_last_reload_failed",
                      "1 while the last SIGHUP reload failed (the file on disk is not the one "
                      "in force), 0 once one works or none failed.")
                    .Add({}, last_reload_error_.empty() ? 0 : 1));
  SelfUsage self = ReadSelfUsage();
  out.push_back(Counter("seqpoint_agent_cpu_seconds_total", "CPU time used by seqpointd.")
                    .Add({}, self.cpu_seconds));
  out.push_back(Gauge("seqpoint_agent_resident_memory_bytes", "seqpointd's resident set size.")
                    .Add({}, self.rss_bytes));
  out.push_back(Gauge("seqpoint_agent_start_time_seconds", "Unix time seqpointd started.")
                    .Add({}, static_cast<double>(started_unix_)));
  out.push_back(Counter("seqpoint_store_recoveries_total",
                        "State databases moved aside at start and replaced by a fresh one: "
                        "reason=damaged (damaged or empty: state.db.corrupt-<unix time>) or "
                        "reason=newer_schema (written by a newer, incompatible seqpointd, a "
                        "downgrade: state.db.newer-<unix time>); the log says what was lost.")
                    .Add({{"reason", "damaged"}},
                         store_->recovery() && !store_->recovery()->newer_schema ? 1 : 0)
                    .Add({{"reason", "newer_schema"}},
                         store_->recovery() && store_->recovery()->newer_schema ? 1 : 0));
  out.push_back(Counter("seqpoint_runs_set_aside_total",
                        "Active runs this start could not restore (a damaged or truncated "
                        "checkpoint or log, a layout from a newer seqpointd): closed as "
                        "set_aside with their stored totals kept; `seqpoint status` lists them.")
                    .Add({}, static_cast<double>(runs_->set_aside().size())));
  out.push_back(Counter("seqpoint_source_unannounced_events_total",
                        "Iteration events of processes the source never announced (a late "
                        "record of a pid that exited, a reused pid): dropped, never a run.")
                    .Add({}, static_cast<double>(runs_->unannounced_events())));
  out.push_back(Gauge("seqpoint_store_resume_failed",
                      "1 when the active runs of the state database could not be listed at "
                      "start (seqpointd went on with new runs; `seqpoint status` says why).")
                    .Add({}, resume_error_.empty() ? 0 : 1));
  out.push_back(Gauge("seqpoint_store_writable",
                      "1 while the state database can be written; 0 while writes fail (runs "
                      "are then kept in memory and retried: the daemon is unhealthy).")
                    .Add({}, store_->write_health().writable ? 1 : 0));
  out.push_back(Gauge("seqpoint_store_unsaved_runs",
                      "Runs whose changes wait in memory for the state database.")
                    .Add({}, static_cast<double>(runs_->unsaved_runs())));
  out.push_back(Counter("seqpoint_store_runs_lost_total",
                        "Closed runs dropped unsaved: more waited for the state database than "
                        "seqpointd keeps in memory.")
                    .Add({}, static_cast<double>(runs_->runs_lost())));
  return out;
}

// Every subsystem owns its families (agent/*/..._metrics.h); this table only says which are
// exported, in which order, and which go out by remote-write. Adding a metric touches its
// subsystem's function alone.
std::vector<MetricFamily> Daemon::Families(bool for_upload) {
  const RunMetricsOptions run_options{config_.run_observer_threshold_pct / 100,
                                      static_cast<uint64_t>(config_.run_budget),
                                      energy_ != nullptr,
                                      static_cast<uint64_t>(config_.run_max_series),
                                      &series_ledger_,
                                      node_name_};
  std::vector<MetricFamily> out = RunFamilies(*runs_, run_options, for_upload);
  // The per-bin cost of the fleet view, scraped and uploaded (remote-write keeps its history),
  // within what runs.max_series leaves after the per-run families.
  uint64_t used = 0;
  for (const MetricFamily& f : out) used += f.samples.size();
  const uint64_t cap = static_cast<uint64_t>(config_.run_max_series);
  for (MetricFamily& f : fleet::EfficiencyFamilies(
           *runs_,
           {node_name_, cap > used ? cap - used : 0, for_upload ? nullptr : &series_ledger_})) {
    out.push_back(std::move(f));
  }
  // Straggling ranks of data-parallel runs, judged as their steps settle (agent/fleet).
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  stragglers_.book().Settle(static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull +
                            static_cast<uint64_t>(now.tv_nsec));
  used = 0;
  for (const MetricFamily& f : out) used += f.samples.size();
  auto fleet_job_of = [this](int64_t id) {
    auto it = runs_->runs().find(id);
    return fleet::FleetJob(it != runs_->runs().end() ? it->second->record().key
                                                      : std::to_string(id),
                           runs_->JobLabels(id));
  };
  for (MetricFamily& f : fleet::StragglerFamilies(
           stragglers_.book().Snapshot(fleet_job_of), node_name_, cap > used ? cap - used : 0,
           for_upload ? nullptr : &series_ledger_)) {
    out.push_back(std::move(f));
  }
  if (for_upload) return out;
  auto append = [&out](std::vector<MetricFamily> more) {
    for (MetricFamily& f : more) out.push_back(std::move(f));
  };
  if (energy_) append(EnergyFamilies(*energy_, energy_interval_ms_));
  append(RunManagerFamilies(*runs_));
  append(BackoffFamilies(*runs_));
  append(runs_->counter_windows().Families());
  append(SeriesFamilies(series_ledger_, static_cast<uint64_t>(config_.run_max_series)));
  append(SourceFamilies(source_.get()));
  if (loop_latency_) append(loop_latency_->Families());  // agent/daemon/loop_latency.h
  if (uploader_) append(UploadFamilies(*uploader_));
  append(ControlFamilies(control_->stats()));
  if (metrics_) append(EndpointFamilies(*metrics_));
  append(AgentFamilies());
  return out;
}

}  // namespace seqpoint::daemon
