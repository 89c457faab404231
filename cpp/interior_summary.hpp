// interior_summary.hpp — the tokens that can only continue the inside of a JSON string, found
// once per vocabulary, and the automaton states that allow every one of them.
//
// J is a fixed byte automaton for the inside of a JSON string, starting at a character boundary:
// printable ASCII except `"`, `\` and DEL; the escapes \" \\ \/ \b \f \n \r \t; well-formed
// UTF-8 (no surrogates, nothing past U+10FFFF). A token may end in the middle of an escape or of
// a character. J is deliberately narrower than any spelling corral writes (no \u escapes, no
// DEL, no raw controls): what it leaves out is simply walked.
//
// Per vocabulary (InteriorSummary): `clean_bits`, the ordinary tokens J reads without dying
// ("clean" tokens), and per trie node whether every token in its subtree is clean.
// Per automaton state (interior_universal): does every byte string J reads keep the automaton
// alive from that state? A breadth-first search over the pairs (J state, automaton state)
// reachable from (boundary, state), bounded by a pair budget (over it: no).
//
// Invariant the mask walk relies on (compiled_grammar.cpp): if one element of a frontier is
// interior-universal, every node on a path to a clean token is live, so every clean token is
// allowed outright and a subtree whose tokens are all clean holds no lexically dead node. The
// walk may then skip such subtrees and OR in clean_bits: the entry's allowed tokens and its
// groups' dead nodes are exactly those of the full walk (a split inside a skipped subtree would
// only have made a group with no dead nodes, which allows nothing).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "dfa.hpp"
#include "vocab.hpp"

namespace corral {

class InteriorSummary {
 public:
  explicit InteriorSummary(const Vocabulary& vocab);

  /// Dense mask words: the clean ordinary tokens.
  const std::vector<std::uint32_t>& clean_bits() const { return clean_bits_; }
  /// Is every token in trie node n's subtree (n included) clean?
  bool clean_subtree(std::uint32_t n) const { return clean_subtree_[n] != 0; }
  std::size_t clean_tokens() const { return clean_tokens_; }

  /// J's transition: the next J state, or -1 when `byte` cannot continue the string's inside.
  static std::int32_t j_next(std::int32_t j, std::uint8_t byte);
  static constexpr std::int32_t kBoundary = 0;

 private:
  std::vector<std::uint32_t> clean_bits_;
  std::vector<std::uint8_t> clean_subtree_;
  std::size_t clean_tokens_ = 0;
};

/// Does every byte string J reads from J state `start_j` keep `dfa` alive from `state`? False past
/// `max_pairs` (J state, automaton state) pairs searched. When true and `boundary_states` is
/// given, it receives every automaton state met at a J boundary: each is interior-universal
/// (from the boundary) as well.
bool interior_universal(const Dfa& dfa, std::int32_t state, std::size_t max_pairs,
                        std::vector<std::int32_t>* boundary_states = nullptr,
                        std::int32_t start_j = InteriorSummary::kBoundary);

/// Does every byte string J reads (from the boundary) keep at least one of the automata alive,
/// `dfas[e]` from `states[e]`? The union can be universal where no element is: the "none of
/// the declared keys" automaton is lowered as one terminal per first letter (alternatives of
/// one rule), each dead on the other letters. Searched breadth first over (J state, tuple of
/// element states); a tuple with one live element is answered by `single(e, j, state)` (its
/// interior_universal from J state j, memoised by the caller). False past `max_tuples` tuples.
/// Invariant for the mask walk: as for one universal element, every trie node on a path to a
/// clean token keeps some element alive.
template <class Single>
bool jointly_interior_universal(const std::vector<const Dfa*>& dfas, const std::vector<std::int32_t>& states,
                                std::size_t max_tuples, Single&& single);

template <class Single>
bool jointly_interior_universal(const std::vector<const Dfa*>& dfas, const std::vector<std::int32_t>& states,
                                std::size_t max_tuples, Single&& single) {
  const std::size_t m = dfas.size();
  // A tuple is [J state, element states...] (-1: that element is dead).
  std::vector<std::int32_t> first(m + 1);
  first[0] = InteriorSummary::kBoundary;
  std::size_t alive = 0;
  for (std::size_t e = 0; e < m; ++e) {
    first[e + 1] = states[e];
    alive += states[e] >= 0;
  }
  if (alive == 0) return false;
  std::set<std::vector<std::int32_t>> seen{first};
  std::vector<std::vector<std::int32_t>> todo{std::move(first)};
  std::vector<std::int32_t> next(m + 1);
  for (std::size_t at = 0; at < todo.size(); ++at) {
    for (unsigned b = 0; b < 256; ++b) {
      const std::int32_t nj = InteriorSummary::j_next(todo[at][0], static_cast<std::uint8_t>(b));
      if (nj < 0) continue;
      next[0] = nj;
      std::size_t live = 0, last = 0;
      for (std::size_t e = 0; e < m; ++e) {
        const std::int32_t s = todo[at][e + 1];
        next[e + 1] = s < 0 ? -1 : dfas[e]->next(s, static_cast<std::uint8_t>(b));
        if (next[e + 1] >= 0) {
          ++live;
          last = e;
        }
      }
      if (live == 0) return false;  // a byte string J reads that kills every element
      if (live == 1) {
        if (!single(last, nj, next[last + 1])) return false;
        continue;
      }
      if (seen.insert(next).second) {
        if (todo.size() >= max_tuples) return false;
        todo.push_back(next);
      }
    }
  }
  return true;
}

}  // namespace corral
