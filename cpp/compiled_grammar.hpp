// compiled_grammar.hpp — a grammar bound to a vocabulary, with the shared token-mask cache.
//
// The expensive part of a mask — which tokens a set of terminal DFA states allows — depends only
// on the *frontier*: the distinct (terminal, DFA state) pairs of the parser's scanning items.
// For a frontier, one walk of the token trie splits every token into:
//   * allowed outright: all its bytes stay inside some terminal (a dense bitmask, cached);
//   * undecided: some terminal can end inside the token, and what follows must be checked by
//     the parser. These are grouped by the frontier's DFA states at their first such point
//     (usually one or two groups). Below a split, the tokens leave every terminal at some
//     "dead" trie node; a group keeps a small trie of the distinct *heads* (bytes from the
//     split through the dead node) and, per head, the dead nodes. The matcher walks the head
//     trie with the parser once per distinct head (e.g. `,` `}` `:` after a closing quote,
//     shared by thousands of tokens), then each dead node's subtree from there.
// Everything else is rejected. Entries are computed lazily on first use and shared by every
// matcher of this grammar; the object is immutable apart from the cache, which is guarded by a
// shared mutex, so it is safe to use from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "grammar.hpp"
#include "vocab.hpp"

namespace corral {

struct FrontierEntry {
  // Tokens allowed outright: dense mask words (always for whole-vocabulary entries), or a
  // sparse id list for a small subtree entry (then `allowed` is empty).
  std::vector<std::uint32_t> allowed;
  std::vector<std::int32_t> allowed_ids;
  struct Group {
    std::vector<std::int32_t> states;  // per frontier element: DFA state at the split (or -1)
    TokenTrie heads;                   // distinct heads; "token ids" index `dead`
    std::vector<std::uint32_t> dead;   // vocabulary-trie nodes where tokens leave the terminals
  };
  std::vector<Group> groups;
  std::size_t memory_bytes = 0;
};

struct FrontierKeyHash {
  std::size_t operator()(const std::vector<std::uint64_t>& k) const {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (std::uint64_t x : k) {
      h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
      h *= 0x100000001B3ull;
    }
    return static_cast<std::size_t>(h);
  }
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Vocabulary> vocab, Grammar grammar, const Limits& limits);

  const Grammar& grammar() const { return grammar_; }
  const Vocabulary& vocab() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocab_ptr() const { return vocab_; }
  const Limits& limits() const { return limits_; }
  /// Does the grammar name any vocabulary token (`<|eot_id|>`, `<[id]>`)?
  bool names_tokens() const { return names_tokens_; }

  /// Frontier key element: terminal in the high 32 bits, DFA state in the low 32.
  static std::uint64_t key_element(std::int32_t terminal, std::int32_t state) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(terminal)) << 32 | static_cast<std::uint32_t>(state);
  }
  /// Optional last key element: restrict the entry to the tokens strictly below vocabulary-trie
  /// node `node`, matched from that node's depth on (used after a parser step inside a token).
  static std::uint64_t key_subtree(std::uint32_t node) { return 0xFFFFFFFF00000000ull | node; }
  /// The cached entry for a frontier (sorted, unique key elements, optionally followed by a
  /// key_subtree element), computing it on a miss.
  std::shared_ptr<const FrontierEntry> frontier_entry(const std::vector<std::uint64_t>& key) const;

  using Signature = std::pair<std::uint64_t, std::uint64_t>;
  /// Memoised whole mask for a parser-state signature (null on a miss).
  std::shared_ptr<const std::vector<std::uint32_t>> memo_get(const Signature& sig) const;
  /// Store a whole mask row (mask_words words). Bounded by Limits::max_mask_memo_mb: when full
  /// the memo is cleared (cheap to refill; keeps memory bounded without per-hit bookkeeping).
  void memo_put(const Signature& sig, const std::uint32_t* row) const;
  std::size_t memo_entries() const;
  /// Cheap pre-check so grammars that never memoise (no parser work) skip the lookup.
  bool memo_empty() const { return memo_count_.load(std::memory_order_relaxed) == 0; }

  std::size_t cache_entries() const;
  std::size_t cache_bytes() const;
  std::uint64_t cache_hits() const { return hits_.load(); }
  std::uint64_t cache_misses() const { return misses_.load(); }

 private:
  FrontierEntry compute_entry(const std::vector<std::uint64_t>& key) const;

  std::shared_ptr<const Vocabulary> vocab_;
  Grammar grammar_;
  Limits limits_;
  bool names_tokens_ = false;
  mutable std::shared_mutex mu_;
  mutable std::unordered_map<std::vector<std::uint64_t>, std::shared_ptr<const FrontierEntry>, FrontierKeyHash> cache_;
  mutable std::size_t cache_bytes_ = 0;
  mutable std::atomic<std::uint64_t> hits_{0}, misses_{0};
  struct SigHash {
    std::size_t operator()(const Signature& s) const { return static_cast<std::size_t>(s.first); }
  };
  mutable std::shared_mutex memo_mu_;
  mutable std::atomic<std::size_t> memo_count_{0};
  mutable std::unordered_map<Signature, std::shared_ptr<const std::vector<std::uint32_t>>, SigHash> memo_;
};

}  // namespace corral
