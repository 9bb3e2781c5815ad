#include "agent/cli/report_html.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "agent/cli/report_devices.h"
#include "agent/cli/svg_plot.h"

namespace seqpoint::cli {
namespace {

using nlohmann::json;
using svg::Escape;
using svg::Short;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                "#e377c2", "#17becf", "#bcbd22"};
const char kBar[] = "#8fb3d9";
const char kPoint[] = "#d62728";
const char kActual[] = "#2ca02c";

// A member of the answer; null (iterates as empty) where missing.
const json& At(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// A number from the answer, NaN where missing or null.
double Num(const json& j, const char* key) {
  if (!j.is_object()) return kNaN;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// A display unit for values of `unit` whose size is about `max_abs`.
struct Scale {
  double factor = 1;
  std::string unit;
  double Of(double v) const { return v / factor; }
};

Scale ScaleFor(const std::string& unit, double max_abs) {
  struct Step { double factor; const char* name; };
  std::vector<Step> steps;
  if (unit == "ns") steps = {{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}};
  if (unit == "uJ" || unit == "uj" || unit == "µJ") steps = {{1e6, "J"}, {1e3, "mJ"}};
  for (const Step& s : steps) {
    if (max_abs >= s.factor) return {s.factor, s.name};
  }
  return {1, unit.empty() ? "" : unit};
}

std::string Section(const std::string& title, const std::string& body,
                    const std::string& caption) {
  return "<section>\n<h2>" + Escape(title) + "</h2>\n<figure>\n" + body + "<figcaption>" +
         Escape(caption) + "</figcaption>\n</figure>\n</section>\n";
}

// 1. The SL histogram, the SeqPoints' bins shaded and the SeqPoints marked above it.
std::string HistogramPlot(const json& r) {
  const json& hist = At(r, "histogram");
  const json& points = At(r, "seqpoints");
  if (hist.empty()) return "";
  double lo = 1e300, hi = -1e300, top = 0, gap = 1e300, prev = kNaN;
  for (const json& b : hist) {
    const double sl = Num(b, "seq_len");
    lo = std::min(lo, sl), hi = std::max(hi, sl), top = std::max(top, Num(b, "count"));
    if (std::isfinite(prev) && sl > prev) gap = std::min(gap, sl - prev);
    prev = sl;
  }
  // Bars at least 1/60 of the SL span wide, so a few close SLs do not make every bar a hair.
  const double w = std::max({1.0, gap < 1e300 ? gap : 1.0, (hi - lo) / 60});
  svg::Plot p("sequence length (tokens)", "iterations", svg::Range::Of(lo - w, hi + w, 0.02),
              svg::Range{0, top * 1.08});
  int shade = 0;
  std::set<std::pair<double, double>> bins;
  for (const json& s : points) {
    const json& bin = At(s, "bin");
    if (bin.size() == 2 && bins.insert({bin[0].get<double>(), bin[1].get<double>()}).second) {
      p.Bar(bin[0].get<double>() - w / 2, bin[1].get<double>() + w / 2, top * 1.08,
            shade++ % 2 ? "#e9eff8" : "#f4f6fa",
            "SeqPoint bin SL " + Short(bin[0].get<double>()) + "-" + Short(bin[1].get<double>()));
    }
  }
  for (const json& b : hist) {
    const double sl = Num(b, "seq_len");
    p.Bar(sl - 0.4 * w, sl + 0.4 * w, Num(b, "count"), kBar,
          "SL " + Short(sl) + ": " + Short(Num(b, "count")) + " iterations");
  }
  for (const json& s : points) {
    p.TopMarker(Num(s, "seq_len"), kPoint,
                "SeqPoint: iteration " + Str(s, "iter") + ", SL " + Str(s, "seq_len") +
                    ", weight " + Short(Num(s, "weight")));
  }
  p.AddLegend(kBar, "iterations per SL");
  p.AddLegend("#e9eff8", "SeqPoint bins");
  p.AddLegend(kPoint, "SeqPoints (measured iterations)");
  return Section("Sequence-length histogram", p.Render("SL histogram with SeqPoints"),
                 std::to_string(hist.size()) + " distinct SLs, " +
                     std::to_string(points.size()) + " SeqPoints in " +
                     std::to_string(bins.size()) + " bins.");
}

// 2. Mean iteration time per SL, and the measured iterations' own times.
std::string TimePlot(const json& r) {
  std::vector<std::pair<double, double>> mean, measured;
  for (const json& b : At(r, "histogram")) {
    const double t = Num(b, "time_ns_mean");
    if (std::isfinite(t)) mean.push_back({Num(b, "seq_len"), t});
  }
  for (const json& m : At(r, "measurements")) {
    if (Str(m, "metric") == "time_ns") measured.push_back({Num(m, "seq_len"), Num(m, "value")});
  }
  if (mean.empty() && measured.empty()) return "";
  double xlo = 1e300, xhi = -1e300, yhi = 0;
  for (const auto* v : {&mean, &measured}) {
    for (const auto& [x, y] : *v) xlo = std::min(xlo, x), xhi = std::max(xhi, x), yhi = std::max(yhi, y);
  }
  const Scale s = ScaleFor("ns", yhi);
  svg::Plot p("sequence length (tokens)", "iteration time (" + s.unit + ")",
              svg::Range::Of(xlo, xhi, 0.03), svg::Range{0, s.Of(yhi) * 1.1});
  std::vector<std::pair<double, double>> line;
  for (const auto& [x, y] : mean) line.push_back({x, s.Of(y)});
  p.Polyline(line, "#7f7f7f");
  for (const auto& [x, y] : line) p.Dot(x, y, 2, "#7f7f7f", "SL " + Short(x) + ": mean " + Short(y) + " " + s.unit);
  for (const auto& [x, y] : measured) {
    p.Dot(x, s.Of(y), 4, kPoint, "measured: SL " + Short(x) + ", " + Short(s.Of(y)) + " " + s.unit, true);
  }
  p.AddLegend("#7f7f7f", "mean time per SL (all iterations)", true);
  p.AddLegend(kPoint, "measured iterations", true);
  return Section("Iteration time against sequence length",
                 p.Render("iteration time against SL"),
                 std::to_string(measured.size()) + " measured iterations (time_ns).");
}

// 3. One metric's projection with its 95% interval, steady state and actual total beside it.
std::string ProjectionPlot(const std::string& metric, const json& pr) {
  struct Col { std::string name; double v, lo, hi; bool bounded; const char* color; };
  std::vector<Col> cols;
  const bool bounded = pr.value("bounded", true) && std::isfinite(Num(pr, "high"));
  cols.push_back({"projected (all iterations)", Num(pr, "total"), Num(pr, "low"), Num(pr, "high"),
                  bounded, kPalette[0]});
  const json& ss = At(pr, "steady_state");
  if (std::isfinite(Num(ss, "total"))) {
    cols.push_back({"projected (steady state)", Num(ss, "total"), Num(ss, "low"), Num(ss, "high"),
                    std::isfinite(Num(ss, "high")), kPalette[1]});
  }
  if (std::isfinite(Num(pr, "actual"))) {
    cols.push_back({"actual total", Num(pr, "actual"), kNaN, kNaN, true, kActual});
  }
  double top = 0;
  for (const Col& c : cols) {
    for (double v : {c.v, c.lo, c.hi}) {
      if (std::isfinite(v)) top = std::max(top, v);
    }
  }
  if (!(top > 0)) return "";
  const Scale s = ScaleFor(Str(pr, "unit"), top);
  svg::Plot p("", metric + " total" + (s.unit.empty() ? "" : " (" + s.unit + ")"),
              svg::Range{-0.5, cols.size() - 0.5},
              svg::Range{0, s.Of(top) * 1.15}, 760, 300);
  std::vector<std::string> names;
  for (size_t i = 0; i < cols.size(); ++i) {
    const Col& c = cols[i];
    names.push_back(c.name);
    if (std::isfinite(c.lo)) p.ErrorBar(i, s.Of(c.lo), s.Of(c.hi), c.bounded, c.color);
    p.Dot(i, s.Of(c.v), 5, c.color, c.name + ": " + Short(s.Of(c.v)) + " " + s.unit);
    p.Note(i, s.Of(c.v), Short(s.Of(c.v)) + " " + s.unit);
  }
  p.SetCategories(names);
  p.AddLegend(kPalette[0], "projection, 95% interval", true);
  if (!bounded) p.AddLegend(kPalette[0], "open arrow: no upper bound yet");
  if (std::isfinite(Num(pr, "actual"))) p.AddLegend(kActual, "actual", true);
  return p.Render(metric + " projection");
}

std::string ProjectionsSection(const json& r) {
  const json& proj = At(r, "projections");
  std::string body;
  for (const auto& [metric, pr] : proj.items()) {
    std::string plot = ProjectionPlot(metric, pr);
    if (!plot.empty()) body += "<h3>" + Escape(metric) + "</h3>\n" + plot;
  }
  if (body.empty()) return "";
  return Section("Projected totals", body,
                 "Dots: projected totals; bars: 95% intervals; green: the total actually "
                 "observed over every iteration, where known.");
}

// 4. Daily mean iteration time of the run's main SL bins on this node.
std::string HistoryPlot(const json& r) {
  const json& rows = At(r, "history");
  if (rows.empty()) return "";
  std::set<std::string> day_set;
  std::map<std::string, std::vector<std::pair<std::string, double>>> by_bin;
  double top = 0;
  for (const json& h : rows) {
    const json& bin = At(h, "bin");
    const std::string name = bin.size() == 2 ? "SL " + bin[0].dump() + "-" + bin[1].dump() : "?";
    by_bin[name].push_back({Str(h, "day"), Num(h, "mean")});
    day_set.insert(Str(h, "day"));
    top = std::max(top, Num(h, "mean"));
  }
  const std::vector<std::string> days(day_set.begin(), day_set.end());
  const Scale s = ScaleFor("ns", top);
  svg::Plot p("day (UTC)", "mean iteration time (" + s.unit + ")",
              svg::Range{-0.5, days.size() - 0.5}, svg::Range{0, s.Of(top) * 1.15});
  p.SetCategories(days);
  size_t color = 0;
  for (const auto& [name, pts] : by_bin) {
    const char* c = kPalette[color++ % std::size(kPalette)];
    std::vector<std::pair<double, double>> line;
    for (const auto& [day, mean] : pts) {
      const double x = std::find(days.begin(), days.end(), day) - days.begin();
      line.push_back({x, s.Of(mean)});
      p.Dot(x, s.Of(mean), 4, c, name + ", " + day + ": " + Short(s.Of(mean)) + " " + s.unit);
    }
    p.Polyline(line, c);
    p.AddLegend(c, name, true);
  }
  return Section("Cost history of the main SL bins", p.Render("per-bin cost history"),
                 std::to_string(days.size()) + " day(s) on this node.");
}

// 5. The observer effect per counter group: ratio and its 95% interval, 1 = no effect.
std::string ObserverPlot(const json& r) {
  const json& oe = At(r, "observer_effect");
  if (!oe.is_object()) return "";
  std::vector<json> groups = {At(oe, "all")};
  for (const json& g : At(oe, "groups")) groups.push_back(g);
  std::vector<json> shown;
  for (const json& g : groups) {
    if (std::isfinite(Num(g, "ratio"))) shown.push_back(g);
  }
  if (shown.empty()) return "";
  const double threshold = std::isfinite(Num(oe, "threshold")) ? Num(oe, "threshold") : 0;
  double lo = 1 - threshold, hi = 1 + threshold;
  for (const json& g : shown) {
    for (const char* k : {"ratio", "low", "high"}) {
      if (std::isfinite(Num(g, k))) lo = std::min(lo, Num(g, k)), hi = std::max(hi, Num(g, k));
    }
  }
  svg::Plot p("counter group", "time ratio treated / control", svg::Range{-0.5, shown.size() - 0.5},
              svg::Range::Of(lo, hi, 0.15), 760, 300);
  std::vector<std::string> names;
  p.Line(-0.5, 1, shown.size() - 0.5, 1, "#555", 1, true);
  if (threshold > 0) p.Line(-0.5, 1 + threshold, shown.size() - 0.5, 1 + threshold, kPoint, 1, true);
  for (size_t i = 0; i < shown.size(); ++i) {
    const json& g = shown[i];
    const char* c = g.value("flagged", false) ? kPoint : kPalette[0];
    names.push_back(Str(g, "group") + " (" + Str(g, "pairs") + " pairs)");
    if (std::isfinite(Num(g, "low"))) {
      p.ErrorBar(i, Num(g, "low"), Num(g, "high"), std::isfinite(Num(g, "high")), c);
    }
    p.Dot(i, Num(g, "ratio"), 5, c, names.back() + ": " + Short(Num(g, "ratio")));
    p.Note(i, Num(g, "ratio"), Short(Num(g, "ratio")));
  }
  p.SetCategories(names);
  p.AddLegend(kPalette[0], "ratio, 95% interval", true);
  p.AddLegend("#555", "1 = no effect");
  if (threshold > 0) p.AddLegend(kPoint, "flag threshold (" + Short(100 * threshold) + "%)");
  return Section("Observer effect of the counters", p.Render("observer effect per counter group"),
                 oe.value("flagged", false) ? "FLAGGED: measuring slows the measured iterations."
                                            : "Not flagged.");
}

std::string Cell(const std::string& s) { return "<td>" + Escape(s) + "</td>"; }

std::string SummaryTable(const json& r) {
  std::string rows;
  for (const auto& [metric, pr] : At(r, "projections").items()) {
    const Scale s = ScaleFor(Str(pr, "unit"), std::fabs(Num(pr, "total")));
    auto v = [&](double x) { return std::isfinite(x) ? Short(s.Of(x)) + " " + s.unit : "—"; };
    const json& check = At(At(r, "self_checks"), metric.c_str());
    const double err = Num(check, "error");
    rows += "<tr>" + Cell(metric) + Cell(v(Num(pr, "total"))) + Cell(v(Num(pr, "low"))) +
            Cell(pr.value("bounded", true) ? v(Num(pr, "high")) : "unbounded") +
            Cell(v(Num(pr, "actual"))) +
            Cell(std::isfinite(err) ? Short(100 * err) + "%" : "—") + Cell(Str(pr, "measured")) +
            "</tr>\n";
  }
  if (rows.empty()) return "";
  return "<table>\n<tr><th>metric</th><th>projected</th><th>95% low</th><th>95% high</th>"
         "<th>actual</th><th>self-check error</th><th>measured</th></tr>\n" + rows + "</table>\n";
}

std::string StrataList(const json& r) {
  const json& t = At(r, "time_strata");
  if (!t.is_object()) return "";
  std::string s = "<p>Warm-up ends at iteration " + Escape(Str(t, "warmup_end")) +
                  (t.value("warmup_settled", false) ? " (settled)" : " (not yet settled)") +
                  "; " + std::to_string(At(t, "strata").size()) +
                  " time strata, " + std::to_string(At(t, "changes").size()) +
                  " change(s) of cost.</p>\n";
  return s;
}

const char kStyle[] = R"(<style>
body{font-family:sans-serif;max-width:880px;margin:1.5em auto;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:.6em 0 0} .meta{color:#555;margin-top:0}
figure{margin:0} figcaption{color:#555;font-size:.9em} svg{width:100%;height:auto}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
td:first-child,th:first-child{text-align:left}
@media print{body{max-width:none;margin:0} section{break-inside:avoid}}
</style>
)";

std::string Header(const json& r, const std::string& node) {
  const json& run = At(r, "run");
  const std::string title = "SeqPoint report: run " + Str(run, "id") + " · " + Str(run, "key") +
                            " · node " + node;
  size_t measured = 0;
  std::set<std::string> seen;
  for (const json& m : At(r, "measurements")) {
    measured += seen.insert(Str(m, "pid") + "/" + Str(m, "iter")).second;
  }
  return "<title>" + Escape(title) + "</title>\n" + kStyle + "</head>\n<body>\n<h1>" +
         Escape(title) + "</h1>\n<p class=\"meta\">state " + Escape(Str(run, "state")) + ", " +
         Escape(Str(run, "iterations")) + " iterations, " + std::to_string(measured) +
         " measured.</p>\n";
}

// --- `seqpoint evaluate --html`: the evaluate JSON (RunEvaluateCommand's `--json` output). ---

// The unit of a metric, from its name's suffix (time_ns, energy_uj, ...); "" for counts.
std::string UnitOfMetric(const std::string& name) {
  auto ends = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("_ns")) return "ns";
  if (ends("_uj") || ends("_uJ")) return "uJ";
  return "";
}

// One metric of the evaluation in the shape ProjectionPlot draws (`total` for `projected`).
json AsProjection(const std::string& metric, const json& m) {
  json pr = {{"total", At(m, "projected")}, {"low", At(m, "low")}, {"high", At(m, "high")},
             {"actual", At(m, "actual")},   {"unit", UnitOfMetric(metric)},
             {"bounded", m.value("bounded", true)}};
  const json& ss = At(m, "steady_state");
  if (ss.is_object()) {
    pr["steady_state"] = {{"total", At(ss, "projected")}, {"low", At(ss, "low")},
                          {"high", At(ss, "high")}};
  }
  return pr;
}

const char* const kMethods[] = {"seqpoint", "first_n", "uniform_stride", "random_median_abs"};
const char* const kMethodNames[] = {"SeqPoint", "first N", "uniform stride",
                                    "random (median |error|)"};

// |error| of SeqPoint and of each baseline, per metric; NaN where the answer lacks it.
double MethodError(const json& m, size_t method) {
  return std::fabs(method == 0 ? Num(m, "error_pct")
                               : Num(At(m, "baselines_error_pct"), kMethods[method]));
}

// Grouped bars: per metric, |error| of SeqPoint beside the baselines' at the same budget.
std::string ErrorBarsPlot(const json& metrics) {
  std::vector<std::string> names;
  double top = 0;
  for (const auto& [metric, m] : metrics.items()) {
    names.push_back(metric);
    for (size_t k = 0; k < std::size(kMethods); ++k) {
      if (std::isfinite(MethodError(m, k))) top = std::max(top, MethodError(m, k));
    }
  }
  if (names.empty()) return "";
  svg::Plot p("metric", "|error| of the projected total (%)",
              svg::Range{-0.5, names.size() - 0.5}, svg::Range{0, top > 0 ? top * 1.1 : 1});
  p.SetCategories(names);
  const double w = 0.8 / std::size(kMethods);
  size_t i = 0;
  for (const auto& [metric, m] : metrics.items()) {
    for (size_t k = 0; k < std::size(kMethods); ++k) {
      const double e = MethodError(m, k);
      if (!std::isfinite(e)) continue;
      const double x0 = i - 0.4 + k * w;
      p.Bar(x0, x0 + w * 0.9, e, kPalette[k],
            metric + ", " + kMethodNames[k] + ": |error| " + Short(e) + "%");
    }
    ++i;
  }
  for (size_t k = 0; k < std::size(kMethods); ++k) p.AddLegend(kPalette[k], kMethodNames[k]);
  return p.Render("error against the baselines");
}

std::string EvaluateTable(const json& metrics) {
  std::string rows;
  for (const auto& [metric, m] : metrics.items()) {
    const std::string unit = UnitOfMetric(metric);
    const Scale s = ScaleFor(unit, std::fabs(Num(m, "actual")));
    auto v = [&](double x) { return std::isfinite(x) ? Short(s.Of(x)) + " " + s.unit : "—"; };
    auto pct = [](double x) { return std::isfinite(x) ? Short(x) + "%" : "—"; };
    const bool bounded = m.value("bounded", true) && std::isfinite(Num(m, "high"));
    rows += "<tr>" + Cell(metric) + Cell(v(Num(m, "actual"))) + Cell(v(Num(m, "projected"))) +
            Cell(v(Num(m, "low"))) + Cell(bounded ? v(Num(m, "high")) : "unbounded") +
            Cell(pct(Num(m, "error_pct"))) + Cell(m.value("covered", false) ? "yes" : "no");
    for (size_t k = 1; k < std::size(kMethods); ++k) {
      rows += Cell(pct(Num(At(m, "baselines_error_pct"), kMethods[k])));
    }
    rows += "</tr>\n";
  }
  if (rows.empty()) return "";
  return "<table>\n<tr><th>metric</th><th>actual</th><th>projected</th><th>95% low</th>"
         "<th>95% high</th><th>error</th><th>actual in interval</th><th>first N</th>"
         "<th>uniform stride</th><th>random (median |err|)</th></tr>\n" + rows + "</table>\n";
}

}  // namespace

std::string LocalNodeName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

std::string RenderReportHtml(const json& report, const std::string& node) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += Header(report, node);
  html += SummaryTable(report);
  html += DevicesSectionHtml(report);
  html += StrataList(report);
  html += HistogramPlot(report);
  html += TimePlot(report);
  html += ProjectionsSection(report);
  html += HistoryPlot(report);
  html += ObserverPlot(report);
  html += "</body>\n</html>\n";
  return html;
}

std::string RenderEvaluateHtml(const json& e) {
  const std::string title =
      "SeqPoint evaluation: " + Str(e, "trace") + " · method " + Str(e, "method");
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<title>" + Escape(title) + "</title>\n" + kStyle + "</head>\n<body>\n<h1>" +
          Escape(title) + "</h1>\n<p class=\"meta\">" + Escape(Str(e, "iterations")) +
          " iterations, " + Escape(Str(e, "measured")) + " measured in " +
          Escape(Str(e, "points")) + " SeqPoints; the baselines measure as many.</p>\n";
  const json& metrics = At(e, "metrics");
  html += EvaluateTable(metrics);
  std::string body;
  for (const auto& [metric, m] : metrics.items()) {
    std::string plot = ProjectionPlot(metric, AsProjection(metric, m));
    if (plot.empty()) continue;
    body += "<h3>" + Escape(metric) + "</h3>\n";
    const json& t = At(m, "time_strata");
    if (t.is_object()) {
      body += "<p class=\"meta\">" + std::to_string(At(t, "strata").size()) +
              " time strata, warm-up ends at iteration " + Escape(Str(t, "warmup_end")) + ", " +
              Escape(Str(t, "changes")) + " change(s) of cost.</p>\n";
    }
    body += plot;
  }
  if (!body.empty()) {
    html += Section("Projected against actual totals", body,
                    "Dots: projected totals; bars: 95% intervals; green: the actual total over "
                    "every iteration of the trace.");
  }
  const std::string bars = ErrorBarsPlot(metrics);
  if (!bars.empty()) {
    html += Section("Error against the baselines", bars,
                    "|error| of each method's projected total at the same number of measured "
                    "iterations; random: the median over 25 seeds.");
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace seqpoint::cli
