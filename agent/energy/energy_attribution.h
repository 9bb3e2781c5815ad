// Whose is the node's energy? Energy sources count per device (summed over the node's GPUs or
// RAPL packages), never per process, and seqpointd does not know which process drives which
// device. So an iteration's energy is the node's energy over it, shared only with the runs whose
// timed iterations overlap it in time:
//  - at every instant of an iteration, the node's power is split equally between the runs with
//    a timed iteration going on then (this run counted), and a run's part equally between its
//    processes with an iteration going on then (each rank-iteration of a run of several
//    processes); a data-parallel run fed as steps (step_join.h) gets its whole part over each
//    step, which stands for every rank (never divided by the rank count: `whole`);
//  - so, over any stretch of time, the iterations of all watched runs sum to the node's energy
//    while any of them iterates; a run alone on the node gets the node's whole energy, as before;
//  - what cannot be attributed is refused (nullopt, counted): while another run's process is
//    alive during the iteration and has not yet reported an iteration ending at or after the
//    iteration's end, the share is not known yet, and the caller waits (Share answers kWait);
//    one that waits past kShareWaitNs (a process that does not iterate: loading, evaluation, a
//    hang) is refused as shared (seqpoint_run_energy_unattributed_iterations_total
//    {reason="shared"}), never guessed.
// Included regardless: energy of work seqpointd does not watch (other jobs' processes without
// probes, the host's idle draw), and a run's data loading between iterations while another run
// iterates (that run's iteration gets the node's power then). It is a share of the node, not of
// the run's own devices: two runs on different GPUs get half the node each while both iterate.
//
// A process is alive from when seqpointd found it to when it saw it exit, in CLOCK_MONOTONIC.
// Its iterations' timestamps are the probes' (CLOCK_MONOTONIC too).
//
// Threads: io_context thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

namespace seqpoint::daemon {

// A part of an iteration's window and the share of the node's energy over it that is the
// iteration's.
struct EnergyPiece {
  uint64_t from_ns = 0, to_ns = 0;
  double weight = 1;
};

class EnergyAttribution {
 public:
  // How long an iteration's energy waits for the other runs' overlapping iterations to be
  // reported before it is refused: longer than any poll delay, and than most iterations.
  static constexpr uint64_t kShareWaitNs = 60'000'000'000;
  enum class Outcome { kReady, kWait };

  void ProcessFound(pid_t pid, int64_t run_id, uint64_t now_ns);
  void ProcessExited(pid_t pid, uint64_t now_ns);
  // Every timed iteration of every process, as its end record arrives (in order per process).
  void IterationTimed(pid_t pid, int64_t run_id, uint64_t begin_ns, uint64_t end_ns);
  // The pieces of [begin_ns, end_ns] and the iteration's share of each, for an iteration of
  // (run_id, pid) (whole: a step of the run, which stands for all its processes), or kWait
  // while a live process of another run (or, not whole, another process of the run) has not
  // reported its iterations up to end_ns.
  Outcome Share(int64_t run_id, pid_t pid, bool whole, uint64_t begin_ns, uint64_t end_ns,
                std::vector<EnergyPiece>* pieces) const;
  // Forgets processes that exited before `before_ns` and iterations that ended before it
  // (older than any iteration still to come or waiting).
  void Prune(uint64_t before_ns);
  size_t spans() const { return spans_.size(); }
  size_t iterations() const;

 private:
  static constexpr uint64_t kAlive = UINT64_MAX;
  struct Span {
    pid_t pid;
    int64_t run_id;
    uint64_t from_ns, to_ns;
  };
  struct Timed {
    uint64_t begin_ns, end_ns;
    int64_t run_id;
  };
  struct Process {
    uint64_t reported_until_ns = 0;  // the latest end reported
    std::deque<Timed> timed;         // by end, ascending
  };
  // The earliest time a window still to come can start: each live process's next iteration
  // begins after its latest end (one not yet reported may have begun before it was found).
  uint64_t Horizon() const;
  // Whether (run, pid) is the iteration's own (not a sharer).
  static bool Own(int64_t run_id, pid_t pid, bool whole, const Span& s) {
    return s.pid == pid || (whole && s.run_id == run_id);
  }
  std::vector<Span> spans_;
  std::map<pid_t, Process> procs_;
};

}  // namespace seqpoint::daemon
