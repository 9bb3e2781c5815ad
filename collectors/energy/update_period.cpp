#include "collectors/energy/update_period.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace seqpoint::collectors {
namespace {

std::string Ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

bool UpdatePeriodProbe::Add(const CounterRead& r) {
  ++reads_;
  read_ns_ += std::max<int64_t>(0, r.t1_ns - r.t0_ns);
  if (!first_) first_ = r;
  const bool changed = last_ && r.value != last_->value;
  if (changed) {
    const std::pair<int64_t, int64_t> bracket{last_->t0_ns, r.t1_ns};
    if (changes_++ == 0) first_change_lo_ = bracket.first;
    if (last_change_) {
      const auto& [a_lo, a_hi] = *last_change_;
      const int64_t gap = (bracket.first + bracket.second) / 2 - (a_lo + a_hi) / 2;
      const int64_t widest = std::max(a_hi - a_lo, bracket.second - bracket.first);
      if (gap >= 0 && widest * kTightDivisor <= gap) {
        gap_sum_ += gap;
        ++gaps_;
      }
    }
    if (run_changes_++ == 0) run_start_t0_ = last_->t0_ns;
    if (run_changes_ >= 2) {  // run_changes_ updates inside this span
      const int64_t bound = (r.t1_ns - run_start_t0_) / (run_changes_ - 1);
      bound_ = bound_ ? std::min(*bound_, bound) : bound;
    }
    last_change_ = bracket;
  } else {
    run_changes_ = 0;
  }
  last_ = r;
  return done();
}

bool UpdatePeriodProbe::capped() const {
  return reads_ >= kMaxReads || (first_ && last_->t1_ns - first_->t0_ns >= kMaxNs);
}

UpdatePeriod UpdatePeriodProbe::Estimate() const {
  UpdatePeriod out;
  out.reads = reads_;
  out.changes = changes_;
  out.gaps = gaps_;
  out.read_ns = read_ns_;
  if (first_) out.spent_ns = last_->t1_ns - first_->t0_ns;
  if (changes_ >= 2) {
    out.changes_bound_ns = (last_change_->second - first_change_lo_) / (changes_ - 1);
  }
  if (gaps_ > 0) {
    out.period_ns = gap_sum_ / gaps_;
  } else if (bound_) {
    out.period_ns = *bound_;
    out.upper_bound = true;
  } else if (changes_ >= 2) {
    out.why_not = "the counter's " + std::to_string(changes_) + " changes in " +
                  std::to_string(reads_) + " reads over " + Ms(out.spent_ns) +
                  " were all between late reads: its update period is unknown";
  } else {
    out.why_not = "the counter changed " + std::to_string(changes_) + " time(s) in " +
                  std::to_string(reads_) + " reads over " + Ms(out.spent_ns) +
                  ": its update period is unknown";
  }
  return out;
}

std::string UpdatePeriod::Describe() const {
  if (!period_ns) return why_not;
  const std::string over = std::to_string(reads) + " reads over " + Ms(spent_ns) + ")";
  if (upper_bound) {
    return Ms(*period_ns) + " or less (reads slower than the counter: a change on every read; " +
           over;
  }
  return Ms(*period_ns) + " (mean of " + std::to_string(gaps) +
         " gaps between changes seen by on-time reads; " + over;
}

UpdatePeriod MeasureUpdatePeriod(const std::function<Result<CounterRead>()>& read,
                                 const MeasureOptions& options) {
  UpdatePeriodProbe probe;
  auto last_start = std::chrono::steady_clock::now();
  for (int n = 0; !probe.done() && !probe.capped(); ++n) {
    if (options.stop && options.stop()) break;
    if (n > 0 && options.spacing_ns > 0) {  // real time, whichever clock stamps the reads
      const auto since = std::chrono::steady_clock::now() - last_start;
      if (since < std::chrono::nanoseconds(options.spacing_ns)) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(options.spacing_ns) - since);
      }
    }
    last_start = std::chrono::steady_clock::now();
    Result<CounterRead> r = read();
    if (!r.ok()) {
      UpdatePeriod out = probe.Estimate();
      ++out.reads;
      out.period_ns.reset();
      out.upper_bound = false;
      out.read_error = r.status();
      out.why_not = "the counter's update period could not be measured: " + r.status().message();
      return out;
    }
    probe.Add(*r);
  }
  return probe.Estimate();
}

}  // namespace seqpoint::collectors
