// json_string.hpp — regexes over *decoded* JSON string values, matched in their *encoded* form.
//
// In:  a regular expression tree over decoded text (JSON Schema `pattern`, `format`, length).
// Out: a tree over the bytes a model writes between the quotes of a JSON string (RFC 8259 §7):
//      every character may be written raw (unless it must be escaped), as a short escape
//      (`\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`), as `\uXXXX` (hex in either case) or, outside
//      the BMP, as a UTF-16 surrogate pair `\uD83D\uDE00`.
// Invariants: exact — the result matches an encoded text iff it is a valid JSON string body
//      whose decoding the input tree matches (raw control characters, raw `"`/`\` and lone
//      surrogate escapes never match); Concat/Alt/Repeat/Empty/Intersect/Difference keep their
//      shape, only Chars nodes are replaced, and equal CharSets share one replacement subtree.
#pragma once

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

/// Given a regex over decoded text (an expression tree without RuleRef), return a tree matching
/// exactly the JSON string *contents* (the bytes between the quotes) whose decoding the regex
/// matches. Throws LimitExceeded(max_nfa_states) when one character's spellings alone exceed
/// the NFA budget, InternalError on a RuleRef.
NodePtr json_string_content(const NodePtr& decoded, const Limits& limits);

/// The spellings of one character of a JSON string body, any code point (a surrogate pair is
/// one character). `json_string_any_char(){m,n}` counts decoded code points, as JSON Schema's
/// minLength/maxLength do. Shared: every call returns the same tree.
NodePtr json_string_any_char();

/// The spellings of one character of `cs` inside a JSON string body (the building block of
/// json_string_content). An empty set gives a node matching nothing.
NodePtr json_string_chars(const CharSet& cs);

}  // namespace corral
