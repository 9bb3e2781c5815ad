// Two short live runs of real PyTorch and libtorch under a loaded 2-CPU machine, recorded by
// bench/true_numbers.py (every iteration's own wall and CPU time) with the iterations the live
// seqpointd measured (from its store). Their whole-run time projections missed their 95%
// intervals (+48%, +19%) before the small-sample jackknife (docs/estimators.md); the intervals
// are tested on them as the daemon saw them. Times in microseconds.
//
// The recordings are trace CSVs (docs/trace-csv.md) in selector/estimate/testdata/, read by the
// one trace reader: columns iter, seq_len, time_us, cpu_us, and the flags measured (seqpointd
// measured counters and time) and time_only (controls and windows the probes flagged).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/testing/scratch_dir.h"
#include "common/trace_csv.h"

namespace seqpoint::selector::testing {

struct RecordedLiveRun {
  std::string name;
  std::vector<uint32_t> seq_len;
  std::vector<uint32_t> time_us, cpu_us;
  std::vector<uint32_t> measured;   // counters and time
  std::vector<uint32_t> time_only;  // controls and windows the probes flagged: time only
};

// Reads selector/estimate/testdata/<file>. Throws, naming the file and what is wrong, when it
// cannot: the test that asked fails with that message.
inline RecordedLiveRun LoadRecordedLiveRun(const std::string& name, const std::string& file) {
  const std::string path = seqpoint::testing::SourceDir() + "/selector/estimate/testdata/" + file;
  auto trace = LoadTrace(path);
  if (!trace.ok()) throw std::runtime_error(trace.status().ToString());
  auto column = [&](const char* metric) -> const std::vector<double>& {
    const int i = trace->MetricIndex(metric);
    if (i < 0) throw std::runtime_error(path + ": no column '" + metric + "'");
    return trace->metrics[static_cast<size_t>(i)];
  };
  const std::vector<double>& time = column("time_us");
  const std::vector<double>& cpu = column("cpu_us");
  const std::vector<double>& measured = column("measured");
  const std::vector<double>& time_only = column("time_only");
  RecordedLiveRun r;
  r.name = name;
  r.seq_len = trace->seq_len;
  for (uint32_t i = 0; i < trace->rows(); ++i) {
    if (std::isnan(time[i]) || std::isnan(cpu[i])) {
      throw std::runtime_error(path + ": iteration " + std::to_string(i) +
                               " has no time_us/cpu_us");
    }
    r.time_us.push_back(static_cast<uint32_t>(time[i]));
    r.cpu_us.push_back(static_cast<uint32_t>(cpu[i]));
    if (measured[i] == 1) r.measured.push_back(i);
    if (time_only[i] == 1) r.time_only.push_back(i);
  }
  return r;
}

inline const RecordedLiveRun& T8Passive() {
  static const RecordedLiveRun r = LoadRecordedLiveRun(
      "t8-passive (python3-torch LSTM, 8 threads, OMP passive)", "t8_passive.csv");
  return r;
}

inline const RecordedLiveRun& Libtorch2() {
  static const RecordedLiveRun r =
      LoadRecordedLiveRun("lt2 (libtorch GRU trainer, 2 threads)", "libtorch2.csv");
  return r;
}

}  // namespace seqpoint::selector::testing
