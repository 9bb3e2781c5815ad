#include "agent/steps/step_join.h"

#include <algorithm>
#include <set>

#include "agent/runs/run_tracker.h"

namespace seqpoint::daemon {

StepJoin::StepJoin(pid_t lead, uint32_t expected_ranks, uint32_t lag_steps)
    : lead_(lead), expected_(expected_ranks), lag_steps_(std::max<uint32_t>(1, lag_steps)) {}

void StepJoin::AddRank(pid_t pid, int32_t rank, std::optional<uint64_t> first_iter) {
  auto [it, added] = ranks_.try_emplace(pid);
  if (!added) return;
  it->second.rank = rank;
  if (first_iter) {
    it->second.first_iter = *first_iter;
    it->second.direct_below = *first_iter;
    it->second.progress = static_cast<int64_t>(*first_iter) - 1;
  } else {
    // Found while the others run (the probes attach to it later than to them): it starts where
    // they are, and lags only if it then falls behind.
    it->second.progress = Leader();
  }
  Advance();  // a new rank may be one the launcher announced: nothing changes then
}

bool StepJoin::Direct(pid_t pid, uint64_t iter) const {
  auto it = ranks_.find(pid);
  return it != ranks_.end() && iter < it->second.direct_below;
}

uint32_t StepJoin::unseen_ranks() const {
  return expected_ > ranks_.size() ? expected_ - static_cast<uint32_t>(ranks_.size()) : 0;
}

uint64_t StepJoin::late_iterations() const {
  uint64_t n = 0;
  for (const auto& [pid, r] : ranks_) n += r.late;
  return n;
}

std::vector<StepAction> StepJoin::TakeActions() { return std::exchange(actions_, {}); }

int64_t StepJoin::Leader() const {
  int64_t leader = -1;
  for (const auto& [pid, r] : ranks_) {
    if (r.status != RankStatus::kStopped) leader = std::max(leader, r.progress);
  }
  return leader;
}

void StepJoin::Progress(RankState& r, uint64_t iter) {
  r.progress = std::max(r.progress, static_cast<int64_t>(iter));
  const int64_t leader = Leader();
  const int64_t lag = static_cast<int64_t>(lag_steps_);
  for (auto& [pid, other] : ranks_) {
    if (other.status == RankStatus::kLive && leader - other.progress > lag) {
      other.status = RankStatus::kLagging;
    }
  }
  if (leader + 1 > lag) unseen_lagging_ = true;  // never seen, as if at iteration -1
}

StepJoin::Open* StepJoin::StepFor(pid_t pid, uint64_t iter) {
  AddRank(pid, -1);
  RankState& r = ranks_[pid];
  if (r.status == RankStatus::kStopped || iter < emitted_below_) return nullptr;
  if (!r.first_iter) r.first_iter = iter;
  if (r.status == RankStatus::kLagging) r.status = RankStatus::kLive;  // caught up: rejoins
  Progress(r, iter);
  return &open_[iter];
}

bool StepJoin::Expected(pid_t pid, const RankState& r, uint64_t iter) const {
  (void)pid;
  return r.status == RankStatus::kLive && (!r.first_iter || iter >= *r.first_iter);
}

void StepJoin::Begin(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, uint64_t tokens,
                     uint64_t begin_ns) {
  Open* s = StepFor(pid, iter);
  if (s == nullptr) return;
  Entry& e = s->ranks[pid];
  e.begun = true;
  e.seq_len = seq_len;
  e.batch = batch;
  e.tokens = tokens;
  e.begin_ns = begin_ns;
  if (s->decision == Open::Decision::kDone && s->collect) {
    StepAction a;
    a.kind = StepAction::Kind::kMeasure;
    a.iter = iter;
    a.pid = pid;
    a.group = s->group;
    actions_.push_back(std::move(a));
  }
  Advance();
}

void StepJoin::Decided(uint64_t iter, bool collect, uint32_t group) {
  auto it = open_.find(iter);
  if (it == open_.end() || it->second.decision != Open::Decision::kAsked) return;
  Open& s = it->second;
  s.decision = Open::Decision::kDone;
  s.collect = collect;
  s.group = group;
  if (collect) {
    for (const auto& [pid, e] : s.ranks) {
      if (!e.begun || e.ended) continue;
      StepAction a;
      a.kind = StepAction::Kind::kMeasure;
      a.iter = iter;
      a.pid = pid;
      a.group = group;
      actions_.push_back(std::move(a));
    }
  }
  Advance();
}

void StepJoin::End(pid_t pid, uint64_t iter, uint32_t seq_len, uint32_t batch, uint64_t tokens,
                   uint64_t begin_ns, uint64_t end_ns, bool measured,
                   std::vector<collectors::Sample> values, std::vector<CounterGroup> groups) {
  if (auto r = ranks_.find(pid);
      r != ranks_.end() && r->second.status != RankStatus::kStopped && iter < emitted_below_) {
    ++r->second.late;  // its step went on without it
    r->second.status = RankStatus::kLagging;
    return;
  }
  Open* s = StepFor(pid, iter);
  if (s == nullptr) return;
  Entry& e = s->ranks[pid];
  if (!e.begun) {
    e.seq_len = seq_len;
    e.batch = batch;
    e.tokens = tokens;
    e.begin_ns = begin_ns;
  }
  e.ended = true;
  e.end_ns = end_ns;
  e.measured = measured;
  e.values = std::move(values);
  e.groups = std::move(groups);
  // A rank ended it before every rank had begun it: no decision can cover all of them now.
  if (s->decision == Open::Decision::kNone) s->decision = Open::Decision::kUndecidable;
  ++ranks_[pid].iterations;
  Advance();
}

void StepJoin::RemoveRank(pid_t pid, const std::string& reason) {
  auto it = ranks_.find(pid);
  if (it == ranks_.end() || it->second.status == RankStatus::kStopped) return;
  it->second.status = RankStatus::kStopped;
  it->second.stopped = reason;
  for (auto& [iter, s] : open_) {
    auto e = s.ranks.find(pid);
    if (e != s.ranks.end() && !e->second.ended) {
      s.ranks.erase(e);  // died inside it: no end, no time
      s.dropped = true;
    }
  }
  // Ranks found lagging only because this one led (it began an iteration far ahead, e.g. the
  // one it died in): measured against the ranks left, they are expected again. Else the empty
  // step it left is emitted, and every later step of the others is dropped as late.
  const int64_t leader = Leader();
  for (auto& [other_pid, r] : ranks_) {
    if (r.status == RankStatus::kLagging &&
        leader - r.progress <= static_cast<int64_t>(lag_steps_)) {
      r.status = RankStatus::kLive;
    }
  }
  Advance();
}

void StepJoin::Advance() {
  const bool unseen = unseen_ranks() > 0 && !unseen_lagging_;
  // Emission, oldest first: a step waits for every expected rank's end.
  while (!open_.empty()) {
    auto it = open_.begin();
    const uint64_t iter = it->first;
    Open& s = it->second;
    if (s.decision == Open::Decision::kAsked) return;  // answered by Decided first
    bool complete = !unseen;
    for (const auto& [pid, r] : ranks_) {
      if (!Expected(pid, r, iter)) continue;
      auto e = s.ranks.find(pid);
      if (e == s.ranks.end() || !e->second.ended) complete = false;
    }
    if (!complete) break;
    Emit(iter, s);
    open_.erase(it);
    emitted_below_ = iter + 1;
  }
  // Decisions, in step order: once every expected rank has begun the step.
  for (auto& [iter, s] : open_) {
    if (s.decision != Open::Decision::kNone) continue;
    bool all_begun = !unseen && !s.ranks.empty();
    for (const auto& [pid, r] : ranks_) {
      if (!Expected(pid, r, iter)) continue;
      auto e = s.ranks.find(pid);
      if (e == s.ranks.end() || !e->second.begun) all_begun = false;
    }
    if (!all_begun) continue;
    StepAction a;
    a.kind = StepAction::Kind::kDecide;
    a.iter = iter;
    a.step.iter = iter;
    for (const auto& [pid, e] : s.ranks) {
      a.begun.push_back(pid);
      a.step.seq_len = std::max(a.step.seq_len, e.seq_len);
      a.step.batch = std::max(a.step.batch, e.batch);
      a.step.tokens += e.tokens;
      ++a.step.ranks;
    }
    s.decision = Open::Decision::kAsked;
    actions_.push_back(std::move(a));
    return;  // one question at a time: Decided() goes on from here
  }
}

void StepJoin::Emit(uint64_t iter, Open& s) {
  JoinedStep step;
  step.iter = iter;
  step.measure = s.decision == Open::Decision::kDone && s.collect;
  bool whole = step.measure && !s.dropped;
  std::map<std::string, size_t> index;        // metric -> position in step.values
  std::map<std::string, uint32_t> summed_of;  // process counter -> ranks that read it
  for (const auto& [pid, e] : s.ranks) {
    if (!e.ended) {
      whole = false;  // a lagging rank's iteration, left out: it will arrive late
      continue;
    }
    ++step.ranks;
    step.seq_len = std::max(step.seq_len, e.seq_len);
    step.batch = std::max(step.batch, e.batch);
    step.tokens += e.tokens;
    if (e.begin_ns > 0 && (step.begin_ns == 0 || e.begin_ns < step.begin_ns)) {
      step.begin_ns = e.begin_ns;
    }
    step.end_ns = std::max(step.end_ns, e.end_ns);
    whole = whole && e.measured;
    std::set<std::string> read;  // this rank's process counters, each counted once
    for (const collectors::Sample& v : e.values) {
      if (v.scope == collectors::SampleScope::kProcess && !IsBookkeepingMetric(v.name) &&
          read.insert(v.name).second) {
        ++summed_of[v.name];
      }
      auto [at, first] = index.try_emplace(v.name, step.values.size());
      if (first) {
        step.values.push_back(v);
      } else if (v.scope == collectors::SampleScope::kProcess && !IsBookkeepingMetric(v.name)) {
        // A process's counters add up over the ranks. A device's reading (a GPU's energy,
        // power, utilisation; the node's energy) is the same device whichever rank read it:
        // taken once, from the first rank that has it, never summed.
        step.values[at->second].value += v.value;
      }
    }
    for (const CounterGroup& g : e.groups) {
      if (std::find(step.groups.begin(), step.groups.end(), g) == step.groups.end()) {
        step.groups.push_back(g);
      }
    }
  }
  step.whole = whole && step.ranks > 0;
  // A process counter that some rank of the step did not read (the probes flagged and left it
  // out of that rank's window: a thread on a CPU at a probe, too much hypervisor steal) would
  // be summed over the other ranks only: a step's value short by a rank's share (about half in
  // a 2-rank job), reported as if whole. It is left out of the step instead, and counted.
  if (step.whole) {
    std::string left_out;
    std::erase_if(step.values, [&](const collectors::Sample& v) {
      auto n = summed_of.find(v.name);
      if (n == summed_of.end() || n->second >= step.ranks) return false;
      left_out += (left_out.empty() ? "" : ", ") + v.name;
      return true;
    });
    if (!left_out.empty()) {
      uint32_t read_by = step.ranks;
      for (const auto& [name, n] : summed_of) read_by = std::min(read_by, n);
      ++counters_left_out_;
      last_left_out_ = "step " + std::to_string(iter) + ": " + left_out + " read by " +
                       std::to_string(read_by) + " of " + std::to_string(step.ranks) +
                       " ranks (a rank's window flagged at the probes), left out of the step";
    }
  }
  if (!step.whole) {
    step.values.clear();
    step.groups.clear();
  }
  if (step.measure && !step.whole) ++partial_;
  if (step.ranks == 0) return;  // every rank of it died inside it
  ++steps_;
  StepAction a;
  a.kind = StepAction::Kind::kStep;
  a.iter = iter;
  a.step = std::move(step);
  actions_.push_back(std::move(a));
}

}  // namespace seqpoint::daemon
