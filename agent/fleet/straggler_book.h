// The node's straggler joins, one per data-parallel run (straggler.h), fed by the daemon: ranks
// as the step join learns them, their iterations as they end, and every collective arrival of
// an attached process (the collective probes know pids, not runs: the book maps them). What
// StragglerFamilies exports comes from Snapshot(). A run of one rank gets no join.
// Memory: one StragglerJoin per run with two or more ranks (bounded per rank, straggler.h), and
// the counts of ended runs until EndRun. Not thread-safe: the daemon's io_context thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/fleet/straggler.h"
#include "agent/fleet/straggler_metrics.h"

namespace seqpoint::daemon::fleet {

class StragglerBook {
 public:
  explicit StragglerBook(StragglerOptions options = {}) : options_(options) {}

  // `pid` is rank `rank` (-1: unknown) of data-parallel run `run`.
  void AddRank(int64_t run, uint32_t pid, int32_t rank);
  // The process is gone (its rank no longer holds steps up).
  void RemovePid(uint32_t pid);
  void OnIteration(uint32_t pid, uint64_t iter, uint64_t tokens, uint64_t begin_ns,
                   uint64_t end_ns);
  void OnArrival(uint32_t pid, uint64_t ts_ns);  // pids of no run: ignored
  // Judges what has settled (StragglerJoin::Settle) in every run.
  void Settle(uint64_t now_ns);
  // The run ended: its counts are dropped (its series go with the run's).
  void EndRun(int64_t run);

  // Every run with a join; fleet_job from `fleet_job_of(run)`.
  template <typename FleetJobOf>
  std::vector<RunStragglers> Snapshot(FleetJobOf fleet_job_of) const {
    std::vector<RunStragglers> out;
    for (const auto& [run, join] : joins_) out.push_back({run, fleet_job_of(run), join->counts()});
    return out;
  }
  const StragglerJoin* join(int64_t run) const;

 private:
  StragglerOptions options_;
  std::map<int64_t, std::unique_ptr<StragglerJoin>> joins_;
  std::map<uint32_t, int64_t> run_of_;  // pid -> run
};

}  // namespace seqpoint::daemon::fleet
