// Whether the state database can be written, and the two writes the daemon's runs go through.
//
// A store that cannot be written (a read-only file or mount, `chattr +i`, a full disk) must not
// cost the runs it would hold: RunManager keeps them in memory and retries at every flush, and
// the daemon reports itself unhealthy from write_health() (status, /metrics) and logs once per
// change, not once per failed write. SQLite opens a file it may not write read-only without a
// word and never upgrades that connection, so a retry reopens it first.
#include "agent/store/store.h"
#include "common/clock.h"

namespace seqpoint::daemon {

Status Store::Track(Status st) {
  if (st.ok()) {
    if (!health_.writable) {
      health_.writable = true;
      health_.failing_since_unix_ns = 0;
      ++health_.changes;
    }
    return st;
  }
  ++health_.failures;
  health_.error = st.message();
  if (health_.writable) {
    health_.writable = false;
    health_.failing_since_unix_ns = WallNs();
    ++health_.changes;
  }
  return st;
}

Result<int64_t> Store::CreateRun(const RunRecord& run) {
  auto id = CreateRunTx(run);
  (void)Track(id.ok() ? Status::Ok() : id.status());
  return id;
}

Status Store::SaveRun(const RunSnapshot& snapshot, const std::vector<Measurement>& measurements,
                      const std::vector<BinCostRow>& cost_deltas,
                      const std::vector<IterationLogEntry>& new_log,
                      const std::string* checkpoint) {
  return SaveRuns({RunSave{&snapshot, &measurements, &cost_deltas, &new_log, checkpoint}});
}

Status Store::CheckWritable() {
  auto s = db_->Prepare(
      "INSERT INTO meta VALUES('write_checked_unix', ?) ON CONFLICT(name) DO UPDATE SET "
      "value = excluded.value");
  if (!s.ok()) return Track(s.status());
  (*s)->Bind(1, WallNs() / 1'000'000'000);
  return Track((*s)->Run());
}

Status Store::RetryWritable() {
  if (db_->read_only()) {
    auto reopened = SqliteDb::Open(db_->path());
    if (!reopened.ok()) return Track(reopened.status());
    if ((*reopened)->read_only()) {
      return Track(IoError("state database '" + db_->path() +
                           "' is still read-only (check its permissions, attributes "
                           "(lsattr) and mount, and the free space of daemon.state_dir)"));
    }
    prepared_ = {};  // the old connection's
    db_ = std::move(*reopened);
  }
  return CheckWritable();
}

}  // namespace seqpoint::daemon
