// Status and Result<T>: how every module reports errors. Cheap to return on
// the success path (one enum). fusefs/ turns a Status into an errno exactly
// once, at the FUSE edge (fusefs/to_errno.h).
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace epochfs::cache {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,          // ENOENT
    kPermissionDenied,  // EACCES
    kIoError,           // EIO
    kCorruption,        // checksum mismatch; never reaches a reader (re-read instead)
    kInvalidArgument,   // EINVAL
    kReadOnly,          // EROFS
    kNoSpace,           // ENOSPC
    kStale,             // the source file is no longer the version we snapshotted
    kUnavailable,       // a tier or peer is not usable right now
    kTimedOut,
    kTooLarge,
  };

  Status() = default;
  static Status ok() { return Status(); }
  static Status notFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status permissionDenied(std::string m) {
    return Status(Code::kPermissionDenied, std::move(m));
  }
  static Status ioError(std::string m) { return Status(Code::kIoError, std::move(m)); }
  static Status corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status invalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status readOnly(std::string m) { return Status(Code::kReadOnly, std::move(m)); }
  static Status noSpace(std::string m) { return Status(Code::kNoSpace, std::move(m)); }
  static Status stale(std::string m) { return Status(Code::kStale, std::move(m)); }
  static Status unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status timedOut(std::string m) { return Status(Code::kTimedOut, std::move(m)); }
  static Status tooLarge(std::string m) { return Status(Code::kTooLarge, std::move(m)); }
  // Maps a system errno to the closest code; the message gets strerror appended.
  static Status fromErrno(int err, const std::string& what);

  bool isOk() const { return code_ == Code::kOk; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string toString() const;
  // The same code, the message behind "what: ".
  Status withContext(const std::string& what) const {
    return Status(code_, what + ": " + message_);
  }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or a non-ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool isOk() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const {
    static const Status kOkStatus;
    return isOk() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace epochfs::cache
