// Real perf software events on this test process. The key property: threads that exist before
// Open() (as OpenBLAS's workers do) and threads created after it are both counted.
#include "examples/perf_self_counters.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

using namespace seqpoint::examples;

namespace {

// Burns CPU in the calling thread for about `ms` of its own CPU time; returns that time (ns).
uint64_t BurnCpu(int ms) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
  };
  uint64_t start = now();
  volatile uint64_t sink = 0;
  while (now() - start < uint64_t(ms) * 1'000'000) {
    for (int i = 0; i < 10000; ++i) sink = sink + uint64_t(i);
  }
  return now() - start;
}

// The counters, or a skip message when this kernel refuses perf events to us.
std::unique_ptr<PerfSelfCounters> OpenOrSkip() {
  auto c = PerfSelfCounters::Open();
  if (!c.ok()) {
    MESSAGE("skipping: perf_event_open refused: " << c.status().ToString());
    return nullptr;
  }
  return std::move(*c);
}

}  // namespace

TEST_CASE("examples perf counters: task clock and page faults of the main thread") {
  auto c = OpenOrSkip();
  if (!c) return;
  auto a = c->Read();
  REQUIRE(a.ok());
  uint64_t burnt = BurnCpu(30);
  const size_t pages = 2000, page = size_t(sysconf(_SC_PAGESIZE));
  void* mem =
      mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  madvise(mem, pages * page, MADV_NOHUGEPAGE);  // one fault per 4 KiB page, not per 2 MiB
  for (size_t i = 0; i < pages; ++i) static_cast<volatile char*>(mem)[i * page] = 1;
  munmap(mem, pages * page);
  auto b = c->Read();
  REQUIRE(b.ok());
  CHECK(b->task_clock_ns - a->task_clock_ns >= burnt);
  CHECK(b->page_faults - a->page_faults >= pages);
}

TEST_CASE("examples perf counters: threads from before Open and from after are both counted") {
  std::atomic<int> go{0};
  std::atomic<uint64_t> early_ns{0};
  std::thread early([&] {  // exists at Open(), like OpenBLAS's load-time workers
    while (go.load() == 0) usleep(1000);
    early_ns = BurnCpu(40);
  });
  auto c = OpenOrSkip();
  if (!c) {
    go = 1;
    early.join();
    return;
  }
  CHECK(c->threads_at_open() >= 2);
  auto a = c->Read();
  REQUIRE(a.ok());
  go = 1;
  uint64_t late_ns = 0;
  std::thread late([&] {  // created after Open(): counted through inherit=1
    late_ns = BurnCpu(40);
    for (int i = 0; i < 20; ++i) usleep(500);  // each sleep is a context switch
  });
  late.join();
  early.join();
  auto b = c->Read();
  REQUIRE(b.ok());
  CHECK(b->task_clock_ns - a->task_clock_ns >= early_ns.load() + late_ns);
  CHECK(b->context_switches - a->context_switches >= 20);
}

TEST_CASE("examples perf counters: a missing procfs is a clear error") {
  auto c = PerfSelfCounters::Open("/nonexistent-proc");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("/nonexistent-proc/self/task") != std::string::npos);
}
