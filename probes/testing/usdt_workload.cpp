// A tiny training-loop stand-in that marks its iterations with the SDK header (sdk/include/
// seqpoint/usdt.h), for the eBPF tests and benchmarks. Every behaviour the probes must handle is
// a flag:
//   --iters N          iterations per thread (default 10)
//   --threads T        threads, each with its own iterations (iter = t * 1000000 + i)
//   --seq-lens a,b,..  SLs, cycled (default 16)
//   --work-us U        busy work inside each iteration (default 0)
//   --skip-end K       iteration K of each thread has a begin but no end
//   --skip-begin K     iteration K of each thread has an end but no begin
//   --exit-mid         after the loop, begin one more iteration and _exit() inside it
//   --loop             repeat iterations (1 ms apart) until a line arrives on stdin
//   --loop-sleep-us U  with --loop: the pause between iterations (default 1000; 0: none, for
//                      rates of 10^4 iterations per second with --work-us 100)
//   --wait             print "ready <pid>" and wait for a line on stdin before starting
//   --hold             after the loop, print "done" and wait for a line on stdin before exiting
//   --finish HOW       how to end, for the exit-status tests: exit:N (exit(N)), raise:SIG
//                      (default action of SIG, e.g. 11), group-exit-from-thread:N (a second
//                      thread calls exit_group(N) while main waits on it)
//   --core-dir DIR     before --finish raise: allow core dumps and chdir to DIR (where a
//                      relative kernel.core_pattern puts the file)
// Prints "done <iterations>" when finished.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "seqpoint/usdt.h"

namespace {

struct Config {
  uint64_t iters = 10;
  int threads = 1;
  std::vector<uint32_t> seq_lens{16};
  uint64_t work_us = 0;
  int64_t skip_end = -1;
  int64_t skip_begin = -1;
  bool exit_mid = false;
  bool loop = false;
  uint64_t loop_sleep_us = 1000;
  bool wait = false;
  bool hold = false;
  std::string finish;
  std::string core_dir;
};

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_done{0};

void BusyWait(uint64_t us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

bool StdinHasLine() {
  pollfd p{0, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

void WaitLine() {
  char buf[64];
  if (fgets(buf, sizeof(buf), stdin) == nullptr) return;
}

void Run(const Config& c, int thread) {
  uint64_t base = static_cast<uint64_t>(thread) * 1000000;
  for (uint64_t i = 0; c.loop ? !g_stop.load() : i < c.iters; ++i) {
    uint64_t iter = base + i;
    uint32_t sl = c.seq_lens[i % c.seq_lens.size()];
    uint32_t batch = 4;
    if (static_cast<int64_t>(i) != c.skip_begin) {
      SEQPOINT_ITERATION_BEGIN(iter, sl, batch, uint64_t{sl} * batch);
    }
    BusyWait(c.work_us);
    if (static_cast<int64_t>(i) != c.skip_end) SEQPOINT_ITERATION_END(iter);
    g_done.fetch_add(1);
    if (c.loop && c.loop_sleep_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(c.loop_sleep_us));
    }
  }
}

// --finish: ends the process as asked. Returns only for an unknown HOW.
void Finish(const Config& c) {
  const std::string& how = c.finish;
  size_t colon = how.find(':');
  std::string kind = how.substr(0, colon);
  int n = colon == std::string::npos ? 0 : std::atoi(how.c_str() + colon + 1);
  if (kind == "exit") std::exit(n);
  if (kind == "raise") {
    if (!c.core_dir.empty()) {
      rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
      setrlimit(RLIMIT_CORE, &unlimited);
      if (chdir(c.core_dir.c_str()) != 0) std::perror("usdt_workload: chdir --core-dir");
    }
    signal(n, SIG_DFL);
    raise(n);
    return;
  }
  if (kind == "group-exit-from-thread") {
    // The main thread is not the one that ends the group: the kernel must still report n.
    std::thread([n] { syscall(SYS_exit_group, n); }).join();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "usdt_workload: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--iters")
      c.iters = std::strtoull(next(), nullptr, 10);
    else if (a == "--threads")
      c.threads = std::atoi(next());
    else if (a == "--work-us")
      c.work_us = std::strtoull(next(), nullptr, 10);
    else if (a == "--skip-end")
      c.skip_end = std::atoll(next());
    else if (a == "--skip-begin")
      c.skip_begin = std::atoll(next());
    else if (a == "--exit-mid")
      c.exit_mid = true;
    else if (a == "--loop")
      c.loop = true;
    else if (a == "--loop-sleep-us")
      c.loop_sleep_us = std::strtoull(next(), nullptr, 10);
    else if (a == "--wait")
      c.wait = true;
    else if (a == "--hold")
      c.hold = true;
    else if (a == "--finish")
      c.finish = next();
    else if (a == "--core-dir")
      c.core_dir = next();
    else if (a == "--seq-lens") {
      c.seq_lens.clear();
      std::string list = next();
      for (char* tok = std::strtok(list.data(), ","); tok; tok = std::strtok(nullptr, ",")) {
        c.seq_lens.push_back(static_cast<uint32_t>(std::strtoul(tok, nullptr, 10)));
      }
    } else {
      std::fprintf(stderr, "usdt_workload: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (c.wait) {
    std::printf("ready %d\n", getpid());
    std::fflush(stdout);
    WaitLine();
  }
  std::thread stopper;
  if (c.loop) {
    stopper = std::thread([] {
      while (!StdinHasLine()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      g_stop = true;
    });
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < c.threads; ++t) workers.emplace_back(Run, std::cref(c), t);
  for (auto& w : workers) w.join();
  if (stopper.joinable()) stopper.join();
  if (c.exit_mid) {
    SEQPOINT_ITERATION_BEGIN(999999999, 16, 4, 64);
    std::printf("done %llu\n", static_cast<unsigned long long>(g_done.load()));
    std::fflush(stdout);
    _exit(0);
  }
  std::printf("done %llu\n", static_cast<unsigned long long>(g_done.load()));
  std::fflush(stdout);
  if (c.hold) WaitLine();
  if (!c.finish.empty()) {
    Finish(c);
    std::fprintf(stderr,
                 "usdt_workload: --finish %s is not exit:N, raise:SIG or "
                 "group-exit-from-thread:N\n",
                 c.finish.c_str());
    return 2;
  }
  return 0;
}
