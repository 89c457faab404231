// nfa.hpp — Thompson NFA over code point classes (internal to dfa.cpp and sym_dfa.cpp).
//
// In:  a regular expression tree (Intersect/Difference included: see nfa.cpp).
// Out: an epsilon-NFA whose character transitions are labelled with sets of *alphabet classes*:
//      the code point space is partitioned into the coarsest classes that every CharSet of the
//      tree is a union of, so determinisation works on a handful of symbols instead of 256
//      bytes or 1.1M code points; dfa.cpp expands classes to UTF-8 bytes after minimising.
// Invariant: states.size() <= limits.max_nfa_states (else LimitExceeded); class ranges are
//      sorted, disjoint, surrogate-free; set_classes[i] is sorted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

struct NfaState {
  enum Kind : std::uint8_t { Eps, Char, Match };
  Kind kind = Eps;
  std::int32_t set = -1;           // Char: index into Nfa::set_classes
  std::int32_t next = -1;          // Char: target
  std::vector<std::int32_t> eps;   // Eps: targets
};

struct SymDfa;

struct Nfa {
  std::vector<NfaState> states;
  std::int32_t start = -1;
  std::int32_t match = -1;
  /// Alphabet: per class, its code point ranges.
  std::vector<std::vector<CodepointRange>> class_ranges;
  /// Per distinct CharSet of the tree, then per class set used by a spliced-in product DFA
  /// (Intersect/Difference): the classes it is the union of.
  std::vector<std::vector<std::uint32_t>> set_classes;
  std::uint32_t num_classes() const { return static_cast<std::uint32_t>(class_ranges.size()); }
  /// When the whole tree is one `&`/`-` node: its minimal, live DFA over these classes (what
  /// determinising the NFA would rebuild), so the caller can skip that; else null.
  std::shared_ptr<const SymDfa> whole;
};

/// Throws LimitExceeded(max_nfa_states / max_compile_ms) or InternalError (RuleRef in tree).
Nfa build_nfa(const NodePtr& regex, const Limits& limits, const Budget& budget);

}  // namespace corral
