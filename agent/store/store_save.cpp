// A flush's writes: every run of it in one transaction, and of each run only the rows that
// changed since the last flush that committed (docs/bounds.md, "The state database").
//
// A run's histogram holds a row per SL seen (hundreds to thousands), its SeqPoints a few dozen,
// its projections one per metric; a flush a second changes a few of them (the SLs of the last
// second's iterations, the cheap metrics' totals). Writing them all every second cost a write
// per row per run, and re-preparing each statement per run. The store keeps a digest of each row
// as committed (written_rows.h) and writes a row only when its digest moved; the digests change
// only once the transaction commits, and a failed flush forgets those of its runs, so the next
// one rewrites them whole: a row is never skipped that the file does not hold.
#include "agent/store/iteration_log_codec.h"
#include "agent/store/store.h"

namespace seqpoint::daemon {
namespace {

std::string JoinInts(const auto& values) {
  std::string out;
  for (auto v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

constexpr const char* kStatementSql[] = {
    // kRun: created here when CreateRun could not write it (a store that was read-only then).
    "INSERT INTO runs(id, key, started_ns, state, end_reason, updated_ns, ended_ns, pids, "
    "iterations, max_iter, unobserved, unobserved_before_attach) "
    "VALUES(?10, ?11, ?12, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
    "ON CONFLICT(id) DO UPDATE SET state=?1, end_reason=?2, updated_ns=?3, ended_ns=?4, "
    "pids=?5, iterations=?6, max_iter=?7, unobserved=?8, unobserved_before_attach=?9",
    // kHistogram
    "INSERT OR REPLACE INTO histogram(run_id, seq_len, count, time_ns_sum, energy_uj_sum, "
    "energy_count, time_count) VALUES(?, ?, ?, ?, ?, ?, ?)",
    // kSeqPointsDelete
    "DELETE FROM seqpoints WHERE run_id=?",
    // kSeqPoint
    "INSERT INTO seqpoints VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
    // kProjection
    "INSERT OR REPLACE INTO projections(run_id, metric, unit, total, low, high, actual, "
    "measured, updated_ns, perturbed, steady_total, steady_low, steady_high, bounded, "
    "gap_total, gap_low, gap_high, kind, peak, left_out, left_out_detail) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    // kMeasurement
    "INSERT OR REPLACE INTO measurements(run_id, ordinal, pid, iter, seq_len, batch, metric, "
    "unit, value, device) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    // kCost
    "INSERT INTO bin_cost VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(bin_lo, metric, day) DO "
    "UPDATE SET n = n + excluded.n, sum = sum + excluded.sum, sumsq = sumsq + excluded.sumsq",
    // kLogDelete
    "DELETE FROM iteration_log WHERE run_id=?",
    // kCheckpointDelete
    "DELETE FROM run_checkpoint WHERE run_id=?",
    // kCheckpoint
    "INSERT OR REPLACE INTO run_checkpoint VALUES(?, ?, ?, ?)",
    // kLog
    "INSERT INTO iteration_log(run_id, entries, data, format) VALUES(?, ?, ?, ?)",
    // kGaugeBinsDelete
    "DELETE FROM gauge_bins WHERE run_id=? AND metric=?",
    // kGaugeBin
    "INSERT OR REPLACE INTO gauge_bins(run_id, metric, bin_lo, bin_hi, mean, peak, peak_seq_len, "
    "samples) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
};
static_assert(std::size(kStatementSql) == static_cast<size_t>(13), "one per Store::Stmt");

}  // namespace

Result<SqliteStatement*> Store::Prepared(Stmt which) {
  auto& slot = prepared_[static_cast<size_t>(which)];
  if (!slot) {
    auto s = db_->Prepare(kStatementSql[static_cast<size_t>(which)]);
    if (!s.ok()) return s.status();
    slot = std::move(*s);
  }
  return slot.get();
}

Status Store::Write(SqliteStatement* s) {
  SEQPOINT_RETURN_IF_ERROR(s->Run());
  ++counts_.rows_written;
  return Status::Ok();
}

Result<int64_t> Store::CreateRunTx(const RunRecord& run) {
  auto s = db_->Prepare(
      "INSERT INTO runs(id, key, state, end_reason, started_ns, updated_ns, pids) "
      "VALUES(NULLIF(?, 0), ?, ?, ?, ?, ?, ?)");
  if (!s.ok()) return s.status();
  (*s)->Bind(1, run.id).Bind(2, run.key).Bind(3, RunStateName(run.state)).Bind(4, run.end_reason);
  (*s)->Bind(5, run.started_unix_ns).Bind(6, run.updated_unix_ns).Bind(7, JoinInts(run.pids));
  SEQPOINT_RETURN_IF_ERROR((*s)->Run());
  return db_->LastInsertRowId();
}

Status Store::SaveRuns(const std::vector<RunSave>& runs) {
  if (runs.empty()) return Status::Ok();
  // The runs' digests move here while the transaction runs, and back only once it committed.
  std::unordered_map<int64_t, WrittenRows> staged;
  for (const RunSave& save : runs) {
    const int64_t id = save.snapshot->run.id;
    auto it = written_.find(id);
    if (it == written_.end()) continue;
    staged.emplace(id, std::move(it->second));
    written_.erase(it);
  }
  SqliteTransaction tx(*db_);
  Status st = tx.Begin();
  for (size_t i = 0; i < runs.size() && st.ok(); ++i) {
    st = SaveRunRows(runs[i], staged[runs[i].snapshot->run.id]);
  }
  if (st.ok()) st = tx.Commit();
  if (st.ok()) {
    for (const RunSave& save : runs) {
      const RunRecord& r = save.snapshot->run;
      // A closed run is never saved again: nothing to compare with.
      if (r.state == RunState::kActive) written_[r.id] = std::move(staged[r.id]);
    }
  }
  return Track(st);
}

Status Store::SaveRunRows(const RunSave& save, WrittenRows& written) {
  const RunSnapshot& snap = *save.snapshot;
  const RunRecord& r = snap.run;
  // The run row changes with every flush that has anything to save (its iteration counts).
  auto run = Prepared(Stmt::kRun);
  if (!run.ok()) return run.status();
  (*run)->Bind(1, RunStateName(r.state)).Bind(2, r.end_reason).Bind(3, r.updated_unix_ns);
  (*run)->Bind(4, r.ended_unix_ns).Bind(5, JoinInts(r.pids)).Bind(6, int64_t(r.iterations));
  (*run)->Bind(7, int64_t(r.max_iter)).Bind(8, int64_t(r.unobserved));
  (*run)->Bind(9, int64_t(r.unobserved_before_attach));
  (*run)->Bind(10, r.id).Bind(11, r.key).Bind(12, r.started_unix_ns);
  SEQPOINT_RETURN_IF_ERROR(Write(*run));
  SEQPOINT_RETURN_IF_ERROR(SaveHistogram(snap, written));
  SEQPOINT_RETURN_IF_ERROR(SaveSeqPoints(snap, written));
  SEQPOINT_RETURN_IF_ERROR(SaveProjections(snap, written));
  if (save.measurements && !save.measurements->empty()) {
    auto meas = Prepared(Stmt::kMeasurement);
    if (!meas.ok()) return meas.status();
    for (const Measurement& m : *save.measurements) {
      (*meas)->Bind(1, r.id).Bind(2, int64_t(m.ordinal)).Bind(3, int64_t(m.pid));
      (*meas)->Bind(4, int64_t(m.iter)).Bind(5, int64_t(m.seq_len)).Bind(6, int64_t(m.batch));
      (*meas)->Bind(7, m.metric).Bind(8, m.unit).Bind(9, m.value).Bind(10, m.device);
      SEQPOINT_RETURN_IF_ERROR(Write(*meas));
    }
  }
  static const std::vector<IterationLogEntry> kNoLog;
  SEQPOINT_RETURN_IF_ERROR(SaveLog(r, save.new_log ? *save.new_log : kNoLog, save.checkpoint));
  if (save.cost_deltas && !save.cost_deltas->empty()) {
    auto cost = Prepared(Stmt::kCost);
    if (!cost.ok()) return cost.status();
    for (const BinCostRow& c : *save.cost_deltas) {
      (*cost)->Bind(1, c.day).Bind(2, int64_t(c.bin_lo)).Bind(3, int64_t(c.bin_hi));
      (*cost)->Bind(4, c.metric).Bind(5, int64_t(c.n)).Bind(6, c.sum).Bind(7, c.sumsq);
      SEQPOINT_RETURN_IF_ERROR(Write(*cost));
    }
  }
  return Status::Ok();
}

Status Store::SaveHistogram(const RunSnapshot& snap, WrittenRows& written) {
  auto hist = Prepared(Stmt::kHistogram);
  if (!hist.ok()) return hist.status();
  std::vector<std::pair<uint32_t, uint64_t>> added;
  for (const HistogramBin& b : snap.histogram) {
    RowDigest d;
    RowWriter(*hist, &d)
        .Plain(1, snap.run.id)
        .Plain(2, int64_t(b.seq_len))
        .Set(3, int64_t(b.count))
        .Set(4, b.time_ns_sum)
        .Set(5, b.energy_uj_sum)
        .Set(6, int64_t(b.energy_count))
        .Set(7, int64_t(b.time_count));
    uint64_t* before = FindDigest(written.histogram, b.seq_len);
    if (before && *before == d.value()) {
      (*hist)->Reset();
      ++counts_.rows_unchanged;
      continue;
    }
    SEQPOINT_RETURN_IF_ERROR(Write(*hist));
    if (before) {
      *before = d.value();
    } else {
      added.emplace_back(b.seq_len, d.value());
    }
  }
  if (!added.empty()) {
    written.histogram.insert(written.histogram.end(), added.begin(), added.end());
    std::stable_sort(written.histogram.begin(), written.histogram.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return Status::Ok();
}

Status Store::SaveSeqPoints(const RunSnapshot& snap, WrittenRows& written) {
  // Few rows without a key of their own: the set is compared whole and rewritten whole.
  auto bind = [&snap](SqliteStatement* s, RowDigest* d, const SeqPointRecord& p) {
    RowWriter(s, d)
        .Plain(1, snap.run.id)
        .Set(2, int64_t(p.iter))
        .Set(3, std::string_view(JoinInts(p.iters)))
        .Set(4, std::string_view(JoinInts(p.pids)))
        .Set(5, int64_t(p.seq_len))
        .Set(6, p.weight)
        .Set(7, int64_t(p.bin_lo))
        .Set(8, int64_t(p.bin_hi));
  };
  RowDigest all;
  all.Add(static_cast<int64_t>(snap.seqpoints.size()));
  for (const SeqPointRecord& p : snap.seqpoints) bind(nullptr, &all, p);
  if (written.have_seqpoints && written.seqpoints == all.value()) {
    counts_.rows_unchanged += snap.seqpoints.size();
    return Status::Ok();
  }
  auto del = Prepared(Stmt::kSeqPointsDelete);
  if (!del.ok()) return del.status();
  (*del)->Bind(1, snap.run.id);
  SEQPOINT_RETURN_IF_ERROR((*del)->Run());
  auto sp = Prepared(Stmt::kSeqPoint);
  if (!sp.ok()) return sp.status();
  for (const SeqPointRecord& p : snap.seqpoints) {
    RowDigest unused;
    bind(*sp, &unused, p);
    SEQPOINT_RETURN_IF_ERROR(Write(*sp));
  }
  written.have_seqpoints = true;
  written.seqpoints = all.value();
  return Status::Ok();
}

Status Store::SaveProjections(const RunSnapshot& snap, WrittenRows& written) {
  auto proj = Prepared(Stmt::kProjection);
  if (!proj.ok()) return proj.status();
  bool added = false;
  for (const Projection& p : snap.projections) {
    RowDigest d;
    RowWriter(*proj, &d)
        .Plain(1, snap.run.id)
        .Plain(2, p.metric)
        .Set(3, std::string_view(p.unit))
        .Set(4, p.total)
        .Set(5, p.low)
        .Set(6, p.high)
        .Set(7, p.actual)
        .Set(8, int64_t(p.measured))
        .Plain(9, snap.run.updated_unix_ns)  // when it last changed
        .Set(10, int64_t(p.perturbed ? 1 : 0))
        .Set(11, p.steady_total)
        .Set(12, p.steady_low)
        .Set(13, p.steady_high)
        .Set(14, int64_t(p.bounded ? 1 : 0))
        .Set(15, p.gap_total)
        .Set(16, p.gap_low)
        .Set(17, p.gap_high)
        .Set(18, int64_t(p.kind))
        .Set(19, p.peak)
        .Set(20, std::string_view(p.left_out))
        .Set(21, std::string_view(p.left_out_detail));
    for (const GaugeBin& b : p.bins) {  // part of the projection: compared with it
      RowWriter(nullptr, &d)
          .Set(0, int64_t(b.bin_lo))
          .Set(0, int64_t(b.bin_hi))
          .Set(0, b.mean)
          .Set(0, b.peak)
          .Set(0, int64_t(b.peak_seq_len))
          .Set(0, int64_t(b.samples));
    }
    uint64_t* before = FindDigest(written.projections, p.metric);
    if (before && *before == d.value()) {
      (*proj)->Reset();
      ++counts_.rows_unchanged;
      continue;
    }
    SEQPOINT_RETURN_IF_ERROR(Write(*proj));
    SEQPOINT_RETURN_IF_ERROR(SaveGaugeBins(snap.run.id, p));
    if (before) {
      *before = d.value();
    } else {
      written.projections.emplace_back(p.metric, d.value());
      added = true;
    }
  }
  if (added) {
    std::stable_sort(written.projections.begin(), written.projections.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return Status::Ok();
}

// A gauge's bins, replaced whole with its projection row. A delta has none (a metric's kind
// never changes), so its writes cost no statement here.
Status Store::SaveGaugeBins(int64_t run_id, const Projection& p) {
  if (p.kind == 0 && p.bins.empty()) return Status::Ok();
  auto del = Prepared(Stmt::kGaugeBinsDelete);
  if (!del.ok()) return del.status();
  (*del)->Bind(1, run_id).Bind(2, p.metric);
  SEQPOINT_RETURN_IF_ERROR((*del)->Run());
  if (p.bins.empty()) return Status::Ok();
  auto ins = Prepared(Stmt::kGaugeBin);
  if (!ins.ok()) return ins.status();
  for (const GaugeBin& b : p.bins) {
    (*ins)->Bind(1, run_id).Bind(2, p.metric).Bind(3, int64_t(b.bin_lo));
    (*ins)->Bind(4, int64_t(b.bin_hi)).Bind(5, b.mean).Bind(6, b.peak);
    (*ins)->Bind(7, int64_t(b.peak_seq_len)).Bind(8, int64_t(b.samples));
    SEQPOINT_RETURN_IF_ERROR(Write(*ins));
  }
  return Status::Ok();
}

}  // namespace seqpoint::daemon
