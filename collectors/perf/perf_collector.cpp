#include "collectors/perf/perf_collector.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include "collectors/perf/pmu_trap_probe.h"

namespace seqpoint::collectors {
namespace {

std::string JoinRejected(const std::vector<RejectedEvent>& rejected) {
  std::string out;
  for (const RejectedEvent& r : rejected) {
    if (!out.empty()) out += "; ";
    out += r.event + ": " + r.reason.message();
  }
  return out;
}

// Names of /proc/PID/task entries as tids; non-numeric entries are ignored.
Result<std::vector<pid_t>> ListTids(const FileRoot& proc, pid_t pid) {
  Result<std::vector<std::string>> names = proc.ListDir(std::to_string(pid) + "/task");
  if (!names.ok()) {
    if (names.status().code() == ErrorCode::kNotFound) {
      return NotFound("process " + std::to_string(pid) + " not found under " + proc.root());
    }
    return names.status();
  }
  std::vector<pid_t> tids;
  for (const std::string& n : *names) {
    pid_t tid = 0;
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), tid);
    if (ec == std::errc() && p == n.data() + n.size() && tid > 0) tids.push_back(tid);
  }
  return tids;
}

// Per-thread scaling (see header). Returns false when the event was enabled but never ran.
bool Scaled(uint64_t count, uint64_t enabled, uint64_t running, double* out) {
  if (enabled == 0) {  // the thread did not run in the window: its count is exactly 0
    *out = static_cast<double>(count);
    return true;
  }
  if (running == 0) return false;
  *out = static_cast<double>(count) * (static_cast<double>(enabled) / running);
  return true;
}

}  // namespace

PerfCollector::PerfCollector(PerfOptions options, std::string proc_root)
    : options_(std::move(options)), proc_(std::move(proc_root)) {
  open_options_.inherit = options_.inherit;
  open_options_.exclude_kernel = options_.exclude_kernel;
}

size_t PerfCollector::group_count() const { return std::max<size_t>(1, hardware_.size()); }

Status PerfCollector::SelectGroup(size_t group) {
  if (group >= group_count()) {
    return InvalidArgument("perf: group " + std::to_string(group) + " of " +
                           std::to_string(group_count()));
  }
  if (measuring_) return Internal("perf: SelectGroup during a measurement");
  current_group_ = group;
  return Status::Ok();
}

namespace {

// The verdict is a property of the node: measured once per process, then reused.
std::mutex trap_mutex;
std::optional<Result<ContextSwitchCost>> trap_verdict;

Result<ContextSwitchCost> TrapVerdict(std::span<const PerfEventSpec> hardware,
                                      const PerfOpenOptions& options) {
  std::lock_guard<std::mutex> lock(trap_mutex);
  if (!trap_verdict) trap_verdict = MeasureContextSwitchCost(hardware, options, 200);
  return *trap_verdict;
}

}  // namespace

std::string PrepareHardwareEvents(const PerfOptions& options) {
  if (!options.pmu_trap_check || (options.enabled && !*options.enabled)) return "";
  std::vector<PerfEventSpec> hardware;
  for (const std::string& name : options.events) {
    Result<PerfEventSpec> spec = ParsePerfEvent(name);
    if (spec.ok() && !spec->software) {
      hardware.push_back(*spec);
      break;  // one event tells whether the PMU traps
    }
  }
  if (hardware.empty()) return "";
  Result<ContextSwitchCost> cost =
      TrapVerdict(hardware, PerfOpenOptions{options.inherit, options.exclude_kernel});
  if (!cost.ok()) return "perf: no hardware-event trap check: " + cost.status().message();
  char line[200];
  std::snprintf(line, sizeof line,
                "perf: a context switch costs %.1f us, %.1f us with a hardware event counted: %s",
                cost->plain_ns / 1000, cost->counted_ns / 1000,
                ContextSwitchesTrap(*cost) ? "the PMU traps, hardware events left out"
                                           : "hardware events kept");
  return line;
}

void PerfCollector::LeaveOutTrappingHardware() {
  Result<ContextSwitchCost> cost = TrapVerdict(hardware_[0], open_options_);
  if (!cost.ok() || !ContextSwitchesTrap(*cost)) return;  // no verdict: count as configured
  char why[256];
  std::snprintf(why, sizeof why,
                "left out: counting it makes a context switch cost %.1f us instead of %.1f us "
                "(the PMU traps, as on many VMs; collectors.perf.pmu_trap_check = false keeps "
                "it)",
                cost->counted_ns / 1000, cost->plain_ns / 1000);
  for (const auto& group : hardware_) {
    for (const PerfEventSpec& spec : group) rejected_.push_back({spec.name, Unavailable(why)});
  }
  hardware_.clear();
  hardware_groups_ = {};
}

Status PerfCollector::Open(const Target& target) {
  Close();
  if (target.pid <= 0) {
    return Unsupported("perf counts a process: the target has no pid (device-wide)");
  }
  pid_ = target.pid;
  rejected_.clear();

  // Parse names; split software from hardware.
  std::map<std::string, PerfEventSpec> hw_specs;
  std::vector<std::string> hw_names;
  for (const std::string& name : options_.events) {
    if (std::find(in_probes_.begin(), in_probes_.end(), name) != in_probes_.end()) continue;
    Result<PerfEventSpec> spec = ParsePerfEvent(name);
    if (!spec.ok()) {
      rejected_.push_back({name, spec.status()});
    } else if (spec->software) {
      bool dup = false;
      for (const auto& s : software_) dup |= s.name == name;
      if (!dup) software_.push_back(*spec);
    } else {
      hw_names.push_back(name);
      hw_specs[name] = *spec;
    }
  }

  // Split the hardware events into groups that the PMU schedules in full.
  auto specs_of = [&](std::span<const std::string> names) {
    std::vector<PerfEventSpec> specs;
    for (const std::string& n : names) specs.push_back(hw_specs[n]);
    return specs;
  };
  hardware_groups_ = SplitIntoGroups(hw_names, static_cast<size_t>(options_.max_events_per_group),
                                     [&](std::span<const std::string> names) {
                                       return ProbePerfGroup(specs_of(names), open_options_);
                                     });
  for (const auto& g : hardware_groups_.groups) hardware_.push_back(specs_of(g));
  for (const RejectedEvent& r : hardware_groups_.rejected) rejected_.push_back(r);
  if (!hardware_.empty() && options_.pmu_trap_check) LeaveOutTrappingHardware();

  if (software_.empty() && hardware_.empty() && !in_probes_.empty()) {
    std::string why = rejected_.empty() ? "" : "; the others are left out: " + JoinRejected(rejected_);
    Close();
    return Unsupported("perf: its events are counted in the iteration probes" + why);
  }
  if (software_.empty() && hardware_.empty()) {
    Status s = InvalidArgument("perf: none of collectors.perf.events can be counted here: " +
                               JoinRejected(rejected_));
    Close();
    return s;
  }

  Status attached = AttachNewThreads(/*until_stable=*/true);
  if (!attached.ok()) {
    Close();
    return attached;
  }
  if (threads_.empty()) {
    Close();
    return NotFound("process " + std::to_string(target.pid) + " has no threads left");
  }
  current_group_ = 0;
  warnings_ = JoinRejected(rejected_);
  return Status::Ok();
}

Status PerfCollector::OpenThread(pid_t tid, ThreadEvents* out) {
  out->tid = tid;
  if (!software_.empty()) {
    Result<PerfEventGroup> g = PerfEventGroup::Open(software_, tid, open_options_);
    if (!g.ok()) return g.status();
    out->software.emplace(std::move(g).value());
    out->last_software.values.assign(software_.size(), 0);
  }
  for (const auto& specs : hardware_) {
    Result<PerfEventGroup> g = PerfEventGroup::Open(specs, tid, open_options_);
    if (!g.ok()) return g.status();
    out->hardware.push_back(std::move(g).value());
    PerfGroupCounts zero;
    zero.values.assign(specs.size(), 0);
    out->last_hardware.push_back(zero);
  }
  return Status::Ok();
}

Status PerfCollector::AttachNewThreads(bool until_stable) {
  // A few rounds at most: each round opens the threads created during the previous one.
  for (int round = 0; round < 16; ++round) {
    Result<std::vector<pid_t>> tids = ListTids(proc_, pid_);
    if (!tids.ok()) return threads_.empty() ? tids.status() : Status::Ok();
    size_t opened = 0;
    for (pid_t tid : *tids) {
      bool known = std::any_of(threads_.begin(), threads_.end(),
                               [&](const ThreadEvents& t) { return t.tid == tid; });
      if (known) continue;
      ThreadEvents te;
      Status s = OpenThread(tid, &te);
      if (s.code() == ErrorCode::kNotFound) continue;  // exited since listed
      if (!s.ok()) return s.WithContext("perf: attaching to thread " + std::to_string(tid));
      if (measuring_) {
        if (te.software) (void)te.software->Enable();
        if (!te.hardware.empty()) (void)te.hardware[current_group_].Enable();
      }
      threads_.push_back(std::move(te));
      ++opened;
    }
    if (!until_stable || opened == 0) break;
  }
  return Status::Ok();
}

Status PerfCollector::Begin() {
  if (threads_.empty()) return Internal("perf: Begin() before a successful Open()");
  if (!options_.inherit) {
    // Forget threads that have exited (their last counts were read at the previous End),
    // then open the threads created since.
    Result<std::vector<pid_t>> tids = ListTids(proc_, pid_);
    if (tids.ok()) {
      std::erase_if(threads_, [&](const ThreadEvents& t) {
        return std::find(tids->begin(), tids->end(), t.tid) == tids->end();
      });
    }
    SEQPOINT_RETURN_IF_ERROR(AttachNewThreads(/*until_stable=*/false));
    if (threads_.empty()) return NotFound("process " + std::to_string(pid_) + " has exited");
  }
  if (needs_resync_) Resync();
  for (ThreadEvents& t : threads_) {
    Status s = t.software ? t.software->Enable() : Status::Ok();
    if (s.ok() && !t.hardware.empty()) s = t.hardware[current_group_].Enable();
    if (!s.ok()) {
      // Some threads count already: stop them and re-read baselines next time, so that
      // this failed window never leaks into the next one.
      for (ThreadEvents& u : threads_) {
        if (!u.hardware.empty()) (void)u.hardware[current_group_].Disable();
        if (u.software) (void)u.software->Disable();
      }
      needs_resync_ = true;
      return s.WithContext("perf: enabling counters of thread " + std::to_string(t.tid));
    }
  }
  measuring_ = true;
  return Status::Ok();
}

void PerfCollector::Resync() {
  for (ThreadEvents& t : threads_) {
    if (t.software) (void)t.software->Read(&t.last_software);
    for (size_t g = 0; g < t.hardware.size(); ++g) (void)t.hardware[g].Read(&t.last_hardware[g]);
  }
  needs_resync_ = false;
}

Result<std::vector<Sample>> PerfCollector::End() {
  if (!measuring_) return Internal("perf: End() without Begin()");
  measuring_ = false;
  const size_t g = current_group_;
  const size_t nsw = software_.size();
  const size_t nhw = hardware_.empty() ? 0 : hardware_[g].size();
  std::vector<double> sw_sum(nsw, 0), hw_sum(nhw, 0);
  std::vector<bool> sw_lost(nsw, false), hw_lost(nhw, false);
  uint64_t hw_enabled = 0, hw_running = 0;
  Status first_error;

  // Disable everything first so that every thread's window closes at the same moment.
  for (ThreadEvents& t : threads_) {
    if (!t.hardware.empty()) (void)t.hardware[g].Disable();
    if (t.software) (void)t.software->Disable();
  }
  for (ThreadEvents& t : threads_) {
    if (t.software) {
      PerfGroupCounts now;
      Status s = t.software->Read(&now);
      if (!s.ok()) {
        if (first_error.ok()) first_error = s;
        continue;
      }
      const uint64_t en = now.time_enabled - t.last_software.time_enabled;
      const uint64_t run = now.time_running - t.last_software.time_running;
      for (size_t i = 0; i < nsw; ++i) {
        double v = 0;
        if (Scaled(now.values[i] - t.last_software.values[i], en, run, &v)) {
          sw_sum[i] += v;
        } else {
          sw_lost[i] = true;
        }
      }
      t.last_software = std::move(now);
    }
    if (!t.hardware.empty()) {
      PerfGroupCounts now;
      Status s = t.hardware[g].Read(&now);
      if (!s.ok()) {
        if (first_error.ok()) first_error = s;
        continue;
      }
      PerfGroupCounts& last = t.last_hardware[g];
      const uint64_t en = now.time_enabled - last.time_enabled;
      const uint64_t run = now.time_running - last.time_running;
      hw_enabled += en;
      hw_running += run;
      for (size_t i = 0; i < nhw; ++i) {
        double v = 0;
        if (Scaled(now.values[i] - last.values[i], en, run, &v)) {
          hw_sum[i] += v;
        } else {
          hw_lost[i] = true;
        }
      }
      last = std::move(now);
    }
  }
  if (!first_error.ok()) {
    // A thread whose read failed kept its old baseline: re-read every baseline before the
    // next window rather than report this window's counts in it.
    needs_resync_ = true;
    return first_error.WithContext("perf: reading counters of process " + std::to_string(pid_));
  }

  std::vector<Sample> out;
  std::string lost;
  for (size_t i = 0; i < nsw; ++i) {
    if (sw_lost[i]) {
      lost += (lost.empty() ? "" : ", ") + software_[i].name;
    } else {
      out.push_back({"perf:" + software_[i].name, sw_sum[i], software_[i].unit});
    }
  }
  for (size_t i = 0; i < nhw; ++i) {
    if (hw_lost[i]) {
      lost += (lost.empty() ? "" : ", ") + hardware_[g][i].name;
    } else {
      out.push_back({"perf:" + hardware_[g][i].name, hw_sum[i], hardware_[g][i].unit});
    }
  }
  if (nhw > 0) {
    const double ratio = hw_enabled == 0 ? 1.0 : static_cast<double>(hw_running) / hw_enabled;
    out.push_back(
        {"perf:running_ratio", ratio, "ratio", SampleScope::kProcess, SampleKind::kGauge});
  }
  warnings_ = JoinRejected(rejected_);
  if (!lost.empty()) {
    warnings_ += (warnings_.empty() ? "" : "; ") + std::string("never scheduled on the PMU in ") +
                 "this window, left out: " + lost;
  }
  return out;
}

void PerfCollector::Close() {
  threads_.clear();
  software_.clear();
  hardware_.clear();
  hardware_groups_ = {};
  measuring_ = false;
  needs_resync_ = false;
  current_group_ = 0;
}

std::string PerfCollector::Describe() const {
  std::string d = "perf: pid " + std::to_string(pid_) + ", " + std::to_string(threads_.size()) +
                  " threads" + (options_.inherit ? " (+ inherited)" : "") + "; software:";
  for (const auto& s : software_) d += " " + s.name;
  if (!in_probes_.empty()) {
    d += "; in the iteration probes:";
    for (const auto& s : in_probes_) d += " " + s;
  }
  d += "; hardware groups: " +
       (hardware_groups_.groups.empty() ? std::string("none") : DescribeGroups(hardware_groups_));
  return d;
}

}  // namespace seqpoint::collectors
