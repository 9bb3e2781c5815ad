// The iteration log of active runs and the checkpoints that bound it (store.h, docs/bounds.md).
//
// A run's log holds what its selector was fed, in order, so a restart can replay it. It would
// grow by 40 bytes per iteration (iteration_log_codec.h) for as long as the run's budget is paced
// (it never ends), so the daemon now and then saves a checkpoint of the selector instead
// (selector/state_codec.h): in the same transaction the checkpoint replaces the run's log, and a
// restart loads it and replays only the entries after it. A run that is no longer active never
// resumes: its log and checkpoint go with the save that closes it.
#include "agent/store/iteration_log_codec.h"
#include "agent/store/store.h"
#include "common/clock.h"

namespace seqpoint::daemon {

Status Store::SaveLog(const RunRecord& r, const std::vector<IterationLogEntry>& new_log,
                      const std::string* checkpoint) {
  auto run_rows = [this, &r](Stmt which) -> Status {
    auto s = Prepared(which);
    if (!s.ok()) return s.status();
    (*s)->Bind(1, r.id);
    return (*s)->Run();
  };
  if (r.state != RunState::kActive) {
    SEQPOINT_RETURN_IF_ERROR(run_rows(Stmt::kLogDelete));
    return run_rows(Stmt::kCheckpointDelete);
  }
  if (checkpoint != nullptr) {
    SEQPOINT_RETURN_IF_ERROR(run_rows(Stmt::kLogDelete));
    auto s = Prepared(Stmt::kCheckpoint);
    if (!s.ok()) return s.status();
    (*s)->Bind(1, r.id).Bind(2, int64_t(r.iterations)).Bind(3, WallNs());
    (*s)->BindBlob(4, checkpoint->data(), checkpoint->size());
    SEQPOINT_RETURN_IF_ERROR(Write(*s));
  }
  if (new_log.empty()) return Status::Ok();
  auto log = Prepared(Stmt::kLog);
  if (!log.ok()) return log.status();
  const std::string image = EncodeIterationLog(new_log);
  (*log)->Bind(1, r.id).Bind(2, int64_t(new_log.size()));
  (*log)->BindBlob(3, image.data(), image.size()).Bind(4, int64_t{kIterationLogFormat});
  return Write(*log);
}

Result<std::string> Store::LoadCheckpoint(int64_t run_id) {
  auto s = db_->Prepare("SELECT data FROM run_checkpoint WHERE run_id=?");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, run_id);
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*s)->Blob(0) : std::string();
}

Result<Store::LogStats> Store::IterationLogStats() {
  auto s = db_->Prepare(
      "SELECT (SELECT COALESCE(SUM(entries), 0) FROM iteration_log), "
      "(SELECT COALESCE(SUM(LENGTH(data)), 0) FROM run_checkpoint)");
  if (!s.ok()) return s.status();
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  return LogStats{(*s)->Int(0), (*s)->Int(1)};
}

Result<int64_t> Store::NextRunId() {
  auto s = db_->Prepare("SELECT COALESCE(MAX(id), 0) + 1 FROM runs");
  if (!s.ok()) return s.status();
  auto row = (*s)->Step();
  if (!row.ok()) return row.status();
  return (*s)->Int(0);
}

}  // namespace seqpoint::daemon
