// IterationProbes: the start, end and SL of every training iteration of the processes it is
// attached to, from the seqpoint USDT provider or zero-code uprobes, through one BPF ring
// buffer. This is the API the daemon and `seqpoint probe` use.
//
//   auto probes = IterationProbes::Create(options, &sink);   // loads the BPF programs
//   probes->AttachPid(pid);                                   // what the process carries
//   probes->SetHookMode(HookMode::kWanted);                   // begin events for chosen ones
//   probes->WantSeqLen(pid, 37, 1);                           //   e.g. the next SL-37 iteration
//   while (running) probes->Poll(100);                        // sink.OnBegin / sink.OnEnd
//
// Delivery: every iteration reaches OnEnd exactly once: complete (begin and end seen), or
// incomplete with a flag saying why (ABANDONED: its thread began again first; NO_BEGIN: the end
// of an iteration begun before attach; EXITED: the process exited or was detached mid-
// iteration). Records the ring buffer had no room for are counted (stats().lost, per pid),
// never dropped silently. OnBegin is called only for iterations the agent asked hooks for.
//
// Latency: records of hooked iterations wake the consumer at once, so OnBegin runs within
// microseconds of the probe (stats().hook_latency measures it from the probe's timestamp to the
// callback). Other records are batched: the consumer is woken when wakeup_bytes are pending,
// and Poll(timeout) collects the rest when it times out. That bounds the delay of a trace row
// by the poll timeout and costs one wakeup per ~4000 iterations instead of one per iteration.
//
// Threads: one owner thread calls everything; callbacks run inside Poll()/DetachPid() on that
// thread. The BPF side runs in the traced threads. Destruction detaches every probe; links are
// file-descriptor based, so a killed agent leaves nothing attached either, unless pinned.
//
// Pinned (options.pin_dir; iteration_probes_pins.cpp, probe_pins.h): the links and the shared
// maps live in bpffs too, so the probes keep counting when the owner dies or Release()s them,
// and the next IterationProbes of the same pin_instance adopts them (carried_over()) instead of
// attaching twice. Records then stay in the ring until CommitDelivered(): the next owner is
// given again whatever was delivered but not committed (at least once, never lost).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "probes/discovery/target_finder.h"
#include "probes/iteration_probe.h"
#include "probes/iteration_probe_skeleton.h"
#include "probes/link_reaper.h"
#include "probes/probe_counters.h"
#include "probes/probe_pins.h"
#include "probes/ring_reader.h"
#include "probes/zero_code_probe.h"

namespace seqpoint::probes {

struct IterationEvent {
  enum class Kind { kBegin, kEnd };
  Kind kind = Kind::kEnd;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t iter = 0;
  uint32_t seq_len = 0;
  uint32_t batch = 0;
  uint64_t tokens = 0;
  uint64_t begin_ns = 0;  // CLOCK_MONOTONIC; 0 when unknown (NO_BEGIN)
  uint64_t end_ns = 0;    // CLOCK_MONOTONIC; 0 in a begin event or an incomplete iteration
  uint32_t flags = 0;     // enum sp_event_flag
  uint32_t probe = 0;     // 0: USDT; 1 + zero-code probe index
  // End of a hooked iteration of a process with probe counters (ArmCounters): the process's
  // counts from begin to end probe; bit i of counter_mask says counters[i] holds one.
  std::array<uint64_t, SP_MAX_COUNTERS> counters{};
  uint32_t counter_mask = 0;
  uint32_t counter_flags = 0;  // enum sp_counter_flag: why a counter is missing
  uint32_t cpus = 0;           // CPUs the ending thread could use (the plausibility guard's)
  uint64_t steal_ns = 0;       // steal subtracted from time on a CPU (sp_event.steal_ns)

  bool complete() const {
    return begin_ns != 0 && end_ns != 0 &&
           (flags & (SP_FLAG_ABANDONED | SP_FLAG_NO_BEGIN | SP_FLAG_EXITED)) == 0;
  }
  bool valid_seq_len() const { return (flags & (SP_FLAG_SL_ZERO | SP_FLAG_SL_HUGE)) == 0; }
  uint64_t duration_ns() const { return complete() ? end_ns - begin_ns : 0; }
};

// Receives iterations. Called on the thread that calls Poll()/DetachPid().
class ProbeEventSink {
 public:
  virtual ~ProbeEventSink() = default;
  // Begin of an iteration the agent asked hooks for: start counters here.
  virtual void OnBegin(const IterationEvent& event) { (void)event; }
  // Every iteration, once: complete or flagged incomplete.
  virtual void OnEnd(const IterationEvent& event) = 0;
};

enum class HookMode : uint32_t {
  kNone = SP_HOOK_NONE,      // no OnBegin
  kWanted = SP_HOOK_WANTED,  // OnBegin for iterations named by WantIteration / WantSeqLen
  kAll = SP_HOOK_ALL,        // OnBegin for every iteration
};

struct IterationProbesOptions {
  uint32_t ring_buffer_bytes = 8u << 20;  // power of two (rounded up); 8 MiB = 74898 records
  uint64_t wakeup_bytes = 256u << 10;     // batch size of wakeups for non-hooked records
  uint32_t max_seq_len = 1u << 20;        // above this an SL is flagged absurd (SP_FLAG_SL_HUGE)
  std::vector<ZeroCodeProbe> zero_code;   // at most SP_MAX_ZERO_CODE_PROBES
  std::string proc_root = "/proc";        // injectable for tests
  std::string btf_path;                   // kernel BTF file when the kernel exposes none
  bool counters = true;                   // load the probe counter path (probe_counters.h)
  // Pinning: the bpffs directory (e.g. /sys/fs/bpf/seqpoint) and the owner's instance (the
  // daemon's state directory: one pin tree each). Empty pin_dir: nothing is pinned.
  std::string pin_dir;
  std::string pin_instance;
};

// Log2 histogram of a latency, in nanoseconds.
struct LatencyStats {
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t max_ns = 0;
  std::array<uint64_t, 48> log2_buckets{};  // bucket b counts values in [2^b, 2^(b+1))
  void Add(uint64_t ns);
  // Upper bound of the bucket holding quantile q (0..1); 0 when empty.
  uint64_t QuantileUpperBound(double q) const;
};

struct PidProbeStats {
  uint64_t hits = 0;        // probe hits (BPF side)
  uint64_t events = 0;      // records submitted (BPF side)
  uint64_t lost = 0;        // records dropped, ring buffer full (BPF side)
  uint64_t iterations = 0;  // OnEnd calls, complete or not
  uint64_t incomplete = 0;  // OnEnd calls for incomplete iterations
  bool attached = false;
};

struct IterationProbeStats {
  std::array<uint64_t, SP_STAT_COUNT> kernel{};  // enum sp_stat, summed over CPUs
  uint64_t received = 0;                         // records consumed
  uint64_t malformed = 0;  // records of an unexpected size (a bug: never expected)
  uint64_t exited_mid_iteration = 0;
  uint64_t stale = 0;  // records of processes no longer attached, dropped (pinned: delivered
                       // before a restart; or made as a live process was being detached)
  uint64_t handed_over_twice = 0;  // pinned: ends both generations saw at a hand-over (one kept)
  uint64_t forced_commits = 0;     // pinned: commits made because the ring was half full
  uint64_t pin_failures = 0;       // pinned: attachments whose links could not be pinned
  LatencyStats hook_latency;       // probe fire -> OnBegin / hooked OnEnd
  std::map<int, PidProbeStats> per_pid;
  uint64_t lost() const { return kernel[SP_STAT_LOST]; }
};

class IterationProbes {
 public:
  // Loads the probes. Errors: PermissionDenied (not root), Unsupported (no BPF, BTF or ring
  // buffer), InvalidArgument / NotFound (a zero-code probe's configuration).
  static Result<std::unique_ptr<IterationProbes>> Create(const IterationProbesOptions& options,
                                                         ProbeEventSink* sink);
  ~IterationProbes();
  IterationProbes(const IterationProbes&) = delete;
  IterationProbes& operator=(const IterationProbes&) = delete;

  // Attaches to what `pid` carries now; call again after it loads libraries (idempotent). A
  // reused pid (another process) is detached and attached afresh. Returns the number of new
  // attachments; NotFound names the process and why when it carries nothing.
  // One source of iterations per process (two would report every iteration twice): the USDT
  // provider when it carries it, else the first configured zero-code probe whose libraries it
  // maps, kept for the life of the process. A process that loads the provider after a zero-code
  // probe attached is switched to USDT (its open zero-code iteration is delivered EXITED).
  Result<int> AttachPid(int pid);
  // The same, with targets found by the caller (ProcessDiscovery).
  Result<int> AttachTargets(const ProcessTargets& targets);
  // Detaches, delivers the records still queued, then reports iterations left open as EXITED.
  // Returns without waiting for the kernel to unregister the process's uprobes (~100 ms a link):
  // its links are closed on a worker thread (LinkReaper); the probes ignore it from the start.
  void DetachPid(int pid);
  // The same for every process; returns once all their links are closed.
  void DetachAll();
  bool IsAttached(int pid) const { return attached_.count(pid) > 0; }
  std::vector<int> AttachedPids() const;
  // "usdt /path; zero-code miopen-rnn" for messages.
  std::string Describe(int pid) const;

  // Replaces the zero-code probe set (a config reload): every attach from now on uses the new
  // set; attached processes keep the probes they have until they exit or exec. A probe in both
  // sets keeps its table slot; a new or changed one takes a slot that no attached process uses
  // (SP_MAX_ZERO_CODE_PROBES in all). On error the old set stays.
  Status SetZeroCodeProbes(std::vector<ZeroCodeProbe> probes);
  // The zero-code probe an event came from (IterationEvent::probe); null for USDT.
  const ZeroCodeProbe* ZeroCodeProbeOf(uint32_t event_probe) const;
  // The zero-code probe `pid` is attached through; null when through USDT or not attached.
  const ZeroCodeProbe* AttachedZeroCodeProbe(int pid) const;

  // Perf counters read by the probes at the begin and end of `pid`'s hooked iterations
  // (probe_counters.h); their deltas come in IterationEvent::counters. Unsupported when the
  // kernel lacks the path (counters_why_not() says why): count in user space instead.
  Status ArmCounters(int pid, const std::vector<ProbeCounterEvent>& events);
  void DisarmCounters(int pid) { counters_->Disarm(pid); }
  // The events armed for `pid`, in IterationEvent::counters order; null when none.
  const std::vector<ProbeCounterEvent>* CounterEvents(int pid) const {
    return counters_->EventsOf(pid);
  }
  ProbeCounterProcStats CounterStats(int pid) const { return counters_->StatsOf(pid); }
  const std::string& counters_why_not() const { return skel_->counters_why_not(); }
  // Where the counter path reads hypervisor steal (IterationProbeSkeleton::steal_source).
  const std::string& steal_source() const { return skel_->steal_source(); }
  const std::string& steal_source_why() const { return skel_->steal_source_why(); }

  void SetHookMode(HookMode mode);
  Status WantIteration(int pid, uint64_t iter);
  // The next `count` iterations of `pid` with this SL get hooks (count 0xffffffff: all;
  // seq_len SP_ANY_SEQ_LEN: any SL, consulted after the SL's own entry).
  Status WantSeqLen(int pid, uint32_t seq_len, uint32_t count);

  // Waits up to timeout_ms for a wakeup, then consumes every queued record. Returns the number
  // of records handled.
  Result<int> Poll(int timeout_ms);
  // Readable when a wakeup is pending: for callers that run their own epoll loop.
  int epoll_fd() const;

  // Totals and per-process stats: the processes attached now and the last kGonePidsKept
  // detached ones (older ones are forgotten, so a node that saw many processes stays bounded).
  IterationProbeStats stats() const;
  // The totals only (per_pid empty): for callers that read them often (every /metrics scrape).
  IterationProbeStats totals() const;
  static constexpr size_t kGonePidsKept = 64;
  // Links closed off the owner's thread so far, and what they took.
  LinkReaper::Stats detach_stats() const { return reaper_->stats(); }
  // The links of `pid` detached and not closed yet.
  bool Closing(int pid) const { return reaper_->Pending(pid); }
  const IterationProbesOptions& options() const { return options_; }

  // Pinning. A process a previous owner left pinned: adopted (attached through its old links)
  // while alive, or gone since, with records maybe still queued: DetachPid it after a Poll.
  struct CarriedOver {
    ProcessIdentity identity;
    bool alive = false;
  };
  const std::vector<CarriedOver>& carried_over() const { return carried_; }
  // Pinned: the pin trees of other daemons that can never come back for them, removed at
  // Create (SweepOrphanInstances); the owner logs them.
  const std::vector<SweptInstance>& swept_orphans() const { return swept_; }
  bool pinned() const { return pins_ != nullptr; }
  const std::string& pin_generation_dir() const { return pins_->dir(); }
  uint64_t uncommitted_bytes() const { return ring_->uncommitted(); }
  uint64_t ring_bytes() const { return ring_->size(); }
  // Lets the kernel reuse the space of every record delivered so far (pinned: call it once what
  // they fed is saved; unpinned, Poll does it itself).
  void CommitDelivered();
  // Pinned: delivers what is queued, then stops owning the probes but leaves them attached,
  // counting and pinned for the next owner. With no process attached the pins are removed.
  void Release();
  // Removes the pin tree of `instance` under `pin_dir`, detaching what it held (a daemon told to
  // clean up, or started with pinning off). Returns how many pins it removed.
  static Result<int> RemovePins(const std::string& pin_dir, const std::string& instance);

 private:
  struct Attachment {
    ProcessIdentity identity;
    std::string exe;
    std::map<std::string, LinkPtr> links;  // AttachTarget::Key() (zero-code: by slot) -> link
    std::vector<std::string> sources;
    int zero_code_slot = -1;  // the one zero-code probe of this process; -1: none (USDT)
  };

  IterationProbes(IterationProbesOptions options, ProbeEventSink* sink);
  static int OnRecord(void* self, void* data, size_t size);
  void Deliver(const IterationEvent& event);
  // Delivers the iterations `pid` left open as EXITED (deliver false: only forgets them).
  void FlushOpenIterations(int pid, bool deliver = true);
  // Forgets what processes detached since left behind once their links closed (SweepClosed).
  void SweepClosed();
  void ReadPidCounters(int pid, PidProbeStats* out) const;
  int ReadRing();  // delivers every unread record (of older generations first)
  // Pinning (iteration_probes_pins.cpp).
  Status OpenPins(IterationProbeSkeletonConfig* config);
  void AdoptPinned();
  void PinNewLinks(int pid, const std::string& key, const std::set<int>& before);
  void RetireLegacy(int pid);                    // once our programs record it
  bool HandedOverTwice(const sp_event& record);  // an end the old generation delivered already
  void EndHandovers(uint64_t now_ns);
  int ReadLegacy();

  IterationProbesOptions options_;  // options_.zero_code: the current set, as configured
  // The BPF zero-code table by slot (IterationEvent::probe - 1); slot_of_[i] is the slot of
  // options_.zero_code[i]. Identical at Create; a reload keeps the slots attached processes use.
  std::vector<ZeroCodeProbe> slots_;
  std::vector<uint32_t> slot_of_;
  ProbeEventSink* sink_;
  TargetFinder finder_;
  std::unique_ptr<IterationProbeSkeleton> skel_;  // before ring_ and attached_: destroyed last
  std::unique_ptr<RingReader> ring_;
  std::map<int, Attachment> attached_;
  std::vector<SweptInstance> swept_;
  std::unique_ptr<ProbeCounters> counters_;  // after skel_: destroyed before it
  // Closes detached processes' links off this thread; after skel_: joined before it is freed.
  std::unique_ptr<LinkReaper> reaper_ = std::make_unique<LinkReaper>();
  std::set<int> closing_;  // detached, links not closed yet: their late records are dropped
  IterationProbeStats stats_;
  std::deque<int> gone_;  // detached pids whose per_pid entry is kept, oldest first
  // Pinning: our generation's pins, and older generations (another BPF object or ring size)
  // drained and retired as their processes are attached afresh.
  struct Legacy {
    std::string dir;
    std::unique_ptr<RingReader> ring;
    int pids_fd = -1;
    int inflight_fd = -1;
    int thread_open_fd = -1;
    std::map<int, uint64_t> pids;  // pid -> start time, not yet attached afresh
    uint64_t deadline_ns = 0;      // retired whole then, whoever has not been attached
  };
  std::unique_ptr<ProbePins> pins_;
  std::vector<Legacy> legacy_;
  struct Handover {
    uint64_t until_ns = 0;                                // UINT64_MAX while under way
    std::set<std::pair<uint64_t, uint32_t>> legacy_ends;  // (iteration, tid) the old ring ended
  };
  std::map<int, Handover> handover_;  // processes taken over from another generation, recently
  std::vector<CarriedOver> carried_;
  bool released_ = false;
  bool reading_legacy_ = false;  // delivering an older generation's records
};

}  // namespace seqpoint::probes
