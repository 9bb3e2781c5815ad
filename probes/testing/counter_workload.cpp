// A training-loop stand-in that knows its own CPU time per iteration, for the probe counter
// tests (probe_counters_test.cpp) and benchmarks: each iteration, between its USDT begin and
// end, the main thread and --threads helpers each burn --work-us of CPU. Each thread reads its
// own CLOCK_THREAD_CPUTIME_ID around its share (main: right after the begin marker and right
// before the end marker; a helper: from its wake-up to just before it reports done), and the
// iteration's CPU time is their sum. Not CLOCK_PROCESS_CPUTIME_ID: it sums the threads'
// sum_exec_runtime, which for a thread running on another CPU lags by up to a scheduler tick
// (kernel/sched/cputime.c, thread_group_cputime), so a helper that is still on its way to
// block when main reads it would be undercounted by up to 4 ms.
//   --iters N      iterations (default 20)
//   --threads T    helper threads working inside every iteration (default 0); they start after
//                  "go" (after the agent attached) and wait on a condition variable between
//                  iterations, as a trainer's compute pool does
//   --work-us U    CPU each thread burns per iteration (default 1000)
//   --wait         print "ready <pid>" and wait for a line on stdin before starting
// Prints "cpu <iter> <ns>" per iteration, then "done <iterations>".
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "seqpoint/usdt.h"

namespace {

uint64_t CpuNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Burns `us` of this thread's CPU time (not wall time: preemption must not shorten the work).
void Burn(uint64_t us) {
  const uint64_t until = CpuNs(CLOCK_THREAD_CPUTIME_ID) + us * 1000;
  volatile uint64_t sink = 0;
  while (CpuNs(CLOCK_THREAD_CPUTIME_ID) < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

struct Pool {
  std::vector<std::atomic<uint64_t>>* cpu = nullptr;  // per iteration, the helpers' CPU ns
  std::mutex mu;
  std::condition_variable cv;
  uint64_t round = 0;  // bumped to start a round
  int pending = 0;     // helpers still working in this round
  bool stop = false;
};

void Helper(Pool* pool, uint64_t work_us) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(pool->mu);
      pool->cv.wait(lock, [&] { return pool->stop || pool->round != seen; });
      if (pool->stop) return;
      seen = pool->round;
    }
    const uint64_t begin = CpuNs(CLOCK_THREAD_CPUTIME_ID);
    Burn(work_us);
    (*pool->cpu)[seen - 1] += CpuNs(CLOCK_THREAD_CPUTIME_ID) - begin;
    std::lock_guard<std::mutex> lock(pool->mu);
    if (--pool->pending == 0) pool->cv.notify_all();
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iters = 20, work_us = 1000;
  int threads = 0;
  bool wait = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--iters") {
      iters = std::strtoull(v, nullptr, 10), ++i;
    } else if (a == "--threads") {
      threads = std::atoi(v), ++i;
    } else if (a == "--work-us") {
      work_us = std::strtoull(v, nullptr, 10), ++i;
    } else if (a == "--wait") {
      wait = true;
    } else {
      std::fprintf(stderr, "counter_workload: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (wait) {
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    char line[64];
    if (std::fgets(line, sizeof line, stdin) == nullptr) return 1;
  }
  std::vector<std::atomic<uint64_t>> cpu(iters);  // round it + 1 is iteration it
  Pool pool;
  pool.cpu = &cpu;
  std::vector<std::thread> helpers;
  for (int t = 0; t < threads; ++t) helpers.emplace_back(Helper, &pool, work_us);
  for (uint64_t it = 0; it < iters; ++it) {
    SEQPOINT_ITERATION_BEGIN(it, 16 + it % 3, 4, 64);
    const uint64_t begin = CpuNs(CLOCK_THREAD_CPUTIME_ID);
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.pending = threads;
      ++pool.round;
    }
    pool.cv.notify_all();
    Burn(work_us);
    {
      std::unique_lock<std::mutex> lock(pool.mu);
      pool.cv.wait(lock, [&] { return pool.pending == 0; });
    }
    cpu[it] += CpuNs(CLOCK_THREAD_CPUTIME_ID) - begin;
    SEQPOINT_ITERATION_END(it);
    usleep(200);  // between iterations, as a trainer loads its next batch
  }
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.stop = true;
  }
  pool.cv.notify_all();
  for (std::thread& t : helpers) t.join();
  for (uint64_t it = 0; it < iters; ++it) {
    std::printf("cpu %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(cpu[it].load()));
  }
  std::printf("done %llu\n", static_cast<unsigned long long>(iters));
  std::fflush(stdout);
  return 0;
}
