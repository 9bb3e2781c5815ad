// See straggler.h.
#include "agent/fleet/straggler.h"

#include <algorithm>

#include "agent/fleet/median.h"

namespace seqpoint::daemon::fleet {

const char* CauseName(StragglerCause cause) {
  return cause == StragglerCause::kData ? "data" : "hardware";
}

StepVerdict JudgeStep(uint64_t iter, const std::vector<RankArrival>& ranks,
                      const StragglerOptions& options) {
  StepVerdict v;
  v.iter = iter;
  if (ranks.size() < 2) return v;
  size_t last = 0;
  for (size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i].arrival_ns > ranks[last].arrival_ns) last = i;
  }
  std::vector<double> others, peer_tokens, peer_compute;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == last) continue;
    // Compute before the collective; an arrival before the begin (which one node's clock
    // cannot give, but a caller's error should not wrap) counts as none.
    const uint64_t c =
        ranks[i].arrival_ns > ranks[i].begin_ns ? ranks[i].arrival_ns - ranks[i].begin_ns : 0;
    peer_compute.push_back(static_cast<double>(c));
    others.push_back(static_cast<double>(ranks[i].arrival_ns));
    peer_tokens.push_back(static_cast<double>(ranks[i].tokens));
  }
  v.last_rank = ranks[last].rank;
  const double lag = static_cast<double>(ranks[last].arrival_ns) - Median(others);
  v.lag_ns = lag > 0 ? static_cast<uint64_t>(lag) : 0;
  const double ref = Median(peer_compute);
  v.lag_share = ref > 0 ? static_cast<double>(v.lag_ns) / ref : 0;
  v.straggles = v.lag_ns >= options.min_lag_ns &&
                static_cast<double>(v.lag_ns) >= options.min_lag_share * ref;
  // Data when the extra tokens explain the lag: compute taken as proportional to tokens, the
  // excess must be over the tolerance and at least data_explains of the lag's share.
  const double peers = Median(peer_tokens);
  const double excess = peers > 0 ? static_cast<double>(ranks[last].tokens) / peers - 1 : 0;
  v.token_excess = excess;
  v.cause = excess > options.data_tolerance && excess >= options.data_explains * v.lag_share
                ? StragglerCause::kData
                : StragglerCause::kHardware;
  return v;
}

void StragglerJoin::AddRank(uint32_t pid, int32_t rank) { ranks_[pid].rank = rank; }

void StragglerJoin::RemoveRank(uint32_t pid) {
  if (auto it = ranks_.find(pid); it != ranks_.end()) {
    const int32_t id = it->second.rank >= 0 ? it->second.rank : -static_cast<int32_t>(pid);
    slow_.Forget(id);
    counts_.slow.erase(id);
  }
  ranks_.erase(pid);
  for (auto& [iter, step] : open_) step.erase(pid);
}

void StragglerJoin::OnArrival(uint32_t pid, uint64_t ts_ns) {
  auto it = ranks_.find(pid);
  if (it == ranks_.end()) return;
  std::deque<uint64_t>& a = it->second.arrivals;
  // Records of different threads may come slightly out of order: keep the queue sorted.
  auto pos = a.end();
  while (pos != a.begin() && *(pos - 1) > ts_ns) --pos;
  a.insert(pos, ts_ns);
  if (a.size() > kMaxArrivals) a.pop_front();
}

void StragglerJoin::OnIteration(uint32_t pid, uint64_t iter, uint64_t tokens, uint64_t begin_ns,
                                uint64_t end_ns) {
  auto it = ranks_.find(pid);
  if (it == ranks_.end() || begin_ns == 0 || end_ns <= begin_ns) return;
  it->second.pending.push_back({iter, tokens, begin_ns, end_ns});
  // A fast rank (more than kMaxPending iterations within settle_ns): its oldest iteration
  // settles now rather than being dropped, which lost every step of a job faster than 128
  // iterations a second. It ended kMaxPending iterations ago: its arrivals, which came before
  // that end, are in.
  if (it->second.pending.size() > kMaxPending) SettleOldest(pid, it->second);
}

void StragglerJoin::SettleOldest(uint32_t pid, Rank& r) {
  const Pending p = r.pending.front();
  r.pending.pop_front();
  while (!r.arrivals.empty() && r.arrivals.front() < p.begin_ns) r.arrivals.pop_front();
  uint64_t arrival = 0;
  if (!r.arrivals.empty() && r.arrivals.front() <= p.end_ns) arrival = r.arrivals.front();
  while (!r.arrivals.empty() && r.arrivals.front() <= p.end_ns) r.arrivals.pop_front();
  if (arrival == 0) ++counts_.unmatched;
  open_[p.iter][pid] = {r.rank, p.tokens, p.begin_ns, arrival};
  r.settled = std::max<int64_t>(r.settled, static_cast<int64_t>(p.iter));
}

void StragglerJoin::Count(const StepVerdict& v) {
  ++counts_.steps;
  if (!v.straggles) return;
  const size_t c = static_cast<size_t>(v.cause);
  ++counts_.straggler_steps[c];
  counts_.lag_seconds[c] += static_cast<double>(v.lag_ns) * 1e-9;
  ++counts_.last_by_rank[v.last_rank][c];
}

std::vector<StepVerdict> StragglerJoin::Settle(uint64_t now_ns) {
  // Match each settled iteration with its first arrival inside it.
  for (auto& [pid, r] : ranks_) {
    while (!r.pending.empty() && r.pending.front().end_ns + options_.settle_ns <= now_ns) {
      SettleOldest(pid, r);
    }
  }
  std::vector<StepVerdict> out;
  for (auto it = open_.begin(); it != open_.end();) {
    const auto& step = it->second;
    bool all = ranks_.size() >= 2;
    bool passed = true;  // every rank settled a later iteration: this one will not complete
    for (const auto& [pid, r] : ranks_) {
      all = all && step.count(pid) > 0;
      passed = passed && r.settled > static_cast<int64_t>(it->first);
    }
    if (all) {
      std::vector<RankArrival> arrivals;
      std::vector<RankCompute> compute;
      bool matched = true;
      for (const auto& [pid, a] : step) {
        matched = matched && a.arrival_ns != 0;
        arrivals.push_back(a);
        const int32_t id = a.rank >= 0 ? a.rank : -static_cast<int32_t>(pid);
        compute.push_back(
            {id, a.tokens, a.arrival_ns > a.begin_ns ? a.arrival_ns - a.begin_ns : 0});
      }
      if (matched) {
        out.push_back(JudgeStep(it->first, arrivals, options_));
        out.back().slow_raised = slow_.Step(it->first, compute);
        counts_.slow = slow_.ranks();
        Count(out.back());
      } else {
        ++counts_.incomplete;
      }
      it = open_.erase(it);
    } else if (passed || open_.size() > kMaxOpenSteps) {
      if (ranks_.size() >= 2) ++counts_.incomplete;
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace seqpoint::daemon::fleet
