#include "agent/cli/control_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>

namespace seqpoint::cli {
namespace {

using nlohmann::json;

double D(const json& j) { return j.is_number() ? j.get<double>() : NAN; }

// A value with its unit made readable: ns as seconds, uJ as joules, counts with SI prefixes.
std::string Value(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  if (unit == "ns") {
    std::snprintf(buf, sizeof buf, "%.4g s", v * 1e-9);
  } else if (unit == "us") {
    std::snprintf(buf, sizeof buf, "%.4g s", v * 1e-6);
  } else if (unit == "uJ") {
    std::snprintf(buf, sizeof buf, "%.4g J", v * 1e-6);
  } else if (unit == "bytes") {  // memory: binary prefixes, as nvidia-smi and free print it
    const char* prefix[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int p = 0;
    double x = v;
    while (std::fabs(x) >= 1024 && p < 4) {
      x /= 1024;
      ++p;
    }
    std::snprintf(buf, sizeof buf, "%.4g %s", x, prefix[p]);
  } else {
    const char* prefix[] = {"", "k", "M", "G", "T", "P"};
    int p = 0;
    double x = v;
    while (std::fabs(x) >= 1000 && p < 5) {
      x /= 1000;
      ++p;
    }
    std::snprintf(buf, sizeof buf, "%.4g%s%s%s", x, prefix[p], unit == "count" ? "" : " ",
                  unit == "count" ? "" : unit.c_str());
  }
  return buf;
}

std::string When(const json& unix_ns) {
  if (!unix_ns.is_number() || unix_ns.get<int64_t>() == 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ns.get<int64_t>() / 1000000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Pids(const json& pids) {
  std::string out;
  for (const auto& p : pids) out += (out.empty() ? "" : ",") + std::to_string(p.get<int64_t>());
  return out.empty() ? "-" : out;
}

void PrintRunHeader(const json& r) {
  std::printf("run %lld (%s): %s%s%s\n", static_cast<long long>(r["id"].get<int64_t>()),
              r["key"].get<std::string>().c_str(), r["state"].get<std::string>().c_str(),
              r["end_reason"].get<std::string>().empty() ? "" : ", ",
              r["end_reason"].get<std::string>().c_str());
  std::printf("  started %s, ended %s, pids %s\n", When(r["started_unix_ns"]).c_str(),
              When(r["ended_unix_ns"]).c_str(), Pids(r["pids"]).c_str());
  if (r.contains("launcher")) {
    std::string job = r["launcher"].get<std::string>() + " job " + r["job_id"].get<std::string>();
    if (!r.value("step", std::string()).empty()) job += ", step " + r["step"].get<std::string>();
    if (!r.value("job_name", std::string()).empty()) {
      job += ", name " + r["job_name"].get<std::string>();
    }
    if (!r.value("world_size", std::string()).empty()) {
      job += ", world size " + r["world_size"].get<std::string>();
    }
    if (!r.value("node", std::string()).empty()) job += ", node " + r["node"].get<std::string>();
    std::printf("  %s\n", job.c_str());
  }
  std::printf("  %llu iterations observed, %llu unobserved\n",
              static_cast<unsigned long long>(r["iterations"].get<uint64_t>()),
              static_cast<unsigned long long>(r["unobserved"].get<uint64_t>()));
}

// Processes whose collectors are stopped for a profiler or busy counters, and a pause.
void PrintBackoffs(const json& j) {
  if (j.contains("collectors_paused") && j["collectors_paused"].value("paused", false)) {
    const json& p = j["collectors_paused"];
    std::printf("  collectors PAUSED since %s, %s\n", When(p["since_unix_ns"]).c_str(),
                p["until_unix_ns"].is_null()
                    ? "until `seqpoint resume`"
                    : ("until " + When(p["until_unix_ns"])).c_str());
  }
  if (!j.contains("collectors_backed_off")) return;
  for (const auto& b : j["collectors_backed_off"]) {
    std::printf("  collectors stopped on pid %lld since %s: %s (%s)\n",
                static_cast<long long>(b["pid"].get<int64_t>()), When(b["since_unix_ns"]).c_str(),
                b["reason"].get<std::string>() == "profiler" ? "being profiled"
                                                             : "counters busy",
                b["evidence"].get<std::string>().c_str());
  }
}

// Which device each measured value came from (a GPU's UUID), as `show --json` lists them.
void PrintDevices(const json& s) {
  if (s.contains("devices") && !s["devices"].empty()) {
    std::string list;
    for (const auto& d : s["devices"]) {
      std::string collectors;
      for (const auto& c : d["collectors"]) {
        collectors += (collectors.empty() ? "" : ", ") + c.get<std::string>();
      }
      list += (list.empty() ? "" : "; ") + d["device"].get<std::string>() + " (" + collectors +
              ": " + std::to_string(d["iterations"].get<uint64_t>()) + " iterations)";
    }
    std::printf("  measured on %s\n", list.c_str());
  }
  if (s.value("devices_not_recorded", uint64_t{0}) > 0) {
    std::printf(
        "  device of %llu measured values not recorded (stored by a seqpointd before "
        "store schema 9)\n",
        static_cast<unsigned long long>(s["devices_not_recorded"].get<uint64_t>()));
  }
}

void PrintHistogram(const json& hist) {
  if (hist.empty()) return;
  // At most 16 rows: exact SLs grouped into equal SL ranges.
  uint32_t lo = hist.front()["seq_len"], hi = hist.back()["seq_len"];
  uint32_t rows = std::min<uint32_t>(16, hi - lo + 1);
  uint32_t width = (hi - lo + rows) / rows;
  std::vector<uint64_t> counts(rows, 0);
  for (const auto& b : hist) {
    counts[std::min<uint32_t>(rows - 1, (b["seq_len"].get<uint32_t>() - lo) / width)] +=
        b["count"].get<uint64_t>();
  }
  uint64_t most = *std::max_element(counts.begin(), counts.end());
  std::printf("\nSL histogram (%zu distinct SLs)\n", hist.size());
  for (uint32_t i = 0; i < rows; ++i) {
    int bar = most ? static_cast<int>(40.0 * static_cast<double>(counts[i]) / most + 0.5) : 0;
    std::printf("  %5u-%-5u %-40s %llu\n", lo + i * width, lo + (i + 1) * width - 1,
                std::string(static_cast<size_t>(bar), '#').c_str(),
                static_cast<unsigned long long>(counts[i]));
  }
}

void PrintSeqPoints(const json& points) {
  size_t measured = 0;
  for (const auto& p : points) measured += p["iters"].size();
  std::printf("\nSeqPoints (%zu, %zu measured iterations)\n", points.size(), measured);
  std::printf("  %-13s %6s %8s  %s\n", "SL bin", "rep SL", "weight", "measured (pid:iter)");
  for (const auto& p : points) {
    std::string iters;
    for (size_t i = 0; i < p["iters"].size(); ++i) {
      if (i == 6) {
        iters += " ...";
        break;
      }
      iters += (i ? " " : "") + std::to_string(p["pids"][i].get<int64_t>()) + ":" +
               std::to_string(p["iters"][i].get<uint64_t>());
    }
    char bin[32];
    std::snprintf(bin, sizeof bin, "[%u, %u]", p["bin"][0].get<uint32_t>(),
                  p["bin"][1].get<uint32_t>());
    std::printf("  %-13s %6u %8.0f  %s\n", bin, p["seq_len"].get<uint32_t>(), D(p["weight"]),
                iters.empty() ? "-" : iters.c_str());
  }
}

// Gauges (memory, power, clocks, utilisation): time-weighted means, never totals.
void PrintGauges(const json& show) {
  const json gauges = show.value("gauges", json::object());
  if (gauges.empty()) return;
  std::printf("\nGauges: time-weighted mean over the run, 95%% interval, peak measured\n");
  std::printf("  %-26s %12s %27s %12s\n", "metric", "mean", "interval", "peak");
  for (const auto& [metric, g] : gauges.items()) {
    const std::string unit = g["unit"];
    const bool bounded = g.value("bounded", true);
    const std::string interval = "[" + Value(D(g["low"]), unit) + ", " +
                                 (bounded ? Value(D(g["high"]), unit) : std::string("unbounded")) +
                                 "]";
    std::printf("  %-26s %12s %27s %12s%s%s\n", metric.c_str(), Value(D(g["mean"]), unit).c_str(),
                interval.c_str(), Value(D(g["peak"]), unit).c_str(),
                g.value("perturbed", false) ? "  PERTURBED" : "",
                bounded ? "" : "  (too few samples to bound the mean)");
  }
}

// What measuring costs the run (active runs): per measured iteration and as a share of its time.
void PrintMeasurementCost(const json& show) {
  if (!show.contains("measurement_cost")) return;
  const json& c = show["measurement_cost"];
  if (!c["per_measured_ns"].is_number()) {
    std::printf("\nmeasuring costs: not known yet (no measured iteration to compare)\n");
    return;
  }
  char cap[48] = "";
  if (D(c["max_overhead"]) > 0) {
    std::snprintf(cap, sizeof cap, " (max %.2g%%)", 100 * D(c["max_overhead"]));
  }
  std::printf("\nmeasuring costs %s per measured iteration (%s), %.3g%% of the run's time%s\n",
              Value(D(c["per_measured_ns"]), "ns").c_str(), c["source"].get<std::string>().c_str(),
              100 * D(c["share_of_run_time"]), cap);
}

// GPU memory per SL bin, and the SL at which the job would run out of it.
void PrintGpuMemory(const json& show) {
  for (const json& m : show.value("gpu_memory", json::array())) {
    const bool process = m["scope"] == "process";
    std::printf("\nGPU memory %s (%s): peak per SL bin\n",
                process ? "of the process" : "of the whole GPU",
                m["metric"].get<std::string>().c_str());
    for (const json& b : m["bins"]) {
      char bin[32];
      std::snprintf(bin, sizeof bin, "[%u, %u]", b["bin"][0].get<uint32_t>(),
                    b["bin"][1].get<uint32_t>());
      std::printf("  %-13s %12s  (at SL %u)\n", bin, Value(D(b["peak_bytes"]), "bytes").c_str(),
                  b["peak_seq_len"].get<uint32_t>());
    }
    const json& f = m["fit"];
    const std::string total = Value(D(m["capacity_bytes"]), "bytes");
    if (f["supported"].get<bool>() && f["exceed_seq_len"].is_number()) {
      std::printf("  would exceed %s at SL ~%.0f (%s per SL token, R^2 %.3f)%s%s\n", total.c_str(),
                  D(f["exceed_seq_len"]), Value(D(f["bytes_per_sl"]), "bytes").c_str(), D(f["r2"]),
                  f["extrapolated"].get<bool>() ? ": " : "",
                  f["extrapolated"].get<bool>() ? f["why"].get<std::string>().c_str() : "");
    } else {
      std::printf("  no SL at which it would exceed %s: %s\n",
                  m["capacity_bytes"].is_number() ? total.c_str() : "the GPU's memory",
                  f["why"].get<std::string>().c_str());
    }
  }
}

void PrintProjections(const json& show) {
  std::printf("\nProjections: whole-run totals, 95%% interval\n");
  std::printf("  %-22s %12s %27s %12s %8s\n", "metric", "projected", "interval", "actual", "error");
  for (const auto& [metric, p] : show["projections"].items()) {
    std::string unit = p["unit"];
    if (p.contains("left_out")) {  // flagged: the reason, never the value
      std::printf("  %-22s %12s %27s %12s %8s\n  %-22s left out: %s\n", metric.c_str(), "-", "-",
                  Value(D(p["actual"]), unit).c_str(), "-", "",
                  p.value("left_out_detail", p["left_out"].get<std::string>()).c_str());
      continue;
    }
    const bool bounded = p.value("bounded", true);
    // An unbounded metric: the samples saw too few events to say how many were missed.
    std::string interval = "[" + Value(D(p["low"]), unit) + ", " +
                           (bounded ? Value(D(p["high"]), unit) : std::string("unbounded")) + "]";
    // The actual total covers the observed iterations: compare without the unobserved gap.
    const json gap = p.value("unobserved", json::object());
    const double gap_total = gap.contains("total") ? D(gap["total"]) : 0;
    std::string error = "-";
    if (std::isfinite(D(p["actual"])) && D(p["actual"]) != 0) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%+.2f%%",
                    100 * (D(p["total"]) - gap_total - D(p["actual"])) / D(p["actual"]));
      error = buf;
    }
    const bool perturbed = p.value("perturbed", false);
    // Without an upper bound the total is an estimate nothing bounds, not a floor (one sample of
    // a few can stand far above or below the truth): only its lower bound is printed.
    std::printf("  %-22s %12s %27s %12s %8s%s%s\n", metric.c_str(),
                bounded ? Value(D(p["total"]), unit).c_str() : "-", interval.c_str(),
                Value(D(p["actual"]), unit).c_str(), bounded ? error.c_str() : "-",
                perturbed ? "  PERTURBED" : "",
                bounded ? "" : "  (left out: too few events or measured iterations to bound it)");
    if (gap.contains("iterations")) {
      const bool gap_bounded = std::isfinite(D(gap["high"]));
      std::printf("  %-22s %12s %27s  (in the total: %llu iterations never observed)\n", "",
                  ("+" + Value(gap_total, unit)).c_str(),
                  ("[" + Value(D(gap["low"]), unit) + ", " +
                   (gap_bounded ? Value(D(gap["high"]), unit) : std::string("unbounded")) + "]")
                      .c_str(),
                  static_cast<unsigned long long>(gap["iterations"].get<uint64_t>()));
    }
  }
  // Steady state: the same without the warm-up the time strata found.
  if (show.contains("time_strata")) {
    const json& t = show["time_strata"];
    std::printf("\nTime strata: warm-up %llu iterations%s, %zu strata, %zu changes of cost\n",
                static_cast<unsigned long long>(t.value("warmup_end", uint64_t{0})),
                t.value("warmup_settled", false) ? "" : " (not settled yet)", t["strata"].size(),
                t["changes"].size());
    for (const json& c : t["changes"]) {
      std::string scope = c["bin"].is_null() ? std::string("all SLs")
                                             : "SL " + std::to_string(c["bin"][0].get<uint32_t>()) +
                                                   "-" + std::to_string(c["bin"][1].get<uint32_t>());
      char ratio[32] = "-";
      if (c["ratio"].is_number()) std::snprintf(ratio, sizeof ratio, "x%.2f", D(c["ratio"]));
      std::printf("  from iteration %llu: %s %s (%s)\n",
                  static_cast<unsigned long long>(c["ordinal"].get<uint64_t>()),
                  c["direction"].get<std::string>().c_str(), ratio, scope.c_str());
    }
    std::printf("  %-22s %12s %27s\n", "steady state", "projected", "interval");
    for (const auto& [metric, p] : show["projections"].items()) {
      if (!p.contains("steady_state") || !p["steady_state"]["total"].is_number()) continue;
      const std::string unit = p["unit"];
      const json& st = p["steady_state"];
      std::string interval = "[" + Value(D(st["low"]), unit) + ", " +
                             (p.value("bounded", true) ? Value(D(st["high"]), unit)
                                                       : std::string("unbounded")) + "]";
      std::printf("  %-22s %12s %27s\n", metric.c_str(), Value(D(st["total"]), unit).c_str(),
                  interval.c_str());
    }
  }
  // Older daemons send only the time self-check.
  json checks = show.value("self_checks", json::object());
  if (checks.empty() && show.contains("self_check")) checks["time_ns"] = show["self_check"];
  const json projections = show.value("projections", json::object());
  for (const auto& [metric, c] : checks.items()) {
    // An unbounded projection is "inside" any interval: say that there is none instead.
    const bool bounded = !projections.contains(metric) ||
                         projections[metric].value("bounded", true);
    std::printf(
        "\nself-check: %s projected from the SeqPoints vs measured on every iteration: "
        "%+.2f%% (%s)",
        metric == "energy_uj"        ? "energy"
        : metric == "process_cpu_ns" ? "process CPU time"
                                     : "iteration time",
        100 * D(c["error"]),
        !bounded ? "no interval: too few measured iterations"
        : c["within_interval"].get<bool>() ? "inside the 95% interval"
                                           : "OUTSIDE the 95% interval");
    if (D(c.value("observer_ratio", json(1.0))) > 1) {
      std::printf("; corrected for the observer effect (x%.2f), %s added by measuring",
                  D(c["observer_ratio"]), Value(D(c["observer_excess"]), c["unit"]).c_str());
    }
    std::printf("\n");
  }
  if (show.contains("observer_effect") && show["observer_effect"]["all"]["pairs"] > 0) {
    const json& o = show["observer_effect"];
    std::printf(
        "observer effect: collector-measured iterations take %.2fx [%.2f, %.2f] the time "
        "of the controls (%llu pairs)%s\n",
        D(o["all"]["ratio"]), D(o["all"]["low"]), D(o["all"]["high"]),
        static_cast<unsigned long long>(o["all"]["pairs"].get<uint64_t>()),
        o["flagged"].get<bool>() ? ": MEASURING PERTURBS THE TRAINING" : "");
    for (const auto& g : o["groups"]) {
      if (!g["flagged"].get<bool>()) continue;
      std::printf("  %s: %.2fx [%.2f, %.2f]\n", g["group"].get<std::string>().c_str(),
                  D(g["ratio"]), D(g["low"]), D(g["high"]));
    }
    for (const auto& c : o["dropped_collectors"]) {
      std::printf("  collector %s dropped for this run\n", c.get<std::string>().c_str());
    }
  }
}

}  // namespace

void RenderStatus(const json& s) {
  std::printf("seqpointd %s (pid %lld)\n", s["version"].get<std::string>().c_str(),
              static_cast<long long>(s["pid"].get<int64_t>()));
  std::printf("  state     %s\n  control   %s\n  metrics   %s\n",
              s["state_db"].get<std::string>().c_str(),
              s["control_socket"].get<std::string>().c_str(),
              s["metrics_listen"].get<std::string>().empty()
                  ? "off"
                  : ("http://" + s["metrics_listen"].get<std::string>() + "/metrics").c_str());
  if (s["source"].is_object()) {
    const json& src = s["source"];
    std::printf("  probes    %s: %llu processes, %llu events, %llu lost, %llu anomalies\n",
                src["name"].get<std::string>().c_str(),
                static_cast<unsigned long long>(src["processes"].get<uint64_t>()),
                static_cast<unsigned long long>(src["events"].get<uint64_t>()),
                static_cast<unsigned long long>(src["lost"].get<uint64_t>()),
                static_cast<unsigned long long>(src["anomalies"].get<uint64_t>()));
    if (src.contains("counters") && src["counters"].is_object()) {  // which counter path, why
      const json& c = src["counters"];
      const std::string why = c.value("why", std::string());
      std::printf("  counters  %s%s%s", c.value("path", std::string("-")).c_str(),
                  why.empty() ? "" : ": ", why.c_str());
      if (c.value("windows", uint64_t{0}) != 0 || c.value("flagged", uint64_t{0}) != 0) {
        std::printf("; %llu windows, %llu flagged (%llu implausible, %llu too much steal), "
                    "%llu with steal subtracted",
                    static_cast<unsigned long long>(c.value("windows", uint64_t{0})),
                    static_cast<unsigned long long>(c.value("flagged", uint64_t{0})),
                    static_cast<unsigned long long>(c.value("implausible", uint64_t{0})),
                    static_cast<unsigned long long>(c.value("steal_flagged", uint64_t{0})),
                    static_cast<unsigned long long>(c.value("steal_subtracted", uint64_t{0})));
      }
      std::printf("\n");
      const std::string steal = c.value("steal_source", std::string());
      if (!steal.empty()) {  // where the kernel path reads hypervisor steal, and why
        std::printf("  steal     %s: %s", steal.c_str(),
                    c.value("steal_why", std::string()).c_str());
        if (c.value("steal_stale", uint64_t{0}) != 0) {
          std::printf("; %llu windows read a run queue's copy",
                      static_cast<unsigned long long>(c.value("steal_stale", uint64_t{0})));
        }
        std::printf("\n");
      }
    }
    for (const auto& p : src.value("attached", json::array())) {
      std::printf("            pid %lld (%s): %s%s\n",
                  static_cast<long long>(p["pid"].get<int64_t>()),
                  p["comm"].get<std::string>().c_str(), p["probe"].get<std::string>().c_str(),
                  p["run_started"].get<bool>() ? "" : ", no iteration yet (no run)");
    }
  } else {
    std::printf("  probes    NONE: %s\n", s.value("source_error", std::string("-")).c_str());
  }
  if (s.contains("store") && s["store"].is_object() && !s["store"].value("writable", true)) {
    const json& st = s["store"];
    std::printf("  store     NOT WRITABLE (unhealthy): %s; %llu runs kept in memory\n",
                st.value("error", std::string("-")).c_str(),
                static_cast<unsigned long long>(st.value("unsaved_runs", uint64_t{0})));
  }
  std::printf("  runs      %llu active, %llu closed since start\n",
              static_cast<unsigned long long>(s["runs_active"].get<uint64_t>()),
              static_cast<unsigned long long>(s["runs_closed"].get<uint64_t>()));
  for (const auto& c : s["collectors"]) {
    std::printf("  collector %-10s %-7s %llu ok, %llu failed, %.3f ms total cost%s%s\n",
                c["name"].get<std::string>().c_str(), c["state"].get<std::string>().c_str(),
                static_cast<unsigned long long>(c["ok"].get<uint64_t>()),
                static_cast<unsigned long long>(c["failed"].get<uint64_t>()),
                D(c["cost_us"]) / 1000, c["last_error"].get<std::string>().empty() ? "" : ": ",
                c["last_error"].get<std::string>().c_str());
    // What it measures (per GPU: the energy counter's period, GPM) and what its last
    // measurement left out, and why: no value is missing without a reason.
    if (const std::string d = c.value("description", std::string()); !d.empty()) {
      std::printf("            measures: %s\n", d.c_str());
    }
    if (const std::string w = c.value("warnings", std::string()); !w.empty()) {
      std::printf("            last left out: %s\n", w.c_str());
    }
  }
  if (s.contains("gpu_windows") && s["gpu_windows"].is_object()) {
    const json& g = s["gpu_windows"];
    const auto n = [&](const char* k) { return g.value(k, uint64_t{0}); };
    const uint64_t kept = n("closed_at_end") + n("closed_at_sync");
    const uint64_t out = n("not_closed") + n("no_sync_probe") + n("cut_short") + n("no_iteration");
    if (kept + out > 0) {
      std::printf("  gpu windows %llu closed by a sync (%llu at the end, %llu at the next sync, "
                  "lag max %.1f ms), %llu left out%s%s\n",
                  static_cast<unsigned long long>(kept),
                  static_cast<unsigned long long>(n("closed_at_end")),
                  static_cast<unsigned long long>(n("closed_at_sync")), D(g["lag_ms_max"]),
                  static_cast<unsigned long long>(out), out > 0 ? ": last " : "",
                  out > 0 ? g.value("last_flag", std::string()).c_str() : "");
    }
  }
  PrintBackoffs(s);
  if (s.contains("energy") && s["energy"]["source"].is_string()) {
    const json& e = s["energy"];
    std::printf("  energy    %s, every %lld ms: %llu reads, %llu failed\n",
                e["description"].get<std::string>().c_str(),
                static_cast<long long>(e["interval_ms"].get<int64_t>()),
                static_cast<unsigned long long>(e["reads"].get<uint64_t>()),
                static_cast<unsigned long long>(e["failures"].get<uint64_t>()));
    // How sharp per-iteration energy is: the counter's own period and the smeared iterations.
    if (e.contains("update_period_ms") && e["update_period_ms"].is_number()) {
      const std::string bound =
          e["mean_uncertainty"].is_number()
              ? std::to_string(static_cast<int>(e["mean_uncertainty"].get<double>() * 100)) + "%"
              : "-";
      std::printf(
          "            counter updates every %.1f ms; %llu iterations smeared (error "
          "bound over 10%%), mean bound %s\n",
          e["update_period_ms"].get<double>(),
          static_cast<unsigned long long>(e.value("smeared", uint64_t{0})), bound.c_str());
    }
  } else if (s.contains("energy")) {
    std::printf("  energy    per iteration: %s\n", s["energy"].value("error", "-").c_str());
  }
  if (s["upload"].is_object()) {
    const json& u = s["upload"];
    std::printf(
        "  upload    %s: %llu batches sent, %llu failures, spool %lld batches (%lld B)%s%s\n",
        u["url"].get<std::string>().c_str(),
        static_cast<unsigned long long>(u["sent_batches"].get<uint64_t>()),
        static_cast<unsigned long long>(u["failures"].get<uint64_t>()),
        static_cast<long long>(u.value("spool_batches", 0)),
        static_cast<long long>(u.value("spool_bytes", 0)),
        u["last_error"].get<std::string>().empty() ? "" : "; last error: ",
        u["last_error"].get<std::string>().c_str());
  } else {
    std::printf("  upload    off\n");
  }
}

void RenderRuns(const json& j) {
  std::printf("%5s  %-24s %-9s %10s %8s %10s  %s\n", "ID", "KEY", "STATE", "ITERATIONS", "MEASURED",
              "SELF-CHECK", "STARTED");
  for (const auto& r : j["runs"]) {
    std::string check = "-";
    if (r.contains("self_check_error") && r["self_check_error"].is_number()) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%+.2f%%", 100 * D(r["self_check_error"]));
      check = buf;
    }
    std::string measured =
        r.contains("measured") ? std::to_string(r["measured"].get<uint64_t>()) : "-";
    std::printf("%5lld  %-24s %-9s %10llu %8s %10s  %s\n",
                static_cast<long long>(r["id"].get<int64_t>()), r["key"].get<std::string>().c_str(),
                r["state"].get<std::string>().c_str(),
                static_cast<unsigned long long>(r["iterations"].get<uint64_t>()), measured.c_str(),
                check.c_str(), When(r["started_unix_ns"]).c_str());
  }
}

// A data-parallel run's slow-rank verdicts (agent/fleet/slow_rank_view.h): the ranks held slower
// than their peers at equal SL, and what "none" means on this job: the detection floor.
void PrintSlowRanks(const json& show) {
  if (!show.contains("slow_ranks")) return;
  const json& s = show["slow_ranks"];
  const unsigned long long horizon = static_cast<unsigned long long>(D(s["floor_steps"]));
  auto name = [](const json& r) {
    return r["rank"].is_null() ? std::string("?") : r["rank"].dump();
  };
  std::printf(
      "\nslow ranks (compute per token before the collective vs peers at equal SL, %llu "
      "steps judged): ",
      static_cast<unsigned long long>(s["steps"].get<uint64_t>()));
  std::string verdict;
  for (const json& r : s["ranks"]) {
    if (!r["slow"].get<bool>()) continue;
    char one[64];
    std::snprintf(one, sizeof one, "%srank %s SLOWER (%.2fx)", verdict.empty() ? "" : ", ",
                  name(r).c_str(), D(r["compute_ratio"]));
    verdict += one;
  }
  std::printf("%s", verdict.empty() ? "none" : verdict.c_str());
  if (s["detectable_slowdown"].is_number()) {
    std::printf("; finds a slowdown of %.2fx or more within %llu steps at this job's noise\n",
                D(s["detectable_slowdown"]), horizon);
  } else {
    std::printf(
        "; detection floor not known (a rank still warming up over 64 compared steps, "
        "or compared too seldom to find a slowdown within %llu steps)\n",
        horizon);
  }
  for (const json& r : s["ranks"]) {
    char floor[32] = "-";
    if (r["detectable_slowdown"].is_number()) {
      std::snprintf(floor, sizeof floor, "%.2fx", D(r["detectable_slowdown"]));
    }
    std::printf("  rank %-5s %8llu tested  compute x%.3f  floor %s%s\n", name(r).c_str(),
                static_cast<unsigned long long>(r["tested"].get<uint64_t>()), D(r["compute_ratio"]),
                floor, r["slow"].get<bool>() ? "  SLOW" : "");
  }
}

void RenderShow(const json& s) {
  PrintRunHeader(s["run"]);
  if (s.contains("probes")) {  // active runs: how each live process is probed
    for (const auto& p : s["probes"]) {
      std::printf("  pid %lld: %s\n", static_cast<long long>(p["pid"].get<int64_t>()),
                  p["probe"].get<std::string>().c_str());
      if (!p["detail"].get<std::string>().empty()) {
        std::printf("    %s\n", p["detail"].get<std::string>().c_str());
      }
    }
  }
  PrintBackoffs(s);
  PrintDevices(s);
  PrintHistogram(s["histogram"]);
  PrintSeqPoints(s["seqpoints"]);
  PrintProjections(s);
  PrintGauges(s);
  PrintGpuMemory(s);
  PrintMeasurementCost(s);
  PrintSlowRanks(s);
}

void RenderPause(const json& p) {
  if (!p.value("paused", false)) {
    std::printf("collectors running%s\n",
                p.contains("was_paused") && !p["was_paused"].get<bool>() ? " (were not paused)"
                                                                         : "");
    return;
  }
  std::printf("collectors paused %s\n", p["until_unix_ns"].is_null()
                                            ? "until `seqpoint resume`"
                                            : ("until " + When(p["until_unix_ns"])).c_str());
}

void RenderReport(const json& r) {
  RenderShow(r);
  std::printf("\nMeasurements: %zu values\n", r["measurements"].size());
  std::printf("\nCost of the run's main SL bins on this node, by day (mean iteration time)\n");
  std::printf("  %-11s %-13s %8s %12s\n", "day", "SL bin", "n", "mean");
  for (const auto& h : r["history"]) {
    char bin[32];
    std::snprintf(bin, sizeof bin, "[%u, %u]", h["bin"][0].get<uint32_t>(),
                  h["bin"][1].get<uint32_t>());
    std::printf("  %-11s %-13s %8llu %12s\n", h["day"].get<std::string>().c_str(), bin,
                static_cast<unsigned long long>(h["n"].get<uint64_t>()),
                Value(D(h["mean"]), "ns").c_str());
  }
}

}  // namespace seqpoint::cli
