// Data-parallel runs: the ranks' iteration i joined into one step i. A node runs one rank per
// GPU and the gradient all-reduce makes every step as slow as its slowest rank, so the unit the
// SeqPoint method bins, selects and projects is the step, not the rank-iteration.
//
// A step's features come from all its ranks: the largest SL and batch (the slowest rank sets
// the step's cost), the total tokens; its time runs from the first rank's begin to the last
// rank's end. A step is emitted once every expected rank has ended it, in iteration order.
//
// The measurement decision is taken once per step, when every expected rank has begun it
// (kDecide: the selector sees the step's largest SL), and applied to every rank's iteration
// (kMeasure for each rank that begins after it), so a measured step's process counters are
// summed over all its ranks ("whole") and each device's samples are taken once. The ranks of a
// synchronous job begin a step together (the previous step's all-reduce released them), so the
// decision waits for little. A rank that ends a step before the decision (ranks that do not
// synchronise) leaves that step undecided: it is fed to the selector at its end and no collector
// values are kept for it.
//
// Expected ranks: the live ranks that are not lagging, plus ranks the launcher announced
// (expected_ranks: its local world size) but no process has shown yet. A rank more than
// lag_steps behind the leading rank is lagging: steps go on without it, and its iterations of
// steps already emitted are counted as late, never mixed in; it rejoins at the first step still
// open; a rank found while the others run starts where they are. A rank that exits is removed
// (stopped, with the reason), its unfinished iteration dropped, and the steps it held up are
// emitted with the ranks present.
//
// Memory: at most lag_steps + 2 open steps per rank. Pure logic, no I/O; not thread-safe (the
// RunManager drives it on the io_context thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/runs/counter_group.h"
#include "collectors/collector.h"

namespace seqpoint::daemon {

// In a synchronous job no rank gets a whole step ahead of another; 4 leaves room for ranks
// that overlap their next step's start with the previous one's tail.
inline constexpr uint32_t kStepLagSteps = 4;

struct JoinedStep {
  uint64_t iter = 0;
  uint32_t seq_len = 0;   // largest of its ranks'
  uint32_t batch = 0;     // largest of its ranks'
  uint64_t tokens = 0;    // sum over its ranks
  uint64_t begin_ns = 0;  // the first rank's begin (0: no begin seen)
  uint64_t end_ns = 0;    // the last rank's end
  uint32_t ranks = 0;     // ranks whose iteration is in the step
  bool measure = false;   // the decision said: collectors on every rank
  // measure, and every rank's iteration was under its collectors and none was dropped: `values`
  // are the step's: process samples summed over its ranks, device samples (scope kDevice)
  // taken once per device.
  bool whole = false;
  std::vector<collectors::Sample> values;
  std::vector<CounterGroup> groups;  // per collector, as its ranks held them (one each)
};

struct StepAction {
  enum class Kind { kDecide, kMeasure, kStep };
  Kind kind = Kind::kStep;
  uint64_t iter = 0;
  pid_t pid = 0;             // kMeasure: the rank whose collectors begin now
  uint32_t group = 0;        // kMeasure: the counter group of the step's decision
  std::vector<pid_t> begun;  // kDecide: the ranks that have begun (to measure when chosen)
  JoinedStep step;           // kDecide: the step's features; kStep: the step
};

enum class RankStatus { kLive, kLagging, kStopped };

struct RankState {
  int32_t rank = -1;  // as its launcher numbers it (-1: not known)
  RankStatus status = RankStatus::kLive;
  std::optional<uint64_t> first_iter;  // its first iteration in a step (unset: its first seen)
  uint64_t direct_below = 0;           // its iterations below this were fed to the run directly
  int64_t progress = -1;               // the latest iteration it began or ended
  uint64_t iterations = 0;             // ended, in steps
  uint64_t late = 0;                   // ended after their step was emitted: not in any step
  std::string stopped;                 // why it stopped (kStopped)
};

class StepJoin {
 public:
  // lead: the pid the run's steps are reported under. expected_ranks: the ranks the launcher
  // runs on this node (0: not known; the processes seen count).
  StepJoin(pid_t lead, uint32_t expected_ranks, uint32_t lag_steps = kStepLagSteps);

  // A rank of the run; first_iter: its first iteration that belongs to a step (earlier ones
  // were fed to the run before it became data-parallel). Again for a known pid: nothing.
  void AddRank(pid_t pid, int32_t rank, std::optional<uint64_t> first_iter = std::nullopt);
  // Whether (pid, iter) precedes the rank's first step: the caller feeds it as before.
  bool Direct(pid_t pid, uint64_t iter) const;

  void Begin(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, uint64_t tokens,
             uint64_t begin_ns);
  // The answer to a kDecide: collect (measure and not a control) in counter group `group`.
  void Decided(uint64_t iter, bool collect, uint32_t group);
  // measured: the rank's collectors ran over this iteration; values: what they read.
  void End(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, uint64_t tokens,
           uint64_t begin_ns, uint64_t end_ns, bool measured,
           std::vector<collectors::Sample> values, std::vector<CounterGroup> groups = {});
  // The rank's process is gone (reason: how it ended).
  void RemoveRank(pid_t pid, const std::string& reason);

  // What the caller must do, in order (a kDecide is answered by Decided before the next call).
  std::vector<StepAction> TakeActions();

  pid_t lead() const { return lead_; }
  uint32_t expected_ranks() const { return expected_; }
  // The ranks of the whole job, on every node, as its launcher says (0: not said); reported only.
  void set_world_size(uint32_t n) { world_size_ = n; }
  uint32_t world_size() const { return world_size_; }
  const std::map<pid_t, RankState>& ranks() const { return ranks_; }
  // Ranks announced by the launcher that no process has shown (lagging once the others are
  // lag_steps ahead).
  uint32_t unseen_ranks() const;
  uint64_t steps() const { return steps_; }
  uint64_t partial_steps() const { return partial_; }  // chosen, but not whole
  uint64_t late_iterations() const;
  // Whole steps with a process counter left out because some rank did not read it (its window
  // flagged at the probes), and the latest such step's note ("" when none).
  uint64_t counters_left_out() const { return counters_left_out_; }
  const std::string& last_left_out() const { return last_left_out_; }
  size_t open_steps() const { return open_.size(); }

 private:
  struct Entry {
    bool begun = false, ended = false, measured = false;
    uint32_t seq_len = 0, batch = 0;
    uint64_t tokens = 0, begin_ns = 0, end_ns = 0;
    std::vector<collectors::Sample> values;
    std::vector<CounterGroup> groups;
  };
  struct Open {
    std::map<pid_t, Entry> ranks;
    enum class Decision { kNone, kAsked, kUndecidable, kDone } decision = Decision::kNone;
    bool collect = false;
    uint32_t group = 0;
    bool dropped = false;  // a rank's unfinished iteration was dropped (exit, lag)
  };
  // nullptr when the event is late (its step emitted) or the pid is stopped.
  Open* StepFor(pid_t pid, uint64_t iter);
  int64_t Leader() const;  // the latest iteration any rank still running began or ended
  void Progress(RankState& r, uint64_t iter);
  bool Expected(pid_t pid, const RankState& r, uint64_t iter) const;
  void Advance();
  void Emit(uint64_t iter, Open& step);

  pid_t lead_;
  uint32_t expected_;
  uint32_t world_size_ = 0;
  uint32_t lag_steps_;
  bool unseen_lagging_ = false;
  std::map<pid_t, RankState> ranks_;
  std::map<uint64_t, Open> open_;
  uint64_t emitted_below_ = 0;  // every step below was emitted (or never opened)
  uint64_t steps_ = 0, partial_ = 0;
  uint64_t counters_left_out_ = 0;
  std::string last_left_out_;
  std::vector<StepAction> actions_;
};

}  // namespace seqpoint::daemon
