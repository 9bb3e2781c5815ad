// Writes a synthetic iteration trace of N rows (for the trace-scale benchmark): skewed SLs as in
// bucketed training and a time_ns column linear in padded tokens with 5% noise.
// Usage: trace_gen N OUT.csv
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "common/trace_csv.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: trace_gen ROWS OUT.csv\n");
    return 2;
  }
  const uint64_t n = std::stoull(argv[1]);
  seqpoint::TraceSchema s;
  s.has_batch = s.has_tokens = true;
  s.metrics = {"time_ns"};
  auto w = seqpoint::TraceWriter::Create(argv[2], s);
  if (!w.ok()) {
    std::fprintf(stderr, "trace_gen: %s\n", w.status().message().c_str());
    return 1;
  }
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> len(std::log(20.0), 0.6);
  std::normal_distribution<double> z(0, 0.05);
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t sl = static_cast<uint32_t>(std::fmin(150, std::fmax(1, std::round(len(rng)))));
    double t = std::round((2e5 + 1e3 * sl * 32) * (1 + z(rng)));
    seqpoint::TraceRow r;
    r.iter = i;
    r.seq_len = sl;
    r.batch = 32;
    r.tokens = sl * 30;
    r.metrics = std::span<const double>(&t, 1);
    if (auto st = (*w)->Append(r); !st.ok()) {
      std::fprintf(stderr, "trace_gen: %s\n", st.message().c_str());
      return 1;
    }
  }
  return (*w)->Flush().ok() ? 0 : 1;
}
