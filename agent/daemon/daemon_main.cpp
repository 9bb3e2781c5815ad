// seqpointd: the SeqPoint node agent. Parses the command line, loads the config and runs the
// Daemon until SIGTERM. Exit status: 0 clean stop or valid config, 1 runtime failure, 2 usage
// or config error.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "agent/daemon/daemon.h"
#include "agent/config/log.h"
#include "agent/daemon/config_checks.h"
#include "agent/daemon/source_factory.h"
#include "seqpoint/features.h"

namespace {

using namespace seqpoint::daemon;

constexpr const char* kDefaultConfig = "/etc/seqpoint/seqpointd.toml";

constexpr const char* kUsage = R"(usage: seqpointd [OPTIONS]
The SeqPoint node agent: finds training processes, picks SeqPoints online, measures only those
iterations, and exports live projections of whole-run metrics with 95% intervals.

options:
  --config PATH           config file (default /etc/seqpoint/seqpointd.toml; optional when
                          the default is absent)
  --check-config          validate the config (keys, types, values) and exit
  --print-default-config  print every key with its documentation and default, and exit
  --unpin                 remove the probes this config's daemon left pinned (probes.pin_dir,
                          per state dir), detaching them, and exit: for when no daemon comes
                          back (the package's removal does it for every state dir)
  --state-dir DIR         overrides daemon.state_dir (SQLite state)
  --runtime-dir DIR       overrides daemon.runtime_dir (control socket)
  --control-socket PATH   overrides control.socket
  --metrics-listen H:P    overrides metrics.listen ("" disables /metrics)
  --upload-url URL        overrides upload.url
  --log-level LEVEL       overrides daemon.log_level (error, warn, info, debug)
  --replay TRACE[@KEY]    replay a recorded iteration trace as a training process instead of
                          attaching probes (repeatable; KEY names its run); its metric columns
                          stand in for the collectors
  --replay-delay-us N     pause between replay steps of 64 rows (default 0)
  --replay-crash          the replayed processes die mid-iteration at the end of their trace
  --replay-from-row N     start the replay at row N (the rows before were missed)
  --replay-rows N         replay at most N rows
  --replay-no-exit        after the last row the replayed processes fall silent, not exit
  --replay-repeat N       replay each trace N times, as N runs one after another (soak tests)
  --version               print the version and exit
  --help                  show this help

Signals: SIGTERM/SIGINT stop after flushing state; SIGHUP reloads the config file.
)";

struct Args {
  std::string config = kDefaultConfig;
  bool config_given = false;
  bool check = false;
  bool print_defaults = false;
  bool unpin = false;
  DaemonOverrides overrides;
  ReplaySpec replay;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "seqpointd: %s\n(see seqpointd --help)\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::string_view name = arg.substr(0, arg.find('='));
    std::optional<std::string> inline_value;
    if (arg.find('=') != std::string_view::npos)
      inline_value = std::string(arg.substr(arg.find('=') + 1));
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 < args.size()) return std::string(args[++i]);
      return std::nullopt;
    };
    auto need = [&](std::optional<std::string>* out) {
      *out = value();
      return out->has_value();
    };
    std::optional<std::string> v;
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (name == "--version") {
      std::printf("seqpointd %s\n", SEQPOINT_VERSION);
      return 0;
    } else if (name == "--check-config") {
      a.check = true;
    } else if (name == "--print-default-config") {
      a.print_defaults = true;
    } else if (name == "--unpin") {
      a.unpin = true;
    } else if (name == "--replay-crash") {
      a.replay.crash_at_end = true;
    } else if (name == "--replay-no-exit") {
      a.replay.exit_at_end = false;
    } else if (name == "--config" || name == "--state-dir" || name == "--runtime-dir" ||
               name == "--control-socket" || name == "--metrics-listen" || name == "--upload-url" ||
               name == "--log-level" || name == "--replay" || name == "--replay-delay-us" ||
               name == "--replay-from-row" || name == "--replay-rows" ||
               name == "--replay-repeat") {
      if (!need(&v)) return Usage("option '" + std::string(name) + "' needs a value");
      if (name == "--config") {
        a.config = *v;
        a.config_given = true;
      } else if (name == "--state-dir") {
        a.overrides.state_dir = *v;
      } else if (name == "--runtime-dir") {
        a.overrides.runtime_dir = *v;
      } else if (name == "--control-socket") {
        a.overrides.control_socket = *v;
      } else if (name == "--metrics-listen") {
        a.overrides.metrics_listen = *v;
      } else if (name == "--upload-url") {
        a.overrides.upload_url = *v;
      } else if (name == "--log-level") {
        auto level = ParseLogLevel(*v);
        if (!level.ok()) return Usage(level.status().message());
        a.overrides.log_level = *level;
      } else if (name == "--replay") {
        a.replay.traces.push_back(*v);
      } else {
        char* end = nullptr;
        long long n = std::strtoll(v->c_str(), &end, 10);
        if (v->empty() || *end != '\0' || n < 0) {
          return Usage("option '" + std::string(name) + "' needs a non-negative integer");
        }
        if (name == "--replay-delay-us") a.replay.step_delay_us = n;
        if (name == "--replay-from-row") a.replay.first_row = static_cast<uint64_t>(n);
        if (name == "--replay-rows") a.replay.max_rows = static_cast<uint64_t>(n);
        if (name == "--replay-repeat") a.replay.repeat = static_cast<uint64_t>(std::max(1LL, n));
      }
    } else {
      return Usage("unknown option '" + std::string(arg) + "'");
    }
  }
  if (a.print_defaults) {
    std::fputs(DefaultConfigToml().c_str(), stdout);
    return 0;
  }
  auto config = LoadCheckedConfig(a.config, /*missing_ok=*/!a.config_given);
  if (!config.ok()) {
    std::fprintf(stderr, "seqpointd: %s\n", config.status().message().c_str());
    return 2;
  }
  if (a.unpin) {
    DaemonConfig c = *config;
    a.overrides.ApplyTo(&c);
    auto removed = RemoveProbePins(c);
    if (!removed.ok()) {
      std::fprintf(stderr, "seqpointd: --unpin: %s\n", removed.status().message().c_str());
      return 1;
    }
    std::printf("%d pins removed%s%s\n", removed->second, removed->first.empty() ? "" : " from ",
                removed->first.c_str());
    return 0;
  }
  if (a.check) {
    DaemonConfig c = *config;
    a.overrides.ApplyTo(&c);
    seqpoint::Status st = CheckConfig(c);
    if (st.ok()) st = PeerPolicy::Create(c.control_group).status();
    if (!st.ok()) {
      std::fprintf(stderr, "seqpointd: %s: %s\n", a.config.c_str(), st.message().c_str());
      return 2;
    }
    if (access(a.config.c_str(), F_OK) != 0) {
      std::printf("%s: absent; the built-in defaults are used and valid\n", a.config.c_str());
    } else {
      std::printf("%s: OK\n", a.config.c_str());
    }
    return 0;
  }
  auto daemon =
      Daemon::Create(std::move(*config), a.config, a.overrides, MakeDaemonParts(a.replay));
  if (!daemon.ok()) {
    LogLine(LogLevel::kError, "cannot start: " + daemon.status().message());
    return 1;
  }
  seqpoint::Status st = (*daemon)->Run();
  if (!st.ok()) {
    LogLine(LogLevel::kError, st.message());
    return 1;
  }
  return 0;
}
