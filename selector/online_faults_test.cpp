// The faults a live agent meets, on the online selector and its time strata: a run that ends
// during its warm-up, a run of one SL, a step of the clock that timed the iterations,
// iterations whose times arrive out of order from several threads, and 10^8 iterations. (A run
// resumed after a daemon restart: selector_checkpoint_test.cpp, and agent/runs's
// run_tracker_test.cpp for the log replay.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "selector/estimate/stratified_projection.h"
#include "selector/online_selector.h"
#include "selector/strata/time_strata.h"
#include "selector/test_runs.h"

namespace seqpoint::selector {

using testing::DriftRun;
using testing::FirstSlower;
using testing::MakeDriftRun;
using testing::Online;
using testing::RunOnline;
using testing::Sum;

namespace {

// The interval holds the actual total.
void CheckCovers(const MetricProjection& p, double actual) {
  CHECK(p.low <= actual);
  CHECK(p.high >= actual);
}

}  // namespace

TEST_CASE("faults: a run that ends during its warm-up projects from the warm-up, honestly") {
  SUBCASE("40 iterations of a 100-iteration warm-up: provisional strata, a projection") {
    DriftRun d = MakeDriftRun(40, 2, 100, 1.5, SIZE_MAX, 1);
    Online o = RunOnline(d);
    CHECK_FALSE(o.sel.strata().warmup_settled());
    REQUIRE(!o.time_samples.empty());
    auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), o.time_samples, Auxiliary::kCost);
    REQUIRE(p.ok());
    CheckCovers(p->whole, d.run.total);
    CHECK(p->whole.high > p->whole.low);  // an interval, not a point
    auto w = ProjectStratified(o.sel.strata(), o.sel.Current(), o.work_samples, Auxiliary::kTime);
    REQUIRE(w.ok());
    CheckCovers(w->whole, Sum(d.work));
  }
  SUBCASE("3 iterations: nothing measured yet, and the projection says so") {
    DriftRun d = MakeDriftRun(3, 2, 100, 1.5, SIZE_MAX, 1);
    Online o = RunOnline(d);
    CHECK(o.sel.strata().observed() == 3);
    CHECK(o.sel.measured() == 0);  // the paced budget: 16 * 3 / 64 < 1
    auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), o.time_samples, Auxiliary::kCost);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message().find("no measured iteration") != std::string::npos);
  }
}

TEST_CASE("faults: a single-SL run is one bin, projected like any other") {
  DriftRun d = MakeDriftRun(3000, 2, 50, 1.5, SIZE_MAX, 1);
  std::fill(d.run.seq_len.begin(), d.run.seq_len.end(), 32u);
  Online o = RunOnline(d);
  CHECK(o.sel.bins() == 1);
  const Selection s = o.sel.Current();
  REQUIRE(s.points.size() == 1);
  CHECK(s.points[0].weight == 3000);
  CHECK(s.points[0].seq_len == 32);
  auto work = ProjectStratified(o.sel.strata(), s, o.work_samples, Auxiliary::kTime);
  REQUIRE(work.ok());
  CHECK(std::fabs(work->whole.total - Sum(d.work)) / Sum(d.work) < 0.03);
  CheckCovers(work->whole, Sum(d.work));
  auto time = ProjectStratified(o.sel.strata(), s, o.time_samples, Auxiliary::kCost);
  REQUIRE(time.ok());
  CheckCovers(time->whole, d.run.total);
}

TEST_CASE("faults: a clock step makes no change, no negative duration, no lost warm-up") {
  SUBCASE("after the warm-up: one absurd time and one negative are no change and no crash") {
    DriftRun d = MakeDriftRun(3000, 2, 0, 1, SIZE_MAX, 1);
    d.run.time[1500] = 1e15;
    d.run.time[1600] = -5;
    Online o = RunOnline(d);
    CHECK(o.sel.strata().changes().empty());
    CHECK(o.sel.strata().observed() == 2999);  // the negative duration is refused
  }
  // The warm-up is found from a cost model fitted on the first iterations; a least-squares fit
  // followed one step of the clock there, and the whole warm-up looked like steady state.
  const DriftRun clean = MakeDriftRun(3000, 2, 120, 1.6, SIZE_MAX, 1);
  const uint64_t warmup = RunOnline(clean).sel.strata().warmup_end();
  REQUIRE(warmup >= 60);
  SUBCASE("forward, 10 s, while the warm-up is looked for: the same warm-up, no change") {
    for (size_t at : {size_t{200}, size_t{700}}) {
      CAPTURE(at);
      DriftRun d = clean;
      d.run.time[at] += 1e10;  // the iterations take ~1.5 ms: the step is 2x the whole run
      Online o = RunOnline(d);
      CHECK(o.sel.strata().warmup_end() == warmup);
      CHECK(FirstSlower(o.sel.strata()) == nullptr);
      // Time projected from the measured iterations (the self-check) is not thrown either. (A
      // counter projected through every iteration's time takes the stepped time as the
      // iteration's: the strata cannot tell a step from a real stall, such as a recompile, and
      // seqpointd's durations come from the monotonic clock, which does not step.)
      auto p = ProjectStratified(o.sel.strata(), o.sel.Current(), o.time_samples, Auxiliary::kCost);
      REQUIRE(p.ok());
      CheckCovers(p->whole, clean.run.total);
    }
  }
  SUBCASE("backward, while the warm-up is looked for: refused, the same warm-up") {
    DriftRun d = clean;
    d.run.time[200] = -1e10;
    Online o = RunOnline(d);
    CHECK(o.sel.strata().observed() == 2999);
    CHECK(o.sel.strata().warmup_end() == warmup);
    CHECK(FirstSlower(o.sel.strata()) == nullptr);
  }
}

TEST_CASE("faults: iterations out of order from several threads are accepted and counted") {
  DriftRun d = MakeDriftRun(3000, 2, 100, 1.6, 2000, 2.0);
  SUBCASE("time strata: the same warm-up and the same slowdown") {
    TimeStrata in_order, shuffled;
    std::mt19937_64 rng(1);
    std::vector<size_t> order(d.run.time.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (auto b = order.begin(); b + 4 <= order.end(); b += 4) std::shuffle(b, b + 4, rng);
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t a = i, s = order[i];
      in_order.Observe(a, d.run.seq_len[a], CostProxy(d.run.seq_len[a], 64), d.run.time[a]);
      shuffled.Observe(s, d.run.seq_len[s], CostProxy(d.run.seq_len[s], 64), d.run.time[s]);
    }
    CHECK(shuffled.observed() == 3000);
    CHECK(shuffled.warmup_end() == in_order.warmup_end());
    const TimeChange* a = FirstSlower(in_order);
    const TimeChange* b = FirstSlower(shuffled);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    // Back-dated to where the change began (the slowdown starts at 2000), give or take the
    // iterations that arrived out of order.
    CHECK(a->ordinal >= 1990);
    CHECK(b->ordinal >= 1968);
    CHECK(b->ordinal == doctest::Approx(static_cast<double>(a->ordinal)).epsilon(0.01));
  }
  SUBCASE("the selector: 4 threads, each iteration's time up to 32 iterations late") {
    // Iterations start in ordinal order (the tracker numbers them as they come); they end, and
    // their times reach OnTime, in whatever order the threads finish them.
    OnlineOptions opt;
    opt.per_doubling = 16;
    opt.warmup = 0;
    auto sel = OnlineSelector::Create(opt);
    REQUIRE(sel.ok());
    std::mt19937_64 rng(5);
    std::vector<size_t> in_flight;
    std::vector<StrataSample> work;
    const testing::Run& r = d.run;
    auto finish = [&](size_t k) {
      const size_t i = in_flight[k];
      in_flight.erase(in_flight.begin() + static_cast<long>(k));
      sel->OnTime(i, r.seq_len[i], r.batch[i], r.time[i]);
    };
    for (size_t i = 0; i < r.seq_len.size(); ++i) {
      if (sel->OnIteration(i, r.seq_len[i], r.batch[i], 0).measure) {
        const double cost = CostProxy(r.seq_len[i], r.batch[i]);
        work.push_back({i, r.seq_len[i], cost, r.time[i], d.work[i]});
      }
      in_flight.push_back(i);
      while (in_flight.size() > 32 || (in_flight.size() > 4 && rng() % 2 == 0)) {
        finish(rng() % in_flight.size());
      }
    }
    while (!in_flight.empty()) finish(0);
    const TimeStrata& t = sel->strata();
    CHECK(t.observed() == 3000);
    CHECK(t.warmup_end() == RunOnline(d).sel.strata().warmup_end());
    const TimeChange* slower = FirstSlower(t);
    REQUIRE(slower != nullptr);
    CHECK(slower->ordinal >= 1968);  // back-dated; out of order by up to 32
    CHECK(slower->ordinal < 2060);
    StrataCells cells = t.Cells();
    uint64_t n = 0;
    for (const auto& [key, c] : cells) n += c.n;
    CHECK(n == 3000);  // every late time is in its stratum
    auto p = ProjectStratified(t, sel->Current(), work, Auxiliary::kTime);
    REQUIRE(p.ok());
    CHECK(std::fabs(p->whole.total - Sum(d.work)) / Sum(d.work) < 0.03);
    CheckCovers(p->whole, Sum(d.work));
  }
}

TEST_CASE("faults: 10^8 iterations, memory bounded, every doubling of the run measured") {
  OnlineOptions o;
  o.per_doubling = 16;
  auto sel = *OnlineSelector::Create(o);
  // A cheap deterministic stream (SplitMix64): 10^8 draws from a library RNG cost seconds.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  constexpr uint64_t kIterations = 100'000'000;
  size_t memory_at_1e7 = 0;
  for (uint64_t i = 0; i < kIterations; ++i) {
    const uint64_t h = mix(i);
    const uint32_t l = 8 + static_cast<uint32_t>(h % 113);
    sel.OnIteration(i, l, 64, 0);
    if (i % 16 == 0) {
      const double noise = 1 + 0.06 * (static_cast<double>(h >> 40) / 16777216.0 - 0.5);
      sel.OnTime(i, l, 64, (2e5 + 1e3 * l * 64) * noise);
    }
    if (i + 1 == 10'000'000) memory_at_1e7 = sel.MemoryBytes();
  }
  INFO("memory at 10^7 " << memory_at_1e7 << " B, at 10^8 " << sel.MemoryBytes() << " B");
  CHECK(sel.MemoryBytes() < 512u << 10);
  CHECK(sel.MemoryBytes() < memory_at_1e7 * 5 / 4);  // grows by a stratum per doubling at most
  // 16 per doubling: 16 * (1 + log2(10^8 / 64)) ~ 345 in all.
  CHECK(sel.measured() <= 346 + 8 * sel.strata().changes().size());
  // Measurements in every doubling window [64 * 2^k, 64 * 2^(k+1)), the last one included.
  std::vector<uint64_t> per_window(64, 0);
  for (const auto& s : sel.samples()) {
    uint32_t w = 0;
    for (uint64_t edge = 64; s.iter >= edge; edge *= 2) ++w;
    ++per_window[w];
  }
  const uint32_t last = static_cast<uint32_t>(std::floor(std::log2(kIterations / 64.0)));  // 20
  for (uint32_t w = 1; w < last; ++w) {
    CAPTURE(w);
    CHECK(per_window[w] >= 12);
  }
  CHECK(per_window[last] >= 6);  // a part of a window: 10^8 < 64 * 2^21
}

}  // namespace seqpoint::selector
