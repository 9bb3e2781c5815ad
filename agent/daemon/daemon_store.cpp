// The daemon and its state database: the periodic flush, and what it says when the database
// cannot be written (a read-only file or mount, `chattr +i`, a full disk).
//
// Such a store never costs a run: RunManager keeps runs in memory and the flush retries every
// daemon.flush_interval_ms (reopening a connection SQLite opened read-only). The daemon is
// unhealthy meanwhile, in `seqpoint status` (store.writable), on /metrics
// (seqpoint_store_writable 0) and in the log, with one line when writes start failing and one
// when they work again, however many fail in between (seqpoint_store_errors_total counts them).
// A shutdown whose final flush fails exits 1: what was kept in memory is lost.
#include "agent/config/log.h"
#include "agent/daemon/daemon.h"

using nlohmann::json;

namespace seqpoint::daemon {

Status Daemon::FlushState() {
  if (!store_->write_health().writable) (void)store_->RetryWritable();
  Status st =
      store_->write_health().writable ? runs_->Flush() : IoError(store_->write_health().error);
  LogStoreHealth();
  // Saved: the source may let go of what it delivered (pinned probes keep it until then, so a
  // restart is given it again). Every save goes through here, whoever asks for it.
  if (st.ok() && source_) source_->OnStateSaved();
  return st;
}

void Daemon::LogStoreHealth() {
  const StoreWriteHealth& h = store_->write_health();
  if (h.changes == store_health_logged_) return;
  store_health_logged_ = h.changes;
  const std::string db = "state database '" + config_.StateDbPath() + "'";
  if (!h.writable) {
    SEQPOINT_LOG(kError, db + " cannot be written: " + h.error +
                             "; runs are kept in memory and saved once it can be (retried every " +
                             std::to_string(config_.flush_interval_ms) +
                             " ms); seqpointd reports itself unhealthy until then");
  } else {
    SEQPOINT_LOG(kInfo, db + " can be written again after " + std::to_string(h.failures) +
                            " failed writes; the runs kept in memory are being saved");
  }
}

nlohmann::json Daemon::StoreJson() const {
  const StoreWriteHealth& h = store_->write_health();
  return {
      {"writable", h.writable},
      {"error", h.writable ? std::string() : h.error},
      {"write_failures", h.failures},
      {"failing_since_unix", h.failing_since_unix_ns / 1'000'000'000},
      {"unsaved_runs", runs_->unsaved_runs()},
      {"runs_lost", runs_->runs_lost()},
      {"durability_window_ms", config_.flush_interval_ms},
      {"recovered", store_->recovery() ? json{{"moved_to", store_->recovery()->moved_to},
                                              {"reason", store_->recovery()->reason},
                                              {"newer_schema", store_->recovery()->newer_schema}}
                                       : json(nullptr)},
      {"resume_error", resume_error_.empty() ? json(nullptr) : json(resume_error_)}};
}

}  // namespace seqpoint::daemon
