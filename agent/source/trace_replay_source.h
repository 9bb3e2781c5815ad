// An IterationSource that replays recorded iteration traces (docs/trace-csv.md) as if
// each were a live process: begin events (when the daemon asked for them), end events with
// timestamps advanced by the trace's time_ns, then the process's exit. Used by the daemon's
// tests and by `seqpointd --replay` on machines where the eBPF probes cannot attach; the data
// is real (traces recorded from the real trainer), only the delivery is simulated.
//
// ReplayCollector is its companion: a collector that returns the trace's other metric
// columns (task_clock_ns, page_faults, ...) for the iteration being replayed, so projections
// can be checked against the trace's actual totals.
//
// Threads: runs on the io_context it is given; posts one step of rows_per_step rows per
// process at a time, so control and /metrics stay responsive during a replay.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/source/iteration_source.h"
#include "collectors/collector.h"
#include "common/trace_csv.h"

namespace seqpoint::daemon {

struct ReplayProcess {
  std::string trace_path;
  pid_t pid = 0;           // any positive number; not a live process
  std::string run_key;     // the run it belongs to
  uint64_t first_row = 0;  // rows before it are skipped (a resumed replay)
  uint64_t max_rows = UINT64_MAX;
  bool crash_at_end = false;  // exit mid-iteration after the last row (a crashed trainer)
  bool exit_at_end = true;    // false: fall silent after the last row, as if still running
};

struct ReplayOptions {
  uint32_t rows_per_step = 64;  // rows per process per posted step
  int64_t step_delay_us = 0;    // pause between steps (0: as fast as the loop allows)
  // Each process, once it exits, comes back this many times less one as a new process (a new
  // pid) of a new run, "<key>#<n>": many runs from one trace in memory (bench/soak.py).
  uint64_t repeat = 1;
};

class TraceReplaySource : public IterationSource {
 public:
  static Result<std::unique_ptr<TraceReplaySource>> Create(boost::asio::io_context& io,
                                                           std::vector<ReplayProcess> processes,
                                                           ReplayOptions options);
  std::string_view name() const override { return "replay"; }
  Status Start(IterationSink* sink) override;
  void Stop() override;
  void SetBeginHooks(pid_t pid, bool wanted) override { hooks_[pid] = wanted; }
  SourceStats stats() const override;
  bool pids_are_live() const override { return false; }

  bool finished() const { return finished_; }
  void set_on_finished(std::function<void()> fn) { on_finished_ = std::move(fn); }
  // Metric columns (other than time_ns) of the row `pid` is replaying now; nullptr if none.
  const std::vector<collectors::Sample>* CurrentSamples(pid_t pid) const;
  // Rows replayed of process i so far.
  uint64_t rows_done(size_t i) const { return procs_[i].next_row - procs_[i].spec.first_row; }

 private:
  struct Proc {
    ReplayProcess spec;
    Trace trace;
    uint64_t next_row = 0;
    uint64_t clock_ns = 0;
    bool exited = false;
    uint64_t round = 0;  // of options.repeat
    std::vector<collectors::Sample> current;
  };
  TraceReplaySource(boost::asio::io_context& io, ReplayOptions options)
      : io_(io), timer_(io), options_(options) {}
  void Step();
  void EmitRow(Proc& p);
  // Starts the process's next round (ReplayOptions::repeat); false when none is left.
  bool Reborn(Proc& p);

  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  ReplayOptions options_;
  std::vector<Proc> procs_;
  std::map<pid_t, bool> hooks_;
  IterationSink* sink_ = nullptr;
  bool stopped_ = false;
  bool finished_ = false;
  uint64_t events_ = 0;
  pid_t next_pid_ = 0;  // for reborn processes, above every pid given
  std::function<void()> on_finished_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 public:
  ~TraceReplaySource() override { *alive_ = false; }
};

// Returns the replayed trace's metric columns as a collector's samples.
class ReplayCollector : public collectors::Collector {
 public:
  explicit ReplayCollector(const TraceReplaySource* source) : source_(source) {}
  std::string_view name() const override { return "replay"; }
  Status Open(const collectors::Target& target) override;
  Status Begin() override;
  Result<std::vector<collectors::Sample>> End() override;
  void Close() override { pid_ = 0; }

 private:
  const TraceReplaySource* source_;
  pid_t pid_ = 0;
  std::vector<collectors::Sample> begun_;
};

}  // namespace seqpoint::daemon
