// Status and Result<T>: how every fallible call in Apus reports failure.
//
// A Status is a code plus a human message. OK carries no message and costs one small string.
// Codes are chosen by what Swift answers, so one function, to_http_status(), maps any failure
// to the HTTP status a client or peer sees. Result<T> holds either a T or a non-OK Status.
// Both are [[nodiscard]]: dropping a Status is a compile-time warning (an error with
// APUS_WERROR), our version of RocksDB's ASSERT_STATUS_CHECKED.
//
// Thread-compatible: a Status is a value; share copies, not references, across threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace apus::common {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,             // 404
    kConflict,             // 409
    kPreconditionFailed,   // 412
    kInsufficientStorage,  // 507: missing/unmounted device, disk full
    kTimeout,              // 408 from a client, 504/503 from a peer
    kIOError,              // 500
    kCorruption,           // 500; the caller quarantines
    kInvalidArgument,      // 400
    kUnavailable,          // 503
    kCancelled,            // the peer or the server went away; nothing to answer
  };

  Status() = default;  // OK
  static Status ok_status() { return Status(); }
  static Status not_found(std::string msg = {}) { return {Code::kNotFound, std::move(msg)}; }
  static Status conflict(std::string msg = {}) { return {Code::kConflict, std::move(msg)}; }
  static Status precondition_failed(std::string msg = {}) {
    return {Code::kPreconditionFailed, std::move(msg)};
  }
  static Status insufficient_storage(std::string msg = {}) {
    return {Code::kInsufficientStorage, std::move(msg)};
  }
  static Status timeout(std::string msg = {}) { return {Code::kTimeout, std::move(msg)}; }
  static Status io_error(std::string msg = {}) { return {Code::kIOError, std::move(msg)}; }
  static Status corruption(std::string msg = {}) { return {Code::kCorruption, std::move(msg)}; }
  static Status invalid_argument(std::string msg = {}) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status unavailable(std::string msg = {}) { return {Code::kUnavailable, std::move(msg)}; }
  static Status cancelled(std::string msg = {}) { return {Code::kCancelled, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_precondition_failed() const { return code_ == Code::kPreconditionFailed; }
  bool is_timeout() const { return code_ == Code::kTimeout; }
  bool is_cancelled() const { return code_ == Code::kCancelled; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFound: <message>", for logs.
  std::string to_string() const;

  // Marks a deliberately ignored status, so the intent is visible at the call site.
  void ignore() const {}

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// The one mapping from a failure to the HTTP status Swift would answer with.
int to_http_status(const Status& s);

// A value or the Status explaining why there is none. Construct from a T or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT: implicit
    assert(!std::get<1>(v_).ok() && "Result needs a value or a failure");
  }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace apus::common

// Propagates a failed Status from an expression returning Status.
#define APUS_RETURN_IF_ERROR(expr)                        \
  do {                                                    \
    ::apus::common::Status apus_status_ = (expr);         \
    if (!apus_status_.ok()) return apus_status_;          \
  } while (0)

// Assigns the value of a Result expression to `lhs`, or returns its failed Status.
#define APUS_ASSIGN_OR_RETURN(lhs, expr)                  \
  do {                                                    \
    auto apus_result_ = (expr);                           \
    if (!apus_result_.ok()) return apus_result_.status(); \
    lhs = std::move(*apus_result_);                       \
  } while (0)

// The same inside a coroutine.
#define APUS_CO_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::apus::common::Status apus_status_ = (expr);         \
    if (!apus_status_.ok()) co_return apus_status_;       \
  } while (0)

// Fatal check for broken invariants (never for bad input): logs and aborts, in every build.
#define APUS_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) ::apus::common::check_failed(#cond, __FILE__, __LINE__);       \
  } while (0)

namespace apus::common {
[[noreturn]] void check_failed(const char* expr, const char* file, int line);
}
