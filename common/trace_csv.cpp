// Streaming reader and buffered writer of the iteration trace (see trace_csv.h).
// The reader never holds more than one chunk plus one line in memory, so a 10^8-row trace costs
// the same memory as a 10-row one. All validation errors name file:line and the column.
#include "common/trace_csv.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace seqpoint {
namespace {

enum class Col { kIter, kSeqLen, kBatch, kTokens, kEpoch, kMetric };

struct Header {
  std::vector<Col> kinds;          // per CSV column
  std::vector<std::string> names;  // per CSV column
  std::vector<int> metric_slot;    // per CSV column: index into metrics, or -1
  TraceSchema schema;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::string Shown(std::string_view cell) {
  constexpr size_t kMax = 40;
  std::string s(cell.substr(0, kMax));
  if (cell.size() > kMax) s += "...";
  return s;
}

// A header with no comma but ';' or tabs is from a tool (or locale) that separates fields
// otherwise: say so, since "no seq_len column" alone does not tell why.
std::string SeparatorHint(std::string_view header) {
  if (header.find(',') != std::string_view::npos) return "";
  const char* looks = header.find(';') != std::string_view::npos    ? "semicolon"
                      : header.find('\t') != std::string_view::npos ? "tab"
                                                                    : nullptr;
  if (looks == nullptr) return "";
  return std::string("; the file looks ") + looks +
         "-separated, but the trace CSV separates fields with commas (docs/trace-csv.md)";
}

class Parser {
 public:
  Parser(std::string_view source, const TraceReadOptions& options, const TraceHeaderFn& on_header,
         const TraceRowFn& on_row)
      : source_(source), options_(options), on_header_(on_header), on_row_(on_row) {}

  Status Line(std::string_view line) {
    ++line_no_;
    line = Trim(line);
    if (line.empty() || line.front() == '#') return Status::Ok();
    if (!have_header_) return ParseHeader(line);
    return ParseRow(line);
  }

  Status Finish() {
    if (!have_header_) {
      return InvalidArgument(source_ +
                             ": the trace is empty: expected a header line such as "
                             "'iter,seq_len,batch,tokens,time_ns' followed by one row per iteration");
    }
    return Status::Ok();
  }

 private:
  Status Error(size_t column, std::string what) const {
    std::string name = column < header_.names.size() ? header_.names[column] : "?";
    return InvalidArgument(source_ + ":" + std::to_string(line_no_) + ": column " +
                           std::to_string(column + 1) + " ('" + name + "'): " + what);
  }

  Status ParseHeader(std::string_view line) {
    have_header_ = true;
    std::map<std::string, size_t> seen;
    size_t column = 0;
    for (size_t start = 0;; ++column) {
      size_t comma = line.find(',', start);
      std::string name(Trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
      if (name.empty()) {
        return InvalidArgument(source_ + ":" + std::to_string(line_no_) + ": column " +
                               std::to_string(column + 1) + " of the header has no name");
      }
      if (seen.count(name)) {
        return InvalidArgument(source_ + ":" + std::to_string(line_no_) + ": column '" + name +
                               "' appears twice in the header (columns " +
                               std::to_string(seen[name] + 1) + " and " + std::to_string(column + 1) + ")");
      }
      seen[name] = column;
      Col kind = Col::kMetric;
      if (name == "iter") kind = Col::kIter;
      else if (name == "seq_len") kind = Col::kSeqLen;
      else if (name == "batch") kind = Col::kBatch;
      else if (name == "tokens") kind = Col::kTokens;
      else if (name == "epoch") kind = Col::kEpoch;
      header_.kinds.push_back(kind);
      header_.names.push_back(name);
      header_.metric_slot.push_back(kind == Col::kMetric ? static_cast<int>(header_.schema.metrics.size()) : -1);
      if (kind == Col::kMetric) header_.schema.metrics.push_back(name);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (!seen.count("seq_len")) {
      std::string found;
      for (const auto& n : header_.names) found += (found.empty() ? "" : ",") + n;
      return InvalidArgument(source_ + ":" + std::to_string(line_no_) +
                             ": the header has no 'seq_len' column (found: " + Shown(found) +
                             "); the first non-comment line must name the columns and include seq_len" +
                             SeparatorHint(line));
    }
    header_.schema.has_iter = seen.count("iter") > 0;
    header_.schema.has_batch = seen.count("batch") > 0;
    header_.schema.has_tokens = seen.count("tokens") > 0;
    header_.schema.has_epoch = seen.count("epoch") > 0;
    metrics_.assign(header_.schema.metrics.size(), std::numeric_limits<double>::quiet_NaN());
    return on_header_ ? on_header_(header_.schema) : Status::Ok();
  }

  template <typename T>
  Status BelowMin(size_t column, T min_value, std::string_view cell) const {
    return Error(column, "must be >= " + std::to_string(min_value) + ", got '" + Shown(cell) + "'");
  }

  template <typename T>
  Status ParseInt(std::string_view cell, size_t column, T min_value, T& out) const {
    if (cell.empty()) return Error(column, "is empty; this column needs a value in every row");
    auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), out);
    if (ec == std::errc::result_out_of_range) {
      return Error(column, "value '" + Shown(cell) + "' is out of range");
    }
    if (ec != std::errc() || ptr != cell.data() + cell.size()) {
      // A negative number in an unsigned column is out of range, as zero is where 1 is the
      // least: say so, not "expected an integer".
      bool negative = cell.size() > 1 && cell.front() == '-' &&
                      cell.find_first_not_of("0123456789", 1) == std::string_view::npos;
      if (negative) return BelowMin(column, min_value, cell);
      return Error(column, "expected an integer, got '" + Shown(cell) + "'");
    }
    if (out < min_value) return BelowMin(column, min_value, cell);
    return Status::Ok();
  }

  Status ParseRow(std::string_view line) {
    TraceRow row;
    row.iter = rows_;
    row.line = line_no_;
    size_t column = 0;
    size_t start = 0;
    const size_t ncols = header_.kinds.size();
    for (;; ++column) {
      size_t comma = line.find(',', start);
      std::string_view cell =
          Trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
      if (column >= ncols) {
        return InvalidArgument(source_ + ":" + std::to_string(line_no_) + ": row has more than the " +
                               std::to_string(ncols) + " columns of the header");
      }
      switch (header_.kinds[column]) {
        case Col::kIter:
          SEQPOINT_RETURN_IF_ERROR(ParseInt<uint64_t>(cell, column, 0, row.iter));
          break;
        case Col::kSeqLen:
          SEQPOINT_RETURN_IF_ERROR(ParseInt<uint32_t>(cell, column, 1, row.seq_len));
          break;
        case Col::kBatch:
          SEQPOINT_RETURN_IF_ERROR(ParseInt<uint32_t>(cell, column, 1, row.batch));
          break;
        case Col::kTokens:
          SEQPOINT_RETURN_IF_ERROR(ParseInt<uint64_t>(cell, column, 0, row.tokens));
          break;
        case Col::kEpoch:
          SEQPOINT_RETURN_IF_ERROR(ParseInt<int64_t>(cell, column, 0, row.epoch));
          break;
        case Col::kMetric: {
          double& slot = metrics_[header_.metric_slot[column]];
          if (!options_.read_metrics || cell.empty()) {
            slot = std::numeric_limits<double>::quiet_NaN();
            break;
          }
          auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), slot);
          if (ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(slot)) {
            return Error(column, "expected a finite number or an empty cell, got '" + Shown(cell) + "'");
          }
          break;
        }
      }
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (column + 1 != ncols) {
      return InvalidArgument(source_ + ":" + std::to_string(line_no_) + ": row has " +
                             std::to_string(column + 1) + " columns but the header has " +
                             std::to_string(ncols) + "; column " + std::to_string(column + 2) +
                             " ('" + header_.names[column + 1] + "') is missing");
    }
    row.metrics = metrics_;
    ++rows_;
    if (options_.progress && options_.progress_every && rows_ % options_.progress_every == 0) {
      options_.progress(rows_);
    }
    return on_row_ ? on_row_(row) : Status::Ok();
  }

  std::string source_;
  const TraceReadOptions& options_;
  const TraceHeaderFn& on_header_;
  const TraceRowFn& on_row_;
  bool have_header_ = false;
  uint64_t line_no_ = 0;
  uint64_t rows_ = 0;
  Header header_;
  std::vector<double> metrics_;
};

// Feeds complete lines of `text` to the parser; returns the unconsumed tail (a partial line).
Status FeedLines(Parser& p, std::string_view text, std::string_view* tail) {
  size_t start = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) break;
    SEQPOINT_RETURN_IF_ERROR(p.Line(text.substr(start, nl - start)));
    start = nl + 1;
  }
  *tail = text.substr(start);
  return Status::Ok();
}

}  // namespace

Status ParseTrace(std::string_view text, std::string_view source, const TraceReadOptions& options,
                  const TraceHeaderFn& on_header, const TraceRowFn& on_row) {
  Parser p(source, options, on_header, on_row);
  std::string_view tail;
  SEQPOINT_RETURN_IF_ERROR(FeedLines(p, text, &tail));
  if (!tail.empty()) SEQPOINT_RETURN_IF_ERROR(p.Line(tail));
  return p.Finish();
}

Status ReadTrace(const std::string& path, const TraceReadOptions& options,
                 const TraceHeaderFn& on_header, const TraceRowFn& on_row) {
  int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = "cannot open trace '" + path + "': " + std::strerror(err);
    return err == ENOENT ? NotFound(msg) : IoError(msg);
  }
  Parser p(path, options, on_header, on_row);
  constexpr size_t kChunk = 1 << 20;
  std::string buf;  // unconsumed partial line + new chunk
  std::vector<char> chunk(kChunk);
  Status st;
  while (true) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = IoError("reading trace '" + path + "': " + std::strerror(errno));
      break;
    }
    if (n == 0) {
      if (!buf.empty()) st = p.Line(buf);
      if (st.ok()) st = p.Finish();
      break;
    }
    buf.append(chunk.data(), static_cast<size_t>(n));
    std::string_view tail;
    st = FeedLines(p, buf, &tail);
    if (!st.ok()) break;
    buf.erase(0, buf.size() - tail.size());
    if (buf.size() > (64u << 20)) {
      st = InvalidArgument(path + ": a line longer than 64 MiB; is this a CSV trace?");
      break;
    }
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return st;
}

int Trace::MetricIndex(std::string_view name) const {
  for (size_t i = 0; i < schema.metrics.size(); ++i) {
    if (schema.metrics[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Result<Trace> LoadTrace(const std::string& path, const TraceReadOptions& options) {
  Trace t;
  Status st = ReadTrace(
      path, options,
      [&](const TraceSchema& s) {
        t.schema = s;
        t.metrics.assign(s.metrics.size(), {});
        return Status::Ok();
      },
      [&](const TraceRow& r) {
        t.iter.push_back(r.iter);
        t.seq_len.push_back(r.seq_len);
        if (t.schema.has_batch) t.batch.push_back(r.batch);
        if (t.schema.has_tokens) t.tokens.push_back(r.tokens);
        if (t.schema.has_epoch) t.epoch.push_back(r.epoch);
        for (size_t m = 0; m < r.metrics.size(); ++m) t.metrics[m].push_back(r.metrics[m]);
        return Status::Ok();
      });
  if (!st.ok()) return st;
  return t;
}

// ---- writer ----

TraceWriter::TraceWriter(std::FILE* f, bool owned, std::string path, TraceSchema schema)
    : file_(f), owned_(owned), path_(std::move(path)), schema_(std::move(schema)) {
  std::string h = schema_.has_iter ? "iter,seq_len" : "seq_len";
  if (schema_.has_batch) h += ",batch";
  if (schema_.has_tokens) h += ",tokens";
  if (schema_.has_epoch) h += ",epoch";
  for (const auto& m : schema_.metrics) h += "," + m;
  header_line_ = h + "\n";
}

TraceWriter::~TraceWriter() {
  (void)Flush();
  if (owned_ && file_) std::fclose(file_);
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, TraceSchema schema) {
  for (const auto& m : schema.metrics) {
    if (m.empty() || m.find_first_of(",\n\r#") != std::string::npos || m == "seq_len" ||
        m == "iter" || m == "batch" || m == "tokens" || m == "epoch") {
      return InvalidArgument("metric column name '" + m + "' is not allowed in a trace");
    }
  }
  std::FILE* f = path == "-" ? stdout : std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return IoError("cannot create trace '" + path + "': " + std::strerror(errno));
  }
  return std::unique_ptr<TraceWriter>(new TraceWriter(f, path != "-", path, std::move(schema)));
}

Status TraceWriter::AppendComment(std::string_view text) {
  if (wrote_header_) return InvalidArgument("trace comments must come before the first row");
  buffer_ += "# ";
  for (char c : text) buffer_ += (c == '\n' || c == '\r') ? ' ' : c;
  buffer_ += '\n';
  return Status::Ok();
}

Status TraceWriter::Append(const TraceRow& row) {
  if (row.metrics.size() != schema_.metrics.size()) {
    return Internal("trace row has " + std::to_string(row.metrics.size()) + " metrics, schema has " +
                    std::to_string(schema_.metrics.size()));
  }
  if (!wrote_header_) {
    buffer_ += header_line_;
    wrote_header_ = true;
  }
  char num[64];
  auto put_u = [&](uint64_t v) {
    auto r = std::to_chars(num, num + sizeof num, v);
    buffer_.append(num, r.ptr);
  };
  if (schema_.has_iter) {
    put_u(row.iter);
    buffer_ += ',';
  }
  put_u(row.seq_len);
  if (schema_.has_batch) { buffer_ += ','; put_u(row.batch); }
  if (schema_.has_tokens) { buffer_ += ','; put_u(row.tokens); }
  if (schema_.has_epoch) {
    buffer_ += ',';
    auto r = std::to_chars(num, num + sizeof num, row.epoch);
    buffer_.append(num, r.ptr);
  }
  for (double v : row.metrics) {
    buffer_ += ',';
    if (std::isfinite(v)) {
      auto r = std::to_chars(num, num + sizeof num, v);
      buffer_.append(num, r.ptr);
    }
  }
  buffer_ += '\n';
  if (buffer_.size() >= (64u << 10)) return Flush();
  return Status::Ok();
}

Status TraceWriter::Flush() {
  if (!wrote_header_) {  // a trace with no rows still has its header
    buffer_ += header_line_;
    wrote_header_ = true;
  }
  if (buffer_.empty()) return Status::Ok();
  size_t n = std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  bool failed = n != buffer_.size() || std::fflush(file_) != 0;
  buffer_.clear();
  if (failed) return IoError("writing trace '" + path_ + "': " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace seqpoint
