#include "agent/daemon/daemon.h"

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <filesystem>

#include "agent/config/log.h"
#include "agent/daemon/config_checks.h"
#include "collectors/perf/perf_collector.h"
#include "collectors/registry.h"
#include "common/clock.h"
#include "seqpoint/features.h"

namespace seqpoint::daemon {

void DaemonOverrides::ApplyTo(DaemonConfig* c) const {
  if (state_dir) c->state_dir = *state_dir;
  if (runtime_dir) c->runtime_dir = *runtime_dir;
  if (control_socket) c->control_socket = *control_socket;
  if (metrics_listen) c->metrics_listen = *metrics_listen;
  if (upload_url) c->upload_url = *upload_url;
  if (log_level) c->log_level = *log_level;
}

Daemon::Daemon(DaemonConfig config, std::string config_path, DaemonOverrides overrides,
               DaemonParts parts)
    : config_(std::move(config)),
      config_path_(std::move(config_path)),
      overrides_(std::move(overrides)),
      parts_(std::move(parts)),
      signals_(io_),
      flush_timer_(io_),
      idle_timer_(io_),
      prune_timer_(io_),
      energy_timer_(io_),
      process_cpu_timer_(io_),
      watchdog_timer_(io_),
      profiler_timer_(io_) {}

Daemon::~Daemon() { Shutdown(); }

RunManagerOptions Daemon::RunOptions() const { return RunOptions(config_); }

RunManagerOptions Daemon::RunOptions(const DaemonConfig& config_) {
  RunManagerOptions o;
  o.group_by = *ParseRunGroupBy(config_.run_group_by);  // validated by ValidateConfig
  o.proc_root = config_.proc_root;
  o.selector.budget_count = static_cast<uint64_t>(config_.run_budget);
  o.selector.budget_fraction = config_.run_budget_fraction;
  o.selector.per_doubling = static_cast<uint32_t>(config_.run_budget_per_doubling);
  o.selector.target_error_pct = config_.run_target_error_pct;
  o.selector.target_rel_error = config_.run_target_error;
  o.selector.max_overhead = config_.run_max_overhead;
  o.selector.warmup = static_cast<uint64_t>(config_.run_warmup_iterations);
  o.idle_timeout_s = config_.run_idle_timeout_s;
  o.observer_threshold = config_.run_observer_threshold_pct / 100;
  o.observer_drop = config_.run_observer_action == "drop";
  o.observer_node_drop_s = config_.run_observer_node_drop_s;
  o.observer_control_every = static_cast<uint32_t>(config_.run_observer_control_every);
  o.profilers.libraries = config_.run_profiler_libraries;
  o.profilers.commands = config_.run_profiler_commands;
  o.profiler_hold_down_s = config_.run_profiler_hold_down_s;
  o.gpu_sync.tail_ns = config_.run_gpu_sync_tail_ms * 1'000'000;
  o.gpu_sync.bound_ns = config_.run_gpu_sync_bound_ms * 1'000'000;
  return o;
}

MetricsServerOptions Daemon::MetricsOptions(const DaemonConfig& c) {
  return {c.metrics_listen, c.metrics_max_connections, c.metrics_idle_timeout_ms,
          c.metrics_header_timeout_ms};
}

UploaderOptions Daemon::UploadOptions() const { return UploadOptions(config_); }

UploaderOptions Daemon::UploadOptions(const DaemonConfig& config_) {
  UploaderOptions o;
  o.url = config_.upload_url;
  o.interval_s = config_.upload_interval_s;
  o.timeout_s = config_.upload_timeout_s;
  o.backoff_initial_ms = config_.upload_backoff_initial_ms;
  o.backoff_max_s = config_.upload_backoff_max_s;
  o.spool_max_bytes = config_.upload_spool_max_bytes;
  o.batch_max_samples = config_.upload_batch_max_samples;
  o.tls = UploadTlsOptions::From(config_);
  o.auth = UploadAuthOptions::From(config_);
  for (const auto& [k, v] : config_.upload_labels) o.labels.emplace_back(k, v);
  if (!config_.upload_labels.count("instance")) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    o.labels.emplace_back("instance", host);
  }
  return o;
}

Result<std::unique_ptr<Daemon>> Daemon::Create(DaemonConfig config, std::string config_path,
                                               DaemonOverrides overrides, DaemonParts parts) {
  overrides.ApplyTo(&config);
  SEQPOINT_RETURN_IF_ERROR(CheckConfig(config));
  SetLogLevel(config.log_level);
  std::unique_ptr<Daemon> d(new Daemon(std::move(config), std::move(config_path),
                                       std::move(overrides), std::move(parts)));
  std::error_code ec;
  bool created = std::filesystem::create_directories(d->config_.state_dir, ec);
  if (ec) {
    return IoError("cannot create state directory '" + d->config_.state_dir + "': " + ec.message() +
                   " (set daemon.state_dir or --state-dir)");
  }
  // Private when seqpointd makes it; one that exists (systemd's StateDirectory=, with its
  // StateDirectoryMode=, or a directory given by --state-dir) keeps its mode.
  if (created) chmod(d->config_.state_dir.c_str(), 0700);
  StoreOptions store_options;
  store_options.lock_dir = true;  // one daemon per state directory
  auto store = Store::Open(d->config_.StateDbPath(), store_options);
  if (!store.ok()) return store.status();
  d->store_ = std::move(*store);
  // A file SQLite may read but not write (read-only, immutable) is found now, not at the first
  // run: the daemon starts unhealthy and says so (daemon_store.cpp).
  (void)d->store_->CheckWritable();
  d->LogStoreHealth();
  if (d->store_->recovery()) SEQPOINT_LOG(kWarn, d->store_->recovery()->Describe());
  if (!d->store_->check_skipped().empty()) {
    SEQPOINT_LOG(kWarn, "state database '" + d->config_.StateDbPath() +
                            "' used without a full check: " + d->store_->check_skipped());
  }
  d->runs_ = std::make_unique<RunManager>(d->store_.get(), nullptr, d->RunOptions());
  d->runs_->steps().set_rank_observer(&d->stragglers_);
  SEQPOINT_RETURN_IF_ERROR(d->StartParts());
  return d;
}

Status Daemon::StartParts() {
  started_unix_ = WallNs() / 1'000'000'000;
  if (parts_.source) {
    // Without probes the daemon still serves its state, /metrics and the upload spool, and
    // says why in the log, `seqpoint status` and seqpoint_probe_up: a node agent degrades, it
    // does not crash-loop.
    auto source = parts_.source(io_, config_);
    if (source.ok()) {
      source_ = std::move(*source);
    } else {
      source_error_ = source.status().message();
      SEQPOINT_LOG(kError,
                   "no iteration source, so no training process will be found: " + source_error_);
    }
  }
  StartEnergySampler();
  if (parts_.collectors) {
    CollectorSetFactory make = parts_.collectors(config_, source_.get());
    if (energy_ && make) {
      // The sampler gives every iteration, SeqPoints included, its energy_uj.
      make = [make] {
        auto v = make();
        std::erase_if(v, [](const auto& c) { return c->name() == "energy"; });
        return v;
      };
    }
    runs_ = std::make_unique<RunManager>(store_.get(), std::move(make), RunOptions());
    runs_->steps().set_rank_observer(&stragglers_);
  }
  runs_->set_source(source_.get());
  runs_->set_energy_sampler(energy_.get());
  // A run that cannot be restored is set aside by RunManager (status, /metrics, show); an error
  // here is the store failing to list them at all. Either way the daemon starts and measures
  // new runs: a start that failed would be restarted by systemd into the same error.
  if (Status resumed = runs_->Resume(); !resumed.ok()) {
    resume_error_ = resumed.message();
    SEQPOINT_LOG(kError, "the active runs of " + config_.StateDbPath() + " could not be resumed (" +
                             resume_error_ +
                             "); they stay in the database as they are, and seqpointd goes on "
                             "with new runs (docs/failure-modes.md)");
  }

  ControlServerOptions control{config_.ControlSocketPath(), config_.control_group,
                               config_.control_max_request_bytes, config_.control_max_clients,
                               config_.control_client_timeout_ms};
  auto control_server = ControlServer::Start(
      io_, control, [this](const ControlRequest& r) { return HandleControl(r); });
  if (!control_server.ok()) return control_server.status();
  control_ = std::move(*control_server);

  if (!config_.metrics_listen.empty()) {
    auto m = MetricsServer::Start(io_, MetricsOptions(),
                                  [this] { return RenderExposition(Families(false)); });
    if (!m.ok()) return m.status();
    metrics_ = std::move(*m);
  }
  if (!config_.upload_url.empty()) {
    auto u =
        Uploader::Create(io_, store_.get(), UploadOptions(), [this] { return Families(true); });
    if (!u.ok()) return u.status();
    uploader_ = std::move(*u);
    runs_->set_on_run_closed([this](RunSnapshot) {
      if (uploader_) uploader_->SpoolNow(Families(true));
    });
  }
  // The closed run is still in Families(true) when on_closed runs: RunManager calls it before
  // forgetting the run, so its final projection is spooled.
  // Before anything is watched: the check counts a hardware event for a moment, which is what
  // slows a CPU where the PMU traps.
  if (std::string pmu = collectors::PrepareHardwareEvents(config_.collectors.perf); !pmu.empty()) {
    SEQPOINT_LOG(kInfo, pmu);
  }
  if (source_) {
    loop_latency_ = std::make_unique<LoopLatencySink>(runs_.get(), source_->pids_are_live());
    SEQPOINT_RETURN_IF_ERROR(source_->Start(loop_latency_.get()));
  }
  if (uploader_) uploader_->Start();

  // The source asks for an early save when what it delivered and keeps until saved piles up
  // (FlushState lets it go).
  auto save = [this] { (void)FlushState(); };
  if (source_) {
    source_->set_save_request([this, save] {
      if (!shut_down_) save();
    });
  }
  Every(flush_timer_, std::chrono::milliseconds(config_.flush_interval_ms), save);
  Every(idle_timer_, std::chrono::seconds(5), [this] { runs_->CloseIdleRuns(); });
  // The profiler scan also ends a timed pause, so it runs even with no profiler to look for.
  // Reading every watched process's maps takes its mmap_lock and was most of an idle node's
  // cost: with a source that reports library loads, a process is looked at when found and
  // when its libraries change (RunManager::OnLibrariesChanged), the tick reads only those
  // backed off (to see their profiler go), and every one once per kFullProfilerScan (events
  // lost). docs/bounds.md has the figures.
  Every(profiler_timer_, std::chrono::milliseconds(config_.run_profiler_scan_interval_ms),
        [this] {
          const int64_t now = MonotonicNs();
          const bool all = source_ == nullptr || !source_->reports_library_loads() ||
                           now - last_full_profiler_scan_ns_ >= kFullProfilerScanNs;
          if (all) last_full_profiler_scan_ns_ = now;
          runs_->ScanProfilers(all);
        });
  if (energy_) {
    // Only while training processes are watched: an idle node costs no wake-ups.
    Every(energy_timer_, std::chrono::milliseconds(energy_interval_ms_), [this] {
      if (runs_->processes() > 0) {
        energy_->Sample();
      } else {
        energy_->Pause();
      }
    });
  }
  // Every watched process's CPU clock, the auxiliary of the CPU counters' projections
  // (agent/runs/process_cpu_sampler.h); about 1 us a process. Only while processes are watched.
  SampleProcessCpuLater();
  auto prune = [this] {
    const int64_t today = Today();
    (void)store_->PruneHistory(today - config_.history_retention_days);
    auto pruned = store_->PruneClosedRuns(config_.closed_runs_kept);
    if (pruned.ok() && *pruned > 0) {
      SEQPOINT_LOG(kInfo, "deleted the " + std::to_string(*pruned) +
                              " oldest closed runs from the state database "
                              "(runs.closed_runs_kept = " +
                              std::to_string(config_.closed_runs_kept) + ")");
    }
  };
  prune();
  Every(prune_timer_, std::chrono::hours(6), prune);
  SEQPOINT_LOG(kInfo, "seqpointd " SEQPOINT_VERSION " started: state " + config_.StateDbPath() +
                          ", control " + config_.ControlSocketPath() +
                          (metrics_ ? ", metrics " + config_.metrics_listen : "") +
                          (uploader_ ? ", upload " + config_.upload_url : "") +
                          (source_ ? ", source " + std::string(source_->name()) : ""));
  return Status::Ok();
}

void Daemon::StartEnergySampler() {
  const collectors::CollectorConfig& cc = config_.collectors;
  bool enabled = false;
  for (const collectors::CollectorInfo& info : collectors::CollectorRegistry()) {
    if (info.name == "energy") enabled = collectors::IsCollectorEnabled(info, cc);
  }
  if (config_.run_energy_sample_interval_ms <= 0 || !enabled) {
    energy_error_ = "off (runs.energy_sample_interval_ms = 0 or collectors.energy.enabled = false)";
    return;
  }
  if (!source_ || !source_->pids_are_live()) {
    // A replay's timestamps are not this machine's clock: no counter can be read against them.
    energy_error_ = "off: the iteration source has no live timestamps";
    return;
  }
  auto sampler = EnergySampler::Open(cc, collectors::EnergySourceRegistry());
  if (!sampler.ok()) {
    energy_error_ = sampler.status().message();
    SEQPOINT_LOG(kInfo, "no energy per iteration: " + energy_error_);
    return;
  }
  energy_ = std::move(*sampler);
  energy_interval_ms_ = config_.run_energy_sample_interval_ms;
  SEQPOINT_LOG(kInfo, "energy per iteration from " + energy_->Describe() + ", sampled every " +
                          std::to_string(config_.run_energy_sample_interval_ms) + " ms");
}

void Daemon::SampleProcessCpuLater() {
  // Every kIntervalMs while processes are watched; an idle node is looked at twice a second.
  const bool watching = runs_->processes() > 0;
  process_cpu_timer_.expires_after(
      std::chrono::milliseconds(watching ? ProcessCpuSampler::kIntervalMs : 500));
  process_cpu_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || shut_down_) return;
    runs_->SampleProcessCpu();  // nothing when no process is watched
    SampleProcessCpuLater();
  });
}

void Daemon::Every(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
                   std::function<void()> job) {
  timer.expires_after(period);
  timer.async_wait([this, &timer, period, job](boost::system::error_code ec) {
    if (ec || shut_down_) return;
    job();
    Every(timer, period, job);
  });
}

Status Daemon::Run() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.add(SIGHUP);
  std::signal(SIGPIPE, SIG_IGN);
  std::function<void()> wait = [this, &wait] {
    signals_.async_wait([this, &wait](boost::system::error_code ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        Status st = Reload();
        if (!st.ok()) {
          ++reload_failures_;
          last_reload_error_ = st.message();
          SEQPOINT_LOG(kError, "reload of " + config_path_ + " failed, nothing was changed: " +
                                   "control, metrics, probes, runs and upload all still run on "
                                   "the config loaded before: " +
                                   st.message());
        }
        wait();
        return;
      }
      SEQPOINT_LOG(kInfo, std::string("received ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT") +
                              ": flushing state and stopping");
      Shutdown();
    });
  };
  wait();
  NotifySystemd();
  io_.run();
  if (!final_flush_error_.empty()) return IoError(final_flush_error_);
  return Status::Ok();
}

void Daemon::NotifySystemd() {
  if (!notifier_.enabled()) return;
  // From the loop itself: READY=1 once it runs, and every keep-alive from a timer on it, so a
  // loop that is stuck (not only a dead process) misses the watchdog.
  boost::asio::post(io_, [this] {
    Status st = notifier_.Notify("READY=1\nSTATUS=serving " + config_.ControlSocketPath());
    if (!st.ok()) SEQPOINT_LOG(kWarn, st.message());
  });
  if (notifier_.keepalive_interval().count() > 0) {
    Every(watchdog_timer_, notifier_.keepalive_interval(), [this] {
      Status st = notifier_.Notify("WATCHDOG=1");
      if (!st.ok()) SEQPOINT_LOG(kWarn, st.message());
    });
  }
}

void Daemon::RequestShutdown() {
  boost::asio::post(io_, [this] { Shutdown(); });
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  boost::system::error_code ec;
  signals_.cancel(ec);
  flush_timer_.cancel();
  idle_timer_.cancel();
  prune_timer_.cancel();
  energy_timer_.cancel();
  process_cpu_timer_.cancel();
  watchdog_timer_.cancel();
  (void)notifier_.Notify("STOPPING=1");
  profiler_timer_.cancel();
  if (source_) source_->Stop();
  if (runs_) {
    Status st = FlushState();
    if (!st.ok()) {
      // Said in the exit status too: what the runs held since the store failed is lost.
      final_flush_error_ = "final flush: " + st.message() + "; " +
                           std::to_string(runs_->unsaved_runs()) +
                           " runs' changes since then are lost";
      SEQPOINT_LOG(kError, final_flush_error_);
    }
  }
  if (uploader_) uploader_->Stop();
  if (control_) control_->Stop();
  if (metrics_) metrics_->Stop();
  io_.stop();
  if (started_unix_ != 0) SEQPOINT_LOG(kInfo, "seqpointd stopped");  // not after a failed start
}

// All or nothing (docs/failure-modes.md): every new part is built and checked first (the
// config, the control group, the uploader with its TLS files, the source's probe set, which
// applies whole or not at all itself), and only then are they swapped in together, by steps
// that cannot fail. An error on the way leaves every part running on the old config.
Status Daemon::Reload() {
  if (config_path_.empty()) return Status::Ok();
  auto loaded = LoadCheckedConfig(config_path_, false);
  if (!loaded.ok()) return loaded.status();
  DaemonConfig next = std::move(*loaded);
  overrides_.ApplyTo(&next);
  SEQPOINT_RETURN_IF_ERROR(CheckConfig(next));

  // Build: nothing that runs changes here.
  ControlServerOptions control{next.ControlSocketPath(), next.control_group,
                               next.control_max_request_bytes, next.control_max_clients,
                               next.control_client_timeout_ms};
  auto policy = ControlServer::Prepare(control);
  if (!policy.ok()) return policy.status();
  const bool upload_changed = next.upload_url != config_.upload_url ||
                              next.upload_labels != config_.upload_labels ||
                              next.upload_interval_s != config_.upload_interval_s ||
                              next.upload_spool_max_bytes != config_.upload_spool_max_bytes ||
                              next.upload_backoff_initial_ms != config_.upload_backoff_initial_ms ||
                              next.upload_backoff_max_s != config_.upload_backoff_max_s ||
                              next.upload_timeout_s != config_.upload_timeout_s ||
                              next.upload_batch_max_samples != config_.upload_batch_max_samples ||
                              UploadSecurityChanged(next, config_);
  std::unique_ptr<Uploader> uploader;
  if (upload_changed && !next.upload_url.empty()) {
    auto u =
        Uploader::Create(io_, store_.get(), UploadOptions(next), [this] { return Families(true); });
    if (!u.ok()) return u.status().WithContext("upload");
    uploader = std::move(*u);
  }
  // The last step that can fail; it applies whole or not at all (iteration_source.h).
  if (source_) SEQPOINT_RETURN_IF_ERROR(source_->Reconfigure(next).WithContext("probes"));

  // Swap: nothing from here on can fail.
  auto restart_needed = [&](const std::string& key, const std::string& a, const std::string& b) {
    if (a != b) SEQPOINT_LOG(kWarn, "reload: " + key + " changed; takes effect after a restart");
  };
  restart_needed("daemon.state_dir", config_.state_dir, next.state_dir);
  restart_needed("control.socket", config_.ControlSocketPath(), next.ControlSocketPath());
  restart_needed("metrics.listen", config_.metrics_listen, next.metrics_listen);
  restart_needed("runs.profiler_scan_interval_ms",
                 std::to_string(config_.run_profiler_scan_interval_ms),
                 std::to_string(next.run_profiler_scan_interval_ms));
  restart_needed("runs.energy_sample_interval_ms",
                 std::to_string(config_.run_energy_sample_interval_ms),
                 std::to_string(next.run_energy_sample_interval_ms));
  control_->Apply(control, std::move(*policy));
  if (metrics_) metrics_->Reconfigure(MetricsOptions(next));
  config_ = std::move(next);
  SetLogLevel(config_.log_level);
  runs_->Reconfigure(RunOptions());
  if (upload_changed) {
    if (uploader_) uploader_->Stop();
    uploader_ = std::move(uploader);
    if (uploader_) {
      uploader_->Start();
      runs_->set_on_run_closed([this](RunSnapshot) {
        if (uploader_) uploader_->SpoolNow(Families(true));
      });
    }
  } else if (uploader_) {
    uploader_->RetryNow();  // the files it reads (CA, token) may have been fixed
  }
  ++reloads_;
  last_reload_error_.clear();
  SEQPOINT_LOG(kInfo, "reloaded " + config_path_);
  return Status::Ok();
}

}  // namespace seqpoint::daemon
