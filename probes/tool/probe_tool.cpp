// See probe_tool.h.
#include "probes/tool/probe_tool.h"

#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "probes/iteration_probes.h"
#include "probes/discovery/proc_reader.h"
#include "probes/discovery/process_discovery.h"
#include "probes/tool/trace_output.h"

namespace seqpoint::probes {
namespace {

double NowS() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Attaches what discovery finds, detaches and closes the trace of what goes.
class ProbeSession : public DiscoveryListener {
 public:
  ProbeSession(const ProbeToolOptions& options, TraceOutput* output)
      : options_(options), output_(output) {}

  void set_probes(IterationProbes* probes) { probes_ = probes; }

  bool OnTargets(const ProcessTargets& targets) override {
    const int pid = targets.identity.pid;
    bool fresh = !probes_->IsAttached(pid);
    if (fresh) {
      output_->SetHeader(pid, {"seqpoint probe: pid " + std::to_string(pid) + " (" +
                               targets.identity.comm + ") " + targets.exe});
    }
    auto attached = probes_->AttachTargets(targets);
    if (!attached.ok()) {
      if (reported_.insert(pid).second) {
        std::fprintf(options_.log, "seqpoint probe: %s\n", attached.status().message().c_str());
      }
      return false;
    }
    if (*attached > 0) {
      std::fprintf(options_.log, "seqpoint probe: pid %d (%s): attached %s -> %s\n", pid,
                   targets.identity.comm.c_str(), probes_->Describe(pid).c_str(),
                   output_->PathFor(pid).c_str());
      if (options_.on_attach) options_.on_attach(pid);
    }
    ever_attached_.insert(pid);
    return true;
  }

  void OnGone(int pid, const std::optional<ExitStatus>& how) override {
    if (!probes_->IsAttached(pid)) return;
    probes_->DetachPid(pid);
    auto stats = probes_->stats();
    auto s = stats.per_pid.find(pid);
    output_->Close(pid, s == stats.per_pid.end() ? 0 : s->second.lost);
    if (how)
      std::fprintf(options_.log, "seqpoint probe: pid %d: %s\n", pid, how->Describe().c_str());
    // Gone for good, or a new image (exec) that discovery examines and may attach again.
    if (!Alive(pid)) gone_.insert(pid);
  }

  static bool Alive(int pid) {
    auto id = ReadProcessIdentity("/proc", pid);
    return id.ok() && !id->exited();
  }

  bool Gone(int pid) const { return gone_.count(pid) > 0; }
  bool EverAttached(int pid) const { return ever_attached_.count(pid) > 0; }

 private:
  const ProbeToolOptions& options_;
  TraceOutput* output_;
  IterationProbes* probes_ = nullptr;
  std::set<int> reported_;
  std::set<int> ever_attached_;
  std::set<int> gone_;
};

void PrintSummary(const ProbeToolOptions& options, const TraceOutput& output,
                  const IterationProbeStats& stats, const DiscoveryStats& discovery) {
  std::fprintf(options.log,
               "seqpoint probe: discovery saw %llu execs, %llu library loads (%d dynamic "
               "linkers hooked), %llu exits; examined %llu times; %llu process events lost\n",
               static_cast<unsigned long long>(discovery.execs),
               static_cast<unsigned long long>(discovery.library_loads), discovery.linkers_hooked,
               static_cast<unsigned long long>(discovery.exits),
               static_cast<unsigned long long>(discovery.examined),
               static_cast<unsigned long long>(discovery.lost));
  for (const std::string& e : discovery.linker_errors) {
    std::fprintf(options.log, "seqpoint probe: %s\n", e.c_str());
  }
  for (const TraceFileSummary& s : output.summaries()) {
    std::fprintf(options.log,
                 "seqpoint probe: %s: %llu iterations (%llu without time), %llu skipped, %llu "
                 "lost\n",
                 s.path.c_str(), static_cast<unsigned long long>(s.rows),
                 static_cast<unsigned long long>(s.rows_without_time),
                 static_cast<unsigned long long>(s.skipped),
                 static_cast<unsigned long long>(s.lost));
  }
  for (const auto& [pid, p] : stats.per_pid) {
    if (p.hits == 0) continue;
    std::fprintf(options.log, "seqpoint probe: pid %d: %llu probe hits for %llu iterations\n", pid,
                 static_cast<unsigned long long>(p.hits),
                 static_cast<unsigned long long>(p.iterations));
  }
  if (output.dropped() > 0) {
    std::fprintf(options.log,
                 "seqpoint probe: %llu iterations not written: their trace file could not be "
                 "created, or they came from a new image of a process traced to stdout (use "
                 "--out FILE)\n",
                 static_cast<unsigned long long>(output.dropped()));
  }
  if (stats.lost() > 0) {
    std::fprintf(options.log,
                 "seqpoint probe: %llu records lost in total: the ring buffer was full (the "
                 "traced processes fired faster than this tool could read)\n",
                 static_cast<unsigned long long>(stats.lost()));
  }
}

}  // namespace

Result<std::string> ResolveOutputPattern(const ProbeToolOptions& options) {
  std::string out = options.out;
  if (options.all) {
    if (out.empty()) out = "seqpoint-trace.{pid}.csv";
    if (out == "-") {
      return InvalidArgument(
          "--all writes one trace per process: give --out a path (\"{pid}\" "
          "in it is replaced by the process id)");
    }
    if (out.find("{pid}") == std::string::npos) {
      size_t slash = out.rfind('/');
      size_t dot = out.rfind('.');
      if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
        out += ".{pid}";
      } else {
        out.insert(dot, ".{pid}");
      }
    }
  } else if (out.empty()) {
    out = "-";
  }
  return out;
}

Status RunProbeTool(const ProbeToolOptions& options) {
  if ((options.pid > 0) == options.all) {
    return InvalidArgument("give exactly one of --pid PID or --all");
  }
  if (options.duration_s < 0) return InvalidArgument("--duration must be >= 0 seconds");
  auto pattern = ResolveOutputPattern(options);
  if (!pattern.ok()) return pattern.status();
  if (*pattern != "-") {  // fail now, not at the first iteration
    std::string dir =
        pattern->find('/') == std::string::npos ? "." : pattern->substr(0, pattern->rfind('/') + 1);
    if (access(dir.c_str(), W_OK) != 0) {
      return InvalidArgument("--out " + *pattern + ": directory " + dir + " is not writable (" +
                             std::strerror(errno) + "): create it or choose another path");
    }
  }

  TraceOutput output(*pattern);
  ProbeSession session(options, &output);
  IterationProbesOptions probe_options;
  probe_options.zero_code = options.zero_code;
  probe_options.max_seq_len = options.max_seq_len;
  auto probes = IterationProbes::Create(probe_options, &output);
  if (!probes.ok()) return probes.status();
  session.set_probes(probes->get());

  if (options.pid > 0) {  // a clear answer now rather than a silent wait
    TargetFinder finder("/proc", options.zero_code);
    auto targets = finder.Find(options.pid);
    if (!targets.ok()) return targets.status();
    if (targets->targets.empty() && !options.wait) {
      return (*probes)->AttachTargets(*targets).status();  // NotFound, saying why
    }
  }

  DiscoveryOptions discovery_options;
  discovery_options.zero_code = options.zero_code;
  discovery_options.only_pid = options.pid;
  auto discovery = ProcessDiscovery::Create(discovery_options, &session);
  if (!discovery.ok()) return discovery.status();
  SEQPOINT_RETURN_IF_ERROR((*discovery)->Start());
  if (options.pid > 0 && !(*probes)->IsAttached(options.pid)) {
    std::fprintf(options.log,
                 "seqpoint probe: waiting for pid %d to load the seqpoint provider "
                 "or a configured library\n",
                 options.pid);
  }
  if (options.on_ready) options.on_ready();

  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) return Internal(std::string("epoll_create1: ") + std::strerror(errno));
  for (int fd : {(*probes)->epoll_fd(), (*discovery)->epoll_fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev);
  }
  Status status;
  const double deadline = options.duration_s > 0 ? NowS() + options.duration_s : 0;
  double next_alive_check = 0;
  while (true) {
    if (options.stop && options.stop()) break;
    if (deadline > 0 && NowS() >= deadline) break;
    if (options.pid > 0 && session.Gone(options.pid)) break;
    if (options.pid > 0 && !(*probes)->IsAttached(options.pid) && NowS() >= next_alive_check) {
      next_alive_check = NowS() + 1;  // not attached (yet, or after an exec): is it still there?
      if (!ProbeSession::Alive(options.pid)) break;
    }
    epoll_event events[2];
    // 100 ms bounds how long a batched (not woken) record waits to be written.
    int n = epoll_wait(epoll, events, 2, 100);
    if (n < 0 && errno != EINTR) {
      status = Internal(std::string("epoll_wait: ") + std::strerror(errno));
      break;
    }
    auto d = (*discovery)->Poll(0);
    auto p = (*probes)->Poll(0);
    if (!d.ok() || !p.ok()) {
      status = d.ok() ? p.status() : d.status();
      break;
    }
    if (!output.error().ok()) break;
  }
  close(epoll);
  DiscoveryStats discovery_stats = (*discovery)->stats();
  discovery->reset();      // no more attaches
  (*probes)->DetachAll();  // delivers what is queued, flushes open iterations
  output.CloseAll((*probes)->stats());
  PrintSummary(options, output, (*probes)->stats(), discovery_stats);
  if (!output.error().ok()) return output.error();
  if (options.pid > 0 && !session.EverAttached(options.pid) && status.ok()) {
    return NotFound("pid " + std::to_string(options.pid) +
                    " never carried the seqpoint provider "
                    "or a configured library while probed");
  }
  return status;
}

}  // namespace seqpoint::probes
