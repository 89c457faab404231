// dfa.hpp — one terminal's deterministic automaton over bytes.
//
// In:  a regular expression tree (no RuleRef).
// Out: a DFA over UTF-8 bytes whose language is exactly the UTF-8 encodings of the strings the
//      tree matches.
// Invariants: every state is live (can reach an accepting state), so `next` returning kDead is
// the only way a byte can be rejected; transitions are stored per byte equivalence class; the
// automaton is minimal (so equal remaining languages share one state id, which keeps the mask
// cache small). A DFA for the empty language has zero states and start() == kDead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

class Dfa {
 public:
  static constexpr std::int32_t kDead = -1;

  std::int32_t start() const { return start_; }
  std::uint32_t num_states() const { return static_cast<std::uint32_t>(accepting_.size()); }
  std::int32_t next(std::int32_t state, std::uint8_t byte) const {
    return table_[static_cast<std::size_t>(state) * num_classes_ + classes_[byte]];
  }
  bool accepting(std::int32_t state) const { return accepting_[static_cast<std::size_t>(state)] != 0; }
  bool matches_empty() const { return start_ != kDead && accepting(start_); }
  bool empty_language() const { return start_ == kDead; }

  std::uint32_t num_classes() const { return num_classes_; }
  std::uint8_t byte_class(std::uint8_t byte) const { return classes_[byte]; }
  /// Transition by class id (every byte of a class behaves the same).
  std::int32_t next_by_class(std::int32_t state, std::uint32_t cls) const {
    return table_[static_cast<std::size_t>(state) * num_classes_ + cls];
  }
  /// Smallest byte of each class (for enumerating possible next bytes).
  std::uint8_t class_representative(std::uint32_t cls) const { return class_rep_[cls]; }

  /// Length in bytes of the shortest path from `state` to an accepting state (0 if accepting).
  std::uint32_t distance_to_accept(std::int32_t state) const { return dist_[static_cast<std::size_t>(state)]; }
  /// The bytes of one shortest accepted continuation from `state`.
  std::string shortest_completion(std::int32_t state) const;

  /// Build from a regular tree. Throws LimitExceeded (max_nfa_states / max_dfa_states /
  /// max_compile_ms) or InternalError if the tree contains a RuleRef.
  static Dfa compile(const NodePtr& regex, const Limits& limits, const Budget& budget);
  /// The same language through the general pipeline only (NFA → subsets → Hopcroft), without
  /// the direct construction of finite trees (finite_dfa.hpp): the reference the tests compare
  /// that construction with. Equal to compile's result up to state numbering.
  static Dfa compile_by_subsets(const NodePtr& regex, const Limits& limits, const Budget& budget);
  /// compile's direct construction alone (finite_dfa.hpp): the minimal DFA when that route
  /// takes the tree and needs at most `max_states` states; nothing otherwise (the tree is
  /// outside its class, or bigger). Throws only what the compile budget throws.
  static std::optional<Dfa> compile_direct(const NodePtr& regex, const Limits& limits, const Budget& budget,
                                           std::size_t max_states);
  /// The minimal DFA accepting exactly the given byte strings, which must be sorted and
  /// unique. Linear in their total length (no regex, no NFA): what binding a slot builds.
  /// Throws LimitExceeded(max_dfa_states).
  static Dfa from_strings(const std::vector<std::string_view>& sorted, const Limits& limits);

  /// Bytes of memory held (for cache accounting).
  std::size_t memory_bytes() const;
  /// Same automaton, state for state (start, byte classes, transitions, accepting states):
  /// then mask entries computed for one are valid for the other.
  bool same_as(const Dfa& o) const {
    return start_ == o.start_ && num_classes_ == o.num_classes_ && classes_ == o.classes_ &&
           accepting_ == o.accepting_ && table_ == o.table_;
  }
  /// A hash of what same_as compares.
  std::uint64_t fingerprint() const;

 private:
  std::int32_t start_ = kDead;
  std::uint32_t num_classes_ = 1;
  std::array<std::uint8_t, 256> classes_{};
  std::vector<std::uint8_t> class_rep_;
  std::vector<std::int32_t> table_;       // num_states * num_classes
  std::vector<std::uint8_t> accepting_;   // per state
  std::vector<std::uint32_t> dist_;       // per state: bytes to nearest accept
  std::vector<std::uint8_t> toward_;      // per state: first byte on a shortest path
  friend class DfaBuilder;
  friend struct DfaCodec;  // artifact.cpp: writes the table, rebuilds the derived arrays on load
};

}  // namespace corral
