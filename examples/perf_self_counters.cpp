// See perf_self_counters.h.
#include "examples/perf_self_counters.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace seqpoint::examples {
namespace {

constexpr uint64_t kEvents[3] = {PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_PAGE_FAULTS,
                                 PERF_COUNT_SW_CONTEXT_SWITCHES};

int OpenEvent(pid_t tid, uint64_t config, bool user_only) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = config;
  attr.inherit = 1;
  attr.exclude_hv = 1;
  attr.exclude_kernel = user_only ? 1 : 0;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

Result<std::vector<pid_t>> ListThreads(const std::string& proc_root) {
  std::string dir = proc_root + "/self/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return IoError("cannot list threads in '" + dir + "': " + std::strerror(errno) +
                   "; is procfs mounted?");
  }
  std::vector<pid_t> tids;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) tids.push_back(static_cast<pid_t>(tid));
  }
  closedir(d);
  if (tids.empty()) return IoError("'" + dir + "' lists no thread; is procfs mounted?");
  return tids;
}

}  // namespace

Result<std::unique_ptr<PerfSelfCounters>> PerfSelfCounters::Open(const std::string& proc_root) {
  auto tids = ListThreads(proc_root);
  if (!tids.ok()) return tids.status();
  std::unique_ptr<PerfSelfCounters> c(new PerfSelfCounters());
  for (pid_t tid : *tids) {
    for (uint64_t config : kEvents) {
      int fd = OpenEvent(tid, config, c->user_only_);
      if (fd < 0 && (errno == EACCES || errno == EPERM) && !c->user_only_ && c->fds_.empty()) {
        // perf_event_paranoid >= 2 without CAP_PERFMON allows user-mode counting only
        // (kernel/events/core.c, perf_allow_kernel).
        c->user_only_ = true;
        fd = OpenEvent(tid, config, true);
      }
      if (fd < 0) {
        int err = errno;
        if (err == ESRCH) break;  // the thread ended while we listed: nothing to count
        std::string hint = (err == EACCES || err == EPERM)
                               ? "; lower /proc/sys/kernel/perf_event_paranoid or run as root"
                           : err == ENOSYS || err == ENOENT
                               ? "; this kernel lacks perf events (CONFIG_PERF_EVENTS)"
                               : "";
        return Status(
            err == EACCES || err == EPERM ? ErrorCode::kPermissionDenied : ErrorCode::kUnsupported,
            "perf_event_open(software event " + std::to_string(config) + ", thread " +
                std::to_string(tid) + "): " + std::strerror(err) + hint);
      }
      c->fds_.push_back(fd);
    }
    if (c->fds_.size() % 3 != 0) {  // a thread vanished between two of its events
      while (c->fds_.size() % 3 != 0) {
        close(c->fds_.back());
        c->fds_.pop_back();
      }
    }
  }
  return c;
}

PerfSelfCounters::~PerfSelfCounters() {
  for (int fd : fds_) close(fd);
}

Result<SelfCounterValues> PerfSelfCounters::Read() const {
  uint64_t sums[3] = {0, 0, 0};
  for (size_t i = 0; i < fds_.size(); ++i) {
    uint64_t value = 0;
    ssize_t n = read(fds_[i], &value, sizeof value);
    if (n != static_cast<ssize_t>(sizeof value)) {
      return IoError(std::string("reading a perf software counter failed: ") +
                     (n < 0 ? std::strerror(errno) : "short read"));
    }
    sums[i % 3] += value;
  }
  return SelfCounterValues{sums[0], sums[1], sums[2]};
}

}  // namespace seqpoint::examples
