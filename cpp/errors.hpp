// errors.hpp — the engine's error hierarchy.
//
// Every error that bad *input* can cause is one of these types; each has a Python twin in
// corral/errors.py (the bindings map them one to one). Broken internal invariants are
// InternalError, raised by CORRAL_CHECK — they are bugs, never the user's fault.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace corral {

/// Base of every corral error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Malformed or unsupported grammar / regex text. Carries where: byte offset into the text and
/// the 1-based line and column (column counted in code points).
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::size_t offset, int line, int column)
      : Error(format(message, line, column)), message_(message), offset_(offset), line_(line),
        column_(column) {}
  /// An error with no position (e.g. about the grammar as a whole).
  explicit CompileError(const std::string& message)
      : Error(message), message_(message), offset_(0), line_(0), column_(0) {}

  const std::string& bare_message() const { return message_; }
  std::size_t offset() const { return offset_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  static std::string format(const std::string& m, int line, int column) {
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + m;
  }
  std::string message_;
  std::size_t offset_;
  int line_, column_;
};

/// A configured limit (states, time, nesting, items) was exceeded.
class LimitExceeded : public Error {
 public:
  LimitExceeded(const std::string& limit, std::uint64_t given, std::uint64_t limit_value,
                const std::string& what)
      : Error(what + " (" + limit + ": needed more than " + std::to_string(limit_value) +
              (given > limit_value ? ", reached " + std::to_string(given) : std::string()) +
              "; raise the limit if this input is trusted)"),
        limit_(limit), given_(given), limit_value_(limit_value) {}
  const std::string& limit() const { return limit_; }
  std::uint64_t given() const { return given_; }
  std::uint64_t limit_value() const { return limit_value_; }

 private:
  std::string limit_;
  std::uint64_t given_, limit_value_;
};

/// A vocabulary that cannot be used (bad ids, width smaller than the vocabulary, ...).
class TokenizerError : public Error {
 public:
  using Error::Error;
};

/// Bad values for a grammar's slots (`${name}` terminals) at bind time: an unknown or missing
/// slot name, an empty value list, a duplicate or empty value, invalid UTF-8. Per-request data,
/// so it is its own type (a server answers it with a 400, not a compile failure of its schema).
class SlotError : public Error {
 public:
  SlotError(const std::string& slot, const std::string& what) : Error(what), slot_(slot) {}
  /// The slot the error is about ("" when it concerns the binding as a whole).
  const std::string& slot() const { return slot_; }

 private:
  std::string slot_;
};

/// A broken internal invariant: a bug in corral.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace corral

#define CORRAL_CHECK(cond, msg)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::corral::InternalError(std::string("internal invariant failed: ") + (msg) + \
                                    " (" __FILE__ ":" + std::to_string(__LINE__) + ")"); \
  } while (0)
