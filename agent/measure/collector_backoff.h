// When the collectors must stay out of the way (issue 12, item 4), and for how long:
//  - per process, while a profiler is on it (profiler_watch.h) or a vendor library answered that
//    its counters are busy (collectors::IsCountersBusy): a back-off starts at the first sighting
//    and ends only once no sighting came for runs.profiler_hold_down_s. A profiler that comes
//    and goes every second therefore holds one back-off, never a stop/start per second (the
//    hold-down), and the counters are free again for a while before the agent takes them back.
//  - node-wide, while paused by `seqpoint pause [--for DURATION]` (site tooling that needs the
//    counters, as `dcgmi profile --pause` does for DCGM) until `seqpoint resume` or the end of
//    the duration. A pause lives in memory only: a restarted daemon is not paused.
// During either, the process's collectors are closed (their counters released) and open again
// at the next chosen iteration after it; iterations are still timed, energy still attributed.
//
// Times are CLOCK_MONOTONIC nanoseconds given by the caller (the clock seam), so tests drive them.
// Threads: the daemon's io_context thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace seqpoint::daemon {

inline constexpr const char* kBackoffProfiler = "profiler";
inline constexpr const char* kBackoffCountersBusy = "counters_busy";

struct Backoff {
  std::string reason;    // kBackoffProfiler | kBackoffCountersBusy
  std::string profiler;  // the pattern seen, or the collector that answered busy (a label)
  std::string evidence;  // what was seen, for logs, status and show
  int64_t since_unix_ns = 0;
  int64_t since_mono_ns = 0;
  int64_t last_seen_mono_ns = 0;
};

struct PauseState {
  bool paused = false;
  int64_t since_unix_ns = 0;
  std::optional<int64_t> until_mono_ns;  // none: until `seqpoint resume`
  std::optional<int64_t> until_unix_ns;
};

struct BackoffStats {
  std::map<std::string, uint64_t> started;  // back-offs begun, by reason
  uint64_t ended = 0;                       // back-offs ended by the hold-down
  uint64_t pauses = 0;                      // pause commands
};

class CollectorBackoff {
 public:
  explicit CollectorBackoff(int64_t hold_down_ns) : hold_down_ns_(hold_down_ns) {}
  void set_hold_down_ns(int64_t ns) { hold_down_ns_ = ns; }
  int64_t hold_down_ns() const { return hold_down_ns_; }

  // A sighting on `pid` now. True when it starts a back-off (the caller stops the collectors).
  bool Seen(pid_t pid, const std::string& reason, const std::string& profiler,
            const std::string& evidence, int64_t now_mono_ns, int64_t now_unix_ns);
  // Ends every back-off not seen for the hold-down; returns the pids whose back-off ended.
  std::map<pid_t, Backoff> Expire(int64_t now_mono_ns);
  void Forget(pid_t pid) { active_.erase(pid); }
  const Backoff* Find(pid_t pid) const;
  const std::map<pid_t, Backoff>& active() const { return active_; }

  // until_mono_ns none: until Resume(). Returns the state after the call.
  const PauseState& Pause(std::optional<int64_t> duration_ns, int64_t now_mono_ns,
                          int64_t now_unix_ns);
  // True when a pause was lifted by this call.
  bool Resume();
  // True while paused; lifts a pause whose duration has passed (`expired` says so).
  bool Paused(int64_t now_mono_ns, bool* expired = nullptr);
  const PauseState& pause() const { return pause_; }

  // True when `pid`'s collectors must stay closed now (a pause past its end no longer blocks,
  // though only Paused() lifts it, so that the lifting is logged once).
  bool Blocks(pid_t pid, int64_t now_mono_ns) const {
    const bool paused =
        pause_.paused && (!pause_.until_mono_ns || now_mono_ns < *pause_.until_mono_ns);
    return paused || active_.count(pid) > 0;
  }
  const BackoffStats& stats() const { return stats_; }

 private:
  int64_t hold_down_ns_;
  std::map<pid_t, Backoff> active_;
  PauseState pause_;
  BackoffStats stats_;
};

}  // namespace seqpoint::daemon
