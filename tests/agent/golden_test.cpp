// Golden tests in the node_exporter manner: a recorded trace replayed through the in-process
// daemon, and the *shape* of what users and dashboards depend on diffed against checked-in
// files: every /metrics family with its TYPE, HELP and label names, and the keys of
// `seqpoint show --json` and `status --json`. Values change from run to run and are masked; a
// renamed metric, label or field shows up here as a diff to approve.
//
// To approve a change: SEQPOINT_UPDATE_GOLDEN=1 build/tests/agent_golden_test, then review and
// commit the diff of tests/golden/ (and docs/metrics.md where a family changed).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/testing/test_harness.h"
#include "tests/agent/gpu_trace.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

// One line per family: "# TYPE name type", its HELP, then the sorted label-name sets it uses.
std::string MetricsShape(const std::string& exposition) {
  std::map<std::string, std::pair<std::string, std::set<std::string>>> families;  // name -> help
  std::map<std::string, std::string> types;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      size_t sp = line.find(' ', 7);
      families[line.substr(7, sp - 7)].first = line.substr(sp + 1);
    } else if (line.rfind("# TYPE ", 0) == 0) {
      size_t sp = line.find(' ', 7);
      types[line.substr(7, sp - 7)] = line.substr(sp + 1);
    } else if (!line.empty() && line[0] != '#') {
      size_t brace = line.find('{');
      size_t space = line.find(' ');
      std::string name = line.substr(0, std::min(brace, space));
      std::string labels;
      if (brace != std::string::npos && brace < space) {
        // label names only: key="value",... (values may hold escaped quotes)
        size_t i = brace + 1;
        while (i < line.size() && line[i] != '}') {
          size_t eq = line.find('=', i);
          labels += (labels.empty() ? "" : ",") + line.substr(i, eq - i);
          i = eq + 2;
          while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
          i += 1;
          if (i < line.size() && line[i] == ',') ++i;
        }
      }
      families[name].second.insert("{" + labels + "}");
    }
  }
  std::string out;
  for (const auto& [name, f] : families) {
    out += "# TYPE " + name + " " + types[name] + "\n# HELP " + name + " " + f.first + "\n";
    for (const std::string& l : f.second) out += name + l + "\n";
  }
  return out;
}

// Keys and value kinds; an array is shown by its first element.
json Shape(const json& j) {
  if (j.is_object()) {
    json o = json::object();
    for (const auto& [k, v] : j.items()) o[k] = Shape(v);
    return o;
  }
  if (j.is_array()) return j.empty() ? json::array() : json::array({Shape(j.front())});
  if (j.is_number()) return "number";
  if (j.is_boolean()) return "bool";
  if (j.is_null()) return "null";
  return "string";
}

void CheckGolden(const std::string& name, const std::string& got) {
  const std::string path = SourceDir() + "/tests/golden/" + name;
  if (std::getenv("SEQPOINT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream out(path);
    out << got;
    REQUIRE_MESSAGE(out.good(), "cannot write " << path);
    MESSAGE("updated " << path);
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "no golden file " << path
                                 << "; create it with SEQPOINT_UPDATE_GOLDEN=1 and commit it");
  std::stringstream want;
  want << in.rdbuf();
  INFO("golden file " << path << " differs; if the change is intended, run the test with "
       << "SEQPOINT_UPDATE_GOLDEN=1 and commit the diff. Got:\n" << got);
  CHECK(want.str() == got);
}

}  // namespace

TEST_CASE("golden: /metrics families and seqpoint show/status fields of a replayed run") {
  TempDir dir;
  DaemonConfig cfg = DaemonHarness::TestConfig(dir);
  // An upload endpoint that never answers: the upload families are exported as on a real node.
  cfg.upload_url = "http://127.0.0.1:" + std::to_string(FreePort()) + "/api/v1/write";
  ReplaySpec spec;
  spec.exit_at_end = false;  // the run stays active, so its per-run families are exported
  // With GPU memory gauges (gpu_trace.h), so the gauge families and fields are in the shape.
  spec.traces.push_back(WriteGpuTrace(dir.File("gru_gpu.csv"), 16 * kGpuTraceGiB).path + "@job-0");
  DaemonHarness h;
  REQUIRE(h.Start(cfg, MakeDaemonParts(spec)).ok());
  auto trace_rows = [] {
    std::ifstream in(RecordedTrace());
    std::string line;
    uint64_t n = 0;
    while (std::getline(in, line)) n += !line.empty() && line[0] != '#';
    return n - 1;  // the header
  }();
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-0");
    return s.ok() && (*s)["run"]["iterations"] == trace_rows;
  }));
  HttpResult metrics = HttpGet("127.0.0.1", h.metrics_port(), "/metrics");
  REQUIRE_MESSAGE(metrics.error.empty(), metrics.error);
  CheckGolden("metrics.txt", MetricsShape(metrics.body));

  auto show = h.Show("job-0");
  REQUIRE(show.ok());
  CheckGolden("show.json", Shape(*show).dump(1) + "\n");
  ControlRequest status;
  status.cmd = "status";
  auto st = h.Request(status);
  REQUIRE(st.ok());
  CheckGolden("status.json", Shape(*st).dump(1) + "\n");
}
