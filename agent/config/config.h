// seqpointd's configuration (docs/architecture.md): one typed struct, every field with an
// in-class default and a comment. The TOML file (/etc/seqpoint/seqpointd.toml) sets any subset
// of the keys listed by ConfigKeys(); an unknown key or a value of the wrong type is an error
// that names the file, the line and the key. `seqpointd --print-default-config` writes every
// key with its documentation and default, generated from the same table, so the two never drift.
//
// Threads: a DaemonConfig is a plain value, copied on reload (SIGHUP) and never shared mutably.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector_config.h"
#include "probes/zero_code_probe.h"
#include "common/status.h"

namespace seqpoint::daemon {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct DaemonConfig {
  // [daemon]
  LogLevel log_level = LogLevel::kInfo;         // error | warn | info | debug
  std::string state_dir = "/var/lib/seqpoint";  // SQLite state (state.db) lives here
  std::string runtime_dir = "/run/seqpoint";    // control socket lives here
  std::string proc_root = "/proc";              // procfs root (tests inject a fixture)
  int64_t flush_interval_ms = 1000;             // how often run state is written: the durability window

  // [control]
  std::string control_socket;                // empty: <runtime_dir>/control.sock
  std::string control_group;                 // group allowed besides root; empty: none
  int64_t control_max_request_bytes = 4096;  // one request line, newline included
  int64_t control_max_clients = 16;          // concurrent connections
  int64_t control_client_timeout_ms = 5000;  // to send a request line, or read an answer

  // [metrics]
  std::string metrics_listen = "127.0.0.1:9464";  // host:port of /metrics; empty: disabled
  int64_t metrics_max_connections = 64;      // served at once; then idle ones closed, or 503
  int64_t metrics_idle_timeout_ms = 120000;  // a kept-alive connection waits this for a request
  int64_t metrics_header_timeout_ms = 5000;  // a request header must arrive within this

  // [runs]
  std::string run_group_by = "auto";  // auto | env:NAME | cgroup | pid
  std::string run_only_key;           // watch only run keys with this prefix (empty: all)
  int64_t run_budget = 4096;             // at most this many iterations measured per run
  double run_budget_fraction = 0;        // and at most this fraction of iterations (0: off)
  int64_t run_budget_per_doubling = 16;  // measurements per doubling of the run (0: caps only)
  double run_target_error_pct = 0.5;     // cost-proxy error the selector's bins aim at
  // Both off by default. bench/budget_share.py: the accuracy target stops a steady run's
  // stretches early and its time intervals then cover less (36/36 -> 29/36). The overhead cap
  // changes nothing on recorded runs replayed offline, but live its cost estimate is noisy and
  // errs high, and the candidates it holds back skew the sample: a replayed run's time self-check
  // then missed by -8.4% (agent_upload_test), so its time was left out. Until the selector
  // spreads held-back samples over the stretch, measuring stays paced by the count alone.
  double run_target_error = 0;  // a stratum's time this precise (95% half-width): done (0: off)
  double run_max_overhead = 0.02;  // share of a run's time its measurements may cost (0: no cap)
  int64_t run_warmup_iterations = 0;     // iterations never measured at a run's start
  int64_t run_idle_timeout_s = 600;      // an active run whose processes are gone is closed
  int64_t closed_runs_kept = 1000;  // closed runs kept in state.db, newest first (~100 KiB each)
  int64_t history_retention_days = 365;  // bin-cost history kept for efficiency-over-time
  // Energy on every iteration: the energy counter (collectors.energy.sources) is read this
  // often; an iteration's energy is interpolated at its probe timestamps (0: energy only on
  // SeqPoints, by the energy collector).
  int64_t run_energy_sample_interval_ms = 50;
  int64_t run_observer_control_every = 4;    // one chosen iteration in N: timed, no collectors
  double run_observer_threshold_pct = 5;     // measured iterations slower than this: flagged
  std::string run_observer_action = "drop";  // drop (the blamed collectors, in that run) | flag
  int64_t run_observer_node_drop_s = 0;  // > 0: a drop also holds node-wide for this long
  // Profiler back-off (agent/measure/profiler_watch.h): a process that maps one of these libraries,
  // or runs under one of these commands, is left to the profiler; its collectors resume this
  // long after the profiler was last seen. Both lists empty: no scan.
  std::vector<std::string> run_profiler_libraries = {"libcupti", "libnvperf", "librocprofiler",
                                                     "rocprofiler-sdk"};
  std::vector<std::string> run_profiler_commands = {"nsys", "ncu", "rocprof", "rocprofv3",
                                                    "omniperf"};
  int64_t run_profiler_scan_interval_ms = 1000;  // how often processes are checked
  int64_t run_profiler_hold_down_s = 10;         // profiler gone this long: collectors resume
  // The GPU window rule (collectors/gpu/sync_window.h): a measured window's GPU values are kept
  // when a CUDA/HIP sync returned within tail_ms before its CPU end, or within bound_ms after.
  int64_t run_gpu_sync_tail_ms = 2;
  int64_t run_gpu_sync_bound_ms = 1000;
  int64_t run_max_series = 20000;  // per-run series on /metrics and upload; beyond: overflow

  // [upload]
  std::string upload_url;                     // Prometheus remote-write URL (http://); empty: off
  int64_t upload_interval_s = 15;             // projections are sampled and spooled this often
  int64_t upload_timeout_s = 10;              // one HTTP request
  int64_t upload_backoff_initial_ms = 500;    // first retry delay; doubles on every failure
  int64_t upload_backoff_max_s = 5;           // retry delay cap (Prometheus' max_backoff)
  int64_t upload_spool_max_bytes = 64 << 20;  // bounded spool: oldest batches dropped beyond
  int64_t upload_batch_max_samples = 2000;    // samples per spooled batch
  std::map<std::string, std::string> upload_labels;  // extra labels on every series
  // https:// (upload_security.h): the endpoint is verified against the system CA store plus
  // tls_ca_file, for the URL's host or tls_server_name; optional client certificate (mTLS).
  std::string upload_tls_ca_file;      // extra CA bundle (PEM); empty: the system store only
  std::string upload_tls_cert_file;    // client certificate (PEM), with tls_key_file
  std::string upload_tls_key_file;     // its private key (PEM, unencrypted)
  std::string upload_tls_server_name;  // name to verify and send as SNI; empty: the URL's host
  bool upload_tls_insecure_skip_verify = false;  // no certificate check at all (warned in log)
  // Credentials, read from files before each request (never logged): one of the two kinds.
  std::string upload_bearer_token_file;         // "Authorization: Bearer <file contents>"
  std::string upload_basic_auth_user;           // HTTP basic auth user, with the password file
  std::string upload_basic_auth_password_file;  // its password

  // [probes]
  int64_t probes_discover_interval_ms = 2000;  // how often new training processes are sought
  int64_t probes_poll_interval_ms = 1000;      // batched end records are read at least this often
  // Ring buffer for iteration records (~112 B each). Pinned, it also holds what the daemon has
  // read but not yet saved, and what comes while no daemon runs: 8 MiB is ~5 s of 10^4
  // iterations per second beyond the save backlog.
  int64_t probes_ring_buffer_kib = 8192;
  // bpffs directory where the probes are pinned, so they keep counting across a restart and
  // the next daemon adopts them (docs/architecture.md "Restarts"); empty: not pinned.
  std::string probes_pin_dir = "/sys/fs/bpf/seqpoint";
  // Zero-code probes (config_zero_code.h): presets enabled by name (the RNN ones: a few uprobe
  // hits per iteration; GEMM presets are opt-in, one hit per GEMM call), and custom probes.
  std::vector<std::string> probes_zero_code = {"miopen-rnn", "cudnn-rnn", "cudnn9-rnn"};
  std::vector<probes::ZeroCodeProbe> probes_zero_code_custom;  // [probes.zero_code_custom.NAME]

  // [collectors]: keys collectors.<name>.<field>, owned by collectors/collector_config.h.
  collectors::CollectorConfig collectors;

  // Paths derived from the above.
  std::string ControlSocketPath() const;
  std::string StateDbPath() const;
};

// Documentation of one key, used for --print-default-config and error messages.
struct ConfigKeyDoc {
  std::string_view key;       // "runs.budget"
  std::string_view type;      // "integer", "string", ...
  std::string default_value;  // TOML literal
  std::string_view doc;       // one line
};
std::vector<ConfigKeyDoc> ConfigKeys();
// A string as a TOML value in the printed config (escaped): the one helper both key tables use.
std::string TomlQuote(const std::string& s);

// Parses TOML text; `source` names it in errors ("seqpointd.toml:12:3: ...").
Result<DaemonConfig> ParseConfig(std::string_view text, std::string_view source);
// Reads and parses a file. A missing file is an error unless `missing_ok` (then defaults).
// Anything but a regular file (a directory, a FIFO, a device) is refused, as is a file over
// kMaxConfigFileBytes; an unreadable one is an error of kind kPermissionDenied that says so.
inline constexpr int64_t kMaxConfigFileBytes = 1 << 20;
Result<DaemonConfig> LoadConfig(const std::string& path, bool missing_ok);
// A documented TOML file holding every key at its default, commented out.
std::string DefaultConfigToml();

Result<LogLevel> ParseLogLevel(std::string_view name);
std::string_view LogLevelName(LogLevel level);

}  // namespace seqpoint::daemon
