// Chooses what feeds the daemon: a replay of recorded traces (--replay), or the live eBPF
// probes with the collectors of the registry. The live source is compiled from
// ebpf_source.cpp when SEQPOINT_HAVE_EBPF, else from no_ebpf_source.cpp (CMake picks the file,
// so no #ifdef is needed here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/daemon/daemon.h"

namespace seqpoint::daemon {

struct ReplaySpec {
  std::vector<std::string> traces;  // "path" or "path@run-key"
  int64_t step_delay_us = 0;
  bool crash_at_end = false;  // the processes die mid-iteration after their last row
  bool exit_at_end = true;    // false: they stay silent, as if still running
  uint64_t first_row = 0;     // rows before it are skipped (iterations the agent missed)
  uint64_t max_rows = UINT64_MAX;
  uint32_t rows_per_step = 64;
};

DaemonParts MakeDaemonParts(const ReplaySpec& replay);

// The live iteration source of this build (eBPF probes), or Unsupported naming why not.
Result<std::unique_ptr<IterationSource>> MakeLiveSource(boost::asio::io_context& io,
                                                        const DaemonConfig& config);

}  // namespace seqpoint::daemon
