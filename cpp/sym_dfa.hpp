// sym_dfa.hpp — deterministic automata over an NFA's alphabet classes (internal to nfa.cpp and
// dfa.cpp).
//
// In:  an Nfa (nfa.hpp) and one of its start/accept state pairs; or two SymDfas over the same
//      alphabet.
// Out: SymDfa — a DFA over the class alphabet with partial transitions (-1 = dead):
//      determinise (subset construction), prune_dead (drop states that cannot accept),
//      minimise (Hopcroft), and product (language intersection / difference).
// Why a separate stage: dfa.cpp turns one of these into the byte-level Dfa, and nfa.cpp needs
//      the same machinery in the middle of building an NFA, to compile the operands of `&` and
//      `-` to DFAs and splice their product back in as an ordinary NFA fragment.
// Invariants: every function keeps `trans.size() == size() * k`; a SymDfa for the empty
//      language has no states and start == -1; determinise and product never create more than
//      limits.max_dfa_states states (LimitExceeded) and check the budget while they run.
#pragma once

#include <cstdint>
#include <vector>

#include "limits.hpp"
#include "nfa.hpp"

namespace corral {

struct SymDfa {
  std::uint32_t k = 0;               // alphabet size (number of classes)
  std::vector<std::int32_t> trans;   // size() * k, -1 = dead
  std::vector<std::uint8_t> acc;     // per state
  std::int32_t start = -1;
  std::size_t size() const { return acc.size(); }
  std::int32_t at(std::size_t s, std::uint32_t c) const { return trans[s * k + c]; }
};

[[noreturn]] void throw_dfa_state_limit(std::size_t n, const Limits& limits);

/// Subset construction of the sub-automaton of `nfa` entered at `start`, accepting where the
/// closure contains `match`. States unreachable from `start` are never visited.
SymDfa determinise(const Nfa& nfa, std::int32_t start, std::int32_t match, const Limits& limits,
                   const Budget& budget);

/// The same language with only live states (every state can reach acceptance).
SymDfa prune_dead(const SymDfa& d);

/// The minimal DFA of a pruned, non-empty `d`, states numbered in BFS order from the start
/// (start == 0); its states stay live.
SymDfa minimise(const SymDfa& d, const Budget& budget);

/// The same automaton with its states renumbered in BFS order from the start (classes in
/// increasing order), start == 0: the numbering minimise gives, for a DFA that is already
/// minimal and live.
SymDfa renumber_bfs(const SymDfa& d);

enum class ProductOp : std::uint8_t {
  Intersect,   // accept where both accept
  Difference,  // accept where the first accepts and the second does not
};

/// The reachable part of the product of two pruned DFAs over the same alphabet. For
/// Difference the second automaton is implicitly completed with a dead state (a pair whose
/// second half died keeps following the first alone), which is what makes complementing it
/// exact. The result may contain dead states: prune it.
SymDfa product(const SymDfa& a, const SymDfa& b, ProductOp op, const Limits& limits,
               const Budget& budget);

}  // namespace corral
