#include "selector/binning.h"

#include <doctest/doctest.h>

using namespace seqpoint::selector;

namespace {
SlHistogram Uniform(uint32_t lo, uint32_t hi, int each) {
  SlHistogram h;
  for (uint32_t sl = lo; sl <= hi; ++sl)
    for (int i = 0; i < each; ++i) h.Add(sl, CostProxy(sl, 1), sl, true);
  return h;
}
}  // namespace

TEST_CASE("binning: equal-cost bins are contiguous, cover every bucket, and sum to the run") {
  auto h = Uniform(1, 100, 10);
  auto buckets = h.Buckets();
  auto bins = CutEqualCost(buckets, 8);
  REQUIRE(bins.size() == 8);
  uint64_t count = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    count += bins[i].count;
    if (i > 0) CHECK(bins[i].first == bins[i - 1].last + 1);
    CHECK(bins[i].rep >= bins[i].first);
    CHECK(bins[i].rep <= bins[i].last);
  }
  CHECK(bins.front().lo == 1);
  CHECK(bins.back().hi == 100);
  CHECK(count == h.total());
  // Equal cost: the short-SL bin spans more SLs than the long-SL bin.
  CHECK(bins.front().hi - bins.front().lo > bins.back().hi - bins.back().lo);
}

TEST_CASE("binning: more bins than SLs gives one bin per SL with zero proxy error") {
  auto h = Uniform(5, 9, 3);
  auto buckets = h.Buckets();
  auto bins = CutEqualCost(buckets, 50);
  CHECK(bins.size() == 5);
  CHECK(ProxyErrorPct(buckets, bins) == 0.0);
}

TEST_CASE("binning: the fewest bins that meet the target") {
  auto h = Uniform(1, 500, 4);
  auto buckets = h.Buckets();
  auto bins = BinsForTarget(buckets, 0.5, 4096);
  CHECK(ProxyErrorPct(buckets, bins) <= 0.5);
  if (bins.size() > 1) CHECK(ProxyErrorPct(buckets, CutEqualCost(buckets, bins.size() / 2)) > 0.5);
  auto capped = BinsForTarget(buckets, 1e-9, 3);
  CHECK(capped.size() == 3);
}
