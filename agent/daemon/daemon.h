// seqpointd: one io_context running everything (docs/architecture.md, Conventions): the iteration
// source (eBPF probes or a replay), the runs (RunManager), the control socket, /metrics, the
// remote-write uploader, and a timer per periodic job (flush, idle runs, history pruning). Signals:
// SIGTERM/SIGINT stop cleanly (state flushed, active runs left active so the next start resumes
// them), SIGHUP reloads the config file (log level, budget and grouping for new runs, control
// group, upload settings, zero-code probes for processes attached from then on; paths and listen
// addresses need a restart and say so).
//
// Threads: Run() runs the io_context on the calling thread; RequestShutdown() may be called
// from any thread. Everything else is touched only from the io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/fleet/straggler_observer.h"
#include "agent/config/config.h"
#include "agent/control/control_server.h"
#include "agent/daemon/loop_latency.h"
#include "agent/daemon/systemd_notify.h"
#include "agent/energy/energy_sampler.h"
#include "agent/metrics/metric_family.h"
#include "agent/metrics/metrics_server.h"
#include "agent/runs/run_manager.h"
#include "agent/runs/series_cap.h"
#include "agent/source/iteration_source.h"
#include "agent/store/store.h"
#include "agent/upload/uploader.h"

namespace seqpoint::daemon {

// Command-line settings that win over the config file, also after a reload.
struct DaemonOverrides {
  std::optional<std::string> state_dir;
  std::optional<std::string> runtime_dir;
  std::optional<std::string> control_socket;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> upload_url;
  std::optional<LogLevel> log_level;
  void ApplyTo(DaemonConfig* config) const;
};

// Where iterations come from and what measures them; tests and --replay supply their own.
using SourceFactory = std::function<Result<std::unique_ptr<IterationSource>>(
    boost::asio::io_context&, const DaemonConfig&)>;
using CollectorSetFactoryMaker =
    std::function<CollectorSetFactory(const DaemonConfig&, IterationSource*)>;

struct DaemonParts {
  SourceFactory source;                 // null: no source (the daemon serves its state only)
  CollectorSetFactoryMaker collectors;  // null: no collectors (time is still measured)
};

class Daemon {
 public:
  // config_path empty: no file to reload from.
  static Result<std::unique_ptr<Daemon>> Create(DaemonConfig config, std::string config_path,
                                                DaemonOverrides overrides, DaemonParts parts);
  ~Daemon();

  // Runs until SIGTERM/SIGINT or RequestShutdown(); returns after state is flushed.
  Status Run();
  void RequestShutdown();
  // Re-reads the config file and applies what can change live: whole, or (on any error,
  // returned) not at all.
  Status Reload();
  // The last SIGHUP reload's error ("" when it worked or none failed); failures counted.
  const std::string& last_reload_error() const { return last_reload_error_; }
  uint64_t reload_failures() const { return reload_failures_; }

  boost::asio::io_context& io() { return io_; }
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  const DaemonConfig& config() const { return config_; }
  RunManager& runs() { return *runs_; }
  Store& store() { return *store_; }
  IterationSource* source() { return source_.get(); }
  // The loop latency of the source's events (null without a source).
  const LoopLatencySink* loop_latency() const { return loop_latency_.get(); }
  Uploader* uploader() { return uploader_.get(); }
  EnergySampler* energy_sampler() { return energy_.get(); }

  // What /metrics serves and the uploader pushes (projection families only when for_upload).
  std::vector<MetricFamily> Families(bool for_upload);

  Result<nlohmann::json> HandleControl(const ControlRequest& request);

 private:
  Daemon(DaemonConfig config, std::string config_path, DaemonOverrides overrides,
         DaemonParts parts);
  Status StartParts();
  void StartEnergySampler();
  // The process CPU clocks (RunManager::SampleProcessCpu), rescheduled by itself.
  void SampleProcessCpuLater();
  void Every(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
             std::function<void()> job);
  void Shutdown();
  // The state database (daemon_store.cpp): a flush that first retries a store that could not
  // write, and one log line per change of its write health.
  Status FlushState();
  void LogStoreHealth();
  nlohmann::json StoreJson() const;
  // READY=1 and the watchdog keep-alives, when run by systemd.
  void NotifySystemd();
  RunManagerOptions RunOptions() const;
  static RunManagerOptions RunOptions(const DaemonConfig& config);
  UploaderOptions UploadOptions() const;
  static UploaderOptions UploadOptions(const DaemonConfig& config);
  static MetricsServerOptions MetricsOptions(const DaemonConfig& c);
  MetricsServerOptions MetricsOptions() const { return MetricsOptions(config_); }
  nlohmann::json StatusJson();
  std::vector<MetricFamily> AgentFamilies() const;
  // The control commands (control_views.cpp), one each; HandleControl dispatches.
  Result<nlohmann::json> ControlStatus(const ControlRequest& request);
  Result<nlohmann::json> ControlRuns(const ControlRequest& request);
  Result<nlohmann::json> ControlShow(const ControlRequest& request);
  Result<nlohmann::json> ControlHistory(const ControlRequest& request);
  Result<nlohmann::json> ControlPause(const ControlRequest& request);
  Result<nlohmann::json> ControlResume(const ControlRequest& request);
  nlohmann::json PauseJson() const;
  Status AddReport(int64_t run_id, int64_t days, nlohmann::json& out);

  DaemonConfig config_;
  std::string config_path_;
  DaemonOverrides overrides_;
  DaemonParts parts_;
  boost::asio::io_context io_{1};
  boost::asio::signal_set signals_;
  boost::asio::steady_timer flush_timer_;
  boost::asio::steady_timer idle_timer_;
  boost::asio::steady_timer prune_timer_;
  boost::asio::steady_timer energy_timer_;
  boost::asio::steady_timer process_cpu_timer_;  // SampleProcessCpuLater
  boost::asio::steady_timer watchdog_timer_;  // WATCHDOG=1 to systemd (systemd_notify.h)
  SystemdNotifier notifier_ = SystemdNotifier::FromEnvironment();
  boost::asio::steady_timer profiler_timer_;  // runs.profiler_scan_interval_ms
  // Every watched process is scanned for profilers at least this often, library loads reported
  // or not (a backstop for lost events); in between only on events (daemon.cpp).
  static constexpr int64_t kFullProfilerScanNs = 60'000'000'000;
  int64_t last_full_profiler_scan_ns_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RunManager> runs_;
  fleet::StragglerObserver stragglers_;  // the ranks of data-parallel runs (agent/fleet)
  std::unique_ptr<IterationSource> source_;
  std::unique_ptr<LoopLatencySink> loop_latency_;  // between source_ and runs_: times each event
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<Uploader> uploader_;
  std::string source_error_;               // why there is no iteration source, when there is none
  std::unique_ptr<EnergySampler> energy_;  // energy on every iteration, when a source is present
  std::string energy_error_;               // why there is none
  int64_t energy_interval_ms_ = 0;         // as started (a reload needs a restart for it)
  int64_t started_unix_ = 0;
  SeriesLedger series_ledger_;                // what runs.max_series left out (series_cap.h)
  const std::string node_name_ = NodeName();  // the `node` label
  uint64_t reloads_ = 0;
  uint64_t reload_failures_ = 0;
  std::string last_reload_error_;  // of the last failed reload, until one works
  std::string resume_error_;       // why the store's active runs could not be listed at start
  bool shut_down_ = false;
  uint64_t store_health_logged_ = 0;  // StoreWriteHealth::changes when last logged
  std::string final_flush_error_;     // why the state could not be saved at shutdown
};

}  // namespace seqpoint::daemon
