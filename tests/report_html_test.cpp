// `seqpoint report --html`: the page rendered from a replayed run's `report` answer has every
// plot, and headless Chromium (Debian's `chromium`; skipped where absent) draws it without
// console errors and not blank.
//
// tests/data/report/gru_debian_1500.json is the `report` answer of the recorded trace replayed
// through the in-process daemon (the run left active, so time strata are in it). To refresh it:
// SEQPOINT_UPDATE_REPORT_FIXTURE=1 build/tests/report_html_test. docs/report.png is the
// screenshot of it: SEQPOINT_REPORT_SCREENSHOT=docs/report.png build/tests/report_html_test.
// `seqpoint evaluate --online --html` on the recorded trace is checked the same way.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/report_html.h"
#include "agent/testing/test_harness.h"

using namespace seqpoint::daemon;
using namespace seqpoint::daemon::testing;
using nlohmann::json;

namespace {

const char* const kPlots[] = {"SL histogram with SeqPoints", "iteration time against SL",
                              "time_ns projection", "per-bin cost history",
                              "observer effect per counter group"};

std::string Fixture() { return SourceDir() + "/tests/data/report/gru_debian_1500.json"; }

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Out {
  int code = -1;
  std::string text;
};

Out Sh(const std::string& cmd) {
  Out r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.text.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The <svg> elements of a page, each from "<svg" to its "</svg>".
std::vector<std::string> Svgs(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    out.push_back(html.substr(at, html.find("</svg>", at) - at));
  }
  return out;
}

// Every plot named is there, and each <svg> holds data marks (marks carry a hover <title>).
using Names = std::vector<std::string>;

void CheckPlots(const std::string& html,
                const Names& plots = Names(std::begin(kPlots), std::end(kPlots))) {
  for (const std::string& name : plots) {
    CHECK_MESSAGE(html.find("aria-label=\"" + name + "\"") != std::string::npos,
                  "no plot " << name);
  }
  const auto svgs = Svgs(html);
  CHECK(svgs.size() >= plots.size());
  for (const std::string& s : svgs) {
    INFO(s.substr(0, 200));
    CHECK(s.find("<title>") != std::string::npos);
    CHECK((s.find("<path") != std::string::npos || s.find("<rect") != std::string::npos));
  }
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // no fetches
  CHECK(html.find("https://") == std::string::npos);
}

// Headless Chromium (skipped where absent) loads `page` without console errors, its DOM has
// the plots, and its screenshot (kept at `keep` where given) is not blank.
void ChromiumChecks(const TempDir& dir, const std::string& page, const char* keep,
                    const Names& plots) {
  if (Sh("command -v chromium").code != 0) {
    MESSAGE("skipped: no chromium (scripts/setup.sh installs it)");
    return;
  }
  const std::string png = keep != nullptr ? std::string(keep) : dir.path() + "/page.png";
  const std::string chromium = "timeout 120 chromium --headless --no-sandbox --disable-gpu "
                               "--hide-scrollbars --user-data-dir=" + dir.path() + "/profile ";
  Out dom = Sh(chromium + "--enable-logging=stderr --v=0 --dump-dom file://" + page);
  REQUIRE_MESSAGE(dom.code == 0, dom.text);
  CHECK_MESSAGE(dom.text.find("CONSOLE") == std::string::npos, dom.text);
  CheckPlots(dom.text, plots);

  Out shot = Sh(chromium + "--window-size=1280,2000 --screenshot=" + png + " file://" + page);
  REQUIRE_MESSAGE(shot.code == 0, shot.text);
  Out blank = Sh("python3 " + SourceDir() + "/tests/png_not_blank.py " + png);
  CHECK_MESSAGE(blank.code == 0, blank.text);
}

}  // namespace

TEST_CASE("report html: a replayed run's report answer renders every plot") {
  TempDir dir;
  ReplaySpec spec;
  spec.exit_at_end = false;  // active: the live answer, with time strata
  DaemonHarness h;
  REQUIRE(h.Start(DaemonHarness::TestConfig(dir), ReplayParts(1, spec)).ok());
  REQUIRE(WaitFor([&] {
    auto s = h.Show("job-0");
    return s.ok() && (*s)["run"]["iterations"] == 1500;
  }));
  ControlRequest r;
  r.cmd = "report";
  r.run = "job-0";
  json report;
  REQUIRE(WaitFor([&] {  // the bin-cost history is flushed every 200 ms
    auto a = h.Request(r);
    if (a.ok()) report = *a;
    return a.ok() && !(*a)["history"].empty();
  }));
  if (std::getenv("SEQPOINT_UPDATE_REPORT_FIXTURE") != nullptr) {
    report["node"] = "replay-node";  // the CLI adds the host name; the fixture names a fixed one
    std::ofstream(Fixture()) << report.dump(1) << "\n";
    MESSAGE("updated " << Fixture());
  }
  const std::string html = seqpoint::cli::RenderReportHtml(report, "test-node");
  CHECK(html.find("run " + report["run"]["id"].dump() + " · " +
                  report["run"]["key"].get<std::string>() + " · node test-node") !=
        std::string::npos);
  CheckPlots(html);
}

TEST_CASE("report html: headless Chromium draws the CLI's page of the saved report") {
  TempDir dir;
  const std::string page = dir.path() + "/report.html";
  Out cli = Sh(std::string(SEQPOINT_CLI) + " report --from-json " + Fixture() + " --html " + page);
  REQUIRE_MESSAGE(cli.code == 0, cli.text);
  const std::string html = Slurp(page);
  CHECK(html.find("node replay-node") != std::string::npos);
  CheckPlots(html);

  ChromiumChecks(dir, page, std::getenv("SEQPOINT_REPORT_SCREENSHOT"),
                 Names(std::begin(kPlots), std::end(kPlots)));
}

TEST_CASE("evaluate html: the CLI's page of an online evaluation of the recorded trace") {
  const Names kEvalPlots = {"time_ns projection", "task_clock_ns projection",
                           "error against the baselines"};
  TempDir dir;
  const std::string page = dir.path() + "/evaluate.html";
  const std::string trace = SourceDir() + "/tests/data/agent/gru_debian_1500.csv";
  Out cli = Sh(std::string(SEQPOINT_CLI) + " evaluate --trace " + trace + " --online --html " + page);
  REQUIRE_MESSAGE(cli.code == 0, cli.text);
  CHECK(cli.text.find("wrote " + page) != std::string::npos);
  const std::string html = Slurp(page);
  CHECK(html.find("<title>SeqPoint evaluation: " + trace + " · method seqpoint-online</title>") !=
        std::string::npos);
  CheckPlots(html, kEvalPlots);
  // SeqPoint and the three baselines each have a bar per metric; the actual total is drawn.
  for (const char* method : {"SeqPoint: |error|", "first N: |error|", "uniform stride: |error|",
                             "random (median |error|): |error|"}) {
    CHECK_MESSAGE(html.find("time_ns, " + std::string(method)) != std::string::npos, method);
  }
  CHECK(html.find("actual total: ") != std::string::npos);
  CHECK(html.find("projected (steady state): ") != std::string::npos);

  // --json keeps stdout one JSON document beside the page.
  Out json_out = Sh("(" + std::string(SEQPOINT_CLI) + " evaluate --trace " + trace +
                    " --online --json --html " + page + " 2>/dev/null)");
  REQUIRE(json_out.code == 0);
  CHECK(!json::parse(json_out.text, nullptr, false).is_discarded());

  ChromiumChecks(dir, page, std::getenv("SEQPOINT_EVALUATE_SCREENSHOT"), kEvalPlots);
}

// Names come from configs and environments (metric names, run keys): never markup in the page.
TEST_CASE("report html: names that need escaping, an empty run, one SL, no measurement yet") {
  nlohmann::json report = {
      {"run", {{"id", 9}, {"key", "<script>alert(1)</script>"}, {"state", "active"},
               {"iterations", 3}}},
      {"histogram", nlohmann::json::array({{{"seq_len", 16}, {"count", 3}, {"time_ns_mean", 1e6}}})},
      {"seqpoints", nlohmann::json::array()},
      {"measurements", nlohmann::json::array()},
      {"projections",
       {{"perf:\"evil\"<img src=x onerror=alert(1)>",
         {{"unit", "count"}, {"total", 5.0}, {"low", 0.0}, {"high", nullptr}, {"bounded", false}}}}},
      {"history", nlohmann::json::array()}};
  const std::string page = seqpoint::cli::RenderReportHtml(report, "node&<b>");
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("<img") == std::string::npos);
  CHECK(page.find("&lt;script&gt;") != std::string::npos);
  CHECK(page.find("node&amp;&lt;b&gt;") != std::string::npos);
  // An empty answer is a page that says so, not a crash.
  const std::string empty = seqpoint::cli::RenderReportHtml(nlohmann::json::object(), "n");
  CHECK(empty.find("<html") != std::string::npos);
}
