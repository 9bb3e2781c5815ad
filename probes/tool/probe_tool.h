// `seqpoint probe`: attaches the iteration probes without the daemon and writes each traced
// process's iterations as a trace (trace_output.h), ready for `seqpoint select`.
//
//   --pid PID   that process only (its exec, library loads and exit are followed)
//   --all       every process that carries the provider or a configured library, now and later
// It runs until --duration elapses, SIGINT/SIGTERM (options.stop), or, with --pid, the process
// exits. Every probe is detached before it returns. Single-threaded: one epoll loop over the
// iteration ring buffer and the process-event ring buffer.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "probes/zero_code_probe.h"
#include "common/status.h"

namespace seqpoint::probes {

struct ProbeToolOptions {
  int pid = 0;            // > 0: this process only
  bool all = false;       // every matching process
  bool wait = false;      // --pid: wait for the process to load the provider instead of failing
  double duration_s = 0;  // 0: until stopped (or, with --pid, until the process exits)
  std::string out;        // "-" or a path; "{pid}" is replaced (required with --all)
  std::vector<ZeroCodeProbe> zero_code;
  uint32_t max_seq_len = 1u << 20;
  std::function<bool()> stop;  // polled between waits; true ends the capture
  std::FILE* log = stderr;     // progress and the final summary
  // Called once the probes are loaded and discovery follows processes (before any waiting),
  // and after each attach to a process: a caller that starts the workload can wait for these
  // instead of guessing how long loading takes on a loaded machine. Run on the capture loop.
  std::function<void()> on_ready;
  std::function<void(int pid)> on_attach;
};

// Resolves the output pattern: with --all, a path without "{pid}" gets ".{pid}" before its
// extension. Errors name the option.
Result<std::string> ResolveOutputPattern(const ProbeToolOptions& options);

// Runs a capture. Errors: no such process, nothing to attach (--pid without --wait), no
// permission / BPF support, an unwritable output.
Status RunProbeTool(const ProbeToolOptions& options);

}  // namespace seqpoint::probes
