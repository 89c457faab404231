// limits.hpp — resource limits for compiling and matching untrusted constraints.
//
// Grammars and regexes may come from strangers over a network, so every stage that can grow
// (automaton states, grammar size, nesting, compile time, parser items) is bounded here.
// Each default is chosen so realistic constraints never hit it while a hostile one fails in
// well under a second with a LimitExceeded naming the limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "errors.hpp"

namespace corral {

struct Limits {
  /// NFA states for one terminal (≈ size of the regex after expanding counted repetition).
  /// Cost: ~40 bytes per state. `a{0,100000}` needs ~100k and is refused.
  std::uint32_t max_nfa_states = 50000;
  /// DFA states for one terminal after determinisation. Cost: one row of
  /// (number of byte classes) int32 per state, built eagerly at compile time.
  std::uint32_t max_dfa_states = 20000;
  /// DFA states summed over all terminals of a grammar.
  std::uint32_t max_total_dfa_states = 200000;
  /// Nesting depth of parentheses/brackets in regex and grammar text (recursive-descent parsers),
  /// stacked grammar quantifiers included. Every recursion over the parsed tree downstream
  /// (lowering, NFA construction, destructors) is as deep as this. Values above
  /// kMaxNestingCeiling act as the ceiling (see nesting_limit).
  std::uint32_t max_nesting = 200;
  /// Productions in the lowered grammar.
  std::uint32_t max_productions = 100000;
  /// Wall-clock budget for compiling one constraint, milliseconds.
  std::uint32_t max_compile_ms = 10000;
  /// Earley items in one parser set at decode time; a grammar that explodes past this puts the
  /// matcher into its error state instead of exhausting memory.
  std::uint32_t max_items_per_set = 50000;
  /// Memory for memoised whole masks (per compiled grammar), MiB. A mask that needed parser work
  /// is stored under the parser-state signature, so a recurring state costs one copy. Cost:
  /// ceil(width/32)*4 bytes per entry (16 KiB at a 128k vocabulary). 0 disables it.
  std::uint32_t max_mask_memo_mb = 64;
  /// Values bound to one slot (`${name}` terminal) per binding. Checked before any work, so a
  /// request with a million values is refused in microseconds.
  std::uint32_t max_slot_values = 100000;
  /// Bytes of one slot's values (as spelled in the output, quotes and escapes included) per
  /// binding: bounds the trie built at bind time. The slot's DFA also counts against
  /// max_dfa_states (its dense table is states x byte classes x 4 bytes).
  std::uint32_t max_slot_bytes = 1 << 20;
  /// Mask entries of equivalent DFA states are shared (compiled_grammar.hpp) for terminals
  /// with at least this many states: a counted string's positions then cost one full trie walk
  /// instead of one each, plus a walk of the vocabulary's few long tokens per position. Cost:
  /// a lazily built class table, about (share depth + 1) ints per state queried nearby.
  /// Entries are also shared across grammars on one vocabulary whose terminals have the same
  /// automaton (mask_pool.hpp). 2^32 - 1 turns both off: every frontier of the grammar walks
  /// the whole trie itself (the reference path the tests compare with).
  std::uint32_t mask_share_min_states = 64;
};

/// The deepest nesting any setting of max_nesting allows: the parsers and every recursion over
/// their trees take roughly 0.5-1 KiB of stack per level, and compiles may run on threads with
/// 1 MiB stacks (measured: 1,000 levels pass on one, 2,000 overflow it). Inlining chains of
/// regular rules (grammar_lower.cpp) may build trees up to about five times the limit deep.
constexpr std::uint32_t kMaxNestingCeiling = 500;

/// The nesting depth the parsers enforce: max_nesting, capped at kMaxNestingCeiling.
inline std::uint32_t nesting_limit(const Limits& limits) {
  return limits.max_nesting < kMaxNestingCeiling ? limits.max_nesting : kMaxNestingCeiling;
}

/// The message suffix for a nesting error: says when the ceiling, not the setting, refused it.
inline std::string nesting_note(const Limits& limits) {
  return limits.max_nesting > kMaxNestingCeiling
             ? " (nesting deeper than 500 is refused whatever max_nesting says: the stack)"
             : "";
}

/// A deadline checked at loop heads of long-running compile stages.
class Budget {
 public:
  explicit Budget(std::uint32_t ms)
      : ms_(ms), deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {}
  /// Throws LimitExceeded when the deadline has passed. Cheap enough to call every few
  /// hundred iterations (reads the steady clock).
  void check(const char* what) const {
    if (std::chrono::steady_clock::now() > deadline_)
      throw LimitExceeded("max_compile_ms", ms_ + 1, ms_, std::string("compile time budget exhausted while ") + what);
  }

 private:
  std::uint32_t ms_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace corral
