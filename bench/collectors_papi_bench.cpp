// Cost of one PAPI measurement (Begin + End = PAPI_start + PAPI_stop) through our collector,
// against a clock_gettime pair measured in the same run. This VM's PAPI reads no hardware event
// (libpfm4 knows no PMU here), so the event set is the sde component's: two counters this
// program registers through libsde. That prices our wrapper and PAPI's own start/stop path;
// a perf_event or GPU component adds its kernel or driver cost on top.
//
// Usage: collectors_papi_bench [PAIRS]   (default 20000; median of 11 rounds)
#include <sde_lib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "collectors/papi/papi_collector.h"

namespace {

long long g_a = 0, g_b = 0;

double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20000;
  papi_handle_t h = papi_sde_init("Bench");
  papi_sde_register_counter(h, "a", PAPI_SDE_RO | PAPI_SDE_DELTA, PAPI_SDE_long_long, &g_a);
  papi_sde_register_counter(h, "b", PAPI_SDE_RO | PAPI_SDE_DELTA, PAPI_SDE_long_long, &g_b);

  seqpoint::collectors::PapiOptions o;
  o.events = {"sde:::Bench::a", "sde:::Bench::b"};
  seqpoint::collectors::PapiCollector papi(o);
  seqpoint::Status s = papi.Open({0, ""});
  if (!s.ok()) {
    std::printf("papi (sde): skipped: %s\n", s.ToString().c_str());
    return 0;
  }
  std::vector<double> base, coll;
  for (int r = 0; r < 11; ++r) {
    timespec a, b;
    double t0 = NowNs();
    for (int i = 0; i < pairs; ++i) {
      clock_gettime(CLOCK_MONOTONIC, &a);
      clock_gettime(CLOCK_MONOTONIC, &b);
    }
    base.push_back((NowNs() - t0) / pairs);
    t0 = NowNs();
    for (int i = 0; i < pairs; ++i) {
      (void)papi.Begin();
      ++g_a;
      (void)papi.End();
    }
    coll.push_back((NowNs() - t0) / pairs);
  }
  std::printf("collectors_papi_bench: Begin+End per measurement, median of 11 x %d pairs\n", pairs);
  std::printf("%-36s %12.3f %10.1f\n", "baseline: clock_gettime pair", Median(base) / 1000, 1.0);
  std::printf("%-36s %12.3f %10.1f\n", "papi (sde, 2 events)", Median(coll) / 1000,
              Median(coll) / Median(base));
  return 0;
}
