#include "selector/sl_histogram.h"

#include <doctest/doctest.h>

using seqpoint::selector::SlHistogram;

TEST_CASE("histogram: exact buckets below 65536, bounded geometric buckets above") {
  for (uint32_t sl : {1u, 37u, 65535u, 65536u, 70000u, 1u << 20, 4000000000u, UINT32_MAX}) {
    uint32_t i = SlHistogram::BucketIndex(sl);
    CHECK(i < SlHistogram::kMaxBuckets);
    auto b = SlHistogram::BucketBounds(i);
    CHECK(b.lo <= sl);
    CHECK(sl <= b.hi);
    if (sl < SlHistogram::kExactLimit)
      CHECK(b.lo == b.hi);
    else
      CHECK(static_cast<double>(b.hi - b.lo + 1) / b.lo <= 1.0 / 256 + 1e-9);
  }
}

TEST_CASE("histogram: counts, eligibility, costs, and memory that does not grow with events") {
  SlHistogram h;
  for (int i = 0; i < 100000; ++i) h.Add(10 + i % 5, 640.0, 500, i >= 10);
  h.Add(UINT32_MAX, 1.0, 0, true);
  CHECK(h.total() == 100001);
  CHECK(h.distinct() == 6);
  auto buckets = h.Buckets();
  REQUIRE(buckets.size() == 6);
  CHECK(buckets[0].lo == 10);
  CHECK(buckets[0].stats.count == 20000);
  CHECK(buckets[0].stats.eligible == 20000 - 2);
  CHECK(buckets[0].mean_cost() == 640.0);
  CHECK(h.MemoryBytes() <= SlHistogram::kMaxBuckets * sizeof(seqpoint::selector::SlStats) * 2);
  size_t before = h.MemoryBytes();
  for (int i = 0; i < 1000000; ++i) h.Add(10 + i % 5, 640.0, 500, true);
  CHECK(h.MemoryBytes() == before);
}
