// errors.hpp — the engine's error hierarchy.
//
// Every error that bad *input* can cause is one of these types. Each is the twin of a class in
// corral/errors.py: the same name (`kName`; the base `Error` is Python's `CorralError`), the same
// parent and the same stable `code()` (`kCode`). `kErrorTypes` below lists them all; the bindings
// expose it as `_core.error_types()`, raise a native error's twin by its code, and a Python test
// checks that every entry has a twin with that parent and code. Broken internal invariants are
// InternalError, raised by CORRAL_CHECK — they are bugs, never the user's fault.
//
// Adding an error type: derive it, give it `using Parent = ...;`, `kName`, `kCode` and the
// `code()` override, add it to kErrorTypes, and add its twin to corral/errors.py.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace corral {

/// Base of every corral error (Python: CorralError).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  static constexpr const char* kName = "CorralError";
  static constexpr const char* kCode = "corral_error";
  /// The stable machine-readable kind of the error (the Python twin's `code`).
  virtual const char* code() const noexcept { return kCode; }
};

/// Malformed or unsupported grammar / regex text. Carries where: byte offset into the text and
/// the 1-based line and column (column counted in code points) — or nothing, for an error about
/// the text as a whole (`has_position()` is false, and the message names no position).
class CompileError : public Error {
 public:
  using Parent = Error;
  static constexpr const char* kName = "CompileError";
  static constexpr const char* kCode = "compile_error";
  const char* code() const noexcept override { return kCode; }

  CompileError(const std::string& message, std::size_t offset, int line, int column)
      : Error(format(message, line, column)), message_(message), offset_(offset), line_(line),
        column_(column) {}
  /// An error with no position (e.g. about the grammar as a whole).
  explicit CompileError(const std::string& message)
      : Error(message), message_(message), offset_(0), line_(0), column_(0) {}

  const std::string& bare_message() const { return message_; }
  /// Whether offset/line/column say where the error is (lines and columns count from 1).
  bool has_position() const { return line_ > 0; }
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
  using Parent = Error;
  static constexpr const char* kName = "LimitExceeded";
  static constexpr const char* kCode = "limit_exceeded";
  const char* code() const noexcept override { return kCode; }

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
  using Parent = Error;
  static constexpr const char* kName = "TokenizerError";
  static constexpr const char* kCode = "tokenizer_error";
  const char* code() const noexcept override { return kCode; }
};

/// Bad values for a grammar's slots (`${name}` terminals) at bind time: an unknown or missing
/// slot name, an empty value list, a duplicate or empty value, invalid UTF-8. Per-request data,
/// so it is its own type under Error, not a CompileError: the grammar compiled, and there is no
/// position in a source text (a server answers it with a 400 about the slots, not the schema).
class SlotError : public Error {
 public:
  using Parent = Error;
  static constexpr const char* kName = "SlotError";
  static constexpr const char* kCode = "slot_error";
  const char* code() const noexcept override { return kCode; }

  SlotError(const std::string& slot, const std::string& what) : Error(what), slot_(slot) {}
  /// The slot the error is about ("" when it concerns the binding as a whole).
  const std::string& slot() const { return slot_; }

 private:
  std::string slot_;
};

/// A compiled-grammar artifact (artifact.hpp) that cannot be loaded. `reason()` says which check
/// refused it, each with its own message: the bytes are not an artifact (bad_magic), are in a
/// format version this engine does not read (unsupported_version), were written by another
/// engine version (engine_version), were compiled for another vocabulary (wrong_vocabulary), or
/// are truncated, damaged or malformed (corrupt; the message names the field and byte offset).
class ArtifactError : public Error {
 public:
  using Parent = Error;
  static constexpr const char* kName = "ArtifactError";
  static constexpr const char* kCode = "artifact_error";
  const char* code() const noexcept override { return kCode; }

  ArtifactError(const std::string& reason, const std::string& what) : Error(what), reason_(reason) {}
  /// bad_magic, unsupported_version, engine_version, wrong_vocabulary or corrupt; matcher
  /// snapshots (snapshot.hpp) add wrong_grammar, wrong_binding, limit and matcher_error.
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

/// A broken internal invariant: a bug in corral.
class InternalError : public Error {
 public:
  using Error::Error;
  using Parent = Error;
  static constexpr const char* kName = "InternalError";
  static constexpr const char* kCode = "internal_error";
  const char* code() const noexcept override { return kCode; }
};

/// One engine error type: its (Python twin's) name, its parent's name ("" for the base) and
/// its code.
struct ErrorType {
  const char* name;
  const char* parent;
  const char* code;
};

namespace detail {
template <class T>
constexpr ErrorType error_type() {
  if constexpr (std::is_same_v<T, Error>) {
    return {T::kName, "", T::kCode};
  } else {
    static_assert(std::is_base_of_v<typename T::Parent, T>, "Parent must be a base of T");
    static_assert(std::is_base_of_v<Error, T>, "every engine error derives from corral::Error");
    return {T::kName, T::Parent::kName, T::kCode};
  }
}
}  // namespace detail

/// Every engine error type, base first. The one list the bindings and the twin test read.
inline constexpr ErrorType kErrorTypes[] = {
    detail::error_type<Error>(),          detail::error_type<CompileError>(),
    detail::error_type<LimitExceeded>(),  detail::error_type<TokenizerError>(),
    detail::error_type<SlotError>(),      detail::error_type<InternalError>(),
    detail::error_type<ArtifactError>(),
};

}  // namespace corral

#define CORRAL_CHECK(cond, msg)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::corral::InternalError(std::string("internal invariant failed: ") + (msg) + \
                                    " (" __FILE__ ":" + std::to_string(__LINE__) + ")"); \
  } while (0)
