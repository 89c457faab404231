// finite_dfa.hpp — the minimal byte automaton of a *finite* regular tree, built directly.
//
// In:  a regular tree with no unbounded repetition (but see "Stars") and no `&`/`-`:
//      a declared key's JSON spellings `"name"` (every character raw, short-escaped or as
//      `\uXXXX` in either case), the whitespace and punctuation around it, an enum of strings,
//      a counted string `(?s:.){0,255}`.
// Out: the minimal byte DFA of its language (UTF-8; acyclic apart from a star), as per-state accepting flags and
//      sorted byte-range edges, every state live, numbered breadth-first from the start (0) in
//      byte order — or nothing, when the tree is outside that class or too big for this path;
//      the caller then uses the general pipeline (NFA → subsets → Hopcroft, dfa.cpp).
// Why: real schemas declare hundreds of keys; each one's terminal went through NFA
//      construction, subset construction and minimisation (about 0.2 ms a key), and counted
//      strings through hundreds of NFA copies; an acyclic language needs none of that.
// Algorithm: right to left, each node is built *in front of* a continuation state T (the
//      automaton of what follows it): Chars → its UTF-8 byte sequences, ending at T; Concat →
//      its kids folded from the last; Alt → the union of its kids' states; X{m,n} → m copies of
//      X in front of (T ∪ X(T ∪ X(…))). A union of two acyclic deterministic states is their
//      product, merged edge by edge (recursing where both have an edge on a byte). Every state
//      is hash-consed on (accepting, edges) after its successors exist, which for acyclic
//      automata is minimisation (Revuz 1992): by induction on the longest word, two states with
//      one language have equal flags and equal successors, so the same key.
// Stars: unbounded repetitions X{m,} T, one (X, T) per tree, are built here too (the undeclared-key
//      terminal: a trie of the declared names whose exits end in `(?s:.)*` before `"`), when
//      X is finite, prefix-free and never empty-matching, it is under no other repetition, and
//      X and T start with different bytes: S = T ∪ X·S is one state (T's flag, X's first edges
//      into X's states copied with their end → S, T's edges). Minimality still holds: by
//      induction on the rank of the strongly connected parts, any state outside the cycle
//      with the language of another has equal flags and successors, so the same key; inside
//      the cycle, S is the only state with T's edges, and two copies of X's states with one
//      language have one residual at their first return to S, so one language in X's minimal
//      template. A second, different star, or overlapping first bytes, take the pipeline
//      (two cycles could share a language that hash-consing cannot see).
// Invariants: the result is exact (the same language as the tree, hence isomorphic to the
//      pipeline's minimal DFA); no LimitExceeded is raised that the pipeline would not raise
//      for the same tree (it returns nothing instead when over its own work cap), apart from the
//      compile budget, which both check.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

struct FiniteAutomaton {
  struct Edge {
    std::uint8_t lo, hi;
    std::int32_t to;
  };
  std::vector<std::uint8_t> acc;       // per state; state 0 is the start
  std::vector<std::uint32_t> first{0};  // edges of s: edges[first[s] .. first[s + 1])
  std::vector<Edge> edges;              // per state sorted by byte, disjoint, ranges merged
  std::size_t size() const { return acc.size(); }
};

/// The minimal DFA of a finite tree (or one with a star, see the file comment) built directly;
/// an automaton with no states for the empty language; nothing when the tree has an unbounded
/// repetition other than one star as described, `&`, `-`
/// or a rule reference, is over limits.max_nfa_states by estimate_nfa_size (the pipeline
/// refuses it), is nested deeper than this path recurses, or needs more than 4 ×
/// limits.max_dfa_states states along the way. Checks `budget` as it runs.
std::optional<FiniteAutomaton> build_finite_automaton(const NodePtr& regex, const Limits& limits,
                                                      const Budget& budget);

/// Whether the tree is of the shape build_finite_automaton takes (no algebra or rule
/// reference, every unbounded repetition outside every other): a cheap walk, no automaton; the
/// build may still return nothing (two different stars, too many states). `star_kids`
/// (optional) receives the distinct kids of its unbounded repetitions, by address.
bool finite_shape(const NodePtr& regex, std::vector<const Node*>* star_kids = nullptr);

}  // namespace corral
