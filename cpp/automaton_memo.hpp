// automaton_memo.hpp — automata shared by every compile in the process, by structural key.
//
// In:  a regular tree (its structural key: kind, code point ranges, counts and children's keys,
//      so equal keys mean equal trees and equal languages), and the automaton a compile built
//      for it: a terminal's byte DFA, or the minimal DFA of an `&`/`-` node.
// Out: the same automaton for the next compile of an equal tree — in another grammar, or in the
//      final compile after the JSON Schema converter's probe of a product built it.
// Why: real schemas repeat the same few expensive terminals (a string of maxLength 255, a
//      date-time, a pattern product) and the converter probes every product before the engine
//      compiles it again; each costs milliseconds to determinise and minimise.
// Invariants: an entry is the exact automaton of its key's tree; it is reused only under limits
//      at least as large as those it was built under (construction that succeeded under a limit
//      succeeds under a larger one, with the same result), so a hit never hides a LimitExceeded
//      the build would raise. Products are stored over code point ranges, not a compile's class
//      alphabet: any NFA whose tree contains the operands has classes that are each inside or
//      outside every label, so the entry maps onto its alphabet exactly. The memo holds at most
//      kAutomatonMemoBytes and is emptied when an insert would pass that; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dfa.hpp"
#include "regex_ast.hpp"

namespace corral {

/// Structural keys of trees. Equal keys ⇔ structurally equal trees. A key is 8 bytes: the
/// node's id in a process-wide hash-consing table, whose entries are (kind, payload, children's
/// ids) — so computing keys is linear in the tree, however deep (keys that spelled out their
/// subtrees cost size × depth on the deeply nested "none of these keys" regexes of big
/// schemas). Ids carry a generation: when the table is emptied (it holds at most
/// kMaxInternedNodes), the automaton memo is emptied with it and later ids never equal earlier
/// ones, so a key never names two different trees. A node's id is cached in the node itself
/// (Node::structural_id, read only while its generation is current), so subtrees shared by
/// every compile — the JSON spellings of a character class, built once per process — are
/// interned once, not once per compile. The keys handed out are memoised per instance, which
/// holds the nodes it keyed (an address is not reused while it is a key).
class StructuralKeys {
 public:
  const std::string& of(const NodePtr& n);

 private:
  static std::uint64_t id_of(const Node& n);
  std::unordered_map<const Node*, std::pair<NodePtr, std::string>> keys_;
};

constexpr std::size_t kMaxInternedNodes = std::size_t{1} << 18;

/// A DFA whose transitions are labelled with code point sets instead of alphabet classes.
struct RangeDfa {
  std::int32_t start = -1;
  std::vector<std::uint8_t> acc;                                   // per state
  std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> out;  // per state: (label, target)
  std::vector<std::vector<CodepointRange>> labels;                  // sorted, disjoint ranges
  std::size_t memory_bytes() const;
};

/// The limits an automaton was built under (the ones that can make its construction fail).
struct BuiltUnder {
  std::uint32_t max_nfa_states = 0;
  std::uint32_t max_dfa_states = 0;
  static BuiltUnder of(const Limits& l) { return {l.max_nfa_states, l.max_dfa_states}; }
  bool covered_by(const Limits& l) const { return max_nfa_states <= l.max_nfa_states && max_dfa_states <= l.max_dfa_states; }
};

constexpr std::size_t kAutomatonMemoBytes = std::size_t{64} << 20;

/// A terminal's byte DFA, if one was built for `key` under limits covered by `limits`.
std::shared_ptr<const Dfa> memo_terminal(const std::string& key, const Limits& limits);
void memo_put_terminal(const std::string& key, const Limits& limits, const Dfa& dfa);
/// Whether the lowering found, under limits at least as large as `limits`, that the terminal
/// holding the starred alternation `key` cannot be built directly (grammar_lower.cpp splits
/// it then); memo_refuse_alternation records that. Emptied with the memo, and past
/// kMaxRefusedAlternations entries.
bool memo_alternation_refused(const std::string& key, const Limits& limits);
void memo_refuse_alternation(const std::string& key, const Limits& limits);
constexpr std::size_t kMaxRefusedAlternations = 4096;
/// The minimal DFA of an `&`/`-` tree, likewise.
std::shared_ptr<const RangeDfa> memo_product(const std::string& key, const Limits& limits);
void memo_put_product(const std::string& key, const Limits& limits, RangeDfa dfa);

struct AutomatonMemoStats {
  std::size_t entries = 0, bytes = 0;
  std::uint64_t hits = 0, misses = 0;
};
AutomatonMemoStats automaton_memo_stats();
/// Forget every entry (benchmarks of a first compile; tests).
void clear_automaton_memo();

}  // namespace corral
