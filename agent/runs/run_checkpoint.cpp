// A run's checkpoint: what replaying its iteration log would rebuild, as bytes, so the store
// can drop the log it stands for (agent/store/store_log.cpp, docs/bounds.md). That is the
// selector's whole state (selector/selector_checkpoint.cpp) and the tracker's own part of the
// replay: the next ordinal, the process and index of each chosen ordinal, and the last index
// of each process (the unobserved count goes on from it). Everything else of a run is restored
// from the store as without a checkpoint: the record and histogram from the run's rows, the
// measurements from theirs.
#include "agent/runs/run_tracker.h"

namespace seqpoint::daemon {
namespace {

constexpr uint32_t kTrackerMagic = 0x4b435254;  // "TRCK"
constexpr uint32_t kTrackerVersion = 1;

}  // namespace

std::string RunTracker::Checkpoint() const {
  selector::StateWriter w;
  w.Put(kTrackerMagic);
  w.Put(kTrackerVersion);
  w.Put(next_ordinal_);
  w.PutAll(sample_ids_, [](selector::StateWriter& o, const auto& kv) {
    o.Put(kv.first);
    o.Put<int32_t>(kv.second.first);
    o.Put(kv.second.second);
  });
  w.PutAll(last_iter_, [](selector::StateWriter& o, const auto& kv) {
    o.Put<int32_t>(kv.first);
    o.Put(kv.second);
  });
  return w.Take() + selector_.Checkpoint();
}

Status RunTracker::LoadCheckpoint(std::string_view image) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument("run " + std::to_string(record_.id) + " checkpoint: " + what);
  };
  selector::StateReader r(image);
  uint32_t magic = 0, version = 0;
  if (!r.Get(&magic) || magic != kTrackerMagic) return bad("not a run checkpoint");
  if (!r.Get(&version) || version != kTrackerVersion) {
    return Unsupported("run " + std::to_string(record_.id) + " checkpoint: layout version " +
                       std::to_string(version) + ", this build reads " +
                       std::to_string(kTrackerVersion));
  }
  uint64_t n = 0;
  if (!r.Get(&next_ordinal_) || !r.Count(&n, 20)) return bad("truncated");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ordinal = 0, iter = 0;
    int32_t pid = 0;
    if (!r.Get(&ordinal) || !r.Get(&pid) || !r.Get(&iter)) return bad("truncated");
    sample_ids_[ordinal] = {pid, iter};
  }
  if (!r.Count(&n, 12)) return bad("truncated");
  for (uint64_t i = 0; i < n; ++i) {
    int32_t pid = 0;
    uint64_t iter = 0;
    if (!r.Get(&pid) || !r.Get(&iter)) return bad("truncated");
    last_iter_[pid] = iter;
  }
  Status st = selector_.LoadCheckpoint(r.rest());
  return st.ok() ? st : st.WithContext("run " + std::to_string(record_.id));
}

}  // namespace seqpoint::daemon
