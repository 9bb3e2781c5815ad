// `seqpoint evaluate --trace T [selection options] [--compare T2] [--json]`
// Select + project on a trace that has metrics for every iteration, with the actual totals
// beside the projections, and the baselines a user would otherwise use (first N, uniform
// stride, random) at the same number of measured iterations. With --compare, T2 is the same
// run (same seq_len sequence) on another configuration, and the speedup projection is checked.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "agent/cli/commands.h"
#include "agent/cli/report_html.h"
#include "agent/cli/select_options.h"
#include "selector/estimate/baselines.h"
#include "selector/estimate/whole_run_estimator.h"
#include "selector/sl_histogram.h"

namespace seqpoint::cli {
namespace {

using nlohmann::json;

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

bool Complete(const std::vector<double>& v) {
  for (double x : v) {
    if (std::isnan(x)) return false;
  }
  return !v.empty();
}

double ErrPct(double projected, double actual) { return (projected - actual) / actual * 100.0; }

// R^2 of the least-squares line metric ~ a + b * (seq_len x batch): how well the cost model's
// linear term explains this metric on this run.
double LinearR2(const Trace& t, const std::vector<double>& y) {
  const size_t n = t.rows();
  double mx = 0, my = 0;
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = selector::CostProxy(t.seq_len[i], t.batch.empty() ? 0 : t.batch[i]);
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : 0.0;
}

// The trace's rows of the selection's iterations (found once, for every metric).
std::vector<size_t> SelectedRows(const selector::Selection& sel, const Trace& t) {
  std::unordered_map<uint64_t, size_t> row_of;
  for (size_t i = 0; i < t.rows(); ++i) row_of[t.iter[i]] = i;
  std::vector<size_t> rows;
  for (const selector::SeqPoint& p : sel.points) {
    for (uint64_t it : p.iters) {
      if (auto r = row_of.find(it); r != row_of.end()) rows.push_back(r->second);
    }
  }
  return rows;
}

// Every metric of the trace projected as seqpointd projects it online, by the same estimator
// (selector/estimate/whole_run_estimator.h): from the measured rows only, by the selector's time
// strata; the time column against the cost proxy (as if it were not measured on every iteration,
// and self-checked against its actual total), any other metric against every iteration's time.
// Trace columns carry no kind: every one is a delta (their totals are what evaluate checks).
selector::WholeRunEstimate ProjectOnline(const selector::OnlineSelector& online,
                                         const selector::Selection& sel, const Trace& t,
                                         const std::vector<size_t>& rows, bool first_occurrences) {
  const int time_col = TimeColumn(t.schema);
  selector::WholeRunInput in;
  in.first_occurrences = first_occurrences;
  in.strata = &online.strata();
  in.selection = &sel;
  in.timed = time_col >= 0 ? t.rows() : 0;
  if (time_col >= 0) {
    double total = 0;
    for (double v : t.metrics[static_cast<size_t>(time_col)]) total += v;
    in.actual["time_ns"] = {t.rows(), total};
  }
  for (size_t i : rows) {
    selector::EstimatorIteration it;
    it.ordinal = t.iter[i];
    it.seq_len = t.seq_len[i];
    it.batch = t.batch.empty() ? 0 : t.batch[i];
    it.time_ns = time_col >= 0 ? t.metrics[static_cast<size_t>(time_col)][i] : 0;
    for (size_t k = 0; k < t.schema.metrics.size(); ++k) {
      const bool is_time = static_cast<int>(k) == time_col;
      it.values.push_back({is_time ? "time_ns" : t.schema.metrics[k], "", t.metrics[k][i],
                           selector::MetricKind::kDelta});
    }
    in.measured.push_back(std::move(it));
  }
  return selector::EstimateWholeRun(in);
}

// The changes of cost the time strata found: where, which way, by how much.
json ChangesJson(const selector::TimeStrata& strata) {
  json out = json::array();
  for (const selector::TimeChange& c : strata.changes()) {
    out.push_back({{"ordinal", c.ordinal},
                   {"direction", c.direction > 0 ? "slower" : "faster"},
                   {"ratio", c.ratio},
                   {"bin", c.sl_hi == 0 ? json(nullptr) : json{c.sl_lo, c.sl_hi}}});
  }
  return out;
}

Status CheckSameRun(const Trace& a, const Trace& b, const std::string& b_path) {
  if (a.rows() != b.rows()) {
    return InvalidArgument(b_path + " has " + std::to_string(b.rows()) +
                           " iterations, the trace has " + std::to_string(a.rows()) +
                           ": --compare needs the same run (same seed) "
                           "on another configuration");
  }
  for (size_t i = 0; i < a.rows(); ++i) {
    if (a.seq_len[i] != b.seq_len[i] || a.iter[i] != b.iter[i]) {
      return InvalidArgument(
          b_path + ": row " + std::to_string(i + 1) + " (iteration " + std::to_string(b.iter[i]) +
          ") has seq_len " + std::to_string(b.seq_len[i]) + " where the trace has " +
          std::to_string(a.seq_len[i]) + ": --compare needs the same sequence of iterations");
    }
  }
  return Status::Ok();
}

}  // namespace

int RunEvaluateCommand(Args argv) {
  auto specs = SelectOptionSpecs(/*fraction_offline=*/true);
  specs.insert(
      specs.begin(),
      {{"--trace", true, "a trace with metrics measured on every iteration", "FILE"},
       {"--metric", true, "evaluate only this metric (default: every complete metric)", "NAME"},
       {"--compare", true, "the same run on another configuration: check the speedup", "FILE"},
       {"--json", false, "print JSON (values in the metrics' own units)"},
       {"--first-occurrences", false,
        "with --online: project each SL's first iteration as its own post-stratum (off in "
        "seqpointd; docs/estimators.md)"},
       {"--html", true, "also write the evaluation as a self-contained HTML page to FILE",
        "FILE"}});
  auto args = ParseArgs(argv, specs);
  if (!args.ok()) {
    std::fprintf(stderr, "seqpoint evaluate: %s\n", args.status().message().c_str());
    return 2;
  }
  if (args->Has("--help")) {
    PrintHelp(
        "evaluate --trace FILE [--budget N | --budget-fraction F | --target-error P] "
        "[--online] [--compare FILE] [--json] [--html FILE]",
        "Checks SeqPoint projections against a fully measured run, beside the baselines.\n"
        "Default budget: 1/200 of the iterations. Times are shown in seconds, energies in "
        "joules.",
        specs);
    return 0;
  }
  auto path = args->Get("--trace");
  if (!path) {
    std::fprintf(stderr, "seqpoint evaluate: --trace FILE is required (see --help)\n");
    return 2;
  }
  TraceReadOptions read;
  auto trace = LoadTrace(*path, read);
  if (!trace.ok()) {
    std::fprintf(stderr, "seqpoint evaluate: %s\n", trace.status().message().c_str());
    return 1;
  }
  const uint64_t n_iter = trace->rows();
  if (n_iter == 0) {
    std::fprintf(stderr, "seqpoint evaluate: %s has no rows\n", path->c_str());
    return 1;
  }
  bool any_budget =
      args->Has("--budget") || args->Has("--budget-fraction") || args->Has("--target-error");
  auto req = SelectRequestFromArgs(*args, *path, n_iter);
  if (!req.ok()) {
    std::fprintf(stderr, "seqpoint evaluate: %s\n", req.status().message().c_str());
    return 2;
  }
  if (!any_budget && !req->online) req->offline.budget = std::max<uint64_t>(1, n_iter / 200);
  std::optional<Trace> other;
  if (auto c = args->Get("--compare")) {
    auto t2 = LoadTrace(*c, read);
    Status st = t2.ok() ? CheckSameRun(*trace, *t2, *c) : t2.status();
    if (!st.ok()) {
      std::fprintf(stderr, "seqpoint evaluate: %s\n", st.message().c_str());
      return 1;
    }
    other = std::move(*t2);
  }
  std::optional<selector::OnlineSelector> online;
  uint32_t bins_needed = 0;
  auto sel = SelectFromTrace(*trace, *req, &online, &bins_needed);
  if (!sel.ok()) {
    std::fprintf(stderr, "seqpoint evaluate: %s\n", sel.status().message().c_str());
    return 1;
  }
  if (std::string w = BudgetWarning(*req, *sel, bins_needed); !w.empty()) {
    std::fprintf(stderr, "seqpoint evaluate: %s\n", w.c_str());
  }
  const uint64_t n = sel->measured();
  Measurements meas = GatherFromTrace(*sel, *trace);
  std::optional<Measurements> meas2;
  if (other) meas2 = GatherFromTrace(*sel, *other);

  json out = {{"trace", *path},
              {"iterations", n_iter},
              {"method", sel->method},
              {"measured", n},
              {"points", sel->points.size()},
              {"proxy_error_pct", sel->proxy_error_pct},
              {"metrics", json::object()}};
  const auto metric_filter = args->Get("--metric");
  bool human = !args->Has("--json");
  if (human) {
    std::printf(
        "trace %s: %llu iterations; %s: %zu SeqPoints, %llu measured (1/%.0f of the run)\n\n",
        path->c_str(), static_cast<unsigned long long>(n_iter), sel->method.c_str(),
        sel->points.size(), static_cast<unsigned long long>(n),
        n ? static_cast<double>(n_iter) / n : 0.0);
    std::printf("%-18s %14s %14s %9s %31s %9s\n", "metric", "actual", "projected", "error %",
                "95% interval", "measured");
  }
  json baselines_table = json::object();
  int evaluated = 0;
  const std::vector<size_t> online_rows =
      online ? SelectedRows(*sel, *trace) : std::vector<size_t>{};
  std::optional<selector::WholeRunEstimate> online_estimate;
  if (online && online->strata().observed() > 0) {
    online_estimate =
        ProjectOnline(*online, *sel, *trace, online_rows, args->Has("--first-occurrences"));
  }
  const int time_col = TimeColumn(trace->schema);
  for (size_t k = 0; k < trace->schema.metrics.size(); ++k) {
    const std::string& name = trace->schema.metrics[k];
    if (metric_filter && *metric_filter != name) continue;
    const auto& values = trace->metrics[k];
    if (!Complete(values)) {
      if (metric_filter || human)
        std::fprintf(stderr,
                     "seqpoint evaluate: metric '%s' skipped: not measured on every iteration\n",
                     name.c_str());
      continue;
    }
    auto p = selector::ProjectMetric(*sel, meas.obs[k]);
    if (!p.ok()) continue;
    // Online, as seqpointd does: the same whole-run estimator.
    const selector::WholeRunProjection* strat = nullptr;
    const selector::WholeRunSelfCheck* check = nullptr;
    if (online_estimate) {
      const std::string as = static_cast<int>(k) == time_col ? "time_ns" : name;
      for (const auto& e : online_estimate->projections) {
        if (e.metric == as) strat = &e;
      }
      for (const auto& c : online_estimate->self_checks) {
        if (c.metric == as) check = &c;
      }
      if (strat) {
        p->total = strat->total;
        p->low = strat->low;
        p->high = strat->high;
        p->samples = strat->samples;
      }
    }
    const double actual = Sum(values);
    json j = {{"actual", actual},
              {"projected", p->total},
              {"low", p->low},
              {"high", p->high},
              {"error_pct", ErrPct(p->total, actual)},
              {"covered", p->low <= actual && actual <= p->high},
              {"samples", p->samples},
              {"linear_r2", LinearR2(*trace, values)}};
    if (strat) {
      j["bounded"] = strat->bounded;
      j["steady_state"] = {{"projected", strat->steady_total},
                           {"low", strat->steady_low},
                           {"high", strat->steady_high}};
      if (check) {
        // Time projected from the measured iterations alone against its actual total: on the
        // run's time strata (cut on these very times), and on doubling windows only (the
        // honest check, the one seqpointd exports).
        j["self_check"] = {{"error_pct", check->error * 100},
                           {"covered", check->within_interval},
                           {"independent_projected", check->independent_projected},
                           {"independent_low", check->independent_low},
                           {"independent_high", check->independent_high},
                           {"independent_error_pct", check->independent_error * 100},
                           {"independent_covered", check->independent_within}};
      }
      j["time_strata"] = {{"strata", strat->strata},
                          {"borrowed", strat->borrowed},
                          {"warmup_end", online->strata().warmup_end()},
                          {"changes", online->strata().changes().size()},
                          {"change_list", ChangesJson(online->strata())}};
    }
    json b = {{"first_n", ErrPct(selector::ProjectFirstN(values, n), actual)},
              {"uniform_stride", ErrPct(selector::ProjectUniformStride(values, n), actual)},
              {"random_median_abs", selector::MedianRandomErrorPct(values, n, actual, 25)}};
    j["baselines_error_pct"] = b;
    if (other) {
      const auto& v2 = other->metrics[k];
      if (Complete(v2)) {
        auto q = selector::ProjectMetric(*sel, (*meas2).obs[k]);
        if (q.ok()) {
          auto s = selector::ProjectSpeedup(*p, *q);
          const double actual_s = actual / Sum(v2);
          auto ratio_err = [&](double pa, double pb) { return ErrPct(pa / pb, actual_s); };
          j["speedup"] = {
              {"actual", actual_s},
              {"projected", s.speedup},
              {"low", s.low},
              {"high", s.high},
              {"error_pct", ErrPct(s.speedup, actual_s)},
              {"baselines_error_pct",
               {{"first_n",
                 ratio_err(selector::ProjectFirstN(values, n), selector::ProjectFirstN(v2, n))},
                {"uniform_stride", ratio_err(selector::ProjectUniformStride(values, n),
                                             selector::ProjectUniformStride(v2, n))},
                {"random_seed0", ratio_err(selector::ProjectRandom(values, n, 0x5eed0000u),
                                           selector::ProjectRandom(v2, n, 0x5eed0000u))}}}};
        }
      }
    }
    if (human) {
      const std::string interval =
          "[" + HumanValue(name, p->low) + ", " + HumanValue(name, p->high) + "]";
      std::printf("%-18s %14s %14s %+9.3f %31s %9llu\n", name.c_str(),
                  HumanValue(name, actual).c_str(), HumanValue(name, p->total).c_str(),
                  ErrPct(p->total, actual), interval.c_str(),
                  static_cast<unsigned long long>(p->samples));
    }
    out["metrics"][name] = j;
    ++evaluated;
  }
  if (evaluated == 0) {
    std::fprintf(stderr,
                 "seqpoint evaluate: %s has no metric measured on every iteration "
                 "(e.g. a time_ns column with no empty cell)\n",
                 path->c_str());
    return 1;
  }
  if (human) {
    std::printf("\nbaselines at %llu measured iterations, error %%:\n",
                static_cast<unsigned long long>(n));
    std::printf("%-18s %10s %10s %16s %22s\n", "metric", "seqpoint", "first-N", "uniform stride",
                "random (median |err|)");
    for (auto& [name, j] : out["metrics"].items()) {
      std::printf("%-18s %+10.3f %+10.3f %+16.3f %22.3f\n", name.c_str(),
                  j["error_pct"].get<double>(), j["baselines_error_pct"]["first_n"].get<double>(),
                  j["baselines_error_pct"]["uniform_stride"].get<double>(),
                  j["baselines_error_pct"]["random_median_abs"].get<double>());
    }
    if (other) {
      std::printf("\nspeedup %s -> %s:\n", path->c_str(), args->Get("--compare")->c_str());
      std::printf("%-18s %10s %10s %9s %22s %10s %14s\n", "metric", "actual", "projected",
                  "error %", "95% interval", "first-N %", "stride %");
      for (auto& [name, j] : out["metrics"].items()) {
        if (!j.contains("speedup")) continue;
        const json& s = j["speedup"];
        char interval[48];
        std::snprintf(interval, sizeof interval, "[%.4f, %.4f]", s["low"].get<double>(),
                      s["high"].get<double>());
        std::printf("%-18s %10.4f %10.4f %+9.3f %22s %+10.3f %+14.3f\n", name.c_str(),
                    s["actual"].get<double>(), s["projected"].get<double>(),
                    s["error_pct"].get<double>(), interval,
                    s["baselines_error_pct"]["first_n"].get<double>(),
                    s["baselines_error_pct"]["uniform_stride"].get<double>());
      }
    }
  } else {
    std::printf("%s\n", out.dump(2).c_str());
  }
  if (auto html_path = args->Get("--html")) {
    std::ofstream html(*html_path);
    html << RenderEvaluateHtml(out);
    html.close();
    if (!html) {
      std::fprintf(stderr, "seqpoint evaluate: cannot write %s\n", html_path->c_str());
      return 1;
    }
    // On stderr with --json, so that stdout stays one JSON document.
    std::fprintf(human ? stdout : stderr, "wrote %s\n", html_path->c_str());
  }
  return 0;
}

}  // namespace seqpoint::cli
