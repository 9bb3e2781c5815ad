#include "agent/source/trace_replay_source.h"

#include <chrono>
#include <cmath>

namespace seqpoint::daemon {
namespace {

// A column's unit from its name: the suffixes of docs/trace-csv.md, and the event names the
// GPU collectors give their readings (a trace recorded from seqpointd's own samples).
std::string UnitOf(const std::string& column) {
  auto ends = [&](std::string_view s) {
    return column.size() >= s.size() && column.compare(column.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("_ns")) return "ns";
  if (ends("_us")) return "us";
  if (ends("_uj") || ends(":energy")) return "uJ";
  if (ends("_bytes") || ends("mem_used") || ends("mem_total") || ends("vram_used") ||
      ends("vram_total")) {
    return "bytes";
  }
  if (ends(":power")) return "W";
  if (ends("_clock")) return "MHz";
  if (column.find(":util_") != std::string::npos) return "%";
  return "count";
}

// A replayed column as the collectors would have given it: with its unit, scope and kind
// (collectors::InferScopeAndKind, the rule the store's rows are read back with), so a gauge
// column (memory in use, power) is a gauge in the projections, never summed.
collectors::Sample ReplayedSample(const std::string& column, double value) {
  collectors::Sample s{column, value, UnitOf(column)};
  collectors::InferScopeAndKind(s);
  return s;
}

}  // namespace

Result<std::unique_ptr<TraceReplaySource>> TraceReplaySource::Create(
    boost::asio::io_context& io, std::vector<ReplayProcess> processes, ReplayOptions options) {
  std::unique_ptr<TraceReplaySource> src(new TraceReplaySource(io, options));
  for (ReplayProcess& spec : processes) {
    if (spec.pid <= 0) return InvalidArgument("replay process needs a positive pid");
    auto trace = LoadTrace(spec.trace_path);
    if (!trace.ok()) return trace.status();
    Proc p;
    p.spec = std::move(spec);
    p.trace = std::move(*trace);
    p.next_row = p.spec.first_row;
    src->procs_.push_back(std::move(p));
  }
  return src;
}

Status TraceReplaySource::Start(IterationSink* sink) {
  sink_ = sink;
  const uint64_t now =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count());
  for (Proc& p : procs_) {
    p.clock_ns = now;
    sink_->OnProcessFound(ProcessInfo{p.spec.pid, 0, "replay", p.spec.run_key});
  }
  std::weak_ptr<bool> alive = alive_;
  io_.post([this, alive] {
    if (auto a = alive.lock(); a && *a) Step();
  });
  return Status::Ok();
}

void TraceReplaySource::Stop() {
  stopped_ = true;
  timer_.cancel();
}

void TraceReplaySource::EmitRow(Proc& p) {
  const Trace& t = p.trace;
  const size_t row = static_cast<size_t>(p.next_row);
  const uint64_t iter = t.iter.empty() ? row : t.iter[row];
  const uint32_t batch = t.batch.empty() ? 0 : t.batch[row];
  const uint64_t tokens = t.tokens.empty() ? 0 : t.tokens[row];
  const int time_col = t.MetricIndex("time_ns");
  double time_ns = time_col >= 0 ? t.metrics[time_col][row] : NAN;
  if (!std::isfinite(time_ns) || time_ns < 0) time_ns = 1e6;
  p.current.clear();
  for (size_t m = 0; m < t.schema.metrics.size(); ++m) {
    const std::string& name = t.schema.metrics[m];
    double v = t.metrics[m][row];
    if (name == "time_ns" || !std::isfinite(v)) continue;
    p.current.push_back(ReplayedSample(name, v));
  }
  const uint64_t begin = p.clock_ns;
  const uint64_t end = begin + static_cast<uint64_t>(time_ns);
  bool hooked = hooks_[p.spec.pid];
  if (hooked) {
    sink_->OnIterationBegin(
        IterationBegin{p.spec.pid, p.spec.pid, iter, t.seq_len[row], batch, tokens, begin});
    ++events_;
  }
  sink_->OnIterationEnd(IterationEnd{p.spec.pid, p.spec.pid, iter, t.seq_len[row], batch, tokens,
                                     begin, end, hooked});
  ++events_;
  p.clock_ns = end + 1000;  // a microsecond between iterations (data loading)
  ++p.next_row;
}

bool TraceReplaySource::Reborn(Proc& p) {
  if (p.round + 1 >= options_.repeat) return false;
  if (next_pid_ == 0) {
    for (const Proc& q : procs_) next_pid_ = std::max(next_pid_, q.spec.pid + 1);
  }
  const std::string key =
      p.round == 0 ? p.spec.run_key : p.spec.run_key.substr(0, p.spec.run_key.rfind('#'));
  ++p.round;
  p.spec.run_key = key + "#" + std::to_string(p.round);
  p.spec.pid = next_pid_++;
  p.next_row = p.spec.first_row;
  p.exited = false;
  sink_->OnProcessFound(ProcessInfo{p.spec.pid, 0, "replay", p.spec.run_key});
  return true;
}

void TraceReplaySource::Step() {
  if (stopped_ || sink_ == nullptr) return;
  bool any = false;
  for (Proc& p : procs_) {
    if (p.exited) continue;
    const uint64_t rows = p.trace.rows();
    const uint64_t last =
        p.spec.max_rows >= rows ? rows : std::min(rows, p.spec.first_row + p.spec.max_rows);
    for (uint32_t i = 0; i < options_.rows_per_step && p.next_row < last; ++i) EmitRow(p);
    if (p.next_row >= last) {
      p.exited = true;
      p.current.clear();
      if (!p.spec.exit_at_end) continue;
      ProcessExit x;
      x.pid = p.spec.pid;
      x.mid_iteration = p.spec.crash_at_end;
      if (p.spec.crash_at_end) x.signal = 11;
      sink_->OnProcessExit(x);
      if (Reborn(p)) any = true;
    } else {
      any = true;
    }
  }
  if (!any) {
    finished_ = true;
    if (on_finished_) on_finished_();
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  auto next = [this, alive](boost::system::error_code ec = {}) {
    if (auto a = alive.lock(); a && *a && !ec) Step();
  };
  if (options_.step_delay_us > 0) {
    timer_.expires_after(std::chrono::microseconds(options_.step_delay_us));
    timer_.async_wait(next);
  } else {
    io_.post([next] { next(); });
  }
}

SourceStats TraceReplaySource::stats() const {
  SourceStats s;
  s.events = events_;
  for (const Proc& p : procs_) s.processes += p.exited ? 0 : 1;
  s.description = "replay of " + std::to_string(procs_.size()) + " trace(s)";
  return s;
}

const std::vector<collectors::Sample>* TraceReplaySource::CurrentSamples(pid_t pid) const {
  for (const Proc& p : procs_) {
    if (p.spec.pid == pid && !p.exited) return &p.current;
  }
  return nullptr;
}

Status ReplayCollector::Open(const collectors::Target& target) {
  if (source_->CurrentSamples(target.pid) == nullptr) {
    return NotFound("no replayed process " + std::to_string(target.pid));
  }
  pid_ = target.pid;
  return Status::Ok();
}

Status ReplayCollector::Begin() {
  const auto* s = source_->CurrentSamples(pid_);
  if (s == nullptr) return Unavailable("replayed process " + std::to_string(pid_) + " ended");
  begun_ = *s;
  return Status::Ok();
}

Result<std::vector<collectors::Sample>> ReplayCollector::End() { return begun_; }

}  // namespace seqpoint::daemon
