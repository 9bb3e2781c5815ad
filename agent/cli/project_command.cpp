// `seqpoint project --selection S --measured M [--compare M2] [--json]`
// Projects every metric's whole-run total from the SeqPoints' rows of M, with a 95% interval.
// Reads no row of M that the selection does not list. With --compare, M2 holds the same
// iterations measured on another machine or configuration, and the speedup M -> M2 is printed.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/cli/cli_args.h"
#include "agent/cli/commands.h"
#include "agent/cli/selection_runner.h"
#include "selector/selection_json.h"

namespace seqpoint::cli {
namespace {

Result<selector::Selection> ReadSelection(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    std::string msg = "cannot open selection '" + path + "': " + std::strerror(err);
    if (err == ENOENT) {
      msg += "; write it first with `seqpoint select --trace TRACE --budget N --json > " + path + "`";
      return NotFound(msg);
    }
    return IoError(msg);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return selector::SelectionFromJson(ss.str(), path);
}

}  // namespace

int RunProjectCommand(Args argv) {
  std::vector<OptionSpec> specs = {
      {"--selection", true, "the JSON printed by 'seqpoint select --json'", "FILE"},
      {"--measured", true, "trace with metric columns for (at least) the selection's iterations",
       "FILE"},
      {"--compare", true, "the same iterations measured on another configuration: print speedup",
       "FILE"},
      {"--json", false, "print JSON (values in the metrics' own units)"},
  };
  auto args = ParseArgs(argv, specs);
  if (!args.ok()) {
    std::fprintf(stderr, "seqpoint project: %s\n", args.status().message().c_str());
    return 2;
  }
  if (args->Has("--help")) {
    PrintHelp("project --selection FILE --measured FILE [--compare FILE] [--json]",
              "Projects each metric's whole-run total, with a 95% interval, from the SeqPoints.\n"
              "Times are shown in seconds, energies in joules.",
              specs);
    return 0;
  }
  auto sel_path = args->Get("--selection");
  auto measured = args->Get("--measured");
  if (!sel_path || !measured) {
    std::fprintf(stderr, "seqpoint project: --selection FILE and --measured FILE are required\n");
    return 2;
  }
  auto sel = ReadSelection(*sel_path);
  if (!sel.ok()) {
    std::fprintf(stderr, "seqpoint project: %s\n", sel.status().message().c_str());
    return 1;
  }
  auto m = GatherMeasurements(*sel, *measured);
  if (!m.ok()) {
    std::fprintf(stderr, "seqpoint project: %s\n", m.status().message().c_str());
    return 1;
  }
  std::optional<Measurements> cmp;
  if (auto c = args->Get("--compare")) {
    auto mc = GatherMeasurements(*sel, *c);
    if (!mc.ok()) {
      std::fprintf(stderr, "seqpoint project: %s\n", mc.status().message().c_str());
      return 1;
    }
    cmp = std::move(*mc);
  }
  nlohmann::json out = {{"selection", *sel_path}, {"measured", *measured},
                        {"iterations", sel->iterations}, {"metrics", nlohmann::json::object()}};
  if (!args->Has("--json")) {
    std::printf("%-24s %16s %16s %16s %8s\n", "metric", "projected", "95% low", "95% high", "samples");
  }
  for (size_t k = 0; k < m->metrics.size(); ++k) {
    auto p = selector::ProjectMetric(*sel, m->obs[k]);
    if (!p.ok()) {
      std::fprintf(stderr, "seqpoint project: metric '%s' skipped: %s\n", m->metrics[k].c_str(),
                   p.status().message().c_str());
      continue;
    }
    nlohmann::json j = {{"total", p->total}, {"low", p->low}, {"high", p->high}, {"samples", p->samples}};
    if (cmp) {
      for (size_t c = 0; c < cmp->metrics.size(); ++c) {
        if (cmp->metrics[c] != m->metrics[k]) continue;
        auto q = selector::ProjectMetric(*sel, cmp->obs[c]);
        if (!q.ok()) break;
        auto s = selector::ProjectSpeedup(*p, *q);
        j["compare_total"] = q->total;
        j["speedup"] = {{"value", s.speedup}, {"low", s.low}, {"high", s.high}};
      }
    }
    if (!args->Has("--json")) {
      const std::string& name = m->metrics[k];
      std::printf("%-24s %16s %16s %16s %8llu", name.c_str(), HumanValue(name, p->total).c_str(),
                  HumanValue(name, p->low).c_str(), HumanValue(name, p->high).c_str(),
                  static_cast<unsigned long long>(p->samples));
      if (j.contains("speedup")) {
        std::printf("   speedup %.4f [%.4f, %.4f]", j["speedup"]["value"].get<double>(),
                    j["speedup"]["low"].get<double>(), j["speedup"]["high"].get<double>());
      }
      std::printf("\n");
    }
    out["metrics"][m->metrics[k]] = std::move(j);
  }
  if (args->Has("--json")) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace seqpoint::cli
