// epload/result.hpp — the error type and Result<T> used across the core API.
//
// The core never throws across its API and never prints: every fallible call
// returns Result<T>, a value or an Error whose message names the file, line or
// backend concerned and says what to do about it.  Only the Python boundary and
// the CLI turn errors into exceptions or exit codes.
#pragma once

#include <string>   // Error::message
#include <utility>  // std::move
#include <variant>  // Result storage

namespace epload {

/// What kind of failure an Error reports; callers branch on this, people read
/// the message.
enum class Errc {
  io,                ///< a file or directory could not be read or written
  parse,             ///< malformed entry_points.txt or metadata (importlib raises too)
  encoding,          ///< invalid UTF-8 where importlib decodes UTF-8
  unsupported,       ///< input epload cannot answer exactly (e.g. a zip on the path)
  invalid_argument,  ///< bad option or argument from the caller
  not_found,         ///< a named thing (device, backend, file) does not exist
  cache,             ///< cache file unusable (never surfaces from load: it rebuilds)
  backend,           ///< a backend failed to load or initialise
  /// a backend's load was interrupted (a Python BaseException that is not an
  /// Exception, KeyboardInterrupt or SystemExit, passed through it): nothing
  /// failed or is recorded, the backend is unloaded and loadable again
  interrupted,
};

/// A failure: a code to branch on and a message for people.
struct Error {
  Errc code;
  std::string message;
};

/// A value of type T, or an Error.  Cheap to move; check ok() before value().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_v(std::move(value)) {}   // NOLINT: implicit by design
  Result(Error error) : m_v(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(m_v); }
  const T& value() const& { return std::get<0>(m_v); }
  T&& value() && { return std::get<0>(std::move(m_v)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  const Error& error() const { return std::get<1>(m_v); }

 private:
  std::variant<T, Error> m_v;
};

/// Result of an operation that returns nothing on success.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : m_error(std::move(error)), m_ok(false) {}  // NOLINT

  bool ok() const { return m_ok; }
  explicit operator bool() const { return m_ok; }
  const Error& error() const { return m_error; }

 private:
  Error m_error{Errc::io, {}};
  bool m_ok = true;
};

}  // namespace epload
