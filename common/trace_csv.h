// The iteration trace (docs/trace-csv.md): one CSV file per run, read by the CLI and
// written by the examples, the probe tool and the agent.
//
//   # comment lines start with '#'
//   iter,seq_len,batch,tokens,epoch,time_ns,task_clock_ns
//   0,37,64,1980,0,81234567,80111222
//
// `seq_len` is required (positive integer). `iter` (0-based; row order if absent), `batch`,
// `tokens`, `epoch` are optional SL-side columns; every other column is a numeric metric whose
// cell may be empty (not measured). The reader streams: memory does not grow with row count.
// Every error names the file, the line and the column, and says what would be accepted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace seqpoint {

struct TraceSchema {
  bool has_iter = true;
  bool has_batch = false;
  bool has_tokens = false;
  bool has_epoch = false;
  std::vector<std::string> metrics;  // metric column names, in file order
};

// One iteration. Absent optional columns read as 0 (batch, tokens, epoch). Metric cells that
// are empty hold NaN.
struct TraceRow {
  uint64_t iter = 0;
  uint32_t seq_len = 0;
  uint32_t batch = 0;
  uint64_t tokens = 0;
  int64_t epoch = 0;
  std::span<const double> metrics;
  uint64_t line = 0;  // 1-based line number in the file (reader only)
};

struct TraceReadOptions {
  bool read_metrics = true;  // false: metric cells are skipped unparsed (select's fast path)
  // Called every `progress_every` rows with the number of rows read so far (e.g. stderr).
  std::function<void(uint64_t rows)> progress;
  uint64_t progress_every = 10'000'000;
};

using TraceHeaderFn = std::function<Status(const TraceSchema&)>;
using TraceRowFn = std::function<Status(const TraceRow&)>;

// Reads `path` ("-" = stdin), calling on_header once, then on_row for every data row. The first
// error, from the file or from a callback, stops the read and is returned.
Status ReadTrace(const std::string& path, const TraceReadOptions& options,
                 const TraceHeaderFn& on_header, const TraceRowFn& on_row);
// The same over text held in memory (`source` names it in errors). Used by tests and fuzzing.
Status ParseTrace(std::string_view text, std::string_view source, const TraceReadOptions& options,
                  const TraceHeaderFn& on_header, const TraceRowFn& on_row);

// A whole trace in memory, column by column.
struct Trace {
  TraceSchema schema;
  std::vector<uint64_t> iter;
  std::vector<uint32_t> seq_len;
  std::vector<uint32_t> batch;    // empty when the column is absent
  std::vector<uint64_t> tokens;   // empty when the column is absent
  std::vector<int64_t> epoch;     // empty when the column is absent
  std::vector<std::vector<double>> metrics;  // [metric][row]; NaN = not measured
  size_t rows() const { return seq_len.size(); }
  // Index of a metric column, or -1.
  int MetricIndex(std::string_view name) const;
};
Result<Trace> LoadTrace(const std::string& path, const TraceReadOptions& options = {});

// Writes a trace. Rows are buffered; Flush() or destruction writes them out.
class TraceWriter {
 public:
  // path "-" writes to stdout.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path, TraceSchema schema);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const TraceSchema& schema() const { return schema_; }
  Status AppendComment(std::string_view text);  // one "# text" line, before the first row
  // row.metrics must have schema().metrics.size() values; NaN writes an empty cell.
  Status Append(const TraceRow& row);
  Status Flush();

 private:
  TraceWriter(std::FILE* f, bool owned, std::string path, TraceSchema schema);
  std::FILE* file_;
  bool owned_;
  std::string path_;
  TraceSchema schema_;
  std::string header_line_;
  bool wrote_header_ = false;
  std::string buffer_;
};

}  // namespace seqpoint
