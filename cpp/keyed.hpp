// keyed.hpp — keyed member groups: JSON object members in any order, each key at most once.
//
// Grammar text: `K ::= %keyed(sep; m0, m1!, m2; *extra)` — one or more members separated by
// `sep`; mI are the declared members (key index I = position, `!` = required), `*extra` the
// member for undeclared keys (optional part). The language: every sequence m_{i1} sep m_{i2} ...
// (extra anywhere, any number of times) whose declared keys are pairwise distinct and include
// every required one. Members must be non-empty and start with distinct keys (the JSON Schema
// converter guarantees it: each member is `"name" : value`, the extra key class excludes the
// declared names), so the set of keys a member list contains is a function of its text.
//
// Lowering (grammar_lower.cpp) writes, per member j (and the extra member, key kExtraKey):
//     K ::= m_j            (key j)        K ::= K sep m_j      (key j)
// and, when some key is required, one kMinOnly production `K ::= m_r1 sep m_r2 ...` (the
// required members in order) that only shortest-string tables read; the others are then
// kParseOnly. That is 2n+1 productions for n declared keys — linear, not a permutation
// automaton.
//
// Parsing (earley.cpp): every Earley item carries `aux`, an id of a set of seen keys interned
// in the parser's KeySets (this file). An item of a production of K holds the keys of the K it
// extends; completing it yields aux ∪ {key}; an item of a production with key j is never added
// when its aux holds j (no duplicate key can be started, so no mask allows one); a production
// outside K advances past a completed K only when that K's keys include every required one (no
// close with a required key missing). Other nonterminals pass aux through unchanged.
//
// Why it stays bounded: the grammar is linear in the keys; a parser set holds, per item, one
// extra 32-bit id; the KeySets table grows by at most one set per member completion the parser
// performs (each is an existing set plus one key, interned so equal sets share an id) and is
// cleared with the parser. Sets are hashed by content for the mask memo, so equal states share
// masks across matchers.
//
// Exactness of masks: every live item can still complete — a member j ∉ aux can always be
// finished and the required keys not yet seen can always be appended — so "the parser set is
// non-empty" stays equivalent to "the text is a prefix of a sentence", which is what the mask
// computation relies on.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar.hpp"

namespace corral {

/// The matcher's memory of keyed groups: interned sets of key indices (id 0: the empty set).
/// All of it is plain data (a snapshot can copy `words`/`hash` and rebuild `index`).
struct KeySets {
  /// Per id: the set as 64-bit words with trailing zero words trimmed (canonical).
  std::vector<std::vector<std::uint64_t>> words{{}};
  /// Per id: a content hash (0 for the empty set), used in parser-state signatures.
  std::vector<std::uint64_t> hash{0};
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> index;

  void clear();
  bool has(std::uint32_t set, std::uint32_t key) const;
  bool has_all(std::uint32_t set, const std::vector<std::uint32_t>& keys) const;
  /// set ∪ {key}, interned.
  std::uint32_t with(std::uint32_t set, std::uint32_t key);
};

/// Derive the keyed tables of a grammar (group_of, rec_prod) and check their consistency;
/// throws CompileError on an inconsistent grammar (e.g. a corrupted artifact). Called by
/// Grammar::finalize after productions are final.
void finalize_keyed(Grammar& g);

}  // namespace corral
