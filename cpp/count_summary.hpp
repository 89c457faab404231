// count_summary.hpp — masks of counted-string states from a vocabulary-level summary.
//
// The problem. A counted string (`maxLength: 255`, `[a-z]{1,64}`) has one DFA state per
// position. States with more than D characters left (D: the vocabulary's share depth) share the
// short part of their mask (state_equiv.hpp), but each of the last D positions, and the first
// one under a `minLength`, is its own ≈_D class and paid a walk of every short token.
//
// The summary (vocabulary level, built once per tokenizer, kept by its MaskPool). A fixed
// automaton J reads a token's bytes as the inside of a JSON string started at a character
// boundary: it counts the characters *started* (a UTF-8 lead byte, an ASCII byte, or a `\`
// opening an escape; an escape or a multi-byte character counts once, and so does a surrogate
// pair `\uD83D\uDE00`, whose second `\` is not counted), stops counting at an unescaped `"`
// ("closed"), and falls into a sink ("junk") on bytes that cannot continue there (a stray
// continuation byte, a bad escape). Per token: its count c and whether it closed or is junk;
// as bitsets, len_le[k] = {c <= k, not junk} and closed_lt[k] = {closed with c < k}. J is a
// labelling only: nothing relies on it matching the grammar's notion of a character, because
// the relation below is checked against the automata.
//
// The relation (checked exactly per state, on the automata, never assumed). For a state s and
// an anchor state t whose short part was walked (the same terminal, so the same `followable`),
// and bounds lo <= r, write Φ(w) = [J(w) not junk, c(w) <= r, and c(w) >= lo if w closed].
// derive() explores every byte string w from (s, t, J at the boundary) — the product of the two
// automata and J over their joint byte classes, up to D counted characters — and accepts only if
//   (1) δ*(s,w) is live  iff  δ*(t,w) is live and Φ(w);
//   (2) where both are live, one is accepting iff the other is, and then they are the same state;
// choosing r as the largest count and lo the smallest closed count where both are live, and
// checking every point where s dies while t lives against Φ. Φ is prefix-monotone (a count
// only grows, a closed count is frozen, junk is a sink), so by induction on the trie walk of
// compiled_grammar.cpp: from s, exactly the nodes t reaches with Φ are live, the walk splits
// at the same nodes into the same states, and below a split (the same state on both sides)
// everything is identical. Hence the short part of s is
//   allowed(s) = allowed(t) ∩ len_le[r] ∖ closed_lt[lo]      (three bitset operations)
//   groups(s)  = the groups of t whose split path satisfies Φ,
// where t's groups are kept stratified by (count, closed/open/junk) of their split path.
// Anything the relation does not prove (other automata, a state inside a character, a product
// over kMaxNodes) falls back to the plain walk, so the result is always that of the walk.
// Thread-safe (one mutex per grammar's CountedShare; the summary is immutable once built).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "compiled_grammar.hpp"
#include "dfa.hpp"
#include "vocab.hpp"

namespace corral {

class CountSummary {
 public:
  // J's states.
  // kB: at a boundary; kE: after `\`; kU4..kU1: hex digits of `\u` left (kU3D: the first was
  // d/D; kU2H/kU1H: a high surrogate); kH: a boundary right after a high surrogate, where a
  // `\u` low surrogate completes the pair (kEH, kU4H, kU3DH, kU2L, kU1L); kC3..kC1: UTF-8
  // continuation bytes left; kX: closed; kZ: junk.
  enum : std::uint8_t {
    kB, kE, kU4, kU3, kU3D, kU2, kU2H, kU1, kU1H, kH, kEH, kU4H, kU3DH, kU2L, kU1L, kC3, kC2, kC1, kX, kZ, kStates
  };
  /// J's step from state j on byte b; `counted` is set when the byte starts a character.
  static std::uint8_t step(std::uint8_t j, std::uint8_t b, bool& counted);

  CountSummary(const Vocabulary& vocab, std::uint32_t depth);
  std::uint32_t depth() const { return depth_; }
  /// Tokens with at most k counted characters that are not junk (k <= depth).
  const std::uint32_t* len_le(std::uint32_t k) const { return &len_le_[k * words_]; }
  /// Tokens that closed with fewer than k counted characters (k <= depth + 2).
  const std::uint32_t* closed_lt(std::uint32_t k) const { return &closed_lt_[k * words_]; }
  std::size_t memory_bytes() const { return 4 * (len_le_.size() + closed_lt_.size()); }

 private:
  std::uint32_t depth_;
  std::uint32_t words_;
  std::vector<std::uint32_t> len_le_;     // (depth + 1) rows
  std::vector<std::uint32_t> closed_lt_;  // (depth + 3) rows
};

/// The bounds of a proven relation between a state and an anchor (see the header).
struct CountBounds {
  std::uint32_t lo = 0, r = 0;
};

/// Does (1)–(2) of the header hold for states s of `ds` and t of `dt`, counting up to `depth`
/// characters? On success sets the bounds. Bounded work: gives up (false) past `max_nodes`
/// product nodes; `visited` (optional) receives how many it visited.
bool prove_counted(const Dfa& ds, std::int32_t s, const Dfa& dt, std::int32_t t, std::uint32_t depth,
                   std::size_t max_nodes, CountBounds& out, std::size_t* visited = nullptr);

/// Per compiled grammar: the anchors (states whose short part was walked) of each terminal,
/// and the short parts derived from them.
class CountedShare {
 public:
  static constexpr std::size_t kMaxAnchors = 4;  // per terminal, most recent kept
  // Product nodes one proof may visit (a counted string needs about 20 per character left):
  // past it the proof gives up, and an anchor that made a proof give up is not tried again, so
  // a failed derivation costs a small fraction of the walk it would have saved.
  static constexpr std::size_t kMaxNodes = 1024;

  CountedShare(const Vocabulary& vocab, std::shared_ptr<const CountSummary> summary);
  /// The short part of state `s` of terminal `terminal` (automaton `dfa`), derived from an
  /// anchor of that terminal; null when no anchor relation is proven.
  std::shared_ptr<const FrontierEntry> derive(std::int32_t terminal, const Dfa& dfa, std::int32_t s);
  /// Record a walked short part as an anchor for later states of the terminal.
  void add_anchor(std::int32_t terminal, std::int32_t s, std::shared_ptr<const FrontierEntry> entry);

 private:
  // A group of the anchor's entry restricted to split paths with one J summary.
  struct Stratum {
    std::uint32_t count;
    std::uint8_t kind;  // kB-like "open", kX "closed", kZ "junk"
    FrontierEntry::Group group;
  };
  struct Anchor {
    std::int32_t state;
    std::shared_ptr<const FrontierEntry> entry;
    std::vector<Stratum> strata;  // built on first derivation
    bool stratified = false;
    bool too_big = false;  // a proof against it exceeded kMaxNodes
  };
  void stratify(Anchor& a) const;

  const Vocabulary& vocab_;
  std::shared_ptr<const CountSummary> summary_;
  mutable std::mutex mu_;
  std::vector<std::vector<Anchor>> anchors_;  // per terminal
};

}  // namespace corral
