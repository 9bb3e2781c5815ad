#include "agent/cli/selection_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "selector/binning.h"
#include "selector/sl_histogram.h"

namespace seqpoint::cli {

using selector::CostProxy;

TraceReadOptions ProgressOptions(const char* command, bool enabled) {
  TraceReadOptions o;
  o.read_metrics = false;
  if (enabled) {
    o.progress = [command](uint64_t rows) {
      std::fprintf(stderr, "%s: %llu rows read\n", command, static_cast<unsigned long long>(rows));
    };
  }
  return o;
}

namespace {

uint32_t BinsNeeded(const selector::SlHistogram& hist, double target_pct, uint32_t max_bins) {
  if (hist.total() == 0) return 0;
  return static_cast<uint32_t>(selector::BinsForTarget(hist.Buckets(), target_pct, max_bins).size());
}

}  // namespace

Result<selector::Selection> SelectFromTraceFile(const SelectRequest& req, uint32_t* bins_needed) {
  TraceReadOptions read = ProgressOptions("select", req.progress);
  if (req.online) {
    auto sel = selector::OnlineSelector::Create(req.online_options);
    if (!sel.ok()) return sel.status();
    uint64_t index = 0;
    // Every iteration's time, when the trace has it, feeds the time strata as in seqpointd.
    read.read_metrics = true;
    int time_col = -1;
    auto on_header = [&](const TraceSchema& schema) {
      time_col = TimeColumn(schema);
      return Status::Ok();
    };
    Status st = ReadTrace(req.trace, read, on_header, [&](const TraceRow& r) {
      sel->OnIteration(r.iter, r.seq_len, r.batch, static_cast<double>(r.tokens));
      if (time_col >= 0 && static_cast<size_t>(time_col) < r.metrics.size() &&
          !std::isnan(r.metrics[static_cast<size_t>(time_col)])) {
        sel->OnTime(r.iter, r.seq_len, r.batch, r.metrics[static_cast<size_t>(time_col)]);
      }
      ++index;
      return Status::Ok();
    });
    if (!st.ok()) return st;
    if (index == 0) return InvalidArgument(req.trace + ": the trace has no rows");
    if (bins_needed != nullptr) {
      *bins_needed = BinsNeeded(sel->histogram(), req.online_options.target_error_pct,
                                req.online_options.max_bins);
    }
    return sel->Current();
  }
  if (req.trace == "-") {
    return InvalidArgument("offline selection reads the trace twice: give a file path, not '-' "
                           "(or use --online, which reads it once)");
  }
  selector::SlHistogram hist;
  uint64_t index = 0;
  const uint64_t warmup = req.offline.warmup;
  Status st = ReadTrace(req.trace, read, nullptr, [&](const TraceRow& r) {
    hist.Add(r.seq_len, CostProxy(r.seq_len, r.batch), static_cast<double>(r.tokens), index++ >= warmup);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  auto plan = selector::PlanOffline(hist, req.offline);
  if (!plan.ok()) return plan.status().WithContext(req.trace);
  if (bins_needed != nullptr) {
    *bins_needed = BinsNeeded(hist, req.offline.target_error_pct, req.offline.max_bins);
  }
  selector::OccurrencePicker picker(*plan);
  index = 0;
  read.progress = nullptr;
  st = ReadTrace(req.trace, read, nullptr, [&](const TraceRow& r) {
    picker.Observe(index++, r.iter, r.seq_len);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  auto sel = picker.Finish();
  if (!sel.ok()) return sel.status().WithContext(req.trace);
  return sel;
}

int TimeColumn(const TraceSchema& schema) {
  for (size_t k = 0; k < schema.metrics.size(); ++k) {
    if (schema.metrics[k] == "time_ns") return static_cast<int>(k);
  }
  return -1;
}

Result<selector::Selection> SelectFromTrace(const Trace& t, const SelectRequest& req,
                                            std::optional<selector::OnlineSelector>* online_out,
                                            uint32_t* bins_needed) {
  if (t.rows() == 0) return InvalidArgument(req.trace + ": the trace has no rows");
  auto batch = [&](size_t i) { return t.batch.empty() ? 0u : t.batch[i]; };
  auto tokens = [&](size_t i) { return t.tokens.empty() ? 0.0 : static_cast<double>(t.tokens[i]); };
  if (req.online) {
    auto sel = selector::OnlineSelector::Create(req.online_options);
    if (!sel.ok()) return sel.status();
    const int time_col = TimeColumn(t.schema);
    for (size_t i = 0; i < t.rows(); ++i) {
      sel->OnIteration(t.iter[i], t.seq_len[i], batch(i), tokens(i));
      if (time_col >= 0 && !std::isnan(t.metrics[static_cast<size_t>(time_col)][i])) {
        sel->OnTime(t.iter[i], t.seq_len[i], batch(i), t.metrics[static_cast<size_t>(time_col)][i]);
      }
    }
    if (online_out != nullptr) *online_out = *sel;
    if (bins_needed != nullptr) {
      *bins_needed = BinsNeeded(sel->histogram(), req.online_options.target_error_pct,
                                req.online_options.max_bins);
    }
    return sel->Current();
  }
  selector::SlHistogram hist;
  for (size_t i = 0; i < t.rows(); ++i) {
    hist.Add(t.seq_len[i], CostProxy(t.seq_len[i], batch(i)), tokens(i), i >= req.offline.warmup);
  }
  auto plan = selector::PlanOffline(hist, req.offline);
  if (!plan.ok()) return plan.status().WithContext(req.trace);
  if (bins_needed != nullptr) {
    *bins_needed = BinsNeeded(hist, req.offline.target_error_pct, req.offline.max_bins);
  }
  selector::OccurrencePicker picker(*plan);
  for (size_t i = 0; i < t.rows(); ++i) picker.Observe(i, t.iter[i], t.seq_len[i]);
  return picker.Finish();
}

std::string BudgetWarning(const SelectRequest& req, const selector::Selection& sel,
                          uint32_t bins_needed) {
  uint64_t budget = req.offline.budget;  // 0: none (target-error mode)
  double target = req.offline.target_error_pct;
  if (req.online) {
    const auto& on = req.online_options;
    target = on.target_error_pct;
    budget = on.budget_count;
    if (on.budget_fraction > 0) {
      auto f = static_cast<uint64_t>(on.budget_fraction * static_cast<double>(sel.iterations));
      budget = budget ? std::min(budget, f) : std::max<uint64_t>(f, 1);
    }
  }
  const uint64_t per_bin = 2 * static_cast<uint64_t>(bins_needed);
  const uint64_t enough = std::max<uint64_t>(4, per_bin);
  if (budget == 0 || budget >= enough) return "";
  char why[160];
  if (per_bin >= 4) {
    std::snprintf(why, sizeof why, "2 per SL bin for the %u bins that the %g%% target error needs",
                  bins_needed, target);
  } else {
    std::snprintf(why, sizeof why, "4 (2 samples of 2 SeqPoints, for a noise estimate)");
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "warning: a budget of %llu measured iteration%s is less than %s: the cost-model "
                "error is %.3g%% and the projection will be rough, its interval wide; use "
                "--budget %llu or more",
                static_cast<unsigned long long>(budget), budget == 1 ? "" : "s", why,
                sel.proxy_error_pct, static_cast<unsigned long long>(enough));
  return line;
}

std::string HumanValue(std::string_view metric, double v) {
  auto ends = [&](std::string_view suffix) {
    return metric.size() > suffix.size() && metric.substr(metric.size() - suffix.size()) == suffix;
  };
  double scale = 0;
  const char* unit = "";
  if (ends("_ns")) scale = 1e-9, unit = "s";
  else if (ends("_us")) scale = 1e-6, unit = "s";
  else if (ends("_ms")) scale = 1e-3, unit = "s";
  else if (ends("_uj")) scale = 1e-6, unit = "J";
  else if (ends("_mj")) scale = 1e-3, unit = "J";
  char out[64];
  if (scale == 0) {  // a count: whole numbers as such, others to 6 significant digits
    if (std::fabs(v) < 1e15 && v == std::floor(v)) std::snprintf(out, sizeof out, "%.0f", v);
    else std::snprintf(out, sizeof out, "%.6g", v);
    return out;
  }
  const double x = v * scale;
  const double a = std::fabs(x);
  // Four significant digits at least, never more decimals than milli-units need below 1.
  if (a >= 1000) std::snprintf(out, sizeof out, "%.1f %s", x, unit);
  else if (a >= 1) std::snprintf(out, sizeof out, "%.3f %s", x, unit);
  else if (a >= 1e-3 || a == 0) std::snprintf(out, sizeof out, "%.6f %s", x, unit);
  else std::snprintf(out, sizeof out, "%.3e %s", x, unit);
  return out;
}

namespace {

struct Slot {
  uint32_t point;
  uint32_t bin_lo, bin_hi;
  bool found = false;
};

std::unordered_map<uint64_t, Slot> SlotsOf(const selector::Selection& s) {
  std::unordered_map<uint64_t, Slot> slots;
  for (uint32_t p = 0; p < s.points.size(); ++p) {
    for (uint64_t it : s.points[p].iters) slots[it] = {p, s.points[p].bin_lo, s.points[p].bin_hi};
  }
  return slots;
}

}  // namespace

Result<Measurements> GatherMeasurements(const selector::Selection& s, const std::string& path) {
  auto slots = SlotsOf(s);
  Measurements m;
  TraceReadOptions read;
  Status st = ReadTrace(
      path, read,
      [&](const TraceSchema& schema) {
        if (schema.metrics.empty()) {
          return InvalidArgument(path + ": the measured trace has no metric column (e.g. time_ns) "
                                        "to project");
        }
        m.metrics = schema.metrics;
        m.obs.assign(schema.metrics.size(), std::vector<std::vector<selector::Observation>>(s.points.size()));
        return Status::Ok();
      },
      [&](const TraceRow& r) {
        auto it = slots.find(r.iter);
        if (it == slots.end()) return Status::Ok();  // not a SeqPoint: never read
        Slot& slot = it->second;
        if (slot.found) {
          return InvalidArgument(path + ":" + std::to_string(r.line) + ": iteration " +
                                 std::to_string(r.iter) + " appears twice in the measured trace");
        }
        if (r.seq_len < slot.bin_lo || r.seq_len > slot.bin_hi) {
          return InvalidArgument(
              path + ":" + std::to_string(r.line) + ": iteration " + std::to_string(r.iter) +
              " has seq_len " + std::to_string(r.seq_len) + " but the selection puts it in bin [" +
              std::to_string(slot.bin_lo) + ", " + std::to_string(slot.bin_hi) +
              "]: the measured trace is not from the run the selection was made for");
        }
        slot.found = true;
        const double cost = CostProxy(r.seq_len, r.batch);
        for (size_t k = 0; k < r.metrics.size(); ++k) {
          if (!std::isnan(r.metrics[k])) m.obs[k][slot.point].push_back({cost, r.metrics[k]});
        }
        return Status::Ok();
      });
  if (!st.ok()) return st;
  std::string missing;
  size_t n_missing = 0;
  for (const auto& [iter, slot] : slots) {
    if (slot.found) continue;
    if (++n_missing <= 5) missing += (missing.empty() ? "" : ", ") + std::to_string(iter);
  }
  if (n_missing > 0) {
    return InvalidArgument(path + ": has no row for " + std::to_string(n_missing) +
                           " of the selection's iterations (e.g. " + missing +
                           "): measure every iteration listed in the selection's 'iters'");
  }
  return m;
}

Measurements GatherFromTrace(const selector::Selection& s, const Trace& t) {
  Measurements m;
  m.metrics = t.schema.metrics;
  m.obs.assign(m.metrics.size(), std::vector<std::vector<selector::Observation>>(s.points.size()));
  std::unordered_map<uint64_t, size_t> row_of;
  for (size_t i = 0; i < t.rows(); ++i) row_of[t.iter[i]] = i;
  for (uint32_t p = 0; p < s.points.size(); ++p) {
    for (uint64_t it : s.points[p].iters) {
      size_t i = row_of.at(it);
      double cost = CostProxy(t.seq_len[i], t.batch.empty() ? 0 : t.batch[i]);
      for (size_t k = 0; k < m.metrics.size(); ++k) {
        double v = t.metrics[k][i];
        if (!std::isnan(v)) m.obs[k][p].push_back({cost, v});
      }
    }
  }
  return m;
}

}  // namespace seqpoint::cli
