// The straggler book as the step feeder's rank observer (agent/steps/step_feeder.h): the daemon
// owns one, hands it to RunManager::steps().set_rank_observer(), and exports its Snapshot()
// through StragglerFamilies. Steps are judged as their iterations settle, every kSettleEveryNs
// of the ranks' iterations, not only when /metrics is read: `seqpoint show` on a node nobody
// scrapes judged no step, and a scrape interval longer than a rank's StragglerJoin::kMaxPending
// iterations lost steps. io_context thread only.
#pragma once

#include <cstdint>

#include "agent/fleet/straggler_book.h"
#include "agent/steps/step_feeder.h"
#include "common/clock.h"

namespace seqpoint::daemon::fleet {

class StragglerObserver : public RankObserver {
 public:
  StragglerBook& book() { return book_; }
  void OnRank(int64_t run_id, pid_t pid, int32_t rank) override {
    book_.AddRank(run_id, static_cast<uint32_t>(pid), rank);
  }
  void OnRankIteration(int64_t run_id, const IterationEnd& e) override {
    (void)run_id;
    book_.OnIteration(static_cast<uint32_t>(e.pid), e.iter, e.tokens, e.begin_ns, e.end_ns);
    // CLOCK_MONOTONIC, the clock of the probes' stamps that Settle compares with.
    const int64_t now = MonotonicNs();
    if (now < next_settle_ns_) return;
    book_.Settle(static_cast<uint64_t>(now));
    next_settle_ns_ = now + kSettleEveryNs;
  }
  void OnRankExit(pid_t pid) override { book_.RemovePid(static_cast<uint32_t>(pid)); }
  void OnRunEnd(int64_t run_id) override { book_.EndRun(run_id); }
  void OnCollectiveArrival(uint32_t pid, uint64_t ts_ns) override { book_.OnArrival(pid, ts_ns); }

 private:
  static constexpr int64_t kSettleEveryNs = 200'000'000;  // a tenth of the settle time
  StragglerBook book_;
  int64_t next_settle_ns_ = 0;
};

}  // namespace seqpoint::daemon::fleet
