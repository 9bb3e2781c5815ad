#include "agent/store/sqlite_db.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace seqpoint::daemon {

SqliteStatement& SqliteStatement::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
SqliteStatement& SqliteStatement::Bind(int i, double v) {
  if (std::isnan(v)) {
    sqlite3_bind_null(stmt_, i);
  } else {
    sqlite3_bind_double(stmt_, i, v);
  }
  return *this;
}
SqliteStatement& SqliteStatement::Bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
SqliteStatement& SqliteStatement::BindBlob(int i, const void* data, size_t size) {
  sqlite3_bind_blob64(stmt_, i, data, size, SQLITE_TRANSIENT);
  return *this;
}
SqliteStatement& SqliteStatement::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

Result<bool> SqliteStatement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return IoError("state database '" + path_ + "': " + sqlite3_errmsg(db_) + " in `" +
                 sqlite3_sql(stmt_) + "` (check disk space and permissions)");
}

Status SqliteStatement::Run() {
  if (hook_ && *hook_) SEQPOINT_RETURN_IF_ERROR((*hook_)(sqlite3_sql(stmt_)));
  for (;;) {
    auto more = Step();
    if (!more.ok()) {
      Reset();
      return more.status();
    }
    if (!*more) break;
  }
  Reset();
  return Status::Ok();
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

double SqliteStatement::Double(int col) const {
  if (IsNull(col)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, col);
}

std::string SqliteStatement::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
}

std::string SqliteStatement::Blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return IoError("cannot open state database '" + path + "': " + msg +
                   " (check that its directory exists and is writable, or set daemon.state_dir)");
  }
  std::unique_ptr<SqliteDb> out(new SqliteDb(db, path));
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers (`sqlite3 state.db` by an operator) never block the daemon's writes, and a
  // crash loses at most the last transaction. synchronous=NORMAL is durable across process
  // crashes (SIGKILL) in WAL mode; only a power loss may drop the last commits.
  SEQPOINT_RETURN_IF_ERROR(out->Exec("PRAGMA journal_mode=WAL"));
  SEQPOINT_RETURN_IF_ERROR(out->Exec("PRAGMA synchronous=NORMAL"));
  SEQPOINT_RETURN_IF_ERROR(out->Exec("PRAGMA foreign_keys=ON"));
  return out;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

Status SqliteDb::Exec(std::string_view sql) {
  // A rollback is how a failure is undone: never failed on purpose.
  if (hook_ && sql != "ROLLBACK") SEQPOINT_RETURN_IF_ERROR(hook_(sql));
  char* err = nullptr;
  std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return IoError("state database '" + path_ + "': " + msg + " in `" + text.substr(0, 80) + "`");
  }
  return Status::Ok();
}

Result<std::unique_ptr<SqliteStatement>> SqliteDb::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt, nullptr) != SQLITE_OK) {
    return Internal("state database '" + path_ + "': cannot prepare `" + std::string(sql) +
                    "`: " + sqlite3_errmsg(db_));
  }
  return std::make_unique<SqliteStatement>(db_, stmt, path_, &hook_);
}

namespace {

bool IsDamage(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

struct Deadline {
  std::chrono::steady_clock::time_point end;
  bool hit = false;
};

int PastDeadline(void* arg) {
  auto* d = static_cast<Deadline*>(arg);
  if (std::chrono::steady_clock::now() < d->end) return 0;
  d->hit = true;
  return 1;  // interrupts the statement (SQLITE_INTERRUPT)
}

}  // namespace

Result<SqliteFileCheck> CheckSqliteFile(const std::string& path, std::chrono::milliseconds limit) {
  SqliteFileCheck out;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return out;
    return IoError("cannot stat state database '" + path + "': " + std::strerror(errno) +
                   " (check the permissions of daemon.state_dir)");
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("state database '" + path +
                           "' is not a regular file (remove it or set daemon.state_dir)");
  }
  out.bytes = st.st_size;
  if (st.st_size == 0) {
    out.verdict = SqliteFileCheck::Verdict::kEmpty;
    out.detail = "empty: 0 bytes";
    return out;
  }
  sqlite3* db = nullptr;
  // Read-only, no checkpoint on close: the check never writes the WAL into a damaged file nor
  // deletes it, so what is moved aside is what was found.
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  Deadline deadline{std::chrono::steady_clock::now() + limit};
  auto fail = [&](int code) -> Result<SqliteFileCheck> {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
    sqlite3_close_v2(db);
    // Interrupted by the deadline, also while the schema is read at prepare: not checked.
    if ((code & 0xff) == SQLITE_INTERRUPT && deadline.hit) {
      out.verdict = SqliteFileCheck::Verdict::kUnchecked;
      out.detail = "quick_check ran past " + std::to_string(limit.count()) + " ms";
      return out;
    }
    if (IsDamage(code)) {
      out.verdict = SqliteFileCheck::Verdict::kDamaged;
      out.detail = msg;
      return out;
    }
    return IoError("cannot check state database '" + path + "': " + msg +
                   " (check that it and its directory are writable by seqpointd)");
  };
  if (rc != SQLITE_OK) return fail(rc);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_progress_handler(db, 100, PastDeadline, &deadline);
  sqlite3_stmt* stmt = nullptr;
  rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return fail(rc);
  std::string problems;
  int rows = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    std::string row = text ? text : "";
    if (row == "ok") continue;
    if (rows++ < 3) problems += (problems.empty() ? "" : "; ") + row;
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return fail(rc);
  sqlite3_close_v2(db);
  if (rows > 0) {
    out.verdict = SqliteFileCheck::Verdict::kDamaged;
    out.detail = "quick_check: " + problems +
                 (rows > 3 ? " (and " + std::to_string(rows - 3) + " more)" : "");
    return out;
  }
  out.verdict = SqliteFileCheck::Verdict::kOk;
  return out;
}

SqliteTransaction::~SqliteTransaction() {
  if (open_) (void)db_.Exec("ROLLBACK");
}

Status SqliteTransaction::Commit() {
  Status st = db_.Exec("COMMIT");
  if (st.ok()) open_ = false;
  return st;
}

}  // namespace seqpoint::daemon
