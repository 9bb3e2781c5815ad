// `seqpoint status | runs | show RUN | report RUN | pause | resume`: ask the local seqpointd
// over its control socket (agent/control/control_protocol.h) and print the answer for people,
// or as JSON with --json. The socket is --socket, else $SEQPOINT_CONTROL_SOCKET, else
// /run/seqpoint/control.sock.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/cli_args.h"
#include "agent/cli/commands.h"
#include "agent/cli/control_render.h"
#include "agent/cli/report_html.h"
#include "agent/control/control_client.h"

namespace seqpoint::cli {
namespace {

using daemon::ControlRequest;

const OptionSpec kSocket{"--socket", true,
                         "seqpointd's control socket (default: "
                         "$SEQPOINT_CONTROL_SOCKET or /run/seqpoint/control.sock)",
                         "PATH"};
const OptionSpec kJson{"--json", false, "print the daemon's answer as JSON"};

// `report --from-json FILE`: a saved `report --json` answer instead of the daemon's.
Result<nlohmann::json> LoadAnswer(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument(path + ": not JSON");
  return j;
}

// `report --html FILE`: the answer as one self-contained HTML page.
int WriteHtml(const nlohmann::json& answer, const std::string& path) {
  const std::string node =
      answer.contains("node") && answer["node"].is_string() ? answer["node"].get<std::string>()
                                                            : LocalNodeName();
  std::ofstream out(path);
  out << RenderReportHtml(answer, node);
  out.close();
  if (!out) {
    std::fprintf(stderr, "seqpoint: cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

// Parses, asks, prints. `build` fills the request from the parsed arguments (or fails with a
// usage error); `render` prints the human form.
int Ask(Args args, std::string_view usage, std::string_view description,
        std::vector<OptionSpec> specs, size_t positionals,
        const std::function<Status(const ParsedArgs&, ControlRequest*)>& build,
        void (*render)(const nlohmann::json&)) {
  specs.push_back(kSocket);
  specs.push_back(kJson);
  auto parsed = ParseArgs(args, specs);
  if (!parsed.ok()) {
    std::fprintf(stderr, "seqpoint: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (parsed->Has("--help")) {
    PrintHelp(usage, description, specs);
    return 0;
  }
  const auto saved = parsed->Get("--from-json");
  if (parsed->positional().size() != (saved ? 0 : positionals)) {
    std::fprintf(stderr, "usage: seqpoint %.*s (see --help)\n", static_cast<int>(usage.size()),
                 usage.data());
    return 2;
  }
  ControlRequest request;
  Status st = build(*parsed, &request);
  if (!st.ok()) {
    std::fprintf(stderr, "seqpoint: %s\n", st.message().c_str());
    return 2;
  }
  std::string socket = daemon::ResolveControlSocket(parsed->Get("--socket").value_or(""));
  auto answer = saved ? LoadAnswer(*saved) : daemon::SendControlRequest(socket, request);
  if (!answer.ok()) {
    std::fprintf(stderr, "seqpoint: %s\n", answer.status().message().c_str());
    return 1;
  }
  if (auto html = parsed->Get("--html")) return WriteHtml(*answer, *html);
  if (parsed->Has("--json")) {
    std::printf("%s\n", answer->dump(2).c_str());
  } else {
    render(*answer);
  }
  return 0;
}

// "2s", "500ms", "5m", "1h" (a bare number is seconds) -> milliseconds, at most 7 days.
Result<int64_t> ParsePauseDuration(const std::string& text) {
  const auto bad = [&text] {
    return InvalidArgument("--for '" + text +
                           "' is not a duration: a positive number with ms, s, m or h, e.g. 30s");
  };
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return bad();
  }
  const std::string unit = text.substr(used);
  double scale = 0;  // ms per unit
  if (unit == "ms") scale = 1;
  if (unit == "s" || unit.empty()) scale = 1e3;
  if (unit == "m") scale = 6e4;
  if (unit == "h") scale = 3.6e6;
  if (scale == 0 || !(v > 0)) return bad();
  const double ms = v * scale;
  if (ms > static_cast<double>(daemon::kMaxPauseMs)) {
    return InvalidArgument("--for " + text + " is longer than 7 days; leave --for out to pause "
                           "until `seqpoint resume`");
  }
  return std::max<int64_t>(1, static_cast<int64_t>(ms));
}

}  // namespace

int RunPauseCommand(Args args) {
  return Ask(
      args, "pause [--for DURATION] [--json]",
      "Stop every collector of the local seqpointd (the counters are released for site "
      "tooling, as `dcgmi profile --pause` does for DCGM) until `seqpoint resume`, or for "
      "DURATION (500ms, 30s, 5m, 1h; at most 7 days). Iterations are still timed; a restarted "
      "seqpointd is not paused.",
      {{"--for", true, "resume by itself after DURATION", "DURATION"}}, 0,
      [](const ParsedArgs& a, ControlRequest* r) -> Status {
        r->cmd = "pause";
        if (auto text = a.Get("--for")) {
          auto ms = ParsePauseDuration(*text);
          if (!ms.ok()) return ms.status();
          r->for_ms = *ms;
        }
        return Status::Ok();
      },
      RenderPause);
}

int RunResumeCommand(Args args) {
  return Ask(
      args, "resume [--json]",
      "End a `seqpoint pause`: the collectors open again at the next chosen iteration.", {}, 0,
      [](const ParsedArgs&, ControlRequest* r) {
        r->cmd = "resume";
        return Status::Ok();
      },
      RenderPause);
}

int RunStatusCommand(Args args) {
  return Ask(
      args, "status [--json]", "The local seqpointd: probes, runs, collectors, upload.", {}, 0,
      [](const ParsedArgs&, ControlRequest* r) {
        r->cmd = "status";
        return Status::Ok();
      },
      RenderStatus);
}

int RunRunsCommand(Args args) {
  return Ask(
      args, "runs [--all] [--limit N] [--json]",
      "Runs watched on this node (active; --all adds finished and crashed ones).",
      {{"--all", false, "include closed runs"},
       {"--limit", true, "at most N closed runs, newest first (default 50)", "N"}},
      0,
      [](const ParsedArgs& a, ControlRequest* r) -> Status {
        r->cmd = "runs";
        r->all = a.Has("--all");
        auto limit = a.GetInt("--limit");
        if (!limit.ok()) return limit.status();
        if (limit->has_value()) {
          if (**limit < 1) return InvalidArgument("--limit needs a positive integer");
          r->limit = **limit;
        }
        return Status::Ok();
      },
      RenderRuns);
}

int RunShowCommand(Args args) {
  return Ask(
      args, "show RUN [--json]",
      "A run's SL histogram, SeqPoints and projections with 95% intervals. RUN is its id "
      "or key (see `seqpoint runs`).",
      {}, 1,
      [](const ParsedArgs& a, ControlRequest* r) {
        r->cmd = "show";
        r->run = a.positional()[0];
        return Status::Ok();
      },
      RenderShow);
}

int RunReportCommand(Args args) {
  return Ask(
      args, "report RUN [--days N] [--json | --html FILE] | report --from-json FILE --html FILE",
      "show, plus every measurement of the run and how the cost of its main SL bins on "
      "this node moved over the last N days (default 30). --html writes it as one "
      "self-contained page with plots (no scripts, no network; printable).",
      {{"--days", true, "history window of N days (default 30)", "N"},
       {"--html", true, "write the report as a self-contained HTML page to FILE", "FILE"},
       {"--from-json", true,
        "render a saved `report --json` answer instead of asking seqpointd", "FILE"}},
      1,
      [](const ParsedArgs& a, ControlRequest* r) -> Status {
        r->cmd = "report";
        if (a.positional().empty()) return Status::Ok();  // --from-json: no daemon asked
        r->run = a.positional()[0];
        auto days = a.GetInt("--days");
        if (!days.ok()) return days.status();
        if (days->has_value()) {
          if (**days < 1) return InvalidArgument("--days needs a positive integer");
          r->days = **days;
        }
        return Status::Ok();
      },
      RenderReport);
}

}  // namespace seqpoint::cli
