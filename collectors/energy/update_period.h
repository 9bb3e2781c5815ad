// The update period of a stepwise counter, from bracketed back-to-back reads: the one
// implementation, used per GPU by the NVML collector (collectors/nvml/nvml_energy_periods.h, on a
// worker thread) and for the node's energy source by the energy reader
// (agent/energy/energy_reader.h, on the reader's thread).
//
// Such counters move in steps: NVML's total energy on an H100 every 100 ms (97-103 ms apart idle,
// testdata/h100_energy_reads.csv), amdgpu's energy accumulator, hwmon's energy*_input. Each read
// is bracketed by the clock (t0 before the call, t1 after): its value is the counter's at some
// instant in [t0, t1], so a change between consecutive reads a and b lies in [a.t0, b.t1], the
// change's bracket.
//
// Late reads. A read preempted in or before its call (CPU hogs, a loaded node) only widens
// brackets, but a bracket wider than the period may hide two updates, and the gap to the next
// change is then two periods: the mean gap between all changes over-stated a 1 ms counter as
// 1.2 ... 108 ms under two CPU hogs. So:
//  - A gap counts only between two consecutive changes whose brackets are both at most a third of
//    the gap (kTightDivisor). For a counter with a steady interval such a bracket holds one
//    update (two would make it at least a period wide, and the gap, at most a period plus half of
//    each bracket, would be at most 2/3 of itself), so the gap is one update interval, off by at
//    most half the two widths. Late stretches are skipped, never averaged in: reading goes on
//    until kGaps such gaps are seen or the caps pass.
//  - The period is the mean of those gaps: on the H100 under load the reads took up to 64 ms and
//    the raw gaps spread 68-123 ms, but the gaps between tight brackets were 88-113 ms (mean
//    101.5). The mean, not the smallest: the smallest would read the counter's own jitter as a
//    shorter period.
//  - Reads slower than the counter (every read sees a change): no gap is tight. n changes in a
//    row are n updates inside [t0 of the read before them, t1 of the last], so the period is at
//    most that span / (n - 1); the smallest such bound is reported, flagged (upper_bound): the
//    safe side for both users (a window of 10 periods holds 10 updates; a read's value is at most
//    one period old). kRunChanges changes in a row end the reading: no gap will be tight.
//  - Neither (the counter never moved, or every change was between late reads): unknown, and why;
//    with two changes or more, changes_bound_ns still bounds it from above, however loosely.
//
// Pure except MeasureUpdatePeriod, which calls the read it is given (and sleeps for spacing).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace seqpoint::collectors {

// One read of the counter, bracketed by the clock (t0 before the call, t1 after).
struct CounterRead {
  int64_t t0_ns = 0, t1_ns = 0;
  double value = 0;
};

// What the reads gave: the period, or why there is none.
struct UpdatePeriod {
  std::optional<int64_t> period_ns;
  bool upper_bound = false;  // the reads were slower than the counter: period_ns is at most this
  int reads = 0;
  int changes = 0;       // reads that saw a new value
  int gaps = 0;          // the tight gaps the period is the mean of (0 for an upper bound)
  int64_t spent_ns = 0;  // the first read's t0 to the last read's t1
  int64_t read_ns = 0;   // the reads' own time, summed
  Status read_error;     // the read that ended the measurement, when one failed
  std::string why_not;   // when period_ns is empty
  // With 2 changes or more, tight or not: n changes are n distinct updates inside
  // [the first change's bracket start, the last one's end], so a steady counter's period is at
  // most that span / (n - 1). Loose where late reads left long stretches unseen; for a user that
  // needs some safe-side value where period_ns is empty (the node energy reader).
  std::optional<int64_t> changes_bound_ns;

  // "100.0 ms (mean of 4 gaps between changes seen by on-time reads; 41 reads over 520.3 ms)",
  // "3.1 ms or less (reads slower than the counter: ...)", or why_not.
  std::string Describe() const;
};

// Feeds reads in order and keeps what the file comment says.
class UpdatePeriodProbe {
 public:
  static constexpr int kGaps = 4;              // tight gaps to average
  static constexpr int kRunChanges = 16;       // changes in a row: the reads are the slower
  static constexpr int64_t kTightDivisor = 3;  // a bracket at most gap / 3 is tight
  static constexpr int64_t kMaxNs = 2'000'000'000;
  static constexpr int kMaxReads = 2000;

  // The next read; true once done.
  bool Add(const CounterRead& r);
  // kGaps tight gaps seen, or kRunChanges changes in a row.
  bool done() const { return gaps_ >= kGaps || run_changes_ >= kRunChanges; }
  // The caps: kMaxReads reads, or kMaxNs between the first read's start and the last's end.
  bool capped() const;
  UpdatePeriod Estimate() const;

 private:
  std::optional<CounterRead> first_, last_;
  int run_changes_ = 0;       // changes in a row, up to last_
  int64_t run_start_t0_ = 0;  // t0 of the read before the run's first change
  std::optional<std::pair<int64_t, int64_t>> last_change_;  // its bracket
  int64_t first_change_lo_ = 0;                             // the first change's bracket start
  int reads_ = 0, changes_ = 0, gaps_ = 0;
  int64_t gap_sum_ = 0, read_ns_ = 0;
  std::optional<int64_t> bound_;  // the smallest span / (n - 1) of n changes in a row
};

struct MeasureOptions {
  // Least real time between the starts of two reads, slept: a test double's reads take ns, and
  // 2000 of them would pass before a 100 ms counter moves. 0: back to back.
  int64_t spacing_ns = 0;
  // Asked between reads: true ends the measurement (its owner is shutting down).
  std::function<bool()> stop;
};

// Reads through `read` (one bracketed read, or why it failed) until the probe is done or capped.
// A failed read ends it: no period, why_not and read_error name the read's reason.
UpdatePeriod MeasureUpdatePeriod(const std::function<Result<CounterRead>()>& read,
                                 const MeasureOptions& options = {});

}  // namespace seqpoint::collectors
