// json_string.hpp — regexes over *decoded* JSON string values, matched in their *encoded* form.
//
// In:  a regular expression tree over decoded text (JSON Schema `pattern`, `format`, length).
// Out: a tree over the bytes a model writes between the quotes of a JSON string (RFC 8259 §7),
//      in one of two spelling modes (JsonEscapes):
//      Any       — every spelling JSON allows (grammar flag `/re/j`): each character raw (unless
//                  it must be escaped), as a short escape (`\"` `\\` `\/` `\b` `\f` `\n` `\r`
//                  `\t`), as `\uXXXX` (hex in either case) or, outside the BMP, as a UTF-16
//                  surrogate pair `\uD83D\uDE00`;
//      Canonical — only the spelling of Python's `json.dumps(s, ensure_ascii=False)` (grammar flag
//                  `/re/c`): raw, except `\"`, `\\`, `\b \f \n \r \t`, and `\u00xx` (lower-case
//                  hex) for the other controls U+0000..U+001F. One spelling per decoded string,
//                  so jump-ahead can force a key's bytes and a model cannot drift into escapes.
// Invariants: exact — the result matches an encoded text iff it is a valid JSON string body
//      (in Canonical mode: the canonical one) whose decoding the input tree matches (raw control
//      characters, raw `"`/`\` and lone surrogate escapes never match); Concat/Alt/Repeat/Empty/
//      Intersect/Difference keep their shape, only Chars nodes are replaced, and equal CharSets
//      share one replacement subtree.
#pragma once

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

/// Which JSON spellings of a decoded string the result matches (see the file comment).
enum class JsonEscapes : std::uint8_t {
  Any,        // every spelling JSON allows: `/re/j`
  Canonical,  // exactly json.dumps(s, ensure_ascii=False)[1:-1]: `/re/c`
};

/// Given a regex over decoded text (an expression tree without RuleRef), return a tree matching
/// exactly the JSON string *contents* (the bytes between the quotes) whose decoding the regex
/// matches, spelled as `escapes` allows. Throws LimitExceeded(max_nfa_states) when one
/// character's spellings alone exceed the NFA budget, InternalError on a RuleRef.
NodePtr json_string_content(const NodePtr& decoded, const Limits& limits,
                            JsonEscapes escapes = JsonEscapes::Any);

/// The spellings of one character of a JSON string body, any code point (a surrogate pair is
/// one character). `json_string_any_char(){m,n}` counts decoded code points, as JSON Schema's
/// minLength/maxLength do. Shared: every call with the same `escapes` returns the same tree.
NodePtr json_string_any_char(JsonEscapes escapes = JsonEscapes::Any);

/// Forget the process-wide memo of character spellings (benchmarks of a first compile).
void clear_json_string_memo();

/// The spellings of one character of `cs` inside a JSON string body (the building block of
/// json_string_content). An empty set gives a node matching nothing.
NodePtr json_string_chars(const CharSet& cs, JsonEscapes escapes = JsonEscapes::Any);

}  // namespace corral
