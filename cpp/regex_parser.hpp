// regex_parser.hpp — Python `re` syntax → expression tree.
#pragma once

#include <string_view>

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

/// Parse `pattern` (UTF-8, Python `re` syntax) for *full-match* semantics.
/// Supported: literals, escapes (\n \t \xhh \uhhhh \Uhhhhhhhh \0.. octal, escaped punctuation),
/// classes with ranges and negation, \d \D \w \W \s \S (Unicode semantics, as Python's `re`
/// for str patterns), `.` (no newline unless (?s)), alternation, groups (capturing, named
/// (?P<n>...), non-capturing (?:...)), * + ? {m} {m,} {,n} {m,n} and their lazy forms
/// (treated as greedy: the whole string is matched either way), `^`/`\A` at the start and
/// `$`/`\Z` at the end (no-ops under full match), inline flags (?s) (?x) (?u) (?i) (ASCII
/// and simple case folding), comments (?#...).
/// Refused with CompileError naming the offset: backreferences, lookaround, conditionals,
/// atomic groups and possessive quantifiers, \b \B, anchors elsewhere, malformed syntax.
/// Errors report line 1 and the column in code points; the grammar parser re-bases them when
/// a regex is embedded in grammar text.
NodePtr parse_regex(std::string_view pattern, const Limits& limits);

}  // namespace corral
