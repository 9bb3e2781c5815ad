// The median of a few doubles, for the straggler verdicts (straggler.cpp) and the slow-rank test
// (slow_rank.cpp): the peers' arrivals, compute and tokens of one step, a rank's noise.
#pragma once

#include <algorithm>
#include <vector>

namespace seqpoint::daemon::fleet {

// The median of `v` (the mean of the two middle values when even; 0 when empty). Taken by value:
// the caller's vector is left as it was.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace seqpoint::daemon::fleet
