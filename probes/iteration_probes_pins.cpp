// IterationProbes, pinned (iteration_probes.h, probe_pins.h): what survives its owner and how the
// next owner takes it over.
//
// Same generation (the same BPF object and load-time settings): the shared maps were reused at
// load (IterationProbeSkeleton pins them), so the ring's consumer position is where the last
// owner committed, and AdoptPinned() takes over the processes whose links are pinned: alive
// ones stay attached through their old links (the old programs, which write to the same maps),
// so nothing is attached twice and no iteration is missed; gone ones are attached until their
// records are delivered, then the owner detaches them.
//
// Another generation (an upgrade that changed the BPF object, a new ring size): its maps cannot
// be reused. Its ring is drained first, its processes are carried over, and each keeps its old
// probes until the new owner attaches it afresh (AttachTargets). From the moment our programs
// take it, both generations record it: its open iterations are copied to our maps, the old
// programs are told to ignore it, copies of what ended meanwhile are taken back, and its old
// links are unpinned (RetireLegacy). An end both generations saw in between is delivered once:
// the old ring is read first, and our record of the same iteration and thread is dropped
// (HandedOverTwice), so none is reported twice or without its begin. Whatever has not been
// attached afresh within kLegacyGraceNs is retired anyway, and the old generation's pins are
// removed.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "common/clock.h"
#include "probes/iteration_probes.h"

namespace seqpoint::probes {
namespace {

constexpr uint64_t kLegacyGraceNs = 30'000'000'000ull;
// After a process's hand-over, how long the old ring's ends are remembered to drop their echoes.
constexpr uint64_t kHandoverNs = 2'000'000'000ull;

bool AliveAs(const std::string& proc_root, int pid, uint64_t start_time, ProcessIdentity* id) {
  auto found = ReadProcessIdentity(proc_root, pid);
  if (!found.ok() || found->start_time != start_time || found->exited()) return false;
  *id = *found;
  return true;
}

uint32_t ValueSize(int map_fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  return bpf_obj_get_info_by_fd(map_fd, &info, &len) == 0 ? info.value_size : 0;
}

// The entries of an old generation's map that `mine(key, value)` selects, when its layout is ours.
template <typename Key, typename Value, typename Mine>
std::vector<std::pair<Key, Value>> EntriesOf(int from, int to, Mine mine) {
  std::vector<std::pair<Key, Value>> out;
  if (from < 0 || ValueSize(from) != sizeof(Value) || ValueSize(to) != sizeof(Value)) return out;
  Key key{}, next{};
  const Key* prev = nullptr;
  while (bpf_map_get_next_key(from, prev, &next) == 0) {
    Value v{};
    if (bpf_map_lookup_elem(from, &next, &v) == 0 && mine(next, v)) out.push_back({next, v});
    key = next;
    prev = &key;
  }
  return out;
}

template <typename Key, typename Value>
void CopyInto(int to, const std::vector<std::pair<Key, Value>>& entries) {
  for (const auto& [k, v] : entries) bpf_map_update_elem(to, &k, &v, BPF_NOEXIST);
}

// After the old programs stopped: a copied entry the old map no longer holds as it was (that
// iteration ended, or its thread began another, in the old programs before ours had the copy) is
// taken back from ours unless ours rewrote it. Nothing else is copied: whatever began after our
// programs took the process is in our maps already, and copying it again could revive an entry
// our programs have ended since.
template <typename Key, typename Value>
void TakeBackEnded(int from, int to, const std::vector<std::pair<Key, Value>>& copied) {
  for (const auto& [k, v] : copied) {
    Value old{}, ours{};
    if (bpf_map_lookup_elem(from, &k, &old) == 0 && std::memcmp(&old, &v, sizeof(v)) == 0) {
      continue;
    }
    if (bpf_map_lookup_elem(to, &k, &ours) == 0 && std::memcmp(&ours, &v, sizeof(v)) == 0) {
      bpf_map_delete_elem(to, &k);
    }
  }
}

template <typename Key, typename Value, typename Mine>
void DeleteFrom(int from, int to, Mine mine) {
  for (const auto& [k, v] : EntriesOf<Key, Value>(from, to, mine)) bpf_map_delete_elem(from, &k);
}

}  // namespace

Status IterationProbes::OpenPins(IterationProbeSkeletonConfig* config) {
  SEQPOINT_RETURN_IF_ERROR(EnsureBpffs(options_.pin_dir));
  // Trees of daemons whose state is gone keep their links attached (and tracing) until reboot.
  swept_ = SweepOrphanInstances(options_.pin_dir, options_.pin_instance);
  auto pins = ProbePins::Open(options_.pin_dir, options_.pin_instance,
                              IterationProbeSkeleton::Generation(*config));
  if (!pins.ok()) return pins.status();
  pins_ = std::make_unique<ProbePins>(std::move(*pins));
  config->pin_dir = pins_->dir();
  return Status::Ok();
}

void IterationProbes::AdoptPinned() {
  for (const PinnedPid& p : pins_->ListPids()) {
    Attachment att;
    const bool alive = AliveAs(options_.proc_root, p.pid, p.start_time, &att.identity);
    if (!alive) att.identity = ProcessIdentity{p.pid, p.start_time, "", 'X'};
    for (const PinnedLink& l : p.links) {
      bpf_link* link = bpf_link__open(l.path.c_str());
      if (link == nullptr) continue;
      const bool first = att.links.count(l.key) == 0;
      att.links.emplace(first ? l.key : l.key + "@" + std::to_string(att.links.size()),
                        LinkPtr(link));
      if (!first) continue;
      att.sources.push_back("adopted " + l.key);
      size_t colon = l.key.find(':');
      if (l.key.rfind("sl:", 0) == 0 || l.key.rfind("boundary:", 0) == 0) {
        att.zero_code_slot = std::atoi(l.key.c_str() + colon + 1);
      }
    }
    carried_.push_back({att.identity, alive});
    stats_.per_pid[p.pid].attached = true;
    attached_.emplace(p.pid, std::move(att));
  }
  // A registered pid without pins (its links failed to pin): nothing records it any more.
  for (uint32_t pid : [&] {
         std::vector<uint32_t> orphans;
         uint32_t key = 0, next = 0;
         const uint32_t* prev = nullptr;
         while (bpf_map_get_next_key(skel_->pids_fd(), prev, &next) == 0) {
           if (attached_.count(static_cast<int>(next)) == 0) orphans.push_back(next);
           key = next;
           prev = &key;
         }
         return orphans;
       }()) {
    bpf_map_delete_elem(skel_->pids_fd(), &pid);
  }
  for (const std::string& dir : pins_->OtherGenerations()) {
    Legacy l;
    l.dir = dir;
    l.deadline_ns = KernelMonotonicNs() + kLegacyGraceNs;
    int events = bpf_obj_get((dir + "/map_events").c_str());
    if (events >= 0) {
      auto ring = RingReader::Open(events);
      close(events);
      if (ring.ok()) l.ring = std::move(*ring);
    }
    l.pids_fd = bpf_obj_get((dir + "/map_pids").c_str());
    l.inflight_fd = bpf_obj_get((dir + "/map_inflight").c_str());
    l.thread_open_fd = bpf_obj_get((dir + "/map_thread_open").c_str());
    for (const PinnedPid& p : pins_->ListPids(dir)) {
      ProcessIdentity id;
      const bool alive = AliveAs(options_.proc_root, p.pid, p.start_time, &id);
      if (alive) l.pids[p.pid] = p.start_time;
      carried_.push_back({alive ? id : ProcessIdentity{p.pid, p.start_time, "", 'X'}, alive});
    }
    legacy_.push_back(std::move(l));
  }
}

void IterationProbes::PinNewLinks(int pid, const std::string& key, const std::set<int>& before) {
  std::set<int> made;
  for (int fd : OpenLinkFds()) {
    if (before.count(fd) == 0) made.insert(fd);
  }
  Status st = pins_->PinLinks(pid, attached_.at(pid).identity.start_time, key, made);
  if (!st.ok()) ++stats_.pin_failures;  // it stays attached, only not across a restart
}

void IterationProbes::RetireLegacy(int pid) {
  const uint32_t upid = static_cast<uint32_t>(pid);
  for (Legacy& l : legacy_) {
    auto it = l.pids.find(pid);
    if (it == l.pids.end()) continue;
    handover_[pid].until_ns = UINT64_MAX;  // until the old ring's last records are read
    auto inflight = EntriesOf<sp_inflight_key, sp_inflight>(
        l.inflight_fd, skel_->inflight_fd(),
        [&](const sp_inflight_key& k, const sp_inflight&) { return k.pid == upid; });
    auto open = EntriesOf<uint32_t, sp_thread_open>(
        l.thread_open_fd, skel_->thread_open_fd(),
        [&](uint32_t, const sp_thread_open& v) { return v.pid == upid; });
    CopyInto(skel_->inflight_fd(), inflight);
    CopyInto(skel_->thread_open_fd(), open);
    if (l.pids_fd >= 0) bpf_map_delete_elem(l.pids_fd, &upid);  // its old programs stop
    TakeBackEnded(l.inflight_fd, skel_->inflight_fd(), inflight);
    TakeBackEnded(l.thread_open_fd, skel_->thread_open_fd(), open);
    DeleteFrom<sp_inflight_key, sp_inflight>(
        l.inflight_fd, skel_->inflight_fd(),
        [&](const sp_inflight_key& k, const sp_inflight&) { return k.pid == upid; });
    DeleteFrom<uint32_t, sp_thread_open>(
        l.thread_open_fd, skel_->thread_open_fd(),
        [&](uint32_t, const sp_thread_open& v) { return v.pid == upid; });
    (void)RemovePinTree(l.dir + "/pid_" + std::to_string(pid) + "_" + std::to_string(it->second));
    l.pids.erase(it);
  }
}

bool IterationProbes::HandedOverTwice(const sp_event& record) {
  auto h = handover_.find(static_cast<int>(record.pid));
  if (h == handover_.end() || record.kind != SP_EVENT_END) return false;
  const std::pair<uint64_t, uint32_t> key{record.iter, record.tid};
  if (reading_legacy_) {
    h->second.legacy_ends.insert(key);
    return false;
  }
  return h->second.legacy_ends.count(key) != 0;
}

void IterationProbes::EndHandovers(uint64_t now_ns) {
  for (auto it = handover_.begin(); it != handover_.end();) {
    bool pending = false;
    for (const Legacy& l : legacy_) pending = pending || l.pids.count(it->first) != 0;
    if (it->second.until_ns == UINT64_MAX && !pending) it->second.until_ns = now_ns + kHandoverNs;
    it = now_ns > it->second.until_ns ? handover_.erase(it) : std::next(it);
  }
}

int IterationProbes::ReadLegacy() {
  int n = 0;
  const uint64_t now = KernelMonotonicNs();
  for (auto it = legacy_.begin(); it != legacy_.end();) {
    Legacy& l = *it;
    if (l.ring) {
      reading_legacy_ = true;  // its processes are not (yet) attached in our generation
      n += l.ring->Read(
          [this](const void* data, size_t size) { OnRecord(this, const_cast<void*>(data), size); });
      reading_legacy_ = false;
      l.ring->Commit();
    }
    if (!l.pids.empty() && now < l.deadline_ns) {
      ++it;
      continue;
    }
    (void)RemovePinTree(l.dir);  // what is left detaches as the fds below close
    for (int fd : {l.pids_fd, l.inflight_fd, l.thread_open_fd}) {
      if (fd >= 0) close(fd);
    }
    it = legacy_.erase(it);
  }
  if (!handover_.empty()) EndHandovers(now);
  return n;
}

void IterationProbes::Release() {
  if (released_) return;
  if (!pins_) {
    DetachAll();
    return;
  }
  ReadRing();
  released_ = true;
  const bool keep = !attached_.empty();
  attached_.clear();  // closes our fds; the pins hold the links
  if (!keep) (void)RemovePinTree(InstancePinDir(options_.pin_dir, options_.pin_instance));
}

Result<int> IterationProbes::RemovePins(const std::string& pin_dir, const std::string& instance) {
  return RemovePinTree(InstancePinDir(pin_dir, instance));
}

}  // namespace seqpoint::probes
