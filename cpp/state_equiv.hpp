// state_equiv.hpp — bounded-depth equivalence of one DFA's states, for sharing mask entries.
//
// In:  a terminal's DFA and a depth D (the vocabulary's share depth).
// Out: for a state s, a canonical representative rep(s) with s ≈_D rep(s), where
//        p ≈_0 q  iff  p == q, or neither is accepting (both are live: every DFA state is);
//        p ≈_j q  iff  p == q, or neither is accepting and for every byte b, δ(p,b) and δ(q,b)
//                      are both dead or δ(p,b) ≈_{j-1} δ(q,b).
// Invariant (by induction on |w|): if p ≈_D q then for every byte string w with |w| <= D,
// δ*(p,w) is dead iff δ*(q,w) is, and δ*(p,w) is accepting iff δ*(q,w) is — in which case the
// two are the *same* state. So a trie walk of depth <= D from p and from q makes the same
// live/dead and split decisions and records the same states at every split: the walk's result
// (compiled_grammar.cpp) is identical. That is what makes the states of a counted string
// (`[a-z]{1,255}`: one state per position) share one entry wherever more than D positions remain.
// Classes are computed lazily, memoised per (level, state) and interned exactly (no hashing
// shortcuts: a class id is the id of its full tuple), so the cost is bounded by
// (D + 1) × states × byte classes over the automaton's life, paid only near the states queried.
// Not thread-safe: the owner serialises calls.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dfa.hpp"

namespace corral {

class BoundedEquivalence {
 public:
  BoundedEquivalence(const Dfa& dfa, std::uint32_t depth);

  /// A fixed representative of s's ≈_D class (the first state of that class queried).
  std::int32_t representative(std::int32_t s);
  std::size_t memory_bytes() const { return memory_; }

 private:
  std::int32_t class_of(std::int32_t s, std::uint32_t level);
  struct VecHash {
    std::size_t operator()(const std::vector<std::int32_t>& v) const;
  };

  const Dfa& dfa_;
  std::uint32_t depth_;
  std::vector<std::vector<std::int32_t>> ids_;  // [level][state]: class id, -1 = not computed
  std::vector<std::unordered_map<std::vector<std::int32_t>, std::int32_t, VecHash>> intern_;  // per level
  std::unordered_map<std::int32_t, std::int32_t> rep_;  // top-level class id -> representative
  std::size_t memory_ = 0;
};

}  // namespace corral
