#include "collectors/perf/perf_event_group.h"

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace seqpoint::collectors {
namespace {

Status OpenError(int err, const PerfEventSpec& spec, pid_t tid) {
  const std::string what =
      "perf_event_open(" + spec.name + ", tid " + std::to_string(tid) + "): " + std::strerror(err);
  switch (err) {
    case ESRCH:
      return NotFound(what + " (the thread has exited)");
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      return Unsupported(what + " (this machine's PMU has no such event; a VM may expose none)");
    case EACCES:
    case EPERM:
      return PermissionDenied(what +
                              " (run as root, or lower "
                              "/proc/sys/kernel/perf_event_paranoid, or set "
                              "collectors.perf.exclude_kernel = true)");
    case EMFILE:
    case ENFILE:
      return Unavailable(what + " (out of file descriptors: raise LimitNOFILE)");
    case EINVAL:
      return Unsupported(what + " (the kernel rejects this event or group here)");
    default:
      return IoError(what);
  }
}

}  // namespace

Result<PerfEventGroup> PerfEventGroup::Open(std::span<const PerfEventSpec> specs, pid_t tid,
                                            const PerfOpenOptions& options) {
  PerfEventGroup group;
  for (size_t i = 0; i < specs.size(); ++i) {
    perf_event_attr attr = specs[i].attr;
    attr.size = sizeof(attr);
    attr.disabled = i == 0 ? 1 : 0;  // members follow the leader's state
    attr.inherit = options.inherit ? 1 : 0;
    attr.exclude_kernel = options.exclude_kernel ? 1 : 0;
    attr.exclude_hv = 1;
    attr.read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    const int leader = group.fds_.empty() ? -1 : group.fds_[0];
    long fd = ::syscall(SYS_perf_event_open, &attr, tid, -1, leader, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return OpenError(errno, specs[i], tid);
    group.fds_.push_back(static_cast<int>(fd));
  }
  return group;
}

PerfEventGroup& PerfEventGroup::operator=(PerfEventGroup&& other) noexcept {
  if (this != &other) {
    CloseAll();
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

PerfEventGroup::~PerfEventGroup() { CloseAll(); }

void PerfEventGroup::CloseAll() {
  // Members first, then the leader.
  for (size_t i = fds_.size(); i-- > 0;) ::close(fds_[i]);
  fds_.clear();
}

Status PerfEventGroup::Enable() {
  if (fds_.empty()) return Status::Ok();
  if (::ioctl(fds_[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) != 0) {
    return IoError(std::string("PERF_EVENT_IOC_ENABLE: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status PerfEventGroup::Disable() {
  if (fds_.empty()) return Status::Ok();
  if (::ioctl(fds_[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP) != 0) {
    return IoError(std::string("PERF_EVENT_IOC_DISABLE: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status PerfEventGroup::Read(PerfGroupCounts* out) const {
  // Layout for PERF_FORMAT_GROUP without PERF_FORMAT_ID (include/uapi/linux/perf_event.h):
  // u64 nr; u64 time_enabled; u64 time_running; u64 values[nr].
  uint64_t buf[3 + 64];
  const size_t want = (3 + fds_.size()) * sizeof(uint64_t);
  if (fds_.empty() || fds_.size() > 64) return Internal("perf group of unexpected size");
  ssize_t n;
  do {
    n = ::read(fds_[0], buf, want);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return Unavailable(std::string("reading perf group: ") + std::strerror(errno));
  }
  if (static_cast<size_t>(n) != want || buf[0] != fds_.size()) {
    return IoError("reading perf group: short or malformed read (" + std::to_string(n) + " bytes)");
  }
  out->time_enabled = buf[1];
  out->time_running = buf[2];
  out->values.assign(buf + 3, buf + 3 + fds_.size());
  return Status::Ok();
}

Status ProbePerfGroup(std::span<const PerfEventSpec> specs, const PerfOpenOptions& options) {
  PerfOpenOptions probe_options = options;
  probe_options.inherit = false;
  Result<PerfEventGroup> group = PerfEventGroup::Open(specs, 0, probe_options);
  if (!group.ok()) return group.status();
  SEQPOINT_RETURN_IF_ERROR(group->Enable());
  // ~200 us of work on this thread: long enough to span scheduler ticks of rotation,
  // short enough to keep Open cheap.
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::microseconds(200);
  volatile uint64_t sink = 0;
  while (Clock::now() < until) {
    for (int i = 0; i < 256; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  SEQPOINT_RETURN_IF_ERROR(group->Disable());
  PerfGroupCounts counts;
  SEQPOINT_RETURN_IF_ERROR(group->Read(&counts));
  if (counts.time_enabled == 0 || counts.time_running * 100 < counts.time_enabled * 99) {
    return Unavailable(
        "the PMU scheduled this group " +
        std::to_string(counts.time_enabled ? 100 * counts.time_running / counts.time_enabled : 0) +
        "% of the time (more events than free hardware counters, or none at "
        "all: a VM without a virtual PMU)");
  }
  return Status::Ok();
}

}  // namespace seqpoint::collectors
