// See iteration_probes.h.
#include "probes/iteration_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>

#include "common/clock.h"

namespace seqpoint::probes {
namespace {

IterationEvent FromRecord(const sp_event& r) {
  IterationEvent e;
  e.kind = r.kind == SP_EVENT_BEGIN ? IterationEvent::Kind::kBegin : IterationEvent::Kind::kEnd;
  e.pid = r.pid;
  e.tid = r.tid;
  e.iter = r.iter;
  e.seq_len = r.seq_len;
  e.batch = r.batch;
  e.tokens = r.tokens;
  e.begin_ns = r.begin_ns;
  e.end_ns = r.end_ns;
  e.flags = r.flags;
  e.probe = r.probe;
  for (size_t i = 0; i < SP_MAX_COUNTERS; ++i) e.counters[i] = r.counters[i];
  e.counter_mask = r.counter_mask;
  e.counter_flags = r.counter_flags;
  e.steal_ns = r.steal_ns;
  e.cpus = r.cpus;
  return e;
}

// Collects the keys of a hash map that satisfy `match` (deleting while iterating would restart
// the walk).
template <typename Key, typename Match>
std::vector<Key> KeysWhere(int fd, Match match) {
  std::vector<Key> keys;
  Key key{}, next{};
  const Key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (match(next)) keys.push_back(next);
    key = next;
    prev = &key;
  }
  return keys;
}

sp_zero_code_config BpfConfig(const ZeroCodeProbe& probe) {
  return {probe.arg_index,
          probe.arg_bytes,
          probe.deref ? 1u : 0u,
          static_cast<uint32_t>(probe.reduce),
          probe.gated() ? 1u : 0u,
          probe.gate_arg,
          probe.gate_value,
          static_cast<uint32_t>(probe.window),
          0u};
}

}  // namespace

void LatencyStats::Add(uint64_t ns) {
  ++count;
  sum_ns += ns;
  if (ns > max_ns) max_ns = ns;
  size_t bucket = ns == 0 ? 0 : static_cast<size_t>(std::bit_width(ns) - 1);
  if (bucket >= log2_buckets.size()) bucket = log2_buckets.size() - 1;
  ++log2_buckets[bucket];
}

uint64_t LatencyStats::QuantileUpperBound(double q) const {
  if (count == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count - 1)) + 1;
  uint64_t seen = 0;
  for (size_t b = 0; b < log2_buckets.size(); ++b) {
    seen += log2_buckets[b];
    if (seen >= rank) return (uint64_t{2} << b) - 1;
  }
  return max_ns;
}

IterationProbes::IterationProbes(IterationProbesOptions options, ProbeEventSink* sink)
    : options_(std::move(options)), sink_(sink), finder_(options_.proc_root, options_.zero_code) {}

IterationProbes::~IterationProbes() {
  if (!released_) DetachAll();
}

Result<std::unique_ptr<IterationProbes>> IterationProbes::Create(
    const IterationProbesOptions& options, ProbeEventSink* sink) {
  if (sink == nullptr) return InvalidArgument("IterationProbes::Create: sink is null");
  if (options.wakeup_bytes < sizeof(sp_event)) {
    return InvalidArgument("wakeup_bytes " + std::to_string(options.wakeup_bytes) +
                           " is smaller than one record (" + std::to_string(sizeof(sp_event)) +
                           " bytes)");
  }
  IterationProbeSkeletonConfig config;
  config.ring_buffer_bytes = options.ring_buffer_bytes;
  config.wakeup_bytes = options.wakeup_bytes;
  config.max_seq_len = options.max_seq_len;
  config.btf_path = options.btf_path;
  config.counters = options.counters;
  for (const ZeroCodeProbe& probe : options.zero_code) {
    SEQPOINT_RETURN_IF_ERROR(ValidateZeroCodeProbe(probe));
    config.zero_code.push_back(BpfConfig(probe));
  }
  std::unique_ptr<IterationProbes> self(new IterationProbes(options, sink));
  if (!options.pin_dir.empty()) SEQPOINT_RETURN_IF_ERROR(self->OpenPins(&config));
  auto skel = IterationProbeSkeleton::Load(config);
  if (!skel.ok()) return skel.status();
  self->skel_ = std::move(*skel);
  self->counters_ = std::make_unique<ProbeCounters>(self->skel_.get());
  self->slots_ = options.zero_code;
  for (uint32_t i = 0; i < options.zero_code.size(); ++i) self->slot_of_.push_back(i);
  auto ring = RingReader::Open(self->skel_->events_fd());
  if (!ring.ok()) return ring.status().WithContext("the iteration ring buffer");
  self->ring_ = std::move(*ring);
  if (self->pins_) self->AdoptPinned();
  return self;
}

int IterationProbes::OnRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<IterationProbes*>(ctx);
  ++self->stats_.received;
  // A shorter record is an older generation's (a pinned ring left by an older agent): the
  // layout only ever grows at its end, so its fields are a prefix of ours.
  if (size > sizeof(sp_event) || size < offsetof(sp_event, cpus) + sizeof(uint32_t)) {
    ++self->stats_.malformed;
    return 0;
  }
  sp_event record{};
  std::memcpy(&record, data, size);
  // Pinned, a restarted owner is given again what its predecessor delivered but did not commit:
  // a process detached since then had its run saved with them.
  if (self->pins_ && !self->reading_legacy_ &&
      self->attached_.count(static_cast<int>(record.pid)) == 0) {
    ++self->stats_.stale;
    return 0;
  }
  // A record a probe of a live process made as it was being detached (DetachPid), read after.
  if (!self->closing_.empty() && self->closing_.count(static_cast<int>(record.pid)) != 0 &&
      self->attached_.count(static_cast<int>(record.pid)) == 0) {
    ++self->stats_.stale;
    return 0;
  }
  if (!self->handover_.empty() && self->HandedOverTwice(record)) {
    ++self->stats_.handed_over_twice;
    return 0;
  }
  self->Deliver(FromRecord(record));
  return 0;
}

void IterationProbes::Deliver(const IterationEvent& event) {
  if (event.flags & SP_FLAG_HOOKED) {
    uint64_t fired = event.kind == IterationEvent::Kind::kBegin ? event.begin_ns : event.end_ns;
    uint64_t now = KernelMonotonicNs();
    if (fired != 0 && now >= fired) stats_.hook_latency.Add(now - fired);
  }
  if (event.kind == IterationEvent::Kind::kBegin) {
    sink_->OnBegin(event);
    return;
  }
  PidProbeStats& pid = stats_.per_pid[static_cast<int>(event.pid)];
  ++pid.iterations;
  if (!event.complete()) ++pid.incomplete;
  if (event.flags & SP_FLAG_EXITED) ++stats_.exited_mid_iteration;
  sink_->OnEnd(event);
}

Result<int> IterationProbes::AttachPid(int pid) {
  auto targets = finder_.Find(pid);
  if (!targets.ok()) {
    return targets.status().WithContext("attaching to pid " + std::to_string(pid));
  }
  return AttachTargets(*targets);
}

Result<int> IterationProbes::AttachTargets(const ProcessTargets& targets) {
  const int pid = targets.identity.pid;
  auto it = attached_.find(pid);
  if (it != attached_.end() && it->second.identity.start_time != targets.identity.start_time) {
    DetachPid(pid);  // the pid was reused by another process
    it = attached_.end();
  }
  const bool usdt =
      std::any_of(targets.targets.begin(), targets.targets.end(),
                  [](const AttachTarget& t) { return t.kind == AttachTarget::Kind::kUsdt; });
  if (usdt && it != attached_.end() && it->second.zero_code_slot >= 0) {
    DetachPid(pid);  // it loaded the provider after a zero-code probe attached: USDT only now
    it = attached_.end();
  }
  if (targets.targets.empty() && it == attached_.end()) {
    std::string why = "pid " + std::to_string(pid) + " (" + targets.identity.comm + ", " +
                      (targets.exe.empty() ? "no executable mapping" : targets.exe) +
                      ") carries no seqpoint USDT provider and maps no configured zero-code "
                      "library: mark iterations with SEQPOINT_ITERATION_BEGIN/END (sdk/), or "
                      "configure a zero-code probe for a library it loads";
    for (const std::string& note : targets.notes) why += "; " + note;
    return NotFound(why);
  }
  bool fresh = it == attached_.end();
  if (fresh && closing_.count(pid) != 0) {
    // Detached moments ago (the same process switched to USDT, or the pid reused): its old links
    // must be gone before the pid is registered again, or they would record it twice.
    reaper_->WaitFor(pid);
    SweepClosed();
  }
  if (fresh) {
    it = attached_.emplace(pid, Attachment{targets.identity, targets.exe, {}, {}, -1}).first;
  }
  Attachment& att = it->second;
  int added = 0;
  Status first_error;
  // Targets come in the configured order: the first zero-code probe found is the preferred.
  int slot = att.zero_code_slot;
  // No link is destroyed meanwhile: libbpf's USDT bookkeeping is shared with the destroy, and
  // PinNewLinks tells our new links by their fd numbers, which a close could hand out again.
  const LinkReaper::AttachGuard attaching = reaper_->Attaching();
  for (const AttachTarget& t : targets.targets) {
    std::string key = t.Key();
    const std::set<int> links_before = pins_ ? OpenLinkFds() : std::set<int>{};
    if (t.kind != AttachTarget::Kind::kUsdt) {
      if (t.probe >= slot_of_.size()) continue;  // found with another set (cannot happen)
      int s = static_cast<int>(slot_of_[t.probe]);
      if (slot < 0) slot = s;
      if (s != slot) continue;
      key = (t.kind == AttachTarget::Kind::kBoundaryFunction ? "boundary:"
             : t.kind == AttachTarget::Kind::kGateFunction   ? "gate:"
                                                             : "sl:") +
            std::to_string(s) + ":" + t.mapped_path;
    }
    if (att.links.count(key) > 0) continue;
    Result<LinkPtr> link = Status(ErrorCode::kInternal, "unset");
    std::string source;
    if (t.kind == AttachTarget::Kind::kUsdt) {
      // The end probe first: on an already registered process, the gap between the two
      // attaches then yields ends without begins (skipped, counted), not open iterations.
      auto end = skel_->AttachUsdt(pid, t.open_path, /*begin=*/false);
      if (!end.ok()) {
        link = end.status();
      } else {
        att.links.emplace(key + ":end", std::move(*end));
        link = skel_->AttachUsdt(pid, t.open_path, /*begin=*/true);
      }
      source = "usdt " + t.mapped_path;
    } else {
      using Role = IterationProbeSkeleton::ZeroCodeRole;
      Role role = t.kind == AttachTarget::Kind::kBoundaryFunction ? Role::kBoundary
                  : t.kind == AttachTarget::Kind::kGateFunction   ? Role::kGate
                                                                  : Role::kSl;
      link = skel_->AttachZeroCode(pid, t.open_path, t.function, static_cast<uint32_t>(slot), role);
      source = "zero-code " + slots_[slot].name +
               (role == Role::kBoundary ? " boundary "
                : role == Role::kGate   ? " gate "
                                        : " ") +
               t.function + " in " + t.mapped_path;
    }
    if (!link.ok()) {
      att.links.erase(key + ":end");
      if (first_error.ok()) first_error = link.status();
      continue;
    }
    att.links.emplace(key, std::move(*link));
    if (pins_) PinNewLinks(pid, key, links_before);
    att.sources.push_back(source);
    if (t.kind != AttachTarget::Kind::kUsdt) att.zero_code_slot = slot;
    ++added;
  }
  if (att.links.empty()) {
    attached_.erase(it);
    return first_error.ok() ? Internal("pid " + std::to_string(pid) + ": nothing attached")
                            : first_error;
  }
  if (fresh) {
    // Registered only now that every probe is in place: the BPF side ignores an unregistered
    // process, so a half-attached one cannot record a begin whose end probe is missing.
    sp_pid_state state{};
    if (bpf_map_update_elem(skel_->pids_fd(), &pid, &state, BPF_ANY) != 0) {
      Status s = LibbpfError("registering pid " + std::to_string(pid) + " (at most 4096 processes)",
                             errno);
      attached_.erase(it);
      return s;
    }
    stats_.per_pid[pid].attached = true;
    if (!legacy_.empty()) RetireLegacy(pid);  // attached afresh: its old probes go
  }
  return added;
}

void IterationProbes::DetachPid(int pid) {
  auto it = attached_.find(pid);
  if (it == attached_.end()) return;
  PidProbeStats& s = stats_.per_pid[pid];
  ReadPidCounters(pid, &s);
  s.attached = false;
  gone_.push_back(pid);
  while (gone_.size() > kGonePidsKept) {  // forget the oldest gone, unless attached again
    const int old = gone_.front();
    gone_.pop_front();
    auto o = stats_.per_pid.find(old);
    if (o != stats_.per_pid.end() && !o->second.attached) stats_.per_pid.erase(o);
  }
  // Unregistered first: from here the probes ignore the process, so detaching its links one by
  // one cannot produce ends without begins.
  bpf_map_delete_elem(skel_->pids_fd(), &pid);
  if (pins_) pins_->RemovePid(pid, it->second.identity.start_time);  // detached as fds close
  ReadRing();  // deliver what it queued before
  counters_->Disarm(pid);
  FlushOpenIterations(pid);
  // Its links are closed off this thread: each close waits for the kernel to unregister a uprobe
  // (~100 ms). Meanwhile they cannot record anything: a process that exited runs no code (and
  // its links are bound to its task, so a new process given the same pid is not traced by them),
  // and the probes ignore an unregistered pid. A probe of a live process that passed that check
  // just before the unregistration may still record an iteration: closing_ drops such records,
  // and SweepClosed forgets what it left once the links are closed.
  std::vector<LinkPtr> links;
  for (auto& [key, link] : it->second.links) links.push_back(std::move(link));
  attached_.erase(it);
  closing_.insert(pid);
  reaper_->Add(pid, std::move(links));
}

void IterationProbes::DetachAll() {
  while (!attached_.empty()) DetachPid(attached_.begin()->first);
  reaper_->Drain();
  SweepClosed();
}

void IterationProbes::SweepClosed() {
  for (int pid : reaper_->TakeClosed()) {
    if (closing_.erase(pid) == 0 || attached_.count(pid) != 0) continue;
    FlushOpenIterations(pid, /*deliver=*/false);  // late leftovers of a live process, if any
  }
}

void IterationProbes::FlushOpenIterations(int pid, bool deliver) {
  const uint32_t upid = static_cast<uint32_t>(pid);
  int fd = skel_->inflight_fd();
  for (const sp_inflight_key& key :
       KeysWhere<sp_inflight_key>(fd, [&](const sp_inflight_key& k) { return k.pid == upid; })) {
    sp_inflight open{};
    if (bpf_map_lookup_elem(fd, &key, &open) != 0) continue;
    bpf_map_delete_elem(fd, &key);
    if (!deliver) continue;
    IterationEvent e;
    e.pid = upid;
    e.tid = open.tid;
    e.iter = key.iter;
    e.seq_len = open.seq_len;
    e.batch = open.batch;
    e.tokens = open.tokens;
    e.begin_ns = open.begin_ns;
    e.flags = open.flags | SP_FLAG_EXITED;
    Deliver(e);
  }
  fd = skel_->zero_code_state_fd();
  for (const sp_zero_code_key& key :
       KeysWhere<sp_zero_code_key>(fd, [&](const sp_zero_code_key& k) { return k.pid == upid; })) {
    sp_zero_code_state st{};
    if (deliver && bpf_map_lookup_elem(fd, &key, &st) == 0 && st.calls > 0) {
      IterationEvent e;
      e.pid = upid;
      e.iter = st.iter;
      e.seq_len = st.seq_len;
      e.begin_ns = st.begin_ns;
      e.flags = st.flags | SP_FLAG_ZERO_CODE | SP_FLAG_EXITED;
      e.probe = key.probe + 1;
      Deliver(e);
    }
    bpf_map_delete_elem(fd, &key);
  }
  fd = skel_->thread_open_fd();
  for (uint32_t tid : KeysWhere<uint32_t>(fd, [&](uint32_t tid) {
         sp_thread_open open{};
         return bpf_map_lookup_elem(fd, &tid, &open) == 0 && open.pid == upid;
       })) {
    bpf_map_delete_elem(fd, &tid);
  }
  fd = skel_->wanted_iters_fd();
  for (const sp_wanted_iter_key& key : KeysWhere<sp_wanted_iter_key>(
           fd, [&](const sp_wanted_iter_key& k) { return k.pid == upid; })) {
    bpf_map_delete_elem(fd, &key);
  }
  fd = skel_->wanted_sls_fd();
  for (const sp_wanted_sl_key& key :
       KeysWhere<sp_wanted_sl_key>(fd, [&](const sp_wanted_sl_key& k) { return k.pid == upid; })) {
    bpf_map_delete_elem(fd, &key);
  }
}

void IterationProbes::ReadPidCounters(int pid, PidProbeStats* out) const {
  sp_pid_state st{};
  if (bpf_map_lookup_elem(skel_->pids_fd(), &pid, &st) != 0) return;
  out->hits = st.hits;
  out->events = st.events;
  out->lost = st.lost;
}

std::vector<int> IterationProbes::AttachedPids() const {
  std::vector<int> pids;
  for (const auto& [pid, att] : attached_) pids.push_back(pid);
  return pids;
}

std::string IterationProbes::Describe(int pid) const {
  auto it = attached_.find(pid);
  if (it == attached_.end()) return "not attached";
  std::string out;
  for (const std::string& s : it->second.sources) out += (out.empty() ? "" : "; ") + s;
  return out;
}

Status IterationProbes::SetZeroCodeProbes(std::vector<ZeroCodeProbe> probes) {
  if (probes.size() > SP_MAX_ZERO_CODE_PROBES) {
    return InvalidArgument(std::to_string(probes.size()) +
                           " zero-code probes configured; at most " +
                           std::to_string(SP_MAX_ZERO_CODE_PROBES) + " are supported");
  }
  for (const ZeroCodeProbe& p : probes) SEQPOINT_RETURN_IF_ERROR(ValidateZeroCodeProbe(p));
  std::set<int> in_use;  // slots in the cookies of attached uprobes
  for (const auto& [pid, att] : attached_) in_use.insert(att.zero_code_slot);
  std::vector<ZeroCodeProbe> slots = slots_;
  std::vector<uint32_t> slot_of(probes.size(), SP_MAX_ZERO_CODE_PROBES);
  std::set<uint32_t> taken;
  for (size_t i = 0; i < probes.size(); ++i) {  // unchanged probes keep their slots
    for (uint32_t s = 0; s < slots.size(); ++s) {
      if (taken.count(s) == 0 && slots[s] == probes[i]) {
        slot_of[i] = s;
        taken.insert(s);
        break;
      }
    }
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    if (slot_of[i] != SP_MAX_ZERO_CODE_PROBES) continue;
    uint32_t s = 0;
    while (s < slots.size() && (taken.count(s) > 0 || in_use.count(static_cast<int>(s)) > 0)) ++s;
    if (s == SP_MAX_ZERO_CODE_PROBES) {
      return Unavailable("no free zero-code probe slot for '" + probes[i].name +
                         "': processes attached with earlier probe sets hold the others; the new "
                         "set applies once they exit, or after a restart of the agent");
    }
    if (s == slots.size()) slots.emplace_back();
    SEQPOINT_RETURN_IF_ERROR(skel_->SetZeroCodeConfig(s, BpfConfig(probes[i])));
    slots[s] = probes[i];
    slot_of[i] = s;
    taken.insert(s);
  }
  slots_ = std::move(slots);
  slot_of_ = std::move(slot_of);
  options_.zero_code = std::move(probes);
  finder_ = TargetFinder(options_.proc_root, options_.zero_code);
  return Status::Ok();
}

const ZeroCodeProbe* IterationProbes::ZeroCodeProbeOf(uint32_t event_probe) const {
  if (event_probe == 0 || event_probe > slots_.size()) return nullptr;
  return &slots_[event_probe - 1];
}

const ZeroCodeProbe* IterationProbes::AttachedZeroCodeProbe(int pid) const {
  auto it = attached_.find(pid);
  if (it == attached_.end() || it->second.zero_code_slot < 0) return nullptr;
  return &slots_[static_cast<size_t>(it->second.zero_code_slot)];
}

Status IterationProbes::ArmCounters(int pid, const std::vector<ProbeCounterEvent>& events) {
  if (attached_.count(pid) == 0) {
    return NotFound("probe counters: pid " + std::to_string(pid) + " is not attached");
  }
  // A process adopted from a previous daemon runs that daemon's programs, whose counter maps
  // were its own (not pinned) and whose perf events closed with it: counting in this daemon's
  // maps would never reach its records.
  for (const CarriedOver& c : carried_) {
    if (c.alive && c.identity.pid == pid) {
      return Unsupported("probe counters: pid " + std::to_string(pid) +
                         " runs the probes of the previous daemon (adopted across the restart), "
                         "which cannot read this daemon's counters");
    }
  }
  return counters_->Arm(pid, events);
}

void IterationProbes::SetHookMode(HookMode mode) {
  skel_->SetHookMode(static_cast<uint32_t>(mode));
}

Status IterationProbes::WantIteration(int pid, uint64_t iter) {
  sp_wanted_iter_key key{static_cast<uint32_t>(pid), 0, iter};
  uint8_t one = 1;
  if (bpf_map_update_elem(skel_->wanted_iters_fd(), &key, &one, BPF_ANY) != 0) {
    return LibbpfError("marking iteration " + std::to_string(iter) + " of pid " +
                           std::to_string(pid) + " wanted (at most 65536 pending)",
                       errno);
  }
  return Status::Ok();
}

Status IterationProbes::WantSeqLen(int pid, uint32_t seq_len, uint32_t count) {
  sp_wanted_sl_key key{static_cast<uint32_t>(pid), seq_len};
  if (count == 0) {
    bpf_map_delete_elem(skel_->wanted_sls_fd(), &key);
    return Status::Ok();
  }
  if (bpf_map_update_elem(skel_->wanted_sls_fd(), &key, &count, BPF_ANY) != 0) {
    return LibbpfError("marking SL " + std::to_string(seq_len) + " of pid " + std::to_string(pid) +
                           " wanted (at most 65536 pending)",
                       errno);
  }
  return Status::Ok();
}

Result<int> IterationProbes::Poll(int timeout_ms) {
  auto woken = ring_->Wait(timeout_ms);
  if (!woken.ok()) return woken.status();
  // Records submitted without a wakeup are there too; take them all now.
  int rest = ReadRing();  // unpinned, it commits too
  if (!closing_.empty()) SweepClosed();
  if (pins_ && ring_->uncommitted() > ring_->size() / 2) {
    // The owner saves less often than the ring fills: losing records now would be worse than
    // a restart being given fewer of them again.
    ring_->Commit();
    ++stats_.forced_commits;
  }
  return rest;
}

int IterationProbes::ReadRing() {
  int n = legacy_.empty() ? 0 : ReadLegacy();
  n += ring_->Read(
      [this](const void* data, size_t size) { OnRecord(this, const_cast<void*>(data), size); });
  if (!pins_) ring_->Commit();
  return n;
}

void IterationProbes::CommitDelivered() { ring_->Commit(); }

int IterationProbes::epoll_fd() const { return ring_->epoll_fd(); }

IterationProbeStats IterationProbes::stats() const {
  IterationProbeStats out = stats_;
  out.kernel = skel_->ReadStats();
  for (const auto& [pid, att] : attached_) ReadPidCounters(pid, &out.per_pid[pid]);
  return out;
}

IterationProbeStats IterationProbes::totals() const {
  IterationProbeStats out;
  out.kernel = skel_->ReadStats();
  out.received = stats_.received;
  out.malformed = stats_.malformed;
  out.exited_mid_iteration = stats_.exited_mid_iteration;
  out.stale = stats_.stale;
  out.handed_over_twice = stats_.handed_over_twice;
  out.forced_commits = stats_.forced_commits;
  out.pin_failures = stats_.pin_failures;
  out.hook_latency = stats_.hook_latency;
  return out;
}

}  // namespace seqpoint::probes
