// mask_pool.hpp — frontier entries shared by every grammar compiled on one vocabulary.
//
// In:  frontier keys of any CompiledGrammar on the vocabulary, rewritten over *pool DFA ids*.
// Out: the cached FrontierEntry for such a key, or null.
// A frontier entry depends only on the key's automata (their states, byte classes, accepting
// states), each terminal's `followable` flag, the key's states and subtree, and the vocabulary
// (its trie and share depth). So two grammars whose terminals have the *same* automaton — the
// plain JSON string, any-value pieces, the same format or pattern — can share entries: the pool
// gives each distinct automaton an id, found by fingerprint and confirmed by an exact
// comparison (Dfa::same_as), and keys entries by (id, followable, state). A new schema then
// finds the string-interior and free-form entries warm instead of walking the trie for each.
// The pool keeps the automata it compares against alive (aliasing the grammars that own them).
// Bounded: automata of at most kMaxDfaStates states, at most kMaxDfas of them, and entries up
// to kMaxBytes in all (past it, each new entry evicts just enough others: they are cheap to
// refill, and emptying the whole pool at once stalled one mask for tens of milliseconds).
// Thread-safe.
// The pool also keeps the vocabulary's counted-string summary (count_summary.hpp) and its
// string-interior summary (interior_summary.hpp), each built once on first use and shared by
// every grammar on the vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "compiled_grammar.hpp"
#include "count_summary.hpp"
#include "interior_summary.hpp"

namespace corral {

class MaskPool {
 public:
  static constexpr std::uint32_t kMaxDfaStates = 1 << 16;
  static constexpr std::size_t kMaxDfas = 1 << 14;
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 20;

  /// The pool id of `dfa` (kept alive through `owner`), registering it if new; -1 when it is
  /// not pooled (too big, or the pool holds kMaxDfas automata).
  std::int32_t dfa_id(const Dfa& dfa, std::shared_ptr<const void> owner);
  std::shared_ptr<const FrontierEntry> get(const std::vector<std::uint64_t>& key) const;
  void put(const std::vector<std::uint64_t>& key, std::shared_ptr<const FrontierEntry> entry);
  std::size_t entries() const;
  /// The vocabulary's counted-string summary at its share depth (built on first call); null
  /// when the share depth is outside what the summary supports (0, or over kMaxSummaryDepth).
  std::shared_ptr<const CountSummary> count_summary(const Vocabulary& vocab);
  static constexpr std::uint32_t kMaxSummaryDepth = 64;
  /// The vocabulary's string-interior summary (built on first call).
  const InteriorSummary& interior_summary(const Vocabulary& vocab);

 private:
  mutable std::shared_mutex mu_;
  std::unordered_multimap<std::uint64_t, std::pair<std::int32_t, std::shared_ptr<const Dfa>>> dfas_;
  std::size_t num_dfas_ = 0;
  std::unordered_map<std::vector<std::uint64_t>, std::shared_ptr<const FrontierEntry>, FrontierKeyHash> entries_;
  std::size_t bytes_ = 0;
  std::uint64_t evict_seed_ = 0x9E3779B97F4A7C15ull;  // put's eviction draws (under mu_)
  std::once_flag summary_once_;
  std::shared_ptr<const CountSummary> summary_;
  std::once_flag interior_once_;
  std::unique_ptr<const InteriorSummary> interior_;
};

}  // namespace corral
