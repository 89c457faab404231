// regex_memo.hpp — the trees of `/regex/` terminals, shared by every compile in the process.
//
// In:  a regex terminal's pattern text and spelling mode (plain, `/re/j`, `/re/c`), and the
//      tree the grammar parser built for it (parse_regex, then json_string_content for j/c).
// Out: that same tree for the next terminal with the same text and mode — later in the same
//      grammar or in another grammar's compile.
// Why: grammar texts repeat their regexes: within one schema's grammar (a value regex used by
//      many properties) and across schemas (`(?s:.)*`, the number regex, common key names).
//      Parsing a regex and spelling it as JSON allocates a node per character and was about
//      half of the parse stage of a compile; about half of a sample's regexes (a third of their
//      bytes) were seen before in the process. A shared tree also keeps its cached structural
//      id (automaton_memo.hpp) and tree facts, so the lowering does not redo them either.
// Size: the trees take some tens of bytes per pattern byte (a key name's tree is one node over
//      the shared spellings of its characters); patterns over 4 KB (the "none of these keys"
//      regexes of big objects) were never met twice in a 1,000-schema sample, so they are not
//      kept, and 256 KB of pattern text holds what was met again.
// Invariants: an entry is exactly the tree its text and mode parse to. It is reused only under
//      limits at least as large as those it was built under: the regex parse and the JSON
//      spelling fail only on max_nfa_states and max_nesting, and where they succeed under a
//      limit they succeed with the same tree under a larger one — so a hit never hides a
//      LimitExceeded. Failures are never stored. Trees are immutable (NodePtr is a pointer to
//      const), so sharing them across compiles and threads is safe. Bounded: patterns longer
//      than kRegexMemoMaxPattern are not kept, and the memo is emptied when it would pass
//      kRegexMemoEntries entries or kRegexMemoBytes of pattern text; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

constexpr std::size_t kRegexMemoMaxPattern = std::size_t{4} << 10;
constexpr std::size_t kRegexMemoBytes = std::size_t{256} << 10;
constexpr std::size_t kRegexMemoEntries = 16384;

/// The tree stored for (`pattern`, `mode`) under limits covered by `limits`, or null.
/// `mode`: 0 plain, 'j' every JSON spelling, 'c' the canonical one.
NodePtr memo_regex_terminal(std::string_view pattern, char mode, const Limits& limits);
/// Keep `tree` as the tree of (`pattern`, `mode`), built under `limits`.
void memo_put_regex_terminal(std::string_view pattern, char mode, const Limits& limits, NodePtr tree);
/// Forget every entry (benchmarks of a process's first compile).
void clear_regex_memo();

}  // namespace corral
