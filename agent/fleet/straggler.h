// Straggling ranks, and why (issue 23): per step of a data-parallel run, the rank that arrived
// last at the step's first collective, by how much, and whether its work was larger than its
// peers' (data imbalance) or not (a slow rank: its hardware, its host, a noisy neighbour).
//
// Why arrivals: under synchronous data parallelism every rank's step lasts as long as the
// slowest's (each waits in the all-reduce), so step times name no one; the slow rank is the one
// that arrives at the collective last and waits least. Arrivals come from the collective probes
// (probes/collectives/collective_probes.h), iterations (SL, tokens, begin, end) from the
// iteration probes;
// both are CLOCK_MONOTONIC, so ranks on one node compare directly. Ranks on other nodes are
// another agent's: each node judges its own ranks (clocks across nodes are not comparable to a
// millisecond), and the rules compare nodes (packaging/prometheus/seqpoint-fleet-rules.yml).
//
// A rank's arrival in iteration i: its first collective entry in [begin_i, end_i] (DDP's first
// gradient bucket; FSDP's first all-gather). A step is judged once every rank has its iteration
// i settled (ended more than settle_ns ago, so arrivals delivered by then are in). Verdict:
//   last      the rank with the latest arrival
//   lag       its arrival minus the median of the other ranks' arrivals
//   straggles lag >= max(min_lag_ns, min_lag_share x the other ranks' median compute before the
//             collective, begin to arrival): below that, which rank is last is noise
//   slow      over steps, not one: which rank is slower than its peers at equal SL, by a
//             sequential test (slow_rank.h), fed every judged step
//   cause     data when its tokens exceed its peers' median by more than data_tolerance and that
//             excess explains at least data_explains of the lag (compute taken as proportional
//             to tokens: 2x the tokens, about 2x the compute), else hardware ("at equal SL": a
//             slow rank whose batch happened to be 5% longer is still a slow rank)
// Memory: per rank at most kMaxPending iterations (a rank further ahead settles its oldest at
// once: a job faster than kMaxPending iterations per settle_ns) and kMaxArrivals arrivals; at
// most kMaxOpenSteps steps waiting for a rank. Pure logic, no I/O; not thread-safe (one owner).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "agent/fleet/slow_rank.h"

namespace seqpoint::daemon::fleet {

struct StragglerOptions {
  double min_lag_share = 0.10;      // 10%: the slowdown the published detectors flag
  uint64_t min_lag_ns = 1'000'000;  // 1 ms: under it, a wake-up's jitter
  double data_tolerance = 0.05;     // tokens more than 5% above the peers' median: data...
  double data_explains = 0.5;       // ...when the excess is at least half the lag's share
  uint64_t settle_ns = 2'000'000'000;
};

enum class StragglerCause : uint32_t { kData = 0, kHardware = 1 };
inline constexpr size_t kStragglerCauses = 2;
const char* CauseName(StragglerCause cause);  // "data", "hardware"

struct RankArrival {
  int32_t rank = -1;
  uint64_t tokens = 0;      // the rank's work in the step (SL x batch)
  uint64_t begin_ns = 0;    // its iteration's begin
  uint64_t arrival_ns = 0;  // its first collective entry in the iteration
};

struct StepVerdict {
  uint64_t iter = 0;
  int32_t last_rank = -1;
  uint64_t lag_ns = 0;
  double lag_share = 0;     // lag / the other ranks' median compute before the collective
  double token_excess = 0;  // its tokens / the others' median - 1
  bool straggles = false;   // lag over the threshold
  StragglerCause cause = StragglerCause::kHardware;
  std::vector<int32_t> slow_raised;  // ranks the sequential test (slow_rank.h) alarmed on
};

// The verdict on one step of two or more ranks.
StepVerdict JudgeStep(uint64_t iter, const std::vector<RankArrival>& ranks,
                      const StragglerOptions& options);

struct StragglerCounts {
  uint64_t steps = 0;  // judged
  std::array<uint64_t, kStragglerCauses> straggler_steps{};
  std::array<double, kStragglerCauses> lag_seconds{};  // summed over the straggling steps
  std::map<int32_t, std::array<uint64_t, kStragglerCauses>> last_by_rank;  // straggling steps
  uint64_t unmatched = 0;   // rank-iterations with no collective entry (not in a judged step)
  uint64_t incomplete = 0;  // steps dropped because a rank's iteration never came
  // The sequential test's state per rank (slow_rank.h): slower than its peers at equal SL
  // over steps, not in one step. Ranks of unknown number appear as -pid.
  std::map<int32_t, SlowRankState> slow;
};

class StragglerJoin {
 public:
  static constexpr size_t kMaxPending = 256, kMaxArrivals = 4096, kMaxOpenSteps = 64;

  explicit StragglerJoin(StragglerOptions options = {}, SlowRankOptions slow = {})
      : options_(options), slow_(slow) {}

  // A rank's process (rank: as its launcher numbers it; -1 unknown). Again: updates the rank.
  void AddRank(uint32_t pid, int32_t rank);
  void RemoveRank(uint32_t pid);
  void OnArrival(uint32_t pid, uint64_t ts_ns);
  void OnIteration(uint32_t pid, uint64_t iter, uint64_t tokens, uint64_t begin_ns,
                   uint64_t end_ns);
  // Matches the iterations that ended before now - settle_ns, judges the steps every rank has
  // settled, and returns their verdicts (counted in counts()).
  std::vector<StepVerdict> Settle(uint64_t now_ns);

  const StragglerCounts& counts() const { return counts_; }
  size_t ranks() const { return ranks_.size(); }

 private:
  struct Pending {
    uint64_t iter, tokens, begin_ns, end_ns;
  };
  struct Rank {
    int32_t rank = -1;
    std::deque<uint64_t> arrivals;  // not yet matched, oldest first
    std::deque<Pending> pending;    // iterations not yet settled, in end order
    int64_t settled = -1;           // the latest iteration settled
  };
  // Matches the rank's oldest pending iteration with its first arrival inside it, into open_.
  void SettleOldest(uint32_t pid, Rank& r);
  void Count(const StepVerdict& v);

  StragglerOptions options_;
  SlowRankTest slow_;
  std::map<uint32_t, Rank> ranks_;
  std::map<uint64_t, std::map<uint32_t, RankArrival>> open_;  // iter -> pid -> arrival
  StragglerCounts counts_;
};

}  // namespace seqpoint::daemon::fleet
