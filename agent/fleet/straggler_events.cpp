// See straggler_events.h.
#include "agent/fleet/straggler_events.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "common/trace_csv.h"

namespace seqpoint::daemon::fleet {

Result<std::vector<RecordedEvent>> ReadRecordedEvents(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read recorded straggler events " + path);
  std::vector<RecordedEvent> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    RecordedEvent e;
    words >> e.kind >> e.pid;
    bool ok = !words.fail();
    if (e.kind == 'R') {
      ok = ok && static_cast<bool>(words >> e.rank);
    } else if (e.kind == 'I') {
      ok = ok && static_cast<bool>(words >> e.iter >> e.tokens >> e.a >> e.b);
    } else if (e.kind == 'A') {
      ok = ok && static_cast<bool>(words >> e.a);
    } else {
      ok = false;
    }
    if (!ok) {
      return InvalidArgument(path + ":" + std::to_string(n) + ": not 'R pid rank', 'I pid iter " +
                             "tokens begin end' or 'A pid ts': " + line);
    }
    out.push_back(e);
  }
  return out;
}

uint64_t LastTimestamp(const std::vector<RecordedEvent>& events) {
  uint64_t last = 0;
  for (const RecordedEvent& e : events) last = std::max({last, e.a, e.b});
  return last;
}

std::string FormatRecordedEvent(const RecordedEvent& e) {
  const std::string pid = std::to_string(e.pid);
  if (e.kind == 'R') return "R " + pid + " " + std::to_string(e.rank);
  if (e.kind == 'I') {
    return "I " + pid + " " + std::to_string(e.iter) + " " + std::to_string(e.tokens) + " " +
           std::to_string(e.a) + " " + std::to_string(e.b);
  }
  return "A " + pid + " " + std::to_string(e.a);
}

Result<std::vector<RecordedEvent>> ReadJobTraces(const std::vector<std::string>& rank_csvs) {
  static constexpr const char* kColumns[] = {"mono_begin_ns", "mono_end_ns", "mono_arrival_ns"};
  std::vector<RecordedEvent> ranks, timed;
  for (size_t r = 0; r < rank_csvs.size(); ++r) {
    const std::string& path = rank_csvs[r];
    SEQPOINT_ASSIGN_OR_RETURN(Trace trace, LoadTrace(path));
    if (!trace.schema.has_tokens) return InvalidArgument(path + ": no tokens column");
    int col[3];
    for (int k = 0; k < 3; ++k) {
      col[k] = trace.MetricIndex(kColumns[k]);
      if (col[k] < 0) {
        return InvalidArgument(path + ": no " + kColumns[k] +
                               " column (not a bench/fleet/ddp_straggler_job.py trace)");
      }
    }
    const uint32_t pid = kTracePidBase + static_cast<uint32_t>(r);
    ranks.push_back({'R', pid, static_cast<int32_t>(r), 0, 0, 0, 0});
    for (size_t i = 0; i < trace.rows(); ++i) {
      double v[3];
      for (int k = 0; k < 3; ++k) {
        v[k] = trace.metrics[static_cast<size_t>(col[k])][i];
        // Exact below 2^53 ns (104 days of CLOCK_MONOTONIC), which the trace's own values are.
        if (!(v[k] >= 0 && v[k] < 9.007e15)) {
          return InvalidArgument(path + ": row " + std::to_string(i + 1) + ": " + kColumns[k] +
                                 " is not a CLOCK_MONOTONIC time in ns");
        }
      }
      const auto begin = static_cast<uint64_t>(v[0]), end = static_cast<uint64_t>(v[1]),
                 arrival = static_cast<uint64_t>(v[2]);
      timed.push_back({'I', pid, -1, trace.iter[i], trace.tokens[i], begin, end});
      if (arrival != 0) timed.push_back({'A', pid, -1, 0, 0, arrival, 0});
    }
  }
  // Delivered as they happened: an iteration when it ends, an arrival when it happens.
  auto at = [](const RecordedEvent& e) { return e.kind == 'I' ? e.b : e.a; };
  std::stable_sort(timed.begin(), timed.end(),
                   [&](const RecordedEvent& x, const RecordedEvent& y) { return at(x) < at(y); });
  ranks.insert(ranks.end(), timed.begin(), timed.end());
  return ranks;
}

std::vector<RecordedEvent> InjectSlowdown(const std::vector<RecordedEvent>& events, int32_t rank,
                                          uint64_t from, double factor) {
  uint32_t slowed = 0;
  for (const RecordedEvent& e : events) {
    if (e.kind == 'R' && e.rank == rank) slowed = e.pid;
  }
  // Each process's iterations by begin: (end, iter).
  std::map<uint32_t, std::map<uint64_t, std::pair<uint64_t, uint64_t>>> iters;
  for (const RecordedEvent& e : events) {
    if (e.kind == 'I') iters[e.pid][e.a] = {e.b, e.iter};
  }
  // The iteration of `pid` that began last at or before ts: (begin, (end, iter)), or none.
  auto iteration =
      [&](uint32_t pid,
          uint64_t ts) -> const std::pair<const uint64_t, std::pair<uint64_t, uint64_t>>* {
    const auto& m = iters[pid];
    auto it = m.upper_bound(ts);
    return it == m.begin() ? nullptr : &*std::prev(it);
  };
  std::map<uint64_t, uint64_t> first;  // the slowed rank's first arrival per iteration
  for (const RecordedEvent& e : events) {
    if (e.kind != 'A' || e.pid != slowed) continue;
    const auto* it = iteration(slowed, e.a);
    if (it != nullptr && e.a <= it->second.first && it->second.second >= from) {
      first.emplace(it->second.second, e.a);  // arrivals come in time order: the first stays
    }
  }
  // Per iteration: the time the slowed rank added in it, and before it.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> added;  // iter -> (before, in it)
  uint64_t total = 0;
  for (const auto& [begin, end_iter] : iters[slowed]) {
    const uint64_t i = end_iter.second;
    const auto f = first.find(i);
    const uint64_t extra =
        f == first.end()
            ? 0
            : static_cast<uint64_t>((factor - 1) * static_cast<double>(f->second - begin));
    added[i] = {total, extra};
    total += extra;
  }
  auto offset = [&](uint64_t iter) -> std::pair<uint64_t, uint64_t> {
    auto it = added.upper_bound(iter);
    if (it == added.begin()) return {0, 0};
    --it;
    if (it->first == iter) return it->second;
    return {it->second.first + it->second.second, 0};  // an iteration the slowed rank lacks
  };
  std::vector<RecordedEvent> out = events;
  for (RecordedEvent& e : out) {
    if (e.kind == 'I') {
      const auto [before, extra] = offset(e.iter);
      e.a += before;
      e.b += before + extra;
    } else if (e.kind == 'A') {
      const auto* it = iteration(e.pid, e.a);
      if (it == nullptr) continue;
      const uint64_t begin = it->first, end = it->second.first, iter = it->second.second;
      const auto [before, extra] = offset(iter);
      if (e.a > end) {
        e.a += before + extra;  // between iterations: after this one's collective
      } else if (e.pid == slowed && first.count(iter) > 0 && e.a <= first.at(iter)) {
        e.a = begin + before +
              static_cast<uint64_t>(factor * static_cast<double>(e.a - begin));  // stretched
      } else {
        e.a += before + (e.pid == slowed ? extra : 0);
      }
    }
  }
  auto at = [](const RecordedEvent& e) { return e.kind == 'R' ? 0 : e.kind == 'I' ? e.b : e.a; };
  std::stable_sort(out.begin(), out.end(),
                   [&](const RecordedEvent& x, const RecordedEvent& y) { return at(x) < at(y); });
  return out;
}

namespace {

// Feeds `events` to a book (rank of run `run`) or a join (one run).
template <typename AddRank, typename Sink>
void Replay(const std::vector<RecordedEvent>& events, int64_t shift_ns, AddRank add_rank,
            Sink* sink) {
  auto at = [shift_ns](uint64_t ts) {
    return static_cast<uint64_t>(static_cast<int64_t>(ts) + shift_ns);
  };
  for (const RecordedEvent& e : events) {
    if (e.kind == 'R') {
      add_rank(e.pid, e.rank);
    } else if (e.kind == 'I') {
      sink->OnIteration(e.pid, e.iter, e.tokens, at(e.a), at(e.b));
    } else {
      sink->OnArrival(e.pid, at(e.a));
    }
  }
}

}  // namespace

void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t run, int64_t shift_ns,
                          StragglerBook* book) {
  Replay(
      events, shift_ns, [&](uint32_t pid, int32_t rank) { book->AddRank(run, pid, rank); }, book);
}

void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t shift_ns,
                          StragglerJoin* join) {
  Replay(
      events, shift_ns, [&](uint32_t pid, int32_t rank) { join->AddRank(pid, rank); }, join);
}

}  // namespace seqpoint::daemon::fleet
