#pragma once
// Error values that cross module boundaries. Exceptions are reserved for the CLI top level.
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace rlflow {

// Mirrors the CLI exit codes so an error raised deep down keeps its meaning at the top.
enum class ErrorCode : int {
  kUsage = 2,
  kBadInput = 3,
  kVerificationFailed = 4,
  kInternal = 5,
  kUnsupported = 6,  // well-formed but outside what rlflow models; maps to exit 3 at the CLI
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  static Error bad_input(std::string m) { return {ErrorCode::kBadInput, std::move(m)}; }
  static Error unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
  static Error internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
  Error with_context(const std::string& ctx) const { return {code, ctx + ": " + message}; }
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}    // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)) {}  // NOLINT
  static Status Ok() { return {}; }
  bool ok() const { return !err_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *err_; }

 private:
  std::optional<Error> err_;
};

}  // namespace rlflow

// Propagates an error out of the enclosing function returning Expected<...> or Status.
#define RLFLOW_TRY_STATUS(expr)                   \
  do {                                            \
    auto _rl_s = (expr);                          \
    if (!_rl_s.ok()) return _rl_s.error();        \
  } while (0)
