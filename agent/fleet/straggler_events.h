// Recorded straggler inputs of a real data-parallel job, replayed: the ranks, their iterations
// (tokens, begin, end) and their collective arrivals, as agent/fleet/straggler_ddp_test records
// them from the live probes (SEQPOINT_STRAGGLER_RECORD) into a text file:
//   # comment
//   R <pid> <rank>                                  a rank's process
//   I <pid> <iter> <tokens> <begin_ns> <end_ns>     an iteration ended (CLOCK_MONOTONIC)
//   A <pid> <ts_ns>                                 a collective entry
// in the order they were delivered. Replaying them into a StragglerBook gives the verdicts and
// families the live job gave, on machines without eBPF (tests, the golden /metrics): the data is
// real, only its delivery is replayed. Timestamps are shifted by `shift_ns` (say, so that they
// end before now and settle).
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
  int32_t rank = -1;                        // R
  uint64_t iter = 0, tokens = 0, a = 0, b = 0;  // I: begin a, end b; A: ts a
};

// The events of a recorded file; an error names the file and line.
Result<std::vector<RecordedEvent>> ReadRecordedEvents(const std::string& path);

// The latest timestamp among them (0: none).
uint64_t LastTimestamp(const std::vector<RecordedEvent>& events);

// Feeds them, in order, to `book` as ranks of run `run`, every timestamp plus shift_ns.
void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t run,
                          int64_t shift_ns, StragglerBook* book);

}  // namespace seqpoint::daemon::fleet
