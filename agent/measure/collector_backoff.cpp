#include "agent/measure/collector_backoff.h"

#include <vector>

namespace seqpoint::daemon {

bool CollectorBackoff::Seen(pid_t pid, const std::string& reason, const std::string& profiler,
                            const std::string& evidence, int64_t now_mono_ns, int64_t now_unix_ns) {
  auto [it, started] = active_.try_emplace(pid);
  Backoff& b = it->second;
  b.last_seen_mono_ns = now_mono_ns;
  if (!started) return false;  // held: a sighting within the hold-down only extends it
  b.reason = reason;
  b.profiler = profiler;
  b.evidence = evidence;
  b.since_unix_ns = now_unix_ns;
  b.since_mono_ns = now_mono_ns;
  ++stats_.started[reason];
  return true;
}

std::map<pid_t, Backoff> CollectorBackoff::Expire(int64_t now_mono_ns) {
  std::map<pid_t, Backoff> ended;
  for (auto it = active_.begin(); it != active_.end();) {
    if (now_mono_ns - it->second.last_seen_mono_ns >= hold_down_ns_) {
      ended.insert(*it);
      it = active_.erase(it);
      ++stats_.ended;
    } else {
      ++it;
    }
  }
  return ended;
}

const Backoff* CollectorBackoff::Find(pid_t pid) const {
  auto it = active_.find(pid);
  return it == active_.end() ? nullptr : &it->second;
}

const PauseState& CollectorBackoff::Pause(std::optional<int64_t> duration_ns, int64_t now_mono_ns,
                                          int64_t now_unix_ns) {
  if (!pause_.paused) pause_.since_unix_ns = now_unix_ns;
  pause_.paused = true;
  pause_.until_mono_ns.reset();
  pause_.until_unix_ns.reset();
  if (duration_ns) {  // a second pause replaces the first's end: the last caller's need wins
    pause_.until_mono_ns = now_mono_ns + *duration_ns;
    pause_.until_unix_ns = now_unix_ns + *duration_ns;
  }
  ++stats_.pauses;
  return pause_;
}

bool CollectorBackoff::Resume() {
  const bool was = pause_.paused;
  pause_ = PauseState{};
  return was;
}

bool CollectorBackoff::Paused(int64_t now_mono_ns, bool* expired) {
  if (expired != nullptr) *expired = false;
  if (pause_.paused && pause_.until_mono_ns && now_mono_ns >= *pause_.until_mono_ns) {
    pause_ = PauseState{};
    if (expired != nullptr) *expired = true;
  }
  return pause_.paused;
}

}  // namespace seqpoint::daemon
