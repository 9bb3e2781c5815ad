// A selection: the SeqPoints chosen for one run, what `seqpoint select` prints and `project`
// reads (docs/cli.md). Pure data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seqpoint::selector {

struct SeqPoint {
  uint64_t iter = 0;             // the representative iteration (== iters[0])
  std::vector<uint64_t> iters;   // every iteration to measure for this point, representative first
  std::vector<uint32_t> groups;  // counter group each of iters holds (empty: one group)
  uint32_t seq_len = 0;          // SL of the representative
  uint64_t weight = 0;           // iterations this point stands for
  uint32_t bin_lo = 0, bin_hi = 0;
  double mean_cost = 0;  // mean cost proxy of the bin's iterations
  double rep_cost = 0;   // cost proxy of the representative's SL
};

struct Selection {
  uint64_t iterations = 0;  // iterations in the run (sum of weights)
  std::string method;       // "seqpoint-offline" or "seqpoint-online"
  std::string cost_proxy = "seq_len*batch";
  uint64_t budget = 0;         // cap on measured iterations (0: none)
  double proxy_error_pct = 0;  // representative error on the cost proxy (binning.h)
  uint32_t counter_groups = 1;
  std::vector<SeqPoint> points;

  uint64_t measured() const {
    uint64_t n = 0;
    for (const auto& p : points) n += p.iters.size();
    return n;
  }
};

}  // namespace seqpoint::selector
