#include "agent/runs/process_cpu_sampler.h"

#include <time.h>

namespace seqpoint::daemon {

std::optional<uint64_t> ReadProcessCpuNs(pid_t pid) {
  // pid 0 and below would name this process's own clock (or another's group), never `pid`'s.
  if (pid <= 0) return std::nullopt;
  clockid_t id;
  // The process's CPU clock: thread_group_cputime, every thread's time summed (live threads
  // up to this instant, ended ones included), readable by root for any process.
  if (clock_getcpuclockid(pid, &id) != 0) return std::nullopt;
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return std::nullopt;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

void ProcessCpuSampler::Watch(pid_t pid) {
  auto [it, inserted] = procs_.try_emplace(pid);
  if (inserted) SampleOne(pid, it->second);
}

void ProcessCpuSampler::Sample() {
  for (auto& [pid, p] : procs_) {
    if (!p.ended) SampleOne(pid, p);
  }
}

void ProcessCpuSampler::SampleOne(pid_t pid, Proc& p) {
  const uint64_t t0 = clock_();
  const std::optional<uint64_t> cpu = reader_(pid);
  const uint64_t t1 = clock_();
  ++stats_.reads;
  if (!cpu) {
    ++stats_.failures;
    p.ended = true;  // exited (or never readable): no sample will come after this
    return;
  }
  // The read stands for the middle of the clock reads around it (about 1 us apart).
  const Point pt{t0 + (t1 - t0) / 2, *cpu};
  if (!p.ring.empty() && (pt.t_ns <= p.ring.back().t_ns || pt.cpu_ns < p.ring.back().cpu_ns)) {
    ++stats_.implausible;  // time or the process's CPU clock went back: not a sample
    return;
  }
  p.ring.push_back(pt);
  if (p.ring.size() > kRingSamples) p.ring.pop_front();
}

bool ProcessCpuSampler::Covers(pid_t pid, uint64_t t_ns) const {
  auto it = procs_.find(pid);
  return it != procs_.end() && !it->second.ring.empty() && it->second.ring.back().t_ns >= t_ns;
}

bool ProcessCpuSampler::Ended(pid_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() || it->second.ended;
}

std::optional<double> ProcessCpuSampler::At(const Proc& p, uint64_t t_ns) {
  const std::deque<Point>& r = p.ring;
  if (r.empty() || t_ns < r.front().t_ns || t_ns > r.back().t_ns) return std::nullopt;
  size_t lo = 0, hi = r.size() - 1;  // r[lo].t <= t_ns <= r[hi].t
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (r[mid].t_ns <= t_ns ? lo : hi) = mid;
  }
  const Point& a = r[lo];
  const Point& b = r[hi];
  if (b.t_ns == a.t_ns) return static_cast<double>(a.cpu_ns);
  const double f = static_cast<double>(t_ns - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  return static_cast<double>(a.cpu_ns) + f * static_cast<double>(b.cpu_ns - a.cpu_ns);
}

std::optional<double> ProcessCpuSampler::CpuBetween(pid_t pid, uint64_t begin_ns, uint64_t end_ns) {
  auto it = procs_.find(pid);
  std::optional<double> b, e;
  if (it != procs_.end() && end_ns >= begin_ns) {
    b = At(it->second, begin_ns);
    e = At(it->second, end_ns);
  }
  if (!b || !e) {
    ++stats_.uncovered;
    return std::nullopt;
  }
  ++stats_.interpolations;
  return *e - *b;  // >= 0: the ring never goes back
}

}  // namespace seqpoint::daemon
