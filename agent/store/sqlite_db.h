// A thin RAII layer over the SQLite C API: a connection and prepared statements whose errors come
// back as Status naming the database file and the statement. No exceptions, no ORM.
//
// Threads: one connection is used from the daemon's io_context thread only.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace seqpoint::daemon {

// Called with a write statement's SQL just before it runs (Exec, and SqliteStatement::Run,
// COMMIT included); an error fails that statement. The fault-injection seam of the store's
// crash tests (tests/agent/flush_crash_test.cpp): fail, or _exit, between any two statements.
using SqliteFaultHook = std::function<Status(std::string_view sql)>;

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt, std::string path,
                  const SqliteFaultHook* hook = nullptr)
      : db_(db), stmt_(stmt), path_(std::move(path)), hook_(hook) {}
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Binds are 1-based, as in SQLite. Reset() clears bindings for reuse.
  SqliteStatement& Bind(int i, int64_t v);
  SqliteStatement& Bind(int i, double v);  // NaN binds NULL
  SqliteStatement& Bind(int i, std::string_view v);
  SqliteStatement& BindBlob(int i, const void* data, size_t size);
  SqliteStatement& BindNull(int i);
  // Steps once: true while a row is available, false when done.
  Result<bool> Step();
  // Steps to completion (statements returning no rows).
  Status Run();
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const;  // NULL reads as NaN
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const;
  std::string Blob(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string path_;
  const SqliteFaultHook* hook_;  // the connection's (outlives its statements), may be empty
};

class SqliteDb {
 public:
  // Opens (creating) the file; WAL journal, synchronous=NORMAL, a busy timeout.
  static Result<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  Status Exec(std::string_view sql);
  Result<std::unique_ptr<SqliteStatement>> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  const std::string& path() const { return path_; }
  // True when SQLite opened the file read-only (a file it may not write: it says so only at
  // the first write, "attempt to write a readonly database").
  bool read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }
  // Tests only: see SqliteFaultHook. An empty function removes it.
  void set_fault_hook(SqliteFaultHook hook) { hook_ = std::move(hook); }

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  SqliteFaultHook hook_;
};

// What an existing database file is found to be before it is used.
struct SqliteFileCheck {
  enum class Verdict {
    kAbsent,     // no file: a new database will be created
    kOk,         // PRAGMA quick_check says "ok"
    kEmpty,      // 0 bytes: whatever was there is gone
    kDamaged,    // not a database, or quick_check found damage (detail says what)
    kUnchecked,  // quick_check ran past its time limit; the file is used as it is
  };
  Verdict verdict = Verdict::kAbsent;
  std::string detail;  // SQLite's words for the damage
  int64_t bytes = 0;   // the file's size
};

// Opens `path` read-only and runs PRAGMA quick_check, interrupted after
// `limit`. Damage (SQLITE_CORRUPT, SQLITE_NOTADB, a quick_check row other than "ok") is a
// verdict; other failures (permissions, I/O) are errors, since moving such a file aside would
// lose a database that is fine.
Result<SqliteFileCheck> CheckSqliteFile(const std::string& path, std::chrono::milliseconds limit);

// BEGIN IMMEDIATE ... COMMIT; rolls back in the destructor unless Commit() succeeded.
class SqliteTransaction {
 public:
  explicit SqliteTransaction(SqliteDb& db) : db_(db) {}
  ~SqliteTransaction();
  Status Begin() { return db_.Exec("BEGIN IMMEDIATE"); }
  Status Commit();

 private:
  SqliteDb& db_;
  bool open_ = true;
};

}  // namespace seqpoint::daemon
