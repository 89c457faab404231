// Strict byte readers and writers for the engine's binary formats (compiled-grammar artifacts,
// matcher snapshots): little-endian fixed-width integers, LEB128 varints, length-prefixed
// strings.
//
// Invariants:
// - A ByteReader never reads outside its view: every read checks the bytes that remain first.
// - Every refusal is an ArtifactError with reason "corrupt" whose message names the format
//   (`kind`), the field and the byte offset where the bad value starts.
// - Varints are canonical: over-long, overflowing (> 64 bits) and non-minimal encodings are
//   refused, so one value has one encoding and a loaded object re-encodes to the same bytes.
// - A count is accepted only if the bytes that remain could hold that many items of at least
//   `min_bytes` each, so no allocation sized by a count can exceed the input's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace corral::byte_io {

inline void put_fixed(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

/// The `bytes`-wide little-endian integer at `at` (the caller has checked that it is there).
inline std::uint64_t get_fixed(std::string_view d, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(d[at + i])) << (8 * i);
  return v;
}

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

class ByteReader {
 public:
  /// Reads `d` from `pos`; `kind` names the format in error messages ("matcher snapshot").
  ByteReader(std::string_view d, std::size_t pos, const char* kind) : d_(d), pos_(pos), kind_(kind) {}
  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return d_.size() - pos_; }
  bool done() const { return pos_ == d_.size(); }

  ArtifactError corrupt(const std::string& what, std::size_t at) const {
    return ArtifactError("corrupt", std::string("corrupt ") + kind_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }

  std::uint8_t u8(const char* field) {
    if (pos_ >= d_.size()) throw corrupt(std::string("truncated in ") + field, pos_);
    return static_cast<std::uint8_t>(d_[pos_++]);
  }
  std::uint64_t varint(const char* field) {
    const std::size_t at = pos_;
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (shift > 63) throw corrupt(std::string("over-long integer in ") + field, at);
      const std::uint8_t b = u8(field);
      if (shift == 63 && (b & 0x7E) != 0) throw corrupt(std::string("integer overflow in ") + field, at);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) {
        if (b == 0 && shift > 0) throw corrupt(std::string("non-minimal integer in ") + field, at);
        return v;
      }
    }
  }
  /// A varint that must be < bound (a count, an index, a length).
  std::uint64_t below(std::uint64_t bound, const char* field) {
    const std::size_t at = pos_;
    const std::uint64_t v = varint(field);
    if (v >= bound)
      throw corrupt(std::string(field) + " " + std::to_string(v) + " out of range (must be below " + std::to_string(bound) + ")", at);
    return v;
  }
  /// A count of items that take at least `min_bytes` each: bounded by the bytes remaining.
  std::size_t count(const char* field, std::size_t min_bytes = 1) {
    const std::size_t at = pos_;
    const std::uint64_t v = varint(field);
    if (v > remaining() / min_bytes)
      throw corrupt(std::string(field) + " " + std::to_string(v) + " exceeds the " + std::to_string(remaining()) + " bytes that remain", at);
    return static_cast<std::size_t>(v);
  }
  /// The next `n` bytes, as a view into the input.
  std::string_view bytes(std::size_t n, const char* field) {
    if (n > remaining()) throw corrupt(std::string("truncated in ") + field, pos_);
    std::string_view s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  const char* raw(std::size_t n, const char* field) { return bytes(n, field).data(); }
  /// A length-prefixed string, as a view into the input / as a copy.
  std::string_view view(const char* field) { return bytes(count(field), field); }
  std::string str(const char* field) { return std::string(view(field)); }

 private:
  std::string_view d_;
  std::size_t pos_;
  const char* kind_;
};

}  // namespace corral::byte_io
