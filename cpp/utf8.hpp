// utf8.hpp — UTF-8 coding and the Unicode character classes of Python's `re` (internal).
//
// In:  bytes of a pattern (decode) or scalar values (encode); the generated unicode_tables.hpp.
// Out: code points / bytes; CharSets for \d \w \s with Python's str-pattern semantics; the
//      simple case mapping used by IGNORECASE.
// Invariant: decoding is strict (no overlongs, no surrogates, nothing above U+10FFFF), so every
//      CharSet built from decoded text satisfies regex_ast.hpp's invariants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "regex_ast.hpp"

namespace corral {

/// Decodes one scalar value at s[i]; advances i. Returns false (i unchanged) on invalid UTF-8.
bool utf8_decode(std::string_view s, std::size_t& i, std::uint32_t& cp);
/// Appends the UTF-8 encoding of a scalar value.
void utf8_append(std::string& out, std::uint32_t cp);
/// Bytes in the UTF-8 encoding of cp (1..4).
inline int utf8_length(std::uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/// Python's \d \w \s for str patterns (Unicode), and their ASCII-flag versions.
const CharSet& unicode_digit();
const CharSet& unicode_word();
const CharSet& unicode_space();
const CharSet& ascii_digit();
const CharSet& ascii_word();
const CharSet& ascii_space();

/// Code points for which `re`'s simple lowercase differs from identity, as (cp, lower) pairs
/// sorted by cp; and the same pairs sorted by lower (for inverse lookup).
const std::vector<std::pair<std::uint32_t, std::uint32_t>>& lower_pairs();
const std::vector<std::pair<std::uint32_t, std::uint32_t>>& lower_pairs_by_lower();
std::uint32_t simple_lower(std::uint32_t cp);
bool unicode_iscased(std::uint32_t cp);

/// Set algebra helpers on normalised sets.
CharSet charset_intersect(const CharSet& a, const CharSet& b);
CharSet charset_minus(const CharSet& a, const CharSet& b);
bool charset_subset(const CharSet& a, const CharSet& b);  // a ⊆ b

}  // namespace corral
