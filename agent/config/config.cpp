// Config loading: one table of keys (name, type, doc, getter, setter) drives parsing, the
// unknown-key check and the documented default file. toml++ throws on syntax errors; the
// exception is caught here and never crosses this file.
#include "agent/config/config.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>

#include "agent/config/config_validate.h"
#include "agent/config/config_zero_code.h"
#include "agent/config/config_zero_code_toml.h"
#include "collectors/perf/perf_event_names.h"

namespace seqpoint::daemon {
namespace {

using Setter = std::function<Status(const toml::node&, DaemonConfig&)>;
using Getter = std::function<std::string(const DaemonConfig&)>;

struct KeySpec {
  std::string_view key;
  std::string_view type;
  std::string_view doc;
  Getter get;
  Setter set;
};


// A TOML basic string, as the user would write it in the file ("64", not '64').
std::string DoubleQuoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// What a value of the wrong type is, for "must be an integer, found a string (\"64\")".
std::string Found(const toml::node& n) {
  std::ostringstream v;
  if (const auto* s = n.as_string()) return "a string (" + DoubleQuoted(**s) + ")";
  if (const auto* i = n.as_integer()) return "an integer (" + std::to_string(**i) + ")";
  if (const auto* f = n.as_floating_point()) {
    v << *f;
    return "a float (" + v.str() + ")";
  }
  if (const auto* b = n.as_boolean()) return std::string("a boolean (") + (**b ? "true" : "false") + ")";
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date or time";
}

// A string holding what the key wants ("64" for an integer): the fix is to drop the quotes.
std::optional<std::string> Unquoted(const toml::node& n, std::string_view type) {
  const auto* s = n.as_string();
  if (s == nullptr) return std::nullopt;
  const std::string& text = **s;
  if (type == "boolean") {
    if (text == "true" || text == "false") return text;
    return std::nullopt;
  }
  if (type != "integer" && type != "float") return std::nullopt;
  size_t start = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  bool digits = text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos;
  if (digits) return text;  // an integer, which a float key takes too
  if (type == "float") {
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(v)) return text;
  }
  return std::nullopt;
}

KeySpec Str(std::string_view key, std::string DaemonConfig::*field, std::string_view doc) {
  return {key, "string", doc, [field](const DaemonConfig& c) { return TomlQuote(c.*field); },
          [field](const toml::node& n, DaemonConfig& c) {
            if (!n.is_string()) return InvalidArgument("must be a string, found " + Found(n));
            c.*field = **n.as_string();
            return Status::Ok();
          }};
}

KeySpec Int(std::string_view key, int64_t DaemonConfig::*field, int64_t min, int64_t max,
            std::string_view doc) {
  return {key, "integer", doc, [field](const DaemonConfig& c) { return std::to_string(c.*field); },
          [field, min, max](const toml::node& n, DaemonConfig& c) {
            if (!n.is_integer()) return InvalidArgument("must be an integer, found " + Found(n));
            int64_t v = **n.as_integer();
            if (v < min || v > max) {
              return InvalidArgument("must be between " + std::to_string(min) + " and " +
                                     std::to_string(max) + ", got " + std::to_string(v));
            }
            c.*field = v;
            return Status::Ok();
          }};
}

KeySpec Dbl(std::string_view key, double DaemonConfig::*field, double min, double max,
            std::string_view doc) {
  return {key, "float", doc,
          [field](const DaemonConfig& c) {
            std::ostringstream out;
            out << toml::value<double>(c.*field);
            return out.str();
          },
          [field, min, max](const toml::node& n, DaemonConfig& c) {
            if (!n.is_number()) return InvalidArgument("must be a number, found " + Found(n));
            double v = n.value<double>().value_or(0);
            if (!(v >= min && v <= max)) {
              return InvalidArgument("must be between " + std::to_string(min) + " and " +
                                     std::to_string(max));
            }
            c.*field = v;
            return Status::Ok();
          }};
}

KeySpec StrList(std::string_view key, std::vector<std::string> DaemonConfig::*field,
                std::string_view doc) {
  return {key, "array of strings", doc,
          [field](const DaemonConfig& c) {
            std::string out = "[";
            for (const auto& s : c.*field) out += (out.size() > 1 ? ", " : "") + TomlQuote(s);
            return out + "]";
          },
          [field](const toml::node& n, DaemonConfig& c) {
            const toml::array* a = n.as_array();
            if (a == nullptr) return InvalidArgument("must be an array of strings");
            std::vector<std::string> v;
            for (const toml::node& e : *a) {
              if (!e.is_string()) return InvalidArgument("must be an array of strings");
              v.push_back(**e.as_string());
            }
            c.*field = std::move(v);
            return Status::Ok();
          }};
}

const std::vector<KeySpec>& Specs() {
  static const std::vector<KeySpec> specs = {
      {"daemon.log_level", "string",
       "error | warn | info | debug (stderr; the journal under systemd)",
       [](const DaemonConfig& c) { return TomlQuote(std::string(LogLevelName(c.log_level))); },
       [](const toml::node& n, DaemonConfig& c) {
         if (!n.is_string()) return InvalidArgument("must be a string, found " + Found(n));
         auto l = ParseLogLevel(**n.as_string());
         if (!l.ok()) return l.status();
         c.log_level = *l;
         return Status::Ok();
       }},
      Str("daemon.state_dir", &DaemonConfig::state_dir,
          "SQLite state (state.db); restart resumes from it"),
      Str("daemon.runtime_dir", &DaemonConfig::runtime_dir, "the control socket's directory"),
      Str("daemon.proc_root", &DaemonConfig::proc_root,
          "procfs root, for process discovery and run labels"),
      Int("daemon.flush_interval_ms", &DaemonConfig::flush_interval_ms, 100, 3600000,
          "how often run state is written to the state database: the most a SIGKILL loses"),
      Str("control.socket", &DaemonConfig::control_socket,
          "control socket path; empty: <runtime_dir>/control.sock"),
      Str("control.group", &DaemonConfig::control_group,
          "group whose members may use the socket besides root; empty: root only"),
      Int("control.max_request_bytes", &DaemonConfig::control_max_request_bytes, 64, 1 << 20,
          "longest request line accepted; longer requests are refused"),
      Int("control.max_clients", &DaemonConfig::control_max_clients, 1, 1024,
          "concurrent control connections; at the limit a new client closes the one idle the "
          "longest, and is refused only when every one is mid-request"),
      Int("control.client_timeout_ms", &DaemonConfig::control_client_timeout_ms, 100, 3600000,
          "a control client must send each request line, and read each answer, within this "
          "long; an idle connection is closed after it"),
      Str("metrics.listen", &DaemonConfig::metrics_listen,
          "host:port serving /metrics; empty: disabled"),
      Int("metrics.max_connections", &DaemonConfig::metrics_max_connections, 1, 10000,
          "connections /metrics serves at once; at the limit a new one closes the connection "
          "idle the longest, and is answered 503 (Retry-After: 1) only when every one is "
          "mid-request"),
      Int("metrics.idle_timeout_ms", &DaemonConfig::metrics_idle_timeout_ms, 100, 3600000,
          "a kept-alive /metrics connection is closed after waiting this long for its next "
          "request (longer than the scrape interval lets Prometheus keep its connection)"),
      Int("metrics.header_timeout_ms", &DaemonConfig::metrics_header_timeout_ms, 100, 600000,
          "a request header must arrive within this of its first byte (a new connection's "
          "first request, within this of connecting), or the connection is closed: a slow "
          "sender holds a connection no longer"),
      Str("runs.group_by", &DaemonConfig::run_group_by,
          "what groups ranks into one run: auto (the job its launcher names: torchrun, Slurm, "
          "MPI, a Kubernetes pod, then SEQPOINT_RUN_ID, then the process), env:NAME "
          "(environment variable), cgroup, or pid"),
      Str("runs.only_key", &DaemonConfig::run_only_key,
          "watch only processes whose run key starts with this (a private daemon watching its "
          "own job, as the demo's); empty: every process that marks iterations"),
      Int("runs.budget", &DaemonConfig::run_budget, 1, 1000000,
          "at most this many iterations per run measured by the collectors (the SeqPoints' "
          "cost), whatever the run's length"),
      Dbl("runs.budget_fraction", &DaemonConfig::run_budget_fraction, 0, 1,
          "and at most this fraction of the iterations so far (0: count cap only)"),
      Int("runs.budget_per_doubling", &DaemonConfig::run_budget_per_doubling, 0, 1000000,
          "measurements released per doubling of the run (k in the first 64 iterations, k more "
          "in every doubling after), so the budget lasts a run of unknown length and every "
          "stretch of it is measured; 0: the caps alone, spent as early as the bins want"),
      Dbl("runs.target_error_pct", &DaemonConfig::run_target_error_pct, 0.001, 100,
          "representative error on the cost proxy that the selector's SL bins aim at"),
      Dbl("runs.target_error", &DaemonConfig::run_target_error, 0, 1,
          "a budget set by accuracy: a stretch of the run (time stratum, doubling window) is "
          "measured no further once the relative half-width of the 95% interval of its total "
          "time is at most this (0.02: 2%); 0: off, the budget caps alone"),
      Dbl("runs.max_overhead", &DaemonConfig::run_max_overhead, 0, 1,
          "a budget set by overhead: at most this share of a run's time so far spent on "
          "measured iterations, at the added time of one (from the observer-effect controls, "
          "else from measured iterations against their SL's mean); a run's first 8 "
          "measurements are never held back; 0: no cap"),
      Int("runs.warmup_iterations", &DaemonConfig::run_warmup_iterations, 0, 1000000,
          "first iterations of a run never measured; the warm-up itself is found from the "
          "iterations' times and projected as its own stratum"),
      Int("runs.idle_timeout_s", &DaemonConfig::run_idle_timeout_s, 1, 86400 * 30,
          "a run whose processes are all gone for this long is closed as finished"),
      Int("runs.closed_runs_kept", &DaemonConfig::closed_runs_kept, 1, 1000000,
          "closed runs kept in the state database, the newest (each ~100 KiB: histogram, "
          "SeqPoints, measurements, projections); older ones are deleted at start and every "
          "6 hours, active runs never"),
      Int("runs.history_retention_days", &DaemonConfig::history_retention_days, 1, 36500,
          "days of per-SL-bin cost history kept (efficiency over time)"),
      Int("runs.energy_sample_interval_ms", &DaemonConfig::run_energy_sample_interval_ms, 0, 10000,
          "energy on every iteration: the counter of collectors.energy.sources is read this "
          "often and interpolated at the iterations' timestamps (resolution ~ this interval); "
          "0: energy on SeqPoints only"),
      Int("runs.observer_effect_control_every", &DaemonConfig::run_observer_control_every, 0, 1000,
          "one in this many chosen iterations is a control: timed, measured by no collector, so "
          "that the slowdown measuring causes can be told from drift (0 or 1: no controls, no "
          "observer-effect check)"),
      Dbl("runs.observer_effect_threshold_pct", &DaemonConfig::run_observer_threshold_pct, 0, 1000,
          "flag a run whose collector-measured iterations are slower than the control "
          "iterations by more than this: an always-valid sequential sign test over the control "
          "pairs, whose chance of ever flagging a run without such a slowdown is at most 1% "
          "over the whole run and all its counter groups"),
      Str("runs.observer_effect_action", &DaemonConfig::run_observer_action,
          "drop (the default: an agent must not slow the training it watches): warn, mark "
          "projections perturbed and stop the collectors blamed for the rest of that run; "
          "flag: warn and mark only, the collectors go on"),
      Int("runs.observer_effect_node_drop_s", &DaemonConfig::run_observer_node_drop_s, 0,
          int64_t{30} * 86400,
          "with action drop: also start the node's later runs without a dropped collector for "
          "this many seconds after the drop (it shows in status and seqpoint_collector_up); 0: "
          "a drop holds only in the run where the slowdown was found"),
      StrList("runs.profiler_libraries", &DaemonConfig::run_profiler_libraries,
              "a watched process mapping a file whose name starts with one of these (or with "
              "\"lib\" and one of these) is being profiled: its collectors stop until the "
              "profiler is gone (librocprofiler-register, mapped by every HIP process, never "
              "counts, nor does libcupti beside libtorch_cuda: PyTorch's CUDA build links it in "
              "every process)"),
      StrList("runs.profiler_commands", &DaemonConfig::run_profiler_commands,
              "a watched process run by one of these (its own or an ancestor's command name or "
              "executable) is being profiled: its collectors stop until the profiler is gone"),
      Int("runs.profiler_scan_interval_ms", &DaemonConfig::run_profiler_scan_interval_ms, 100,
          60000,
          "how often every watched process is checked for a profiler (/proc/PID/maps and its "
          "ancestors): the longest a profiler and the collectors overlap"),
      Int("runs.profiler_hold_down_s", &DaemonConfig::run_profiler_hold_down_s, 0, 86400,
          "collectors resume once no profiler (or busy answer) was seen on the process for this "
          "long: a profiler that comes and goes holds one back-off, not one per visit"),
      Int("runs.gpu_sync_tail_ms", &DaemonConfig::run_gpu_sync_tail_ms, 0, 1000,
          "a measured window's GPU values (nvml, rocm_smi, gpu_metrics) are read at its end "
          "when the process's last CUDA/HIP sync returned at most this long before the end "
          "(the GPU had caught up); must be less than runs.gpu_sync_bound_ms"),
      Int("runs.gpu_sync_bound_ms", &DaemonConfig::run_gpu_sync_bound_ms, 1, 60000,
          "else they are read at the process's next sync if it returns within this long after "
          "the window's end; if none does, they are flagged and left out, counted in "
          "seqpoint_gpu_windows_total{outcome=\"not_closed\"} (a longer bound keeps more "
          "windows of loops that sync rarely, and holds the GPU collectors open longer)"),
      Int("runs.max_series", &DaemonConfig::run_max_series, 100, 10000000,
          "at most this many per-run series on /metrics and in each upload, counted run by run "
          "in run order: a run that would pass the cap is left out whole and counted in "
          "seqpoint_series_overflow_runs_total (docs/metrics.md, cardinality)"),
      Str("upload.url", &DaemonConfig::upload_url,
          "Prometheus remote-write URL (http:// or https://host:port/path); empty: no upload"),
      Int("upload.interval_s", &DaemonConfig::upload_interval_s, 1, 86400,
          "projections are sampled into the spool this often"),
      Int("upload.timeout_s", &DaemonConfig::upload_timeout_s, 1, 600, "one remote-write request"),
      Int("upload.backoff_initial_ms", &DaemonConfig::upload_backoff_initial_ms, 10, 600000,
          "first retry delay after a failed upload; doubles each failure"),
      Int("upload.backoff_max_s", &DaemonConfig::upload_backoff_max_s, 1, 86400,
          "retry delay cap: once the endpoint answers again, the spool starts draining within "
          "this long (5 s, as Prometheus' own remote-write max_backoff)"),
      Int("upload.spool_max_bytes", &DaemonConfig::upload_spool_max_bytes, 4096, int64_t{1} << 40,
          "spool bound; beyond it the oldest batches are dropped (counted in /metrics)"),
      Int("upload.batch_max_samples", &DaemonConfig::upload_batch_max_samples, 1, 1000000,
          "samples per remote-write request"),
      {"upload.labels", "table of strings",
       "extra labels on every uploaded series, e.g. { cluster = \"a\" }",
       [](const DaemonConfig& c) {
         std::string out = "{";
         for (const auto& [k, v] : c.upload_labels)
           out += (out.size() > 1 ? ", " : " ") + k + " = " + TomlQuote(v);
         return out + (c.upload_labels.empty() ? "}" : " }");
       },
       [](const toml::node& n, DaemonConfig& c) {
         const toml::table* t = n.as_table();
         if (t == nullptr) return InvalidArgument("must be a table of strings");
         c.upload_labels.clear();
         for (const auto& [k, v] : *t) {
           if (!v.is_string())
             return InvalidArgument("label '" + std::string(k.str()) + "' must be a string");
           c.upload_labels[std::string(k.str())] = **v.as_string();
         }
         return Status::Ok();
       }},
      Str("upload.tls_ca_file", &DaemonConfig::upload_tls_ca_file,
          "https: CA bundle (PEM) trusted in addition to the system store (/etc/ssl/certs),\n"
          "# e.g. your private CA; empty: the system store only"),
      Str("upload.tls_cert_file", &DaemonConfig::upload_tls_cert_file,
          "https: client certificate (PEM) for endpoints that require mutual TLS, with\n"
          "# tls_key_file; reloaded when the file changes"),
      Str("upload.tls_key_file", &DaemonConfig::upload_tls_key_file,
          "https: the client certificate's private key (PEM, unencrypted; readable by the\n"
          "# agent's user only)"),
      Str("upload.tls_server_name", &DaemonConfig::upload_tls_server_name,
          "https: name the endpoint's certificate must carry, also sent as SNI; empty: the\n"
          "# host of upload.url"),
      {"upload.tls_insecure_skip_verify", "boolean",
       "https: do not verify the endpoint's certificate at all (anyone on the path can read "
       "and\n# change the upload; logged as a warning at every start and reload). Tests only",
       [](const DaemonConfig& c) {
         return std::string(c.upload_tls_insecure_skip_verify ? "true" : "false");
       },
       [](const toml::node& n, DaemonConfig& c) {
         if (!n.is_boolean()) return InvalidArgument("must be true or false, found " + Found(n));
         c.upload_tls_insecure_skip_verify = **n.as_boolean();
         return Status::Ok();
       }},
      Str("upload.bearer_token_file", &DaemonConfig::upload_bearer_token_file,
          "file holding a token sent as \"Authorization: Bearer <token>\" (hosted Mimir, "
          "Grafana Cloud,\n# ...); read before every request, so a rotated token needs no reload"),
      Str("upload.basic_auth_user", &DaemonConfig::upload_basic_auth_user,
          "HTTP basic auth user (with basic_auth_password_file); not with bearer_token_file"),
      Str("upload.basic_auth_password_file", &DaemonConfig::upload_basic_auth_password_file,
          "file holding the basic auth password (trailing newline ignored); read before\n"
          "# every request"),
      Int("probes.discover_interval_ms", &DaemonConfig::probes_discover_interval_ms, 100, 600000,
          "how often new training processes are sought"),
      Int("probes.poll_interval_ms", &DaemonConfig::probes_poll_interval_ms, 10, 60000,
          "batched iteration records are read at least this often (hooked ones at once)"),
      Int("probes.ring_buffer_kib", &DaemonConfig::probes_ring_buffer_kib, 4, 1 << 20,
          "ring buffer for iteration events (a power of two). With pin_dir it also keeps\n"
          "# what comes while no daemon runs: 8 MiB is ~5 s at 10^4 iterations per second"),
      Str("probes.pin_dir", &DaemonConfig::probes_pin_dir,
          "bpffs directory where the probes stay attached and counting while seqpointd\n"
          "# restarts (a crash, systemctl restart, an upgrade): the next daemon adopts them and\n"
          "# reads what they recorded meanwhile. Empty: the probes go with the daemon. Removed\n"
          "# by `seqpointd --unpin` and when the package is removed"),
      {"probes.zero_code", "array of strings",
       "zero-code probes enabled by preset name, for jobs that do not mark their iterations\n"
       "# (uprobes on a library function whose argument is the SL). miopen-rnn, cudnn-rnn (cuDNN\n"
       "# 7/8), cudnn9-rnn (cuDNN 9, current PyTorch): a few uprobe hits per iteration (~3 us\n"
       "# each), on by default. Opt-in: rocblas-gemm, cublas-gemm, cublas-sgemm\n"
       "# (one hit per GEMM call: hundreds to thousands per iteration), "
       "torch-cpu-adam, torch-cpu-sgd\n# (one per BLAS sgemm_ call, ~2% CPU). A process with "
       "the seqpoint USDT provider uses only\n# that; any other gets the first probe whose "
       "libraries it maps (custom ones first,\n# by name)",
       [](const DaemonConfig& c) { return ZeroCodePresetNamesToml(c.probes_zero_code); },
       [](const toml::node& n, DaemonConfig& c) {
         return SetZeroCodePresetNames(n, &c.probes_zero_code);
       }},
      {"probes.zero_code_custom", "table of tables",
       "zero-code probes of your own, enabled when defined: one table each,\n"
       "# [probes.zero_code_custom.NAME] (NAME: letters, digits, _ and -) with the keys below",
       [](const DaemonConfig&) { return std::string("{}"); },  // none by default
       // Parsed by ParseZeroCodeCustom (ParseConfig), which names the line of each field.
       [](const toml::node&, DaemonConfig&) { return Status::Ok(); }},
  };
  return specs;
}

// A TOML value as collectors::SetCollectorOption takes it; nullopt for other shapes.
std::optional<collectors::CollectorOptionValue> ToCollectorValue(const toml::node& n,
                                                                 bool ints_for_empty) {
  if (n.is_boolean()) return collectors::CollectorOptionValue(**n.as_boolean());
  if (n.is_integer()) return collectors::CollectorOptionValue(**n.as_integer());
  if (n.is_string()) return collectors::CollectorOptionValue(**n.as_string());
  const toml::array* a = n.as_array();
  if (a == nullptr) return std::nullopt;
  if (a->empty()) {
    if (ints_for_empty) return collectors::CollectorOptionValue(std::vector<int64_t>{});
    return collectors::CollectorOptionValue(std::vector<std::string>{});
  }
  if (a->is_homogeneous(toml::node_type::string)) {
    std::vector<std::string> v;
    for (const toml::node& e : *a) v.push_back(**e.as_string());
    return collectors::CollectorOptionValue(std::move(v));
  }
  if (a->is_homogeneous(toml::node_type::integer)) {
    std::vector<int64_t> v;
    for (const toml::node& e : *a) v.push_back(**e.as_integer());
    return collectors::CollectorOptionValue(std::move(v));
  }
  return std::nullopt;
}

std::string Where(std::string_view source, const toml::source_region& r);

// Levenshtein distance, for "nearest valid names".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every name of collectors.perf.events must be one the perf collector can open (a generic perf
// name or r<hex>): a misspelt one would otherwise pass here and only be dropped at run time.
Status CheckPerfEventNames(const toml::node& value, const std::string& key,
                           std::string_view source) {
  const toml::array* names = value.as_array();
  if (names == nullptr) return Status::Ok();
  for (const toml::node& e : *names) {
    const auto* name = e.as_string();
    if (name == nullptr || collectors::ParsePerfEvent(**name).ok()) continue;
    std::vector<std::pair<size_t, std::string>> near;
    for (const std::string& known : collectors::KnownPerfEventNames()) {
      near.emplace_back(EditDistance(**name, known), known);
    }
    std::stable_sort(near.begin(), near.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string nearest;
    size_t shown = 0;
    for (; shown < near.size() && shown < 3 && near[shown].first <= near[0].first + 2; ++shown) {
      nearest += (shown ? ", " : "") + DoubleQuoted(near[shown].second);
    }
    return InvalidArgument(Where(source, e.source()) + ": key '" + key + "': unknown perf event " +
                           DoubleQuoted(**name) + "; nearest valid name" + (shown > 1 ? "s: " : ": ") + nearest +
                           " (or a raw PMU event r<hex>; the generic names are those of `perf list`)");
  }
  return Status::Ok();
}

// [collectors] and its sub-tables: every leaf goes to the collectors' own key table.
Status ParseCollectorTable(const toml::table& table, const std::string& prefix,
                           std::string_view source, collectors::CollectorConfig* out) {
  for (const auto& [key, value] : table) {
    std::string full = prefix + "." + std::string(key.str());
    if (const toml::table* sub = value.as_table()) {
      SEQPOINT_RETURN_IF_ERROR(ParseCollectorTable(*sub, full, source, out));
      continue;
    }
    auto v = ToCollectorValue(value, false);
    Status st = v ? collectors::SetCollectorOption(out, full, *v)
                  : InvalidArgument("has a value of an unsupported type");
    if (!st.ok() && v && value.is_array() && value.as_array()->empty()) {
      st = collectors::SetCollectorOption(out, full, *ToCollectorValue(value, true));
    }
    if (!st.ok()) {
      std::string known;
      for (const auto& k : collectors::CollectorConfigKeys()) {
        if (k.key == full) known = std::string(k.type);
      }
      if (known.empty()) {
        return InvalidArgument(Where(source, key.source()) + ": unknown key '" + full +
                               "' (see `seqpointd --print-default-config` for the collectors."
                               "* keys): " +
                               st.message());
      }
      return InvalidArgument(Where(source, value.source()) + ": key '" + full + "' " +
                             st.message() + " (expected " + known + ")");
    }
    if (full == "collectors.perf.events") {
      SEQPOINT_RETURN_IF_ERROR(CheckPerfEventNames(value, full, source));
    }
  }
  return Status::Ok();
}

std::string Where(std::string_view source, const toml::source_region& r) {
  return std::string(source) + ":" + std::to_string(r.begin.line) + ":" +
         std::to_string(r.begin.column);
}

std::string KnownKeys(std::string_view section) {
  std::string out;
  for (const KeySpec& s : Specs()) {
    if (s.key.substr(0, s.key.find('.')) != section) continue;
    out += (out.empty() ? "" : ", ") + std::string(s.key.substr(s.key.find('.') + 1));
  }
  return out;
}

// A key written before any [section]: "did you mean [runs] budget?" when some section has it.
std::string TopLevelHint(const std::string& name) {
  std::vector<std::string> places;
  auto consider = [&](std::string_view key) {
    size_t dot = key.rfind('.');
    if (dot != std::string_view::npos && key.substr(dot + 1) == name) {
      places.push_back("[" + std::string(key.substr(0, dot)) + "] " + name);
    }
  };
  for (const KeySpec& s : Specs()) consider(s.key);
  for (const auto& k : collectors::CollectorConfigKeys()) consider(k.key);
  if (places.empty()) {
    return "every key belongs in a section ([daemon], [control], [metrics], [runs], [upload], "
           "[probes], [collectors]; see `seqpointd --print-default-config`)";
  }
  std::string out = "did you mean ";
  for (size_t i = 0; i < places.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == places.size() ? " or " : ", ") + places[i];
  }
  return out + "? (put it under that section header)";
}

// ValidateConfig's errors start with the key they are about ("runs.observer_effect_action must
// be ..."): name that key's file:line:column, as the parse errors do.
Status LocateCheckError(const Status& error,
                        const std::vector<std::pair<std::string, toml::source_region>>& set_at,
                        std::string_view source) {
  const std::string& m = error.message();
  const std::pair<std::string, toml::source_region>* found = nullptr;
  for (const auto& entry : set_at) {
    const std::string& k = entry.first;
    if (m.size() > k.size() && m.compare(0, k.size(), k) == 0 &&
        (m[k.size()] == ' ' || m[k.size()] == ':') &&
        (found == nullptr || k.size() > found->first.size())) {
      found = &entry;
    }
  }
  if (found == nullptr) return error.WithContext(std::string(source));
  return InvalidArgument(Where(source, found->second) + ": key '" + found->first + "'" +
                         m.substr(found->first.size()));
}

}  // namespace

std::string DaemonConfig::ControlSocketPath() const {
  return control_socket.empty() ? runtime_dir + "/control.sock" : control_socket;
}
std::string DaemonConfig::StateDbPath() const { return state_dir + "/state.db"; }

std::vector<ConfigKeyDoc> ConfigKeys() {
  DaemonConfig defaults;
  std::vector<ConfigKeyDoc> out;
  for (const KeySpec& s : Specs()) {
    out.push_back({s.key, s.type, s.get(defaults), s.doc});
    if (s.key == "probes.zero_code_custom") {
      for (const ConfigKeyDoc& f : ZeroCodeCustomKeyDocs()) out.push_back(f);
    }
  }
  for (const auto& k : collectors::CollectorConfigKeys()) {
    out.push_back({k.key, k.type, k.default_value, k.doc});
  }
  return out;
}

Result<DaemonConfig> ParseConfig(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(Where(source, e.source()) + ": " + std::string(e.description()) +
                           " (fix the TOML syntax)");
  }
  DaemonConfig config;
  std::vector<std::pair<std::string, toml::source_region>> set_at;  // key -> its value's place
  for (const auto& [section_key, section] : root) {
    std::string section_name(section_key.str());
    if (section_name == "collectors") {
      const toml::table* t = section.as_table();
      if (t == nullptr) {
        return InvalidArgument(Where(source, section.source()) + ": 'collectors' must be a table");
      }
      SEQPOINT_RETURN_IF_ERROR(ParseCollectorTable(*t, "collectors", source, &config.collectors));
      continue;
    }
    if (!section.is_table() && KnownKeys(section_name).empty()) {
      return InvalidArgument(Where(source, section_key.source()) + ": unknown key '" +
                             section_name + "' at the top level; " +
                             TopLevelHint(section_name));
    }
    if (KnownKeys(section_name).empty()) {
      return InvalidArgument(Where(source, section_key.source()) + ": unknown section '" +
                             section_name +
                             "' (known: daemon, control, metrics, runs, upload, "
                             "probes, collectors)");
    }
    const toml::table* table = section.as_table();
    if (table == nullptr) {
      return InvalidArgument(Where(source, section.source()) + ": '" + section_name +
                             "' must be a table ([" + section_name + "])");
    }
    for (const auto& [key, value] : *table) {
      std::string full = section_name + "." + std::string(key.str());
      if (full == "probes.zero_code_custom") {  // a table of tables: errors name the field's line
        SEQPOINT_RETURN_IF_ERROR(
            ParseZeroCodeCustom(value, source, &config.probes_zero_code_custom));
        continue;
      }
      const KeySpec* spec = nullptr;
      for (const KeySpec& s : Specs()) {
        if (s.key == full) spec = &s;
      }
      if (spec == nullptr) {
        return InvalidArgument(Where(source, key.source()) + ": unknown key '" + full +
                               "' (known keys in [" + section_name +
                               "]: " + KnownKeys(section_name) + ")");
      }
      Status st = spec->set(value, config);
      if (!st.ok()) {
        std::string why = st.message();
        if (auto fix = Unquoted(value, spec->type)) {
          why += "; write " + std::string(key.str()) + " = " + *fix;
        } else if (why.find(", found ") == std::string::npos) {  // a type error says enough
          why += " (expected " + std::string(spec->type) + ")";
        }
        return InvalidArgument(Where(source, value.source()) + ": key '" + full + "' " + why);
      }
      set_at.emplace_back(full, value.source());
    }
  }
  Status valid = ValidateConfig(config);
  if (!valid.ok()) return LocateCheckError(valid, set_at, source);
  return config;
}

namespace {

// What a non-regular file is, for "is a directory, not a regular file".
std::string FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string UserName() {
  uid_t uid = geteuid();
  const passwd* pw = getpwuid(uid);
  std::string name = pw != nullptr ? std::string("'") + pw->pw_name + "' " : std::string();
  return "user " + name + "(uid " + std::to_string(uid) + ")";
}

Status PermissionDeniedConfig(const std::string& path) {
  return PermissionDenied("cannot read config file '" + path +
                          "': permission denied (seqpointd runs as " + UserName() +
                          "; make the file readable by it, e.g. `chmod 0644 " + path +
                          "`, and every directory above it searchable)");
}

Status NotRegularConfig(const std::string& path, mode_t mode) {
  return InvalidArgument("config file '" + path + "' is " + FileKind(mode) +
                         ", not a regular file (pass the path of a TOML file, e.g. "
                         "--config /etc/seqpoint/seqpointd.toml)");
}

Status TooLargeConfig(const std::string& path, const std::string& size) {
  return InvalidArgument("config file '" + path + "' is " + size + ", over the limit of " +
                         std::to_string(kMaxConfigFileBytes) +
                         " bytes for a config file (is it the right file?)");
}

}  // namespace

// The path is checked before it is opened: a directory would read as empty (and the daemon
// start on defaults), /dev/zero never ends, and a FIFO blocks open() until a writer comes. It
// is opened with O_NONBLOCK all the same, and checked again on the descriptor, in case the
// path changed in between.
Result<DaemonConfig> LoadConfig(const std::string& path, bool missing_ok) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT && missing_ok) return DaemonConfig{};
    if (err == EACCES) return PermissionDeniedConfig(path);
    if (err == ENOENT || err == ENOTDIR) {
      return NotFound("cannot open config file '" + path +
                      "' (create it, e.g. from `seqpointd --print-default-config`, or pass "
                      "--config PATH)");
    }
    return IoError("cannot open config file '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return NotRegularConfig(path, st.st_mode);
  if (st.st_size > kMaxConfigFileBytes) {
    return TooLargeConfig(path, std::to_string(st.st_size) + " bytes");
  }
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == EACCES || err == EPERM) return PermissionDeniedConfig(path);
    return IoError("cannot open config file '" + path + "': " + std::strerror(err));
  }
  std::string text;
  Status status = Status::Ok();
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = NotRegularConfig(path, st.st_mode);
  } else {
    char buf[8192];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = IoError("cannot read config file '" + path + "': " + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (static_cast<int64_t>(text.size()) > kMaxConfigFileBytes) {
        status =
            TooLargeConfig(path, "more than " + std::to_string(kMaxConfigFileBytes) + " bytes");
        break;
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return ParseConfig(text, path);
}

std::string DefaultConfigToml() {
  std::string out =
      "# seqpointd configuration (/etc/seqpoint/seqpointd.toml). Every key is optional; the\n"
      "# values shown are the defaults. `seqpointd --check-config` validates this file.\n";
  std::string section;
  for (const ConfigKeyDoc& k : ConfigKeys()) {
    std::string s(k.key.substr(0, k.key.find('.')));
    if (s != section) {
      out += "\n[" + s + "]\n";
      section = s;
    }
    out += "# " + std::string(k.doc) + " (" + std::string(k.type) + ")\n";
    out += "# " + std::string(k.key.substr(k.key.find('.') + 1)) + " = " + k.default_value + "\n";
  }
  return out;
}

Result<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  return InvalidArgument("log level '" + std::string(name) +
                         "' is not one of error, warn, info, debug");
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "info";
}

std::string TomlQuote(const std::string& s) {
  std::ostringstream out;
  out << toml::value<std::string>(s);
  return out.str();
}

}  // namespace seqpoint::daemon
