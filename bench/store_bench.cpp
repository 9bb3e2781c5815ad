// Cost of a flush (Store::SaveRuns: every changed run in one transaction) for 1, 8 and 64 active
// runs with realistic state: 500 distinct SLs per run, drawn with a long-tailed distribution
// (most iterations on a few hundred SLs), 100 new iterations per run per flush (100 it/s at the
// default 1 s flush), 32 SeqPoints that change every 10th flush, 8 projections of which the 4
// cheap ones (with an `actual`) move every flush, 2 new measurements per flush.
//
// Prints, per run count: the first flush (every row new), then the median and p90 of the steady
// flushes' wall time and the write statements they ran (each INSERT/UPDATE/DELETE executed,
// counted at the store's fault seam, SqliteDb::set_fault_hook, so the same count works on any
// version of the store). The database lives in a temporary directory (page cache; WAL,
// synchronous=NORMAL as the daemon runs it).
//
// Usage: store_bench [FLUSHES] [TMPDIR]. Build it against an older store for the before figure:
// it uses only SaveRuns, CreateRun and the fault seam.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "agent/store/store.h"

namespace {

namespace fs = std::filesystem;
using namespace seqpoint::daemon;

constexpr int kSls = 500;
constexpr int kItersPerFlush = 100;
constexpr int kSeqPoints = 32;

struct SimRun {
  RunSnapshot snap;
  std::vector<Measurement> new_measurements;
  std::vector<BinCostRow> cost;
  std::vector<IterationLogEntry> log;
};

// One flush interval of a run: 100 iterations, projections and SeqPoints as the tracker moves them.
void Advance(SimRun& r, int flush, std::mt19937_64& rng) {
  std::exponential_distribution<double> tail(1.0 / 60);  // most SLs near the short end
  r.new_measurements.clear();
  r.log.clear();
  for (int i = 0; i < kItersPerFlush; ++i) {
    const int bin = std::min(kSls - 1, static_cast<int>(tail(rng)));
    HistogramBin& b = r.snap.histogram[bin];
    ++b.count;
    ++b.time_count;
    b.time_ns_sum += 1e6 + b.seq_len * 1e3;
    r.snap.run.iterations += 1;
    r.snap.run.max_iter += 1;
    r.log.push_back({r.snap.run.pids[0], b.seq_len, r.snap.run.max_iter, 8, 0, 8.0 * b.seq_len,
                     1e6 + b.seq_len * 1e3});
  }
  r.snap.run.updated_unix_ns += 1'000'000'000;
  for (int m = 0; m < 2; ++m) {
    r.new_measurements.push_back({r.snap.run.iterations - m, r.snap.run.pids[0],
                                  r.snap.run.max_iter - m, 512, 8, "perf:instructions", "count",
                                  1e9 + m});
  }
  for (size_t p = 0; p < r.snap.projections.size(); ++p) {
    Projection& pr = r.snap.projections[p];
    if (p < 4) {  // cheap metrics: the self-check's actual moves with every iteration
      pr.total += 1e8;
      pr.low = pr.total * 0.98;
      pr.high = pr.total * 1.02;
      pr.actual = pr.total;
    }
  }
  if (flush % 10 == 0) {
    for (SeqPointRecord& sp : r.snap.seqpoints) {
      sp.weight += 1;
      sp.iters.push_back(r.snap.run.max_iter);
      sp.pids.push_back(r.snap.run.pids[0]);
    }
  }
}

SimRun NewRun(int64_t id) {
  SimRun r;
  r.snap.run.id = id;
  r.snap.run.key = "bench-" + std::to_string(id);
  r.snap.run.started_unix_ns = 1'700'000'000'000'000'000;
  r.snap.run.updated_unix_ns = r.snap.run.started_unix_ns;
  r.snap.run.pids = {static_cast<int32_t>(10000 + id)};
  for (int s = 0; s < kSls; ++s) {
    r.snap.histogram.push_back({static_cast<uint32_t>(64 + 8 * s), 0, 0, 0, 0, 0});
  }
  for (int p = 0; p < kSeqPoints; ++p) {
    SeqPointRecord sp;
    sp.iter = static_cast<uint64_t>(p) * 10;
    sp.iters = {sp.iter};
    sp.pids = r.snap.run.pids;
    sp.seq_len = 64 + 8 * p;
    sp.weight = 10;
    sp.bin_lo = sp.seq_len;
    sp.bin_hi = sp.seq_len + 7;
    r.snap.seqpoints.push_back(sp);
  }
  const char* metrics[] = {
      "time_ns",           "energy_uj",   "perf:task-clock",   "perf:context-switches",
      "perf:instructions", "perf:cycles", "perf:cache-misses", "perf:branch-misses"};
  for (const char* m : metrics) {
    Projection p;
    p.metric = m;
    p.unit = "count";
    r.snap.projections.push_back(p);
  }
  return r;
}

double Pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

int Bench(int runs, int flushes, const fs::path& dir) {
  const fs::path db = dir / ("state-" + std::to_string(runs) + ".db");
  auto store = Store::Open(db.string());
  if (!store.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", store.status().message().c_str());
    return 1;
  }
  uint64_t statements = 0;
  (*store)->db().set_fault_hook([&statements](std::string_view sql) {
    if (sql != "BEGIN IMMEDIATE" && sql != "COMMIT") ++statements;
    return seqpoint::Status::Ok();
  });
  std::mt19937_64 rng(runs);
  std::vector<SimRun> sim;
  for (int i = 1; i <= runs; ++i) {
    sim.push_back(NewRun(i));
    if (!(*store)->CreateRun(sim.back().snap.run).ok()) return 1;
  }
  std::vector<double> ms;
  std::vector<double> rows;
  double first_ms = 0, first_rows = 0;
  for (int f = 0; f <= flushes; ++f) {
    std::vector<RunSave> saves;
    for (SimRun& r : sim) {
      Advance(r, f, rng);
      saves.push_back({&r.snap, &r.new_measurements, &r.cost, &r.log, nullptr});
    }
    statements = 0;
    auto t0 = std::chrono::steady_clock::now();
    if (auto st = (*store)->SaveRuns(saves); !st.ok()) {
      std::fprintf(stderr, "store_bench: %s\n", st.message().c_str());
      return 1;
    }
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (f == 0) {
      first_ms = t;
      first_rows = static_cast<double>(statements);
    } else {
      ms.push_back(t);
      rows.push_back(static_cast<double>(statements));
    }
  }
  std::printf(
      "%4d runs | first flush %8.2f ms %7.0f writes | steady flush median %7.2f ms p90 %7.2f ms"
      " | writes per flush median %6.0f (%.1f per run)\n",
      runs, first_ms, first_rows, Pct(ms, 0.5), Pct(ms, 0.9), Pct(rows, 0.5),
      Pct(rows, 0.5) / runs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int flushes = argc > 1 ? std::atoi(argv[1]) : 30;
  const fs::path base = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path();
  const fs::path dir = base / ("store_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("store_bench: %d SLs per run, %d iterations per run per flush, %d flushes\n", kSls,
              kItersPerFlush, flushes);
  int rc = 0;
  for (int runs : {1, 8, 64}) rc |= Bench(runs, flushes, dir);
  fs::remove_all(dir);
  return rc;
}
