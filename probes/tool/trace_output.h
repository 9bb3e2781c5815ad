// Writes the iterations of each traced process as an iteration trace (docs/trace-csv.md): one file per process, columns iter,seq_len[,batch,tokens],time_ns.
//
//  - Complete iterations are rows. An iteration left ABANDONED (its thread began the next one
//    first) is a row with an empty time_ns: it ran, its time is unknown.
//  - Iterations that cannot be rows (SL 0 or absurd, end without begin, process exited inside
//    it) are counted, and the counts, the ring buffer's lost records and the first skipped
//    iteration indices go to comment lines at the end of the file: nothing is dropped silently.
//  - batch and tokens columns exist when the process's first iteration comes from the USDT
//    provider with them > 0 (zero-code probes do not know them; the format wants batch >= 1).
//  - A pid whose file was closed (it exec'd a new image and was attached again) gets a new file,
//    "<path>.2", "<path>.3", ...; on stdout that is impossible, so its rows are counted as
//    dropped and reported (dropped()), as are those of a file that could not be created.
// Threads: one owner thread (an ProbeEventSink called from IterationProbes::Poll).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "probes/iteration_probes.h"
#include "common/trace_csv.h"

namespace seqpoint::probes {

struct TraceFileSummary {
  std::string path;
  uint64_t rows = 0;
  uint64_t rows_without_time = 0;  // ABANDONED iterations
  uint64_t skipped = 0;
  uint64_t lost = 0;
};

class TraceOutput : public ProbeEventSink {
 public:
  // `pattern`: a path; "{pid}" in it is replaced by the pid; "-" is stdout (one process only).
  explicit TraceOutput(std::string pattern) : pattern_(std::move(pattern)) {}
  ~TraceOutput() override;

  void OnEnd(const IterationEvent& event) override;

  // Comment lines written at the top of the pid's file when it is created.
  void SetHeader(int pid, std::vector<std::string> comments);
  // Finishes the pid's file: flush, then the summary comments. `lost` = records the ring buffer
  // dropped for it.
  void Close(int pid, uint64_t lost);
  void CloseAll(const IterationProbeStats& stats);

  // The first write error, if any (a full disk): the caller reports it.
  const Status& error() const { return error_; }
  std::vector<TraceFileSummary> summaries() const;
  std::string PathFor(int pid) const;
  uint64_t dropped() const { return dropped_; }

 private:
  struct File {
    std::unique_ptr<TraceWriter> writer;
    TraceFileSummary summary;
    std::map<std::string, uint64_t> skipped_by_reason;
    std::vector<uint64_t> first_skipped;
    bool closed = false;
    bool failed = false;  // the file could not be created: its iterations are dropped, counted
    uint32_t probe = 0;   // the source of its rows (IterationEvent::probe)
  };
  File* Open(int pid, const IterationEvent& first);

  std::string pattern_;
  std::map<int, std::vector<std::string>> headers_;
  std::map<int, File> files_;             // the pid's current file
  std::vector<TraceFileSummary> closed_;  // files of earlier images of a pid
  std::map<int, int> generation_;
  uint64_t dropped_ = 0;
  Status error_;
};

}  // namespace seqpoint::probes
