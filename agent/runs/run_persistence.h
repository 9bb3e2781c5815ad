// RunPersistence: the runs and the store (docs/bounds.md, docs/config.md "durability").
//
//  - Every flush writes every changed run in ONE transaction (Store::SaveRuns): all are saved or
//    none is, so a crash or a failed write never leaves some runs saved and others not.
//  - An active run's iteration log is replaced by a checkpoint of its tracker once
//    checkpoint_every entries were stored since the last one, so the log of a run of any length
//    stays bounded.
//  - A failed write keeps the runs' measurements and cost history in memory for the next flush;
//    the iteration-log entries it took are not kept (they would grow 40 bytes per iteration for
//    as long as the store fails): the next write that succeeds stores a checkpoint instead,
//    which covers them. A run closed meanwhile is kept (up to max_unsaved_closed) until then.
//  - Run ids are given here (the store's next id at start), so a run the store could not
//    create yet is still a run: its row is created by its first save that succeeds.
//  - At start, a run that cannot be restored (a truncated checkpoint, a format this build does
//    not read) is set aside: marked so in the store (its stored totals stay readable), logged
//    once, listed in set_aside(); the others resume and the daemon starts.
// Logging of store trouble is the daemon's (once per change of the store's write health).
//
// Threads: io_context thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/runs/run_tracker.h"
#include "agent/store/store.h"
#include "selector/online_selector.h"

namespace seqpoint::daemon {

class RunPersistence {
 public:
  RunPersistence(Store* store, uint64_t checkpoint_every, size_t max_unsaved_closed)
      : store_(store), checkpoint_every_(checkpoint_every), max_unsaved_(max_unsaved_closed) {}
  void set_limits(uint64_t checkpoint_every, size_t max_unsaved_closed) {
    checkpoint_every_ = checkpoint_every;
    max_unsaved_ = max_unsaved_closed;
  }
  Store* store() const { return store_; }

  // The store's active runs, restored; those that cannot be are set aside (see file comment).
  // An error only when the store cannot list its runs.
  Result<std::vector<std::unique_ptr<RunTracker>>> LoadActive(
      const selector::OnlineOptions& options);
  // Creates the run's row (a failure is counted; its first save that succeeds creates it).
  void Create(const RunRecord& record);
  // A new run id, above the store's and every run held in memory (`active`'s highest id).
  int64_t NewRunId(int64_t highest_active);
  // One run now (a run closing: fresh = projections recomputed first).
  Status Save(RunTracker& tracker, bool fresh);
  // Every closed run waiting and every active run with changes, in one transaction.
  Status Flush(const std::map<int64_t, std::unique_ptr<RunTracker>>& active);
  // A closed run that could not be saved: kept (bounded) for Flush to retry.
  void KeepUnsaved(std::unique_ptr<RunTracker> tracker);

  uint64_t store_errors() const { return store_errors_; }
  uint64_t runs_lost() const { return runs_lost_; }
  size_t unsaved_runs() const { return checkpoint_due_.size() + closed_unsaved_.size(); }
  const std::vector<SetAsideRun>& set_aside() const { return set_aside_; }

 private:
  // What one run's save writes; `checkpoint` set when it replaces the log.
  struct Pending {
    RunTracker* tracker = nullptr;
    RunSnapshot snapshot;
    std::vector<Measurement> measurements;
    std::vector<IterationLogEntry> log;
    std::vector<BinCostRow> cost;
    std::optional<std::string> checkpoint;
  };
  Pending Take(RunTracker& tracker, bool fresh);
  // After the write: on success the run is marked saved, else its parts are given back.
  void Settle(Pending& p, bool saved);
  Status Write(std::vector<Pending>& pending);
  void SetAside(const RunRecord& run, const Status& why);

  Store* store_;
  uint64_t checkpoint_every_;
  size_t max_unsaved_;
  // Iteration-log entries stored per active run since its last checkpoint.
  std::map<int64_t, uint64_t> log_entries_;
  // Runs whose taken log entries a failed write lost: their next save writes a checkpoint.
  std::set<int64_t> checkpoint_due_;
  std::map<int64_t, std::unique_ptr<RunTracker>> closed_unsaved_;  // by id, oldest first
  int64_t next_run_id_ = 0;                                        // 0: not read from the store yet
  uint64_t store_errors_ = 0;
  uint64_t runs_lost_ = 0;
  std::vector<SetAsideRun> set_aside_;
};

}  // namespace seqpoint::daemon
