// earley.hpp — an incremental, byte-level Earley parser whose terminals are DFAs.
//
// Algorithm: Earley (1970) with the Aycock–Horspool (2002) treatment of nullable symbols,
// run scannerless over bytes: an item whose next symbol is a terminal carries that terminal's
// DFA state; each byte advances those states, and whenever a terminal's DFA reaches an
// accepting state the item *also* advances past the terminal. Terminals therefore end at any
// accepting point (not greedily), which keeps the parser exact for every CFG and makes merging
// regular pieces into one terminal language-preserving.
// In:  a finalized Grammar (grammar.hpp). Out: after each byte, the set of live items.
// Invariants: a set is non-empty iff the bytes so far are a prefix of some sentence (all
// nonterminals are productive and all DFA states live); sets are pushed and popped like a stack
// so rollback is exact and cheap; one set never holds more than max_items items (LimitExceeded).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "distinct.hpp"
#include "item_values.hpp"
#include "grammar.hpp"
#include "keyed.hpp"

namespace corral {

struct Item {
  std::uint32_t prod;
  std::uint32_t dot;
  std::uint32_t origin;
  std::int32_t dstate;  // DFA state of the terminal after the dot; -1 when none
  std::uint32_t aux = 0;  // keyed and unique groups: id of the set of keys seen (KeySets, keyed.hpp, unique.hpp);
                          // distinct groups: id of the values seen (ValueSets, distinct.hpp)
};

class EarleyParser {
 public:
  /// `dfas[t]` is terminal t's automaton: the grammar's own, or for a slot the one its binding
  /// built (CompiledGrammar::dfas()). Both must outlive the parser.
  EarleyParser(const Grammar& g, const Dfa* const* dfas, std::uint32_t max_items);

  /// Back to the initial state (one set: the closure of `start ::= . root`).
  void reset();
  std::size_t num_sets() const { return set_start_.size(); }
  /// Keep only the first n sets (n >= 1).
  void pop_to(std::size_t n);

  /// Advance by one byte. Returns false (state unchanged) when no item survives.
  bool push_byte(std::uint8_t b);
  /// Advance past a token terminal (a vocabulary token the grammar names). False (unchanged)
  /// when no item expects that token here.
  bool push_token(std::int32_t token_id);
  /// Token ids named by the grammar that the current set expects (appended to `out`).
  void expected_tokens(std::vector<std::int32_t>& out) const;
  /// Advance every scanning item i of the current set to DFA state new_states[i - cur_begin()]
  /// (kDead drops it): the step a byte string would take if it stayed inside the terminals.
  bool push_states(const std::int32_t* new_states);

  bool accepting() const { return (set_flags_.back() & kAcceptFlag) != 0; }
  /// Does the current set hold an item about to read a slot terminal?
  bool slot_items() const { return (set_flags_.back() & kSlotFlag) != 0; }
  /// Sticky: has an item about to read a slot terminal been added since clear_slot_seen()?
  /// Together with slot_items() this tells whether a computation consulted a slot's automaton,
  /// i.e. whether its result depends on the binding (CompiledGrammar::memo_put).
  bool slot_seen() const { return slot_seen_; }
  void clear_slot_seen() { slot_seen_ = false; }
  std::size_t cur_begin() const { return set_start_.back(); }
  std::size_t cur_end() const { return items_.size(); }
  const Item& item(std::size_t i) const { return items_[i]; }
  /// Terminal after the dot of item i, or -1.
  std::int32_t scanning_terminal(const Item& it) const {
    std::uint32_t pos = g_->rhs_begin[it.prod] + it.dot;
    if (pos >= g_->rhs_begin[it.prod + 1]) return -1;
    Symbol s = g_->rhs_flat[pos];
    return s.is_terminal() ? s.index() : -1;
  }

  /// A 128-bit signature of everything the parser's future depends on: the current set's
  /// scanning items and, recursively through origins, the items waiting on a nonterminal
  /// (completed items and old scanning items can never act again). Equal signatures mean equal
  /// futures (up to a 2^-128 hash collision), so masks can be memoised by it.
  std::pair<std::uint64_t, std::uint64_t> state_signature() const;

  /// Bytes that can come next (bit b set in words[b / 64]).
  std::array<std::uint64_t, 4> next_bytes() const;
  /// The shortest byte string that completes a sentence from the current state (empty when
  /// already accepting). Throws LimitExceeded past `cap` bytes.
  std::string shortest_completion(std::size_t cap);

  /// Distinct groups (distinct.hpp): does a closing item compare its value with those already
  /// closed (on: the default, what accepting text needs), or only count it (off: what the
  /// cached, history-independent part of a mask is computed with)?
  void set_check_values(bool on) { check_values_ = on; }
  bool check_values() const { return check_values_; }
  ValueSets& values() { return values_; }
  const Grammar& grammar() const { return *g_; }
  const Dfa* const* dfas() const { return dfas_; }
  /// Does an open distinct group already hold a value here: one of the current set's items, or
  /// (for items of a group's item rule) one of the items that predicted them? Exact when every
  /// group's item rule is a single terminal (then those are the only places its group is).
  bool open_values() const;
  /// Dead item prefixes (item_values.hpp): per terminal, the value counts of a distinct
  /// group's item (null for other terminals); the table must outlive the parser. Without it
  /// (the default) only duplicate closes are refused.
  void set_item_values(const std::vector<const ItemValues*>* table) { item_values_ = table; }
  const ItemValues* item_values(std::int32_t terminal) const {
    return item_values_ == nullptr ? nullptr : (*item_values_)[static_cast<std::size_t>(terminal)];
  }
  /// The value sets of the distinct group items waiting for the item `it` (an item of a
  /// group's item rule) in its origin set.
  void waiting_value_sets(const Item& it, std::vector<std::uint32_t>& out) const;
  /// The text of an item since its origin set (false when a byte is not known).
  bool item_text(std::uint32_t origin, std::string& out) const;
  /// Would the item `it` of a group's item rule, in state `state` of its terminal `t`, be a
  /// dead prefix (item_values.hpp)? `text`: its text so far (scratch, left as it was);
  /// `strict`: not counting the value a numeric item spells in `state` (it may close there).
  bool dead_prefix(const Item& it, std::int32_t t, std::int32_t state, std::string& text, bool strict = false) const;

 private:
  void open_set();
  bool close_set();  // closure of the newest set; false (and popped) when empty
  void abandon_set();
  void add(std::uint32_t prod, std::uint32_t dot, std::uint32_t origin, std::int32_t dstate, std::uint32_t aux = 0);
  /// Keyed groups: the extra completion cost of an item of a group's production (the
  /// required keys its completion would still lack), and those members' shortest text.
  std::uint64_t missing_cost(const Item& it) const;
  void append_missing(const Item& it, std::string& out, std::size_t cap) const;
  std::uint32_t out_keys(const Item& it);
  // distinct.hpp: the group of an item's production when it is a distinct group, else null.
  const KeyedGroup* distinct_group(std::uint32_t prod) const {
    const std::int32_t grp = g_->group_of[static_cast<std::size_t>(g_->productions[prod].lhs)];
    return grp >= 0 && g_->keyed[static_cast<std::size_t>(grp)].distinct() ? &g_->keyed[static_cast<std::size_t>(grp)] : nullptr;
  }
  // keyed.hpp: the group of an item's production when it remembers its undeclared keys, else null.
  const KeyedGroup* key_group(std::uint32_t prod) const {
    const std::int32_t grp = g_->group_of[static_cast<std::size_t>(g_->productions[prod].lhs)];
    return grp >= 0 && g_->keyed[static_cast<std::size_t>(grp)].remembers_keys() ? &g_->keyed[static_cast<std::size_t>(grp)]
                                                                                 : nullptr;
  }
  // What signatures hash of an item's aux: a distinct group's count of values; a group that
  // remembers undeclared keys, its set without the held keys' id (masks are computed with value
  // checks off and corrected after, as for distinct groups: distinct.hpp).
  std::uint64_t aux_hash(const Item& it) const {
    if (it.aux == 0) return 0;
    if (distinct_group(it.prod)) return values_.signature(it.aux);
    if (const KeyedGroup* kg = key_group(it.prod)) return keys_.hash_without_counter(it.aux, kg->held_at());
    return keys_.hash[it.aux];
  }
  // The value of the V that completed in the newest set with origin set `origin`.
  ValueHash item_value(std::uint32_t origin, std::string* decoded = nullptr) const;
  std::uint32_t distinct_have(const Item& it) const;
  bool exhausted(const KeyedGroup& kg, std::uint32_t have) const;
  bool can_act(std::size_t begin) const;
  void ensure_costs();

  static constexpr std::uint8_t kAcceptFlag = 1, kSlotFlag = 2;
  const Dfa& dfa(std::int32_t terminal) const { return *dfas_[terminal]; }

  const Grammar* g_;
  const Dfa* const* dfas_;
  std::uint32_t max_items_;
  std::vector<Item> items_;
  std::vector<std::size_t> set_start_;
  std::vector<std::uint8_t> set_flags_;  // per set: kAcceptFlag | kSlotFlag
  bool slot_seen_ = false;
  // The seen-key sets items of keyed groups refer to (the matcher's only state besides the
  // item sets; cleared by reset()).
  KeySets keys_;
  // Distinct groups (distinct.hpp): the value sets, the byte that created each set (-1: none
  // known, e.g. a mask's jump through a terminal), and whether closing values are compared.
  ValueSets values_;
  std::vector<std::int16_t> set_byte_;
  std::int16_t pending_byte_ = -1;
  bool check_values_ = true;
  const std::vector<const ItemValues*>* item_values_ = nullptr;
  mutable std::vector<std::uint32_t> scratch_sets_;
  std::string scratch_text_;
  bool refused_ = false;  // close_set: a duplicate was refused in the set being closed
  std::vector<std::pair<std::uint64_t, std::uint64_t>> wait_sig_;  // per set
  // Dedup table for the set being built: open addressing over item indices, invalidated by
  // bumping a generation counter instead of clearing.
  std::vector<std::uint32_t> table_idx_;
  std::vector<std::uint32_t> table_gen_;
  std::uint32_t gen_ = 0;
  std::size_t table_count_ = 0;
  std::vector<std::int32_t> scratch_states_;
  // shortest_completion: per set, the cost of completing each expected nonterminal.
  struct NtCost {
    std::int32_t nt;
    std::uint64_t cost;
    std::uint32_t via;  // item index achieving it
  };
  std::vector<std::vector<NtCost>> costs_;
};

}  // namespace corral
