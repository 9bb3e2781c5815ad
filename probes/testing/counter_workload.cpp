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
//   --storm S      S more threads per iteration, created after the begin marker and joined
//                  before the end marker, each burning --storm-us (default 200) of CPU: a
//                  thread storm (40 iterations x 25 = 1,000 threads)
//   --spinner K    from iteration K on, one more thread, created mid-iteration, that never
//                  blocks: it is on a CPU at every later probe (an OpenMP pool spinning)
//   --exec-after K after iteration K, a helper thread (not main) execs this program again with
//                  the remaining iterations (--first K+1 --wait): the exec'ing thread takes
//                  main's tid, and the new image says "ready" and waits for its "go" again
//   --first F      the first iteration's index (default 0)
//   --wait         print "ready <pid>" and wait for a line on stdin before starting
// Prints "cpu <iter> <ns>" per iteration, then "all <iter> <ns>" per iteration: every thread's
// CPU time inside the iteration read by main at the markers through the threads' own CPU clocks
// (pthread_getcpuclockid: exact for a thread on another CPU too, kernel/sched/core.c
// task_sched_runtime), plus the lifetimes of the storm threads; then "done <iterations>".
// Also "csw <iter> <n>" per iteration: the process's context switches inside it, every thread's
// (getrusage RUSAGE_SELF: voluntary + involuntary, the threads that ended too), read by main
// just inside its CPU clock reads (so both CPU readings hold the getrusage calls).
// And "span <iter> <ns>": the same sum read just before the begin marker and just after the end
// marker. The probes read at the markers, between main's two reads of each pair, so their count
// lies in [all, span]: a thread on another CPU (the spinner) runs on while main goes from a
// marker to its read, and on a loaded machine main may be preempted there for a time slice.
// And "proc <iter> <ns>": CLOCK_PROCESS_CPUTIME_ID across the same inner reads, which holds the
// whole lives of threads that ended inside (their exit too, which their own clocks cannot see):
// exact where no other thread is on a CPU at the reads (the storm), lagging otherwise (above).
// With --exec-after, "exec <pid>" before the exec.
#include <pthread.h>
#include <sys/resource.h>
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

// The process's context switches so far, every thread's, live or ended (kernel/sys.c getrusage:
// the same nvcsw / nivcsw that __schedule counts where sched_switch fires).
uint64_t Switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_nvcsw) + static_cast<uint64_t>(ru.ru_nivcsw);
}

uint64_t ClockOf(pthread_t thread) {
  clockid_t clock;
  if (pthread_getcpuclockid(thread, &clock) != 0) return 0;
  return CpuNs(clock);
}

std::atomic<bool> spin_stop{false};

void Spinner() {
  volatile uint64_t sink = 0;
  while (!spin_stop.load(std::memory_order_relaxed)) sink = sink + 1;
}

void StormThread(uint64_t work_us, std::atomic<uint64_t>* lifetimes) {
  Burn(work_us);
  *lifetimes += CpuNs(CLOCK_THREAD_CPUTIME_ID);  // its whole life so far, from 0 at creation
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iters = 20, work_us = 1000, storm_us = 200, first = 0;
  int threads = 0, storm = 0;
  long spinner_at = -1, exec_after = -1;
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
    } else if (a == "--storm") {
      storm = std::atoi(v), ++i;
    } else if (a == "--storm-us") {
      storm_us = std::strtoull(v, nullptr, 10), ++i;
    } else if (a == "--spinner") {
      spinner_at = std::atol(v), ++i;
    } else if (a == "--exec-after") {
      exec_after = std::atol(v), ++i;
    } else if (a == "--first") {
      first = std::strtoull(v, nullptr, 10), ++i;
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
  std::vector<uint64_t> all(iters);
  std::vector<uint64_t> csw(iters);
  std::vector<uint64_t> span(iters);
  std::vector<uint64_t> proc(iters);
  Pool pool;
  pool.cpu = &cpu;
  std::vector<std::thread> helpers;
  for (int t = 0; t < threads; ++t) helpers.emplace_back(Helper, &pool, work_us);
  std::thread spinner;
  // Every live thread's CPU clock, read by main: a thread on another CPU is read up to now.
  auto all_threads = [&] {
    uint64_t sum = CpuNs(CLOCK_THREAD_CPUTIME_ID);
    for (std::thread& h : helpers) sum += ClockOf(h.native_handle());
    if (spinner.joinable()) sum += ClockOf(spinner.native_handle());
    return sum;
  };
  for (uint64_t it = first; it < iters; ++it) {
    const uint64_t before_begin = all_threads();
    SEQPOINT_ITERATION_BEGIN(it, 16 + it % 3, 4, 64);
    const uint64_t begin_all = all_threads();
    const uint64_t begin_proc = CpuNs(CLOCK_PROCESS_CPUTIME_ID);
    const uint64_t begin = CpuNs(CLOCK_THREAD_CPUTIME_ID);
    // Inside the CPU clocks' window: the getrusage calls are CPU time both readings hold.
    const uint64_t begin_csw = Switches();
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.pending = threads;
      ++pool.round;
    }
    pool.cv.notify_all();
    std::atomic<uint64_t> lifetimes{0};
    std::vector<std::thread> storm_threads;
    for (int s = 0; s < storm; ++s) storm_threads.emplace_back(StormThread, storm_us, &lifetimes);
    bool spinner_born = false;
    if (static_cast<long>(it) == spinner_at) {
      spinner = std::thread(Spinner);  // mid-iteration: after the begin marker
      spinner_born = true;
    }
    Burn(work_us);
    for (std::thread& t : storm_threads) t.join();
    {
      std::unique_lock<std::mutex> lock(pool.mu);
      pool.cv.wait(lock, [&] { return pool.pending == 0 || threads == 0; });
    }
    csw[it] = Switches() - begin_csw;
    cpu[it] += CpuNs(CLOCK_THREAD_CPUTIME_ID) - begin;
    // A spinner born in this iteration had no clock at begin: its whole life is inside.
    proc[it] = CpuNs(CLOCK_PROCESS_CPUTIME_ID) - begin_proc;
    all[it] = all_threads() - begin_all + lifetimes.load();
    (void)spinner_born;
    SEQPOINT_ITERATION_END(it);
    span[it] = all_threads() - before_begin + lifetimes.load();
    usleep(200);  // between iterations, as a trainer loads its next batch
    if (static_cast<long>(it) == exec_after) {
      for (uint64_t i = first; i <= it; ++i) {
        std::printf("cpu %llu %llu\nall %llu %llu\ncsw %llu %llu\nspan %llu %llu\n",
                    static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(cpu[i].load()),
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(all[i]),
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(csw[i]),
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(span[i]));
      }
      std::printf("exec %d\n", static_cast<int>(getpid()));
      std::fflush(stdout);
      // A helper, not main, calls exec: fs/exec.c de_thread gives it main's tid.
      std::vector<std::string> args{
          "/proc/self/exe",        "--iters",   std::to_string(iters),   "--threads",
          std::to_string(threads), "--work-us", std::to_string(work_us), "--first",
          std::to_string(it + 1),  "--wait"};
      std::thread execer([&] {
        std::vector<char*> cargs;
        for (std::string& s : args) cargs.push_back(s.data());
        cargs.push_back(nullptr);
        execv("/proc/self/exe", cargs.data());
        std::perror("execv");
        std::_Exit(3);
      });
      execer.join();  // not reached: exec ends every other thread
    }
  }
  spin_stop = true;
  if (spinner.joinable()) spinner.join();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.stop = true;
  }
  pool.cv.notify_all();
  for (std::thread& t : helpers) t.join();
  for (uint64_t it = first; it < iters; ++it) {
    std::printf("cpu %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(cpu[it].load()));
    std::printf("all %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(all[it]));
    std::printf("csw %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(csw[it]));
    std::printf("span %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(span[it]));
    std::printf("proc %llu %llu\n", static_cast<unsigned long long>(it),
                static_cast<unsigned long long>(proc[it]));
  }
  std::printf("done %llu\n", static_cast<unsigned long long>(iters - first));
  std::fflush(stdout);
  return 0;
}
