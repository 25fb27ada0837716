// Result<T>: what every call of the admin client library returns, a value or
// an Error that says what kind of failure it was (so that each tool maps it
// to its own reporting: epochctl to an exit status, epochbench to a message).
// Thread-safety: a plain value type.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace epochfs::admin {

enum class ErrorKind {
  kUnreachable,  // not an epochfs mount, no such directory, daemon not responding
  kDenied,       // permission denied: the mount root, the socket, or the daemon said so
  kRejected,     // the daemon answered {"ok": false} (its "error" is the message)
  kProtocol,     // a request over the message cap, a reply that is not a JSON object
};

struct Error {
  ErrorKind kind;
  std::string message;  // one line for the user
  std::string code;     // an {"ok": false} reply's "code" (admin::kErr*), else empty
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // value() and the operators: only when ok(); error(): only when not.
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// A Result with no value: success or an Error.
using Status = Result<std::monostate>;
inline Status okStatus() { return std::monostate{}; }

}  // namespace epochfs::admin
