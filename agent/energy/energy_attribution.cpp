#include "agent/energy/energy_attribution.h"

#include <algorithm>

namespace seqpoint::daemon {

void EnergyAttribution::ProcessFound(pid_t pid, int64_t run_id, uint64_t now_ns) {
  for (const Span& s : spans_) {
    if (s.pid == pid && s.to_ns == kAlive) return;
  }
  spans_.push_back({pid, run_id, now_ns, kAlive});
}

void EnergyAttribution::ProcessExited(pid_t pid, uint64_t now_ns) {
  for (Span& s : spans_) {
    if (s.pid == pid && s.to_ns == kAlive) s.to_ns = std::max(now_ns, s.from_ns);
  }
}

void EnergyAttribution::IterationTimed(pid_t pid, int64_t run_id, uint64_t begin_ns,
                                       uint64_t end_ns) {
  if (begin_ns == 0 || end_ns < begin_ns) return;
  Process& p = procs_[pid];
  p.reported_until_ns = std::max(p.reported_until_ns, end_ns);
  if (!p.timed.empty() && p.timed.back().end_ns > end_ns) return;  // out of order: not a sharer
  p.timed.push_back({begin_ns, end_ns, run_id});
}

EnergyAttribution::Outcome EnergyAttribution::Share(int64_t run_id, pid_t pid, bool whole,
                                                    uint64_t begin_ns, uint64_t end_ns,
                                                    std::vector<EnergyPiece>* pieces) const {
  pieces->clear();
  // Who could share the window: processes alive in it, other than the iteration's own. A live
  // one whose iterations are not reported up to the window's end may still have one in it.
  std::vector<pid_t> sharers;
  for (const Span& s : spans_) {
    if (s.from_ns > end_ns || s.to_ns < begin_ns || Own(run_id, pid, whole, s)) continue;
    if (s.to_ns == kAlive) {
      auto it = procs_.find(s.pid);
      if (it == procs_.end() || it->second.reported_until_ns < end_ns) return Outcome::kWait;
    }
    sharers.push_back(s.pid);
  }
  std::sort(sharers.begin(), sharers.end());
  sharers.erase(std::unique(sharers.begin(), sharers.end()), sharers.end());
  // Their iterations in the window, as +1/-1 events on the time axis.
  struct Event {
    uint64_t t;
    int delta;
    bool sibling;  // another process of the iteration's own run (not whole)
    int64_t key;   // the run (or, sibling, the pid)
  };
  std::vector<Event> events;
  for (pid_t q : sharers) {
    auto it = procs_.find(q);
    if (it == procs_.end()) continue;
    const std::deque<Timed>& timed = it->second.timed;
    auto first = std::lower_bound(timed.begin(), timed.end(), begin_ns,
                                  [](const Timed& t, uint64_t b) { return t.end_ns <= b; });
    for (auto t = first; t != timed.end() && t->begin_ns < end_ns; ++t) {
      const uint64_t from = std::max(t->begin_ns, begin_ns);
      const uint64_t to = std::min(t->end_ns, end_ns);
      if (from >= to || (whole && t->run_id == run_id)) continue;
      const bool sibling = t->run_id == run_id;
      const int64_t key = sibling ? q : t->run_id;
      events.push_back({from, +1, sibling, key});
      events.push_back({to, -1, sibling, key});
    }
  }
  if (events.empty()) {
    pieces->push_back({begin_ns, end_ns, 1});
    return Outcome::kReady;
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  std::map<int64_t, int> runs, siblings;  // active iterations by run / by sibling pid
  size_t next = 0;
  for (uint64_t at = begin_ns; at < end_ns;) {
    for (; next < events.size() && events[next].t <= at; ++next) {
      std::map<int64_t, int>& m = events[next].sibling ? siblings : runs;
      if ((m[events[next].key] += events[next].delta) == 0) m.erase(events[next].key);
    }
    const uint64_t to = next < events.size() ? std::min(events[next].t, end_ns) : end_ns;
    // The run's part of the node (1 of the runs iterating), the iteration's part of the run.
    const double weight = 1.0 / static_cast<double>((runs.size() + 1) * (siblings.size() + 1));
    if (!pieces->empty() && pieces->back().weight == weight && pieces->back().to_ns == at) {
      pieces->back().to_ns = to;
    } else {
      pieces->push_back({at, to, weight});
    }
    at = to;
  }
  return Outcome::kReady;
}

uint64_t EnergyAttribution::Horizon() const {
  uint64_t h = UINT64_MAX;
  for (const Span& s : spans_) {
    if (s.to_ns != kAlive) continue;
    auto it = procs_.find(s.pid);
    const uint64_t from = it != procs_.end() && it->second.reported_until_ns > 0
                              ? it->second.reported_until_ns
                              : (s.from_ns > kShareWaitNs ? s.from_ns - kShareWaitNs : 0);
    h = std::min(h, from);
  }
  return h;
}

void EnergyAttribution::Prune(uint64_t before_ns) {
  before_ns = std::min(before_ns, Horizon());
  std::erase_if(spans_, [before_ns](const Span& s) { return s.to_ns < before_ns; });
  for (auto it = procs_.begin(); it != procs_.end();) {
    std::deque<Timed>& timed = it->second.timed;
    while (!timed.empty() && timed.front().end_ns < before_ns) timed.pop_front();
    const pid_t pid = it->first;
    const bool alive =
        std::any_of(spans_.begin(), spans_.end(), [pid](const Span& s) { return s.pid == pid; });
    it = timed.empty() && !alive ? procs_.erase(it) : std::next(it);
  }
}

size_t EnergyAttribution::iterations() const {
  size_t n = 0;
  for (const auto& [pid, p] : procs_) n += p.timed.size();
  return n;
}

}  // namespace seqpoint::daemon
