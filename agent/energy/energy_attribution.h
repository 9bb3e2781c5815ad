// Whose is the node's energy? Energy sources count per device (summed over the node's GPUs or
// RAPL packages), never per process, and seqpointd does not know which process drives which
// device. So an iteration is given energy only while its run owns the node:
//  - while a process of another watched run is alive, an iteration has no energy (counted as
//    shared in seqpoint_run_energy_unattributed_iterations_total{reason="shared"}): a split by
//    any rule (equal shares, time overlap) would be a made-up number when the runs use
//    different devices;
//  - a data-parallel run fed as steps (step_join.h) gets the node's whole energy over each
//    step: the step stands for every rank, so it is never divided by the rank count (the
//    caller ignores the divisor);
//  - otherwise the processes of one run share the node equally: an iteration gets 1/k of the
//    node's energy over it, k = the run's processes alive in that window, so their iterations
//    sum to the node's energy.
// Included regardless: energy of work seqpointd does not watch (other jobs' processes without
// probes, the host's idle draw). Energy between iterations (data loading) is in no iteration.
//
// A process is alive from when seqpointd found it to when it saw it exit, in CLOCK_MONOTONIC.
//
// Threads: io_context thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace seqpoint::daemon {

class EnergyAttribution {
 public:
  void ProcessFound(pid_t pid, int64_t run_id, uint64_t now_ns);
  void ProcessExited(pid_t pid, uint64_t now_ns);
  // k for an iteration of `run_id` over [begin_ns, end_ns] (its energy is the node's / k), or
  // nullopt when another run's process was alive in the window.
  std::optional<uint32_t> Divisor(int64_t run_id, uint64_t begin_ns, uint64_t end_ns) const;
  // Forgets processes that exited before `before_ns` (older than any iteration still to come).
  void Prune(uint64_t before_ns);
  size_t spans() const { return spans_.size(); }

 private:
  static constexpr uint64_t kAlive = UINT64_MAX;
  struct Span {
    pid_t pid;
    int64_t run_id;
    uint64_t from_ns, to_ns;
  };
  std::vector<Span> spans_;
};

}  // namespace seqpoint::daemon
