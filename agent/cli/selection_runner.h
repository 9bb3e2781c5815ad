// The steps that `select`, `project` and `evaluate` share: choosing SeqPoints from a trace
// file (offline in two streaming passes, or online in one), and gathering the measurements of
// a selection's iterations from a measured trace.
#pragma once

#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/trace_csv.h"
#include "selector/offline_selector.h"
#include "selector/online_selector.h"
#include "selector/projection.h"
#include "selector/selection.h"

namespace seqpoint::cli {

struct SelectRequest {
  std::string trace;
  bool online = false;
  selector::OfflineOptions offline;
  selector::OnlineOptions online_options;
  bool progress = false;  // report rows read on stderr
};

Result<selector::Selection> SelectFromTraceFile(const SelectRequest& request);
// The same over a trace already in memory (evaluate); `online_out`, when given, receives the
// online selector as it ended (its time strata project the metrics).
Result<selector::Selection> SelectFromTrace(
    const Trace& trace, const SelectRequest& request,
    std::optional<selector::OnlineSelector>* online_out = nullptr);
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
