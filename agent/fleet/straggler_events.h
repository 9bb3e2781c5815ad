// Recorded straggler inputs of a real data-parallel job, replayed: the ranks, their iterations
// (tokens, begin, end) and their collective arrivals, as agent/fleet/straggler_ddp_test records
// them from the live probes (SEQPOINT_STRAGGLER_RECORD) into a text file:
//   # comment
//   R <pid> <rank>                                  a rank's process
//   I <pid> <iter> <tokens> <begin_ns> <end_ns>     an iteration ended (CLOCK_MONOTONIC)
//   A <pid> <ts_ns>                                 a collective entry
// in the order they were delivered. The same events come from the workload's own traces:
// bench/fleet/ddp_straggler_job.py writes each rank's iterations and its arrival at the step's
// first all-reduce (ReadJobTraces). Replaying them into a StragglerBook or one run's
// StragglerJoin gives the verdicts and families the live job gave, on machines without eBPF
// (tests: agent/fleet/straggler_events_test on tests/golden/straggler_*): the data is real, only
// its delivery is replayed. Timestamps are shifted by `shift_ns` (say, so that they end before
// now and settle).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/fleet/straggler_book.h"
#include "common/status.h"

namespace seqpoint::daemon::fleet {

struct RecordedEvent {
  char kind = 0;  // 'R', 'I' or 'A'
  uint32_t pid = 0;
  int32_t rank = -1;                            // R
  uint64_t iter = 0, tokens = 0, a = 0, b = 0;  // I: begin a, end b; A: ts a
};

// The events of a recorded file; an error names the file and line.
Result<std::vector<RecordedEvent>> ReadRecordedEvents(const std::string& path);
// One event as a line of that file (no newline).
std::string FormatRecordedEvent(const RecordedEvent& e);

// The per-rank traces of bench/fleet/ddp_straggler_job.py, rank_csvs[r] being rank r's
// rank<r>.csv (iter,seq_len,tokens,mono_begin_ns,mono_backward_ns,mono_end_ns,mono_arrival_ns;
// CLOCK_MONOTONIC), as the events the probes deliver: rank r as pid kTracePidBase + r, each
// iteration when it ended, each arrival (0: the step never reached the collective: none) when
// it happened, in time order. An error names the file, the line and the column.
inline constexpr uint32_t kTracePidBase = 1000;
Result<std::vector<RecordedEvent>> ReadJobTraces(const std::vector<std::string>& rank_csvs);

// `events` with rank `rank`'s compute before the collective (its iteration's begin to its first
// collective entry) stretched `factor` times from iteration `from` on, as a synchronous job runs
// it: every later timestamp of every rank moves by the time the slowed rank added (its peers
// wait for it in the collective), so its compute changes and theirs does not. What it does not
// model: a slow rank that also takes CPU from its peers (a spinning one on a small host). For
// testing what the slow-rank test finds in real noise (slow_rank_replay_test). Events of a rank
// not in `events`: unchanged.
std::vector<RecordedEvent> InjectSlowdown(const std::vector<RecordedEvent>& events, int32_t rank,
                                          uint64_t from, double factor);

// The latest timestamp among them (0: none).
uint64_t LastTimestamp(const std::vector<RecordedEvent>& events);

// Feeds them, in order, to `book` as ranks of run `run`, every timestamp plus shift_ns.
void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t run, int64_t shift_ns,
                          StragglerBook* book);
// The same into one run's join, whose Settle() returns the steps' verdicts.
void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t shift_ns,
                          StragglerJoin* join);

}  // namespace seqpoint::daemon::fleet
