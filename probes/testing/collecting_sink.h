// Test helper: an ProbeEventSink that keeps every event, and a bounded wait for a condition while
// polling the probes. The bound only stops a broken test from hanging; no test asserts timing.
#pragma once

#include <time.h>

#include <cstdint>
#include <vector>

#include "probes/iteration_probes.h"

namespace seqpoint::probes::testing {

class CollectingSink : public ProbeEventSink {
 public:
  void OnBegin(const IterationEvent& e) override { begins.push_back(e); }
  void OnEnd(const IterationEvent& e) override { ends.push_back(e); }

  std::vector<IterationEvent> EndsOf(int pid) const { return Of(ends, pid); }
  std::vector<IterationEvent> BeginsOf(int pid) const { return Of(begins, pid); }
  size_t CompleteOf(int pid) const {
    size_t n = 0;
    for (const IterationEvent& e : ends) n += (e.pid == static_cast<uint32_t>(pid) && e.complete());
    return n;
  }

  std::vector<IterationEvent> begins;
  std::vector<IterationEvent> ends;

 private:
  static std::vector<IterationEvent> Of(const std::vector<IterationEvent>& all, int pid) {
    std::vector<IterationEvent> out;
    for (const IterationEvent& e : all) {
      if (e.pid == static_cast<uint32_t>(pid)) out.push_back(e);
    }
    return out;
  }
};

inline int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Calls poll() until done() holds; false if it does not within max_ms.
template <typename PollFn, typename Done>
bool PollUntil(PollFn poll, Done done, int max_ms = 60000) {
  int64_t deadline = MonotonicMs() + max_ms;
  while (!done()) {
    if (MonotonicMs() > deadline) return false;
    poll();
  }
  return true;
}

}  // namespace seqpoint::probes::testing
