// Chooses what feeds the daemon: a replay of recorded traces (--replay), or the live eBPF
// probes with the collectors of the registry (agent/source/live_source.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/daemon/daemon.h"
#include "agent/source/live_source.h"

namespace seqpoint::daemon {

struct ReplaySpec {
  std::vector<std::string> traces;  // "path" or "path@run-key"
  int64_t step_delay_us = 0;
  bool crash_at_end = false;  // the processes die mid-iteration after their last row
  bool exit_at_end = true;    // false: they stay silent, as if still running
  uint64_t first_row = 0;     // rows before it are skipped (iterations the agent missed)
  uint64_t max_rows = UINT64_MAX;
  uint32_t rows_per_step = 64;
  uint64_t repeat = 1;  // each trace replayed this many times, as successive runs
};

DaemonParts MakeDaemonParts(const ReplaySpec& replay);


}  // namespace seqpoint::daemon
