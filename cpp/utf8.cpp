// utf8.cpp — strict UTF-8 coding and the Unicode tables behind \d \w \s and IGNORECASE.
//
// In:  pattern bytes / scalar values; the ranges generated into unicode_tables.hpp from CPython.
// Out: code points, UTF-8 bytes, CharSets.
// Invariant: utf8_decode accepts exactly the well-formed sequences of RFC 3629 (Unicode table
//      3-7), so surrogates and overlongs never reach a CharSet.
#include "utf8.hpp"

#include <algorithm>

#include "unicode_tables.hpp"

namespace corral {

bool utf8_decode(std::string_view s, std::size_t& i, std::uint32_t& cp) {
  if (i >= s.size()) return false;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    ++i;
    return true;
  }
  int len;
  std::uint32_t v, min;
  unsigned char lo2 = 0x80, hi2 = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, v = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, v = b0 & 0x0F, min = 0x800;
    if (b0 == 0xE0) lo2 = 0xA0;
    if (b0 == 0xED) hi2 = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, v = b0 & 0x07, min = 0x10000;
    if (b0 == 0xF0) lo2 = 0x90;
    if (b0 == 0xF4) hi2 = 0x8F;
  } else {
    return false;
  }
  if (i + static_cast<std::size_t>(len) > s.size()) return false;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    const unsigned char lo = k == 1 ? lo2 : 0x80, hi = k == 1 ? hi2 : 0xBF;
    if (b < lo || b > hi) return false;
    v = (v << 6) | (b & 0x3Fu);
  }
  if (v < min) return false;
  cp = v;
  i += static_cast<std::size_t>(len);
  return true;
}

void utf8_append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {
template <std::size_t N>
CharSet from_table(const unicode::Range (&t)[N]) {
  CharSet cs;
  for (const auto& r : t) cs.add(r.lo, r.hi);
  return cs;
}
}  // namespace

const CharSet& unicode_digit() {
  static const CharSet s = from_table(unicode::kDecimal);
  return s;
}
const CharSet& unicode_word() {
  static const CharSet s = from_table(unicode::kWord);
  return s;
}
const CharSet& unicode_space() {
  static const CharSet s = from_table(unicode::kSpace);
  return s;
}
const CharSet& ascii_digit() {
  static const CharSet s = CharSet::range('0', '9');
  return s;
}
const CharSet& ascii_word() {
  static const CharSet s = [] {
    CharSet c = CharSet::range('0', '9');
    c.add('A', 'Z');
    c.add('_', '_');
    c.add('a', 'z');
    return c;
  }();
  return s;
}
const CharSet& ascii_space() {
  static const CharSet s = [] {
    CharSet c = CharSet::range('\t', '\r');  // \t \n \v \f \r
    c.add(' ', ' ');
    return c;
  }();
  return s;
}

const std::vector<std::pair<std::uint32_t, std::uint32_t>>& lower_pairs() {
  static const std::vector<std::pair<std::uint32_t, std::uint32_t>> v = [] {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (const auto& r : unicode::kLower)
      for (std::uint32_t k = 0; k < r.count; ++k) {
        const std::uint32_t c = r.start + k * r.stride;
        out.emplace_back(c, static_cast<std::uint32_t>(static_cast<std::int64_t>(c) + r.delta));
      }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return v;
}

const std::vector<std::pair<std::uint32_t, std::uint32_t>>& lower_pairs_by_lower() {
  static const std::vector<std::pair<std::uint32_t, std::uint32_t>> v = [] {
    auto out = lower_pairs();
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    return out;
  }();
  return v;
}

std::uint32_t simple_lower(std::uint32_t cp) {
  const auto& v = lower_pairs();
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(cp, std::uint32_t{0}));
  return (it != v.end() && it->first == cp) ? it->second : cp;
}

bool unicode_iscased(std::uint32_t cp) {
  static const CharSet s = from_table(unicode::kCased);
  return s.contains(cp);
}

CharSet charset_intersect(const CharSet& a, const CharSet& b) {
  CharSet out;
  const auto& x = a.ranges();
  const auto& y = b.ranges();
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const std::uint32_t lo = std::max(x[i].lo, y[j].lo), hi = std::min(x[i].hi, y[j].hi);
    if (lo <= hi) out.add(lo, hi);
    if (x[i].hi < y[j].hi) ++i; else ++j;
  }
  return out;
}

CharSet charset_minus(const CharSet& a, const CharSet& b) { return charset_intersect(a, b.negated()); }

bool charset_subset(const CharSet& a, const CharSet& b) { return charset_minus(a, b).empty(); }

}  // namespace corral
