// The live iteration source: the eBPF iteration probes (USDT provider `seqpoint`, zero-code
// uprobes) and process discovery of probes, driven from the daemon's io_context.
//
// Event loop: both ring buffers' epoll fds are watched by Asio (readable = a wakeup is pending),
// and an iteration wake-up polls discovery first: a process's announcement (OnProcessFound) must
// reach the runs before its first iteration records, which the runs drop as unannounced
// otherwise (a 2-rank gloo job lost 19 of 120 steps without it). Discovery is also polled on its
// own timer, every probes.discover_interval_ms, and every 100 ms while a pid
// waits to be re-examined (it delays re-examining a pid that just exec'd, e.g. bash exec'ing the
// trainer, and relies on being polled to catch up); and a timer
// (probes.poll_interval_ms) polls the iteration ring anyway, because records of iterations nobody
// asked hooks for are batched in the kernel and only wake the consumer every ~4000 records
// (iteration_probes.h): the timer bounds how stale the cheap per-iteration data can be. Discovery's
// periodic rescan and liveness check also run from that Poll.
//
// Begin hooks, per process: the probes run in kWanted mode. While a process's run still has
// budget for SeqPoints, every SL that process has shown is marked wanted for all its future
// iterations (WantSeqLen(pid, sl, all)), so its begins reach the selector (and the collectors)
// at once; an SL never seen before gets armed when its first end record arrives. When the run
// has spent its budget the SLs are disarmed (the probe counters 2 s later, see Disarm). Those
// processes, and every other process on the node, then cost only batched end records: the
// cheapest mode.
//
// Zero-code probes (probes.zero_code, probes.zero_code_custom; config_zero_code.h): discovery
// attaches them to processes that map their libraries (at start by the /proc scan, later at
// exec and dlopen). A process found that way is announced to the daemon (and gets a run) only
// at its first iteration: every PyTorch job maps libcudnn, RNN or not. Its iterations then flow
// like USDT ones; its begin hook fires at the iteration's first SL call (the BPF side cannot
// know an iteration started before that), so the collectors of a measured iteration cover the
// first SL call to the boundary, while time_ns spans boundary to boundary: `seqpoint show` and
// `status` say so per process. A reload applies a changed probe set to processes attached from
// then on (and rescans /proc); attached ones keep theirs until they exit or exec.
//
// Crashes: the exit tracepoint carries the wait status (exit code, fatal signal, core dump) the
// parent reaps; a non-zero code or a signal marks the run crashed. A process that exits with an
// iteration open (the probes flag it SP_FLAG_EXITED) is crashed too, whatever its status. A
// process whose exit event was lost (found gone by the liveness check, or by the daemon's idle
// check: ProcessesGone) gets the status and exit time the kernel recorded
// (probes/discovery/process_discovery.h), and processes end in the order they really ended;
// only one with no record has no status, and the log says its place in that order is unknown. Not
// so for zero-code: SL calls after the last boundary (evaluation, checkpointing) look like an open
// iteration at any exit, so there the exit status alone decides. Every exit path delivers the
// process's queued records before its exit (OnGone).
#include <time.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <set>

#include "agent/config/config_zero_code.h"
#include "agent/config/log.h"
#include "agent/source/ebpf_source_sync.h"
#include "agent/source/live_source.h"
#include "agent/source/probe_counter_events.h"
#include "agent/source/run_key.h"
#include "probes/collectives/collective_probes.h"
#include "probes/discovery/process_discovery.h"
#include "probes/iteration_probes.h"

namespace seqpoint::daemon {
namespace {

namespace asio = boost::asio;

class EbpfSource : public IterationSource, probes::ProbeEventSink, probes::DiscoveryListener {
 public:
  EbpfSource(asio::io_context& io, int64_t poll_ms)
      : io_(io), timer_(io), discovery_timer_(io), poll_ms_(poll_ms) {}
  ~EbpfSource() override {
    *alive_ = false;
    Stop();
  }

  Status Init(const DaemonConfig& config) {
    probes::IterationProbesOptions po;
    po.ring_buffer_bytes = static_cast<uint32_t>(config.probes_ring_buffer_kib) * 1024;
    po.proc_root = config.proc_root;
    auto zero_code = ResolveZeroCodeProbes(config);
    if (!zero_code.ok()) return zero_code.status();
    po.zero_code = zero_code_ = *zero_code;
    SEQPOINT_RETURN_IF_ERROR(SetGrouping(config));
    probe_events_ = ProbeCounterEventsFor(config.collectors.perf);
    counters_config_why_ = ProbeCountersConfigWhyNot(config.collectors.perf);
    discover_ms_ = config.probes_discover_interval_ms;
    po.pin_dir = config.probes_pin_dir;
    po.pin_instance = config.state_dir;
    auto probes = probes::IterationProbes::Create(po, this);
    if (!probes.ok() && !po.pin_dir.empty()) {
      // Pinning only bridges restarts: without it the probes work as they always did.
      SEQPOINT_LOG(kWarn, "probes not pinned in " + po.pin_dir +
                              ", so a restart of seqpointd misses the iterations of its gap: " +
                              probes.status().message());
      po.pin_dir.clear();
      probes = probes::IterationProbes::Create(po, this);
    }
    if (!probes.ok()) return probes.status();
    probes_ = std::move(*probes);
    // Collective arrivals name straggling ranks (agent/fleet/straggler.h); without them the
    // agent runs as before, and says why once.
    if (auto c = probes::CollectiveProbes::Create({}); c.ok()) {
      collectives_ = std::move(*c);
    } else {
      SEQPOINT_LOG(
          kInfo, "collective probes off (straggling ranks are not named): " + c.status().message());
    }
    // CUDA/HIP sync returns close measured windows' GPU values (ebpf_source_sync.h); without
    // them those values are flagged and left out, and the agent says why once.
    syncs_ = std::make_unique<GpuSyncWatch>(config.proc_root);
    if (!syncs_->loaded()) {
      SEQPOINT_LOG(kInfo,
                   "GPU values of measured windows will be left out (no window is closed "
                   "by a sync): " +
                       syncs_->why_not_loaded());
    }
    for (const probes::SweptInstance& s : probes_->swept_orphans()) {
      SEQPOINT_LOG(kInfo, "removed the pinned probes of the seqpointd with state directory " +
                              s.state_dir + " (" + std::to_string(s.pins) + " pins): " + s.why);
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    started_ns_ =
        static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
    TakeOverCarried();
    probes_->SetHookMode(probes::HookMode::kWanted);
    probes::DiscoveryOptions dopt;
    dopt.proc_root = config.proc_root;
    dopt.zero_code = zero_code_;
    auto discovery = probes::ProcessDiscovery::Create(dopt, this);
    if (!discovery.ok()) return discovery.status();
    discovery_ = std::move(*discovery);
    return Status::Ok();
  }

  std::string_view name() const override { return "ebpf"; }

  Status Start(daemon::IterationSink* sink) override {
    sink_ = sink;
    CatchUp();
    SEQPOINT_RETURN_IF_ERROR(discovery_->Start());  // scans running processes: OnTargets
    Watch(probes_->epoll_fd(), probe_fd_);
    Watch(discovery_->epoll_fd(), discovery_fd_);
    Tick();
    DiscoveryTick();
    return Status::Ok();
  }

  void Stop() override {
    stopped_ = true;
    timer_.cancel();
    discovery_timer_.cancel();
    boost::system::error_code ec;
    if (probe_fd_) probe_fd_->close(ec);
    if (discovery_fd_) discovery_fd_->close(ec);
    if (probes_ && probes_->pinned()) {
      probes_->Release();  // attached and counting until the next daemon adopts them
    } else if (probes_) {
      probes_->DetachAll();
    }
  }

  void OnStateSaved() override {
    if (!probes_ || !probes_->pinned()) return;
    probes_->CommitDelivered();
    save_requested_ = false;
  }

  std::vector<ProcessInfo> CarriedOver() const override {
    std::vector<ProcessInfo> out;
    for (const auto& c : probes_->carried_over()) {
      out.push_back(ProcessInfo{c.identity.pid, c.identity.start_time, c.identity.comm, ""});
    }
    return out;
  }

  // Hooks cover every SL of the process from its next iteration on: a rare SL's first (maybe
  // only) occurrence must be measurable too, or the tail bins would never get a SeqPoint.
  void SetBeginHooks(pid_t pid, bool wanted) override {
    if (!wanted) {
      Disarm(pid);
      return;
    }
    if (!armed_.insert(pid).second) return;
    // Counters first: a begin hooked before they count (arming attaches a tracepoint, 6-14 ms)
    // would measure its iteration's time with no counter and no flag saying why.
    ArmCounters(pid);
    Status st = probes_->WantSeqLen(static_cast<int>(pid), SP_ANY_SEQ_LEN, 0xffffffffu);
    if (!st.ok()) SEQPOINT_LOG(kWarn, "begin hooks: " + st.message());
  }

  std::vector<std::string> ProbeCounterEvents(pid_t pid) const override {
    std::vector<std::string> names;
    if (const auto* events = probes_->CounterEvents(static_cast<int>(pid))) {
      for (const auto& e : *events) names.push_back(e.name);
    }
    return names;
  }

  Status Reconfigure(const DaemonConfig& config) override {
    auto zero_code = ResolveZeroCodeProbes(config);
    if (!zero_code.ok()) return zero_code.status();
    SEQPOINT_RETURN_IF_ERROR(SetGrouping(config));
    probe_events_ = ProbeCounterEventsFor(config.collectors.perf);  // for processes armed next
    counters_config_why_ = ProbeCountersConfigWhyNot(config.collectors.perf);
    discover_ms_ = config.probes_discover_interval_ms;  // from the next tick
    if (*zero_code == zero_code_) return Status::Ok();
    SEQPOINT_RETURN_IF_ERROR(probes_->SetZeroCodeProbes(*zero_code));
    zero_code_ = std::move(*zero_code);
    discovery_->SetZeroCodeProbes(zero_code_);  // rescans /proc: OnTargets
    SEQPOINT_LOG(kInfo, "zero-code probes now [" + ZeroCodeNames(zero_code_) +
                            "] for processes attached from now on; those attached keep theirs");
    return Status::Ok();
  }

  std::vector<AttachedProcess> Attached() const override {
    std::vector<AttachedProcess> out;
    for (int pid : probes_->AttachedPids()) {
      AttachedProcess a;
      a.pid = pid;
      auto c = comm_.find(pid);
      if (c != comm_.end()) a.comm = c->second;
      a.announced = known_.count(pid) > 0;
      a.where = probes_->Describe(pid);
      if (syncs_) a.where += "; " + syncs_->Describe(pid);
      if (const probes::ZeroCodeProbe* z = probes_->AttachedZeroCodeProbe(pid)) {
        a.probe = "zero-code " + z->name;
        a.detail = probes::DescribeZeroCodeProbe(*z) +
                   "; a measured iteration's collectors start at its first SL call, its time_ns "
                   "at the previous boundary";
      } else {
        a.probe = "usdt";
      }
      out.push_back(std::move(a));
    }
    return out;
  }

  SourceStats stats() const override {
    SourceStats s;
    probes::IterationProbeStats p = probes_->totals();  // on every scrape: no per-pid copy
    s.events = p.received;
    s.lost = p.lost() + discovery_->stats().lost;
    s.anomalies = p.kernel[SP_STAT_SL_ZERO] + p.kernel[SP_STAT_SL_HUGE] +
                  p.kernel[SP_STAT_ABANDONED] + p.kernel[SP_STAT_NO_BEGIN] +
                  p.kernel[SP_STAT_DUPLICATE] + p.kernel[SP_STAT_INFLIGHT_FULL] + p.malformed;
    s.processes = probes_->AttachedPids().size();
    size_t zero_code = 0;
    for (int pid : probes_->AttachedPids())
      zero_code += probes_->AttachedZeroCodeProbe(pid) != nullptr;
    s.description =
        "eBPF probes: " + std::to_string(s.processes) + " processes attached (" +
        std::to_string(zero_code) + " through zero-code probes); zero-code probes [" +
        ZeroCodeNames(zero_code_) + "]" +
        (probes_->pinned() ? "; pinned across restarts in " + probes_->pin_generation_dir()
                           : "; not pinned: a restart misses its gap");
    s.counters = CounterPath(p);
    return s;
  }

  // Which counter path is in force for the processes armed from now on, and why.
  ProbeCounterPathStats CounterPath(const probes::IterationProbeStats& p) const {
    ProbeCounterPathStats c;
    c.windows = p.kernel[SP_STAT_COUNTER_WINDOWS];
    c.flagged = p.kernel[SP_STAT_COUNTER_FLAGGED];
    c.implausible = p.kernel[SP_STAT_COUNTER_IMPLAUSIBLE];
    c.read_failures = p.kernel[SP_STAT_COUNTER_READ_FAIL];
    c.steal_subtracted = p.kernel[SP_STAT_COUNTER_STEAL];
    c.steal_flagged = p.kernel[SP_STAT_COUNTER_STOLEN];
    c.steal_stale = p.kernel[SP_STAT_COUNTER_STEAL_STALE];
    c.arm_failures = arm_failures_;
    if (!counters_config_why_.empty()) {
      c.path =
          counters_config_why_ == "collectors.perf is off" ? "none" : "user-space perf collector";
      c.why = counters_config_why_;
    } else if (!probes_->counters_why_not().empty()) {
      c.path = "user-space perf collector";
      c.why = probes_->counters_why_not();
    } else if (!last_arm_error_.empty()) {
      // The kernel path loaded but the last process could not be armed (an attach error).
      c.path = "user-space perf collector";
      c.why = last_arm_error_;
    } else {
      c.path = "in-kernel sched_switch counting";
      c.steal_source = probes_->steal_source();
      c.steal_why = probes_->steal_source_why();
    }
    return c;
  }

  // Every library load of a watched process is reported when discovery hooks the dynamic
  // linker: the daemon then scans only the processes whose libraries changed for profilers.
  bool reports_library_loads() const override {
    return discovery_ && discovery_->stats().linkers_hooked > 0;
  }

  Result<collectors::SyncReading> GpuSyncMark(pid_t pid) override {
    if (!syncs_) return Unavailable("the CUDA sync probes are not set up");
    if (comm_.count(static_cast<int>(pid)) == 0) {
      return NotFound("pid " + std::to_string(pid) + " is not attached");
    }
    return syncs_->Mark(static_cast<int>(pid));
  }

  bool CallAfter(int64_t delay_ns, std::function<void()> fn) override {
    if (stopped_) return false;
    auto timer = std::make_shared<asio::steady_timer>(io_);
    timer->expires_after(std::chrono::nanoseconds(delay_ns));
    std::weak_ptr<bool> alive = alive_;
    timer->async_wait([this, timer, alive, fn = std::move(fn)](boost::system::error_code ec) {
      auto a = alive.lock();
      if (ec || !a || !*a || stopped_) return;
      fn();
    });
    return true;
  }

  // Their exit events first, when queued; then discovery reports every exit the kernel
  // recorded (events lost), in the order they ended, and the rest as unknown in that order.
  // A pid discovery does not watch is ended here without a status. Either way OnGone delivers
  // its queued records before the exit.
  void ProcessesGone(const std::vector<pid_t>& pids) override {
    if (stopped_) return;
    std::vector<int> ours;
    for (pid_t pid : pids) {
      if (known_.count(pid) != 0) ours.push_back(pid);
    }
    if (ours.empty()) return;
    PollDiscovery();
    discovery_->ReportGone(ours);
    std::vector<int> left;
    for (int pid : ours) {
      if (known_.count(pid) != 0) left.push_back(pid);
    }
    if (left.size() > 1) LogOrderUnknown(left, "no exit reported by discovery");
    for (int pid : left) OnGone(pid, std::nullopt);
  }

  // probes::DiscoveryListener
  void OnLibrariesChanged(int pid) override {
    if (known_.count(pid) != 0) AttachCollectives(pid);
    AttachSyncs(pid);
    if (sink_ != nullptr && known_.count(pid) != 0) sink_->OnLibrariesChanged(pid);
  }
  bool OnTargets(const probes::ProcessTargets& targets) override {
    // runs.only_key: a private daemon leaves everyone else's jobs alone (no probe attached).
    if (!only_key_.empty() &&
        RunKeyFor(group_by_, proc_root_, targets.identity.pid, targets.identity.start_time)
                .rfind(only_key_, 0) != 0) {
      return false;
    }
    auto attached = probes_->AttachTargets(targets);
    if (!attached.ok()) {
      SEQPOINT_LOG(kWarn, "cannot attach to pid " + std::to_string(targets.identity.pid) + ": " +
                              attached.status().message());
      return false;
    }
    const int pid = targets.identity.pid;
    comm_[pid] = targets.identity.comm;
    AttachCollectives(pid);
    AttachSyncs(pid);
    if (known_.count(pid) > 0) return true;
    ProcessInfo info{pid, targets.identity.start_time, targets.identity.comm, ""};
    if (probes_->AttachedZeroCodeProbe(pid) != nullptr) {  // announced at its first iteration
      // Its run key is read now, while it runs: the first iteration's record may be delivered
      // only as it exits (records are batched), when /proc/PID/environ is empty.
      info.run_key = RunKeyFor(group_by_, proc_root_, pid, info.start_time);
      if (unannounced_.emplace(pid, info).second) {
        SEQPOINT_LOG(kInfo, "attached to pid " + std::to_string(pid) + " (" +
                                targets.identity.comm + "): " + probes_->Describe(pid) +
                                "; its run starts at its first iteration");
      }
      return true;
    }
    unannounced_.erase(pid);  // it loaded the provider: USDT only from now on
    Announce(info);
    return true;
  }

  void OnExitOrderUnknown(const std::vector<int>& pids) override {
    LogOrderUnknown(pids,
                    "exit events lost and no exit recorded by the kernel (its record full, or "
                    "the process ended as it was being watched)");
  }

  void OnGone(int pid, const std::optional<probes::ExitStatus>& how) override {
    if (how && how->from_record && known_.count(pid) != 0) {
      const uint64_t lost = discovery_->stats().lost;
      SEQPOINT_LOG(kInfo, "pid " + std::to_string(pid) + ": " +
                              (lost > 0 ? "its exit event was lost (discovery's ring buffer "
                                          "was full: " +
                                              std::to_string(lost) + " events lost so far)"
                                        : "its exit event is not read yet") +
                              "; ended as the kernel recorded it: " + how->Describe() +
                              ", in the order the processes ended");
    }
    probes_->DetachPid(pid);  // delivers queued records, open iterations flagged EXITED
    if (collectives_) collectives_->DetachPid(pid);
    if (syncs_) syncs_->Detach(pid);
    unannounced_.erase(pid);
    comm_.erase(pid);
    if (known_.erase(pid) == 0 || sink_ == nullptr) return;
    ProcessExit x;
    x.pid = pid;
    x.mid_iteration = exited_mid_.erase(pid) > 0;
    if (how) {
      x.exit_code = how->exit_code;
      x.signal = how->signal;
      x.core_dumped = how->core_dumped;
    }
    Disarm(pid, /*release_now=*/true);
    sink_->OnProcessExit(x);
  }

  // probes::ProbeEventSink
  void OnBegin(const probes::IterationEvent& e) override {
    AnnounceAtFirstIteration(e);
    if (catching_up_) {  // recorded while no daemon ran: too late for any collector
      caught_up_begins_.insert({static_cast<int>(e.pid), e.iter});
      return;
    }
    if (sink_ == nullptr || !e.valid_seq_len()) return;
    sink_->OnIterationBegin(IterationBegin{static_cast<pid_t>(e.pid), static_cast<pid_t>(e.tid),
                                           e.iter, e.seq_len, e.batch, e.tokens, e.begin_ns});
  }

  void OnEnd(const probes::IterationEvent& e) override {
    AnnounceAtFirstIteration(e);
    if ((e.flags & SP_FLAG_EXITED) && !(e.flags & SP_FLAG_ZERO_CODE)) {
      exited_mid_.insert(static_cast<int>(e.pid));
    }
    if (sink_ == nullptr || !e.valid_seq_len()) return;
    if (e.flags & SP_FLAG_EXITED) return;  // never ended: no iteration to count
    if (BegunBeforeRestart(e)) return;
    // Its begin came before the probe was attached (a restart, a late attach): its SL is not
    // known, so it is not an iteration to bin. The run counts its index as unobserved.
    if (e.flags & SP_FLAG_NO_BEGIN) return;
    // A window whose every counter the probes left out still reaches the manager: its flags
    // are what seqpoint_collector_windows_total{where="probe_flagged"} counts.
    if (e.counter_mask != 0 || e.counter_flags != 0) {
      if (const auto* events = probes_->CounterEvents(static_cast<int>(e.pid))) {
        sink_->OnIterationCounters(CountersOf(e, *events));
      }
    }
    IterationEnd end{static_cast<pid_t>(e.pid),
                     static_cast<pid_t>(e.tid),
                     e.iter,
                     e.seq_len,
                     e.batch,
                     e.tokens,
                     e.complete() ? e.begin_ns : 0,
                     e.end_ns,
                     (e.flags & SP_FLAG_HOOKED) != 0 && !catching_up_};
    sink_->OnIterationEnd(end);
  }

 private:
  Status SetGrouping(const DaemonConfig& config) {
    auto group_by = ParseRunGroupBy(config.run_group_by);
    if (!group_by.ok()) return group_by.status().WithContext("runs.group_by");
    group_by_ = *group_by;
    proc_root_ = config.proc_root;
    only_key_ = config.run_only_key;
    return Status::Ok();
  }
  void Announce(const ProcessInfo& info) {
    if (!known_.insert(info.pid).second || sink_ == nullptr) return;
    SEQPOINT_LOG(kInfo, "attached to pid " + std::to_string(info.pid) + " (" + info.comm +
                            "): " + probes_->Describe(info.pid));
    sink_->OnProcessFound(info);
  }
  void AnnounceAtFirstIteration(const probes::IterationEvent& e) {
    if (e.flags & SP_FLAG_EXITED) return;  // never ended: not an iteration
    auto it = unannounced_.find(static_cast<int>(e.pid));
    if (it == unannounced_.end()) return;
    ProcessInfo info = it->second;
    unannounced_.erase(it);
    Announce(info);
  }
  static void LogOrderUnknown(const std::vector<int>& pids, const std::string& why) {
    std::string list;
    for (int pid : pids) list += (list.empty() ? "" : ", ") + std::to_string(pid);
    SEQPOINT_LOG(kWarn, "pids " + list + " were found gone with " + why +
                            ": the order in which they ended, among themselves and the "
                            "processes ended with them, is not known; they are ended now in "
                            "pid order, without their exit status");
  }
  static std::string ZeroCodeNames(const std::vector<probes::ZeroCodeProbe>& probes) {
    std::string out;
    for (const auto& p : probes) out += (out.empty() ? "" : ", ") + p.name;
    return out;
  }
  // Hooks off at once. The probe counters are released only once the hooks have stayed off for
  // kCounterLingerNs (the budget is spent, or its next slot is far), or at once when the process
  // is gone: disarming the last process detaches the sched_switch program, and attaching it again
  // blocks the loop for 6-14 ms (tracepoint registration), so releasing them between the dense
  // slots of a young run cost a 10,000 it/s loop ~140 attaches a second and held woken records
  // ~0.3 s (bench/cost/README.md).
  void Disarm(pid_t pid, bool release_now = false) {
    const bool was_armed = armed_.erase(pid) > 0;
    if (was_armed) (void)probes_->WantSeqLen(static_cast<int>(pid), SP_ANY_SEQ_LEN, 0);
    if (release_now) {
      counter_gen_.erase(pid);
      probes_->DisarmCounters(static_cast<int>(pid));
      return;
    }
    // Called on every iteration while no slot is near: one release timer per disarm, not per call.
    if (!was_armed) return;
    const uint64_t gen = ++counter_gen_[pid];
    CallAfter(kCounterLingerNs, [this, pid, gen] {
      auto it = counter_gen_.find(pid);
      if (it == counter_gen_.end() || it->second != gen || armed_.count(pid) > 0) return;
      counter_gen_.erase(it);
      probes_->DisarmCounters(static_cast<int>(pid));  // no counting once the budget is spent
    });
  }
  // The probes count the perf software events of the process's hooked iterations themselves;
  // where they cannot, the perf collector counts them in user space (said once per process).
  void ArmCounters(pid_t pid) {
    if (probe_events_.empty()) return;
    Status st = probes_->ArmCounters(static_cast<int>(pid), probe_events_);
    if (st.ok()) {
      last_arm_error_.clear();
    } else if (st.code() != ErrorCode::kNotFound) {  // a process gone meanwhile says nothing
      ++arm_failures_;
      last_arm_error_ = st.message();
    }
    if (!st.ok()) {
      SEQPOINT_LOG(kInfo, "pid " + std::to_string(pid) +
                              ": perf counters in user space from the "
                              "begin wake-up, not in the probes: " +
                              st.message());
    }
  }
  // Asio watches a duplicate of the fd, so closing the descriptor leaves libbpf's own intact.
  void Watch(int fd, std::unique_ptr<asio::posix::stream_descriptor>& desc) {
    if (fd < 0) return;
    desc = std::make_unique<asio::posix::stream_descriptor>(io_, dup(fd));
    Arm(desc.get());
  }
  void Arm(asio::posix::stream_descriptor* desc) {
    std::weak_ptr<bool> alive = alive_;
    desc->async_wait(asio::posix::stream_descriptor::wait_read,
                     [this, alive, desc](boost::system::error_code ec) {
                       auto a = alive.lock();
                       if (ec || !a || !*a || stopped_) return;
                       if (desc == discovery_fd_.get()) {
                         PollDiscovery();
                         // A pid to re-examine soon: the slow tick would leave it waiting.
                         if (discovery_->has_pending() && !discovery_fast_) DiscoveryTick();
                       } else {
                         PollAll();
                       }
                       Arm(desc);
                     });
  }
  void Tick() {
    std::weak_ptr<bool> alive = alive_;
    timer_.expires_after(std::chrono::milliseconds(poll_ms_));
    timer_.async_wait([this, alive](boost::system::error_code ec) {
      auto a = alive.lock();
      if (ec || !a || !*a || stopped_) return;
      PollAll();
      Tick();
    });
  }
  void DiscoveryTick() {
    std::weak_ptr<bool> alive = alive_;
    discovery_fast_ = discovery_->has_pending();
    // Re-arming cancels a pending wait: its handler sees operation_aborted and returns.
    discovery_timer_.expires_after(std::chrono::milliseconds(discovery_fast_ ? 100 : discover_ms_));
    discovery_timer_.async_wait([this, alive](boost::system::error_code ec) {
      auto a = alive.lock();
      if (ec || !a || !*a || stopped_) return;
      PollDiscovery();
      DiscoveryTick();
    });
  }
  // Pinned probes (probes.pin_dir) a previous daemon left: its processes are ours now. Their
  // hooks may still be armed in the kernel, so they count as armed until disarmed.
  void TakeOverCarried() {
    size_t gone = 0;
    for (const auto& c : probes_->carried_over()) {
      const int pid = c.identity.pid;
      comm_[pid] = c.identity.comm;
      known_.insert(pid);  // the daemon's RunManager::Resume finds their runs (CarriedOver)
      carried_.insert(pid);
      armed_.insert(pid);
      if (!c.alive) {
        gone_carried_.push_back(pid);
        ++gone;
      }
    }
    if (!probes_->carried_over().empty()) {
      SEQPOINT_LOG(kInfo, "adopted the pinned probes of " +
                              std::to_string(probes_->carried_over().size()) +
                              " processes from the previous seqpointd (" + std::to_string(gone) +
                              " gone since), in " + probes_->pin_generation_dir());
    }
  }
  // A hooked iteration of a carried process that began before this daemon started, and whose
  // begin record it was not given: the previous daemon was, and counted the iteration then (a
  // begin feeds the selector) and saved it before it let the record go. Its end would count it
  // twice; it is left out (its time too: one iteration).
  bool BegunBeforeRestart(const probes::IterationEvent& e) {
    if (!(e.flags & SP_FLAG_HOOKED) || e.begin_ns == 0 || e.begin_ns >= started_ns_) return false;
    if (carried_.count(static_cast<int>(e.pid)) == 0) return false;
    return caught_up_begins_.erase({static_cast<int>(e.pid), e.iter}) == 0;
  }
  // Delivers what the pinned probes recorded while no daemon ran, then reports the carried
  // processes that are gone since (their runs close with those iterations in).
  void CatchUp() {
    catching_up_ = true;
    if (auto r = probes_->Poll(0); !r.ok()) {
      SEQPOINT_LOG(kWarn, "iteration probes: " + r.status().message());
    }
    catching_up_ = false;
    for (int pid : gone_carried_) OnGone(pid, std::nullopt);
    gone_carried_.clear();
  }
  // Pinned, delivered records stay in the kernel until saved: past a quarter of the ring, the
  // daemon is asked to save now rather than at its next flush.
  void RequestSaveIfBacklogged() {
    if (!probes_->pinned() || save_requested_ || !save_request_) return;
    if (probes_->uncommitted_bytes() <= probes_->ring_bytes() / 4) return;
    save_requested_ = true;
    asio::post(io_, save_request_);
  }
  void PollDiscovery() {
    if (auto r = discovery_->Poll(0); !r.ok()) {
      SEQPOINT_LOG(kWarn, "process discovery: " + r.status().message());
    }
  }
  // The collective functions a process maps (a process with none is no fault: it does not
  // communicate, or not yet).
  void AttachCollectives(int pid) {
    if (!collectives_) return;
    if (auto n = collectives_->AttachPid(pid);
        !n.ok() && n.status().code() != ErrorCode::kNotFound) {
      SEQPOINT_LOG(kWarn,
                   "collective probes, pid " + std::to_string(pid) + ": " + n.status().message());
    }
  }
  // The CUDA/HIP sync functions a process maps (one with none is no fault: not a GPU process, or
  // not yet; GpuSyncMark looks again).
  void AttachSyncs(int pid) {
    if (syncs_ && syncs_->loaded()) (void)syncs_->Attach(pid);
  }
  void PollAll() {
    PollDiscovery();  // announcements before the records of the pids they announce
    if (auto r = probes_->Poll(0); !r.ok()) {
      SEQPOINT_LOG(kWarn, "iteration probes: " + r.status().message());
    }
    if (collectives_ && sink_ != nullptr) {
      auto r = collectives_->Poll(0, [this](const probes::CollectiveArrival& a) {
        sink_->OnCollectiveArrival(a.pid, a.ts_ns);
      });
      if (!r.ok()) SEQPOINT_LOG(kWarn, "collective probes: " + r.status().message());
    }
    RequestSaveIfBacklogged();
  }

  asio::io_context& io_;
  asio::steady_timer timer_;
  asio::steady_timer discovery_timer_;
  int64_t poll_ms_;
  int64_t discover_ms_ = 2000;   // probes.discover_interval_ms
  bool discovery_fast_ = false;  // the discovery timer is at its 100 ms re-examination cadence
  std::unique_ptr<probes::IterationProbes> probes_;
  std::unique_ptr<probes::CollectiveProbes> collectives_;  // null: off (logged why)
  std::unique_ptr<GpuSyncWatch> syncs_;                    // says why when not loaded
  std::unique_ptr<probes::ProcessDiscovery> discovery_;
  std::unique_ptr<asio::posix::stream_descriptor> probe_fd_, discovery_fd_;
  daemon::IterationSink* sink_ = nullptr;
  std::set<pid_t> armed_;                  // processes whose every iteration gets begin hooks
  std::map<pid_t, uint64_t> counter_gen_;  // per disarmed process: which release timer is current
  static constexpr int64_t kCounterLingerNs = 2'000'000'000;
  std::set<int> known_;                           // announced to the sink (OnProcessFound)
  std::map<int, ProcessInfo> unannounced_;        // zero-code processes before their 1st iteration
  std::map<int, std::string> comm_;               // of every attached process
  std::vector<probes::ZeroCodeProbe> zero_code_;  // the configured set, in priority order
  std::vector<probes::ProbeCounterEvent> probe_events_;  // counted in the probes (may be none)
  std::string counters_config_why_;  // why the config gives the probes no event ("" if it does)
  std::string last_arm_error_;       // the last ArmCounters failure ("" after a success)
  uint64_t arm_failures_ = 0;
  RunGroupBy group_by_;  // runs.group_by, for unannounced processes
  std::string proc_root_;
  std::string only_key_;  // runs.only_key
  std::set<int> exited_mid_;
  std::vector<int> gone_carried_;  // pinned processes of the previous daemon that are gone
  bool catching_up_ = false;       // delivering what was recorded while no daemon ran
  std::set<int> carried_;          // processes the previous daemon left pinned
  std::set<std::pair<int, uint64_t>> caught_up_begins_;  // hooked begins given at catch-up
  uint64_t started_ns_ = 0;  // CLOCK_MONOTONIC when the probes were taken over
  bool save_requested_ = false;
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

Result<std::pair<std::string, int>> RemoveProbePins(const DaemonConfig& config) {
  if (config.probes_pin_dir.empty()) return std::make_pair(std::string(), 0);
  auto removed = probes::IterationProbes::RemovePins(config.probes_pin_dir, config.state_dir);
  if (!removed.ok()) return removed.status();
  return std::make_pair(probes::InstancePinDir(config.probes_pin_dir, config.state_dir), *removed);
}

Result<std::unique_ptr<IterationSource>> MakeLiveSource(asio::io_context& io,
                                                        const DaemonConfig& config) {
  auto src = std::make_unique<EbpfSource>(io, config.probes_poll_interval_ms);
  Status st = src->Init(config);
  if (!st.ok()) return st;
  return std::unique_ptr<IterationSource>(std::move(src));
}

}  // namespace seqpoint::daemon
