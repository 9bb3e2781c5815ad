// The live iteration source: the eBPF iteration probes (USDT provider `seqpoint`, zero-code
// uprobes) and process discovery of collectors/ebpf, driven from the daemon's io_context.
//
// Event loop: both ring buffers' epoll fds are watched by Asio (readable = a wakeup is pending);
// discovery is also polled every 100 ms (it delays re-examining a pid that just exec'd, e.g.
// bash exec'ing the trainer, and relies on being polled to catch up), and a timer
// (probes.poll_interval_ms) polls the iteration ring anyway, because records of iterations nobody
// asked hooks for are batched in the kernel and only wake the consumer every ~4000 records
// (iteration_probes.h): the timer bounds how stale the cheap per-iteration data can be. Discovery's
// periodic rescan and liveness check also run from that Poll.
//
// Begin hooks, per process: the probes run in kWanted mode. While a process's run still has
// budget for SeqPoints, every SL that process has shown is marked wanted for all its future
// iterations (WantSeqLen(pid, sl, all)), so its begins reach the selector (and the collectors)
// at once; an SL never seen before gets armed when its first end record arrives. When the run
// has spent its budget the SLs are disarmed. Those processes, and every other process on the
// node, then cost only batched end records: the cheapest mode.
//
// Crashes: the exit tracepoint carries no exit status; a process that exits with an iteration
// open (the probes flag it SP_FLAG_EXITED) is reported as crashed mid-iteration.
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <set>

#include "agent/daemon/log.h"
#include "agent/daemon/source_factory.h"
#include "collectors/ebpf/iteration_probes.h"
#include "collectors/ebpf/process_discovery.h"

namespace seqpoint::daemon {
namespace {

namespace asio = boost::asio;

class EbpfSource : public IterationSource, ebpf::IterationSink, ebpf::DiscoveryListener {
 public:
  EbpfSource(asio::io_context& io, int64_t poll_ms)
      : io_(io), timer_(io), discovery_timer_(io), poll_ms_(poll_ms) {}
  ~EbpfSource() override {
    *alive_ = false;
    Stop();
  }

  Status Init(const DaemonConfig& config) {
    ebpf::IterationProbesOptions po;
    po.ring_buffer_bytes = static_cast<uint32_t>(config.probes_ring_buffer_kib) * 1024;
    po.proc_root = config.proc_root;
    auto probes = ebpf::IterationProbes::Create(po, this);
    if (!probes.ok()) return probes.status();
    probes_ = std::move(*probes);
    probes_->SetHookMode(ebpf::HookMode::kWanted);
    ebpf::DiscoveryOptions dopt;
    dopt.proc_root = config.proc_root;
    auto discovery = ebpf::ProcessDiscovery::Create(dopt, this);
    if (!discovery.ok()) return discovery.status();
    discovery_ = std::move(*discovery);
    return Status::Ok();
  }

  std::string_view name() const override { return "ebpf"; }

  Status Start(daemon::IterationSink* sink) override {
    sink_ = sink;
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
    if (probes_) probes_->DetachAll();
  }

  void SetBeginHooks(pid_t pid, bool wanted) override {
    if (wanted) {
      hooked_.insert(pid);
      return;
    }
    hooked_.erase(pid);
    Disarm(pid);
  }

  SourceStats stats() const override {
    SourceStats s;
    ebpf::IterationProbeStats p = probes_->stats();
    s.events = p.received;
    s.lost = p.lost() + discovery_->stats().lost;
    s.anomalies = p.kernel[SP_STAT_SL_ZERO] + p.kernel[SP_STAT_SL_HUGE] +
                  p.kernel[SP_STAT_ABANDONED] + p.kernel[SP_STAT_NO_BEGIN] +
                  p.kernel[SP_STAT_DUPLICATE] + p.kernel[SP_STAT_INFLIGHT_FULL] + p.malformed;
    s.processes = probes_->AttachedPids().size();
    s.description = "eBPF probes: " + std::to_string(s.processes) + " processes attached";
    return s;
  }

  // ebpf::DiscoveryListener
  bool OnTargets(const ebpf::ProcessTargets& targets) override {
    auto attached = probes_->AttachTargets(targets);
    if (!attached.ok()) {
      SEQPOINT_LOG(kWarn, "cannot attach to pid " + std::to_string(targets.identity.pid) + ": " +
                              attached.status().message());
      return false;
    }
    const int pid = targets.identity.pid;
    if (known_.insert(pid).second && sink_ != nullptr) {
      SEQPOINT_LOG(kInfo, "attached to pid " + std::to_string(pid) + " (" + targets.identity.comm +
                              "): " + probes_->Describe(pid));
      sink_->OnProcessFound(
          ProcessInfo{pid, targets.identity.start_time, targets.identity.comm, ""});
    }
    return true;
  }

  void OnGone(int pid) override {
    probes_->DetachPid(pid);  // delivers queued records, open iterations flagged EXITED
    if (known_.erase(pid) == 0 || sink_ == nullptr) return;
    ProcessExit x;
    x.pid = pid;
    x.mid_iteration = exited_mid_.erase(pid) > 0;
    hooked_.erase(pid);
    Disarm(pid);
    sink_->OnProcessExit(x);
  }

  // ebpf::IterationSink
  void OnBegin(const ebpf::IterationEvent& e) override {
    if (sink_ == nullptr || !e.valid_seq_len()) return;
    sink_->OnIterationBegin(IterationBegin{static_cast<pid_t>(e.pid), static_cast<pid_t>(e.tid),
                                           e.iter, e.seq_len, e.batch, e.tokens, e.begin_ns});
  }

  void OnEnd(const ebpf::IterationEvent& e) override {
    if (e.flags & SP_FLAG_EXITED) exited_mid_.insert(static_cast<int>(e.pid));
    if (hooked_.count(static_cast<pid_t>(e.pid)) && e.valid_seq_len() &&
        armed_[static_cast<pid_t>(e.pid)].insert(e.seq_len).second) {
      Status st = probes_->WantSeqLen(static_cast<int>(e.pid), e.seq_len, 0xffffffffu);
      if (!st.ok()) SEQPOINT_LOG(kWarn, "begin hooks: " + st.message());
    }
    if (sink_ == nullptr || !e.valid_seq_len()) return;
    if (e.flags & SP_FLAG_EXITED) return;  // never ended: no iteration to count
    IterationEnd end{static_cast<pid_t>(e.pid),
                     static_cast<pid_t>(e.tid),
                     e.iter,
                     e.seq_len,
                     e.batch,
                     e.tokens,
                     e.complete() ? e.begin_ns : 0,
                     e.end_ns,
                     (e.flags & SP_FLAG_HOOKED) != 0};
    sink_->OnIterationEnd(end);
  }

 private:
  void Disarm(pid_t pid) {
    auto it = armed_.find(pid);
    if (it == armed_.end()) return;
    for (uint32_t sl : it->second) (void)probes_->WantSeqLen(pid, sl, 0);
    armed_.erase(it);
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
                       PollAll();
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
    discovery_timer_.expires_after(std::chrono::milliseconds(100));
    discovery_timer_.async_wait([this, alive](boost::system::error_code ec) {
      auto a = alive.lock();
      if (ec || !a || !*a || stopped_) return;
      if (auto r = discovery_->Poll(0); !r.ok()) {
        SEQPOINT_LOG(kWarn, "process discovery: " + r.status().message());
      }
      DiscoveryTick();
    });
  }
  void PollAll() {
    if (auto r = discovery_->Poll(0); !r.ok()) {
      SEQPOINT_LOG(kWarn, "process discovery: " + r.status().message());
    }
    if (auto r = probes_->Poll(0); !r.ok()) {
      SEQPOINT_LOG(kWarn, "iteration probes: " + r.status().message());
    }
  }

  asio::io_context& io_;
  asio::steady_timer timer_;
  asio::steady_timer discovery_timer_;
  int64_t poll_ms_;
  std::unique_ptr<ebpf::IterationProbes> probes_;
  std::unique_ptr<ebpf::ProcessDiscovery> discovery_;
  std::unique_ptr<asio::posix::stream_descriptor> probe_fd_, discovery_fd_;
  daemon::IterationSink* sink_ = nullptr;
  std::set<pid_t> hooked_;
  std::map<pid_t, std::set<uint32_t>> armed_;  // SLs marked wanted, per hooked process
  std::set<int> known_;
  std::set<int> exited_mid_;
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

Result<std::unique_ptr<IterationSource>> MakeLiveSource(asio::io_context& io,
                                                        const DaemonConfig& config) {
  auto src = std::make_unique<EbpfSource>(io, config.probes_poll_interval_ms);
  Status st = src->Init(config);
  if (!st.ok()) return st;
  return std::unique_ptr<IterationSource>(std::move(src));
}

}  // namespace seqpoint::daemon
