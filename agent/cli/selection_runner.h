// The steps that `select`, `project` and `evaluate` share: choosing SeqPoints from a trace
// file (offline in two streaming passes, or online in one), and gathering the measurements of
// a selection's iterations from a measured trace.
#pragma once

#include <optional>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trace_csv.h"
#include "selector/estimate/projection.h"
#include "selector/offline_selector.h"
#include "selector/online_selector.h"
#include "selector/selection.h"

namespace seqpoint::cli {

struct SelectRequest {
  std::string trace;
  bool online = false;
  selector::OfflineOptions offline;
  selector::OnlineOptions online_options;
  bool progress = false;  // report rows read on stderr
};

// `bins_needed`, when given, receives the number of SL bins the target error needs on this
// trace with no budget cap (for BudgetWarning).
Result<selector::Selection> SelectFromTraceFile(const SelectRequest& request,
                                                uint32_t* bins_needed = nullptr);
// The same over a trace already in memory (evaluate); `online_out`, when given, receives the
// online selector as it ended (its time strata project the metrics).
Result<selector::Selection> SelectFromTrace(
    const Trace& trace, const SelectRequest& request,
    std::optional<selector::OnlineSelector>* online_out = nullptr,
    uint32_t* bins_needed = nullptr);

// A warning (one line, no newline) when the request's budget is below 4, or below 2 samples
// for each of the `bins_needed` SL bins: the projection is then rough. Empty when the budget
// is enough or there is none (target-error mode).
std::string BudgetWarning(const SelectRequest& request, const selector::Selection& selection,
                          uint32_t bins_needed);

// A metric's value for people: *_ns in seconds, *_us and *_ms too, *_uj in joules, anything
// else (counts) as it is. `value` is in the metric's own unit (JSON keeps those).
std::string HumanValue(std::string_view metric, double value);
// Index of the time_ns metric column, or -1.
int TimeColumn(const TraceSchema& schema);

// Per metric of the measured trace, per point, the observations (cost, value) of the
// selection's iterations. Rows not listed in the selection are skipped.
struct Measurements {
  std::vector<std::string> metrics;
  // [metric][point] -> observations
  std::vector<std::vector<std::vector<selector::Observation>>> obs;
};

Result<Measurements> GatherMeasurements(const selector::Selection& selection,
                                        const std::string& measured_path);
Measurements GatherFromTrace(const selector::Selection& selection, const Trace& trace);

// Prints "<command>: N rows read" lines to stderr during long reads.
TraceReadOptions ProgressOptions(const char* command, bool enabled);

}  // namespace seqpoint::cli
