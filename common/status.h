// The one error type at every module boundary (leveldb's Status, plus a Result<T> for values).
// A Status message names the input and, where there is one, the fix: callers print it as is.
// No exception crosses a module boundary; code that calls throwing libraries catches locally.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace seqpoint {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,   // bad input from a user or a file: fix the input
  kNotFound,          // a file, process, device or symbol is absent
  kUnsupported,       // this kernel, device or format revision is not handled
  kPermissionDenied,  // needs root or a capability
  kUnavailable,       // a resource is there but cannot be used now (busy, EAGAIN, gone)
  kIoError,           // a read or write failed
  kInternal,          // a bug: report it
};

std::string_view ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"; "OK" when ok.
  std::string ToString() const;
  // Returns a copy whose message is prefixed with context ("reading X: ...").
  Status WithContext(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status Unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {ErrorCode::kPermissionDenied, std::move(m)}; }
inline Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace seqpoint

// Returns early from a function returning Status or Result<T> when `expr` fails.
#define SEQPOINT_RETURN_IF_ERROR(expr)              \
  do {                                              \
    ::seqpoint::Status _sp_status = (expr);         \
    if (!_sp_status.ok()) return _sp_status;        \
  } while (0)

// `SEQPOINT_ASSIGN_OR_RETURN(auto rows, store.Query(...));` declares `rows` as the value of a
// Result<T>, or returns its Status from the enclosing function (Status or Result<U>).
#define SEQPOINT_ASSIGN_OR_RETURN(decl, expr) \
  SEQPOINT_ASSIGN_OR_RETURN_IMPL_(SEQPOINT_CONCAT_(_sp_result_, __LINE__), decl, expr)
#define SEQPOINT_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) return tmp.status();                     \
  decl = std::move(tmp).value()
#define SEQPOINT_CONCAT_(a, b) SEQPOINT_CONCAT_IMPL_(a, b)
#define SEQPOINT_CONCAT_IMPL_(a, b) a##b
