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
//
// Several elements. A frontier of several elements is walked through product states (tuples
// of the elements' states, interned per walk with a lazily filled transition table,
// product_walk.hpp): the same states node for node as stepping each element, at the cost of
// one lookup per node. set_mask_fast_paths(false) forces the element-by-element walk.
//
// Delta entries. The entry of a broad frontier (or a one-element short part) that differs from
// an already walked one on a few first bytes is derived from that walk, walking only the trie
// subtrees where the two frontiers' paths differ (delta_walk.cpp); also off on the reference
// path.
//
// Interior skips. A whole-vocabulary walk of a frontier with an element that keeps every
// "clean" token (one that can only continue the inside of a JSON string) alive — or with
// elements that together do, each clean token keeping one of them alive — skips the trie
// subtrees holding only clean tokens and ORs in the vocabulary's clean set instead
// (interior_summary.hpp): on Llama 3.2, 96% of the trie. This is what string interiors and the
// key positions of objects with undeclared keys (the "none of the declared keys" automaton,
// lowered as one terminal per first letter) meet. Also off on the reference path.
//
// Shared entries. A counted string (`[a-z]{1,255}`, maxLength) has one DFA state per position,
// and each would pay a walk of the whole trie. For a one-element frontier whose terminal has
// at least Limits::mask_share_min_states states, the entry is instead assembled from two walks:
// the *short* part (trie nodes at depth <= D, the vocabulary's share depth) is walked from a
// representative of the state's ≈_D class (state_equiv.hpp) and cached per class — every
// position with more than D characters left shares it — and the *long* part (the few nodes
// deeper than D: tokens longer than D bytes) is walked from the real state. The two parts
// together hold exactly what one full walk from the real state would: ≈_D states agree on
// every path of at most D bytes and reach identical states wherever a terminal can end, so the
// short part's groups are valid for the real state too. The assembled entry keeps the short
// part's groups by pointer (`shared`). The short part of a class met after an earlier one was
// walked (the last D positions of a counted string, its first one under a minLength) is derived
// from that earlier walk with a few bitset operations where a relation proven on the automaton
// allows it (count_summary.hpp), and walked otherwise.
//
// Slots. A grammar with slot terminals (`${name}`) is a *skeleton*: it cannot be matched until
// bind() supplies each slot's values. A binding is a small CompiledGrammar that shares the
// skeleton's immutable parts (lowered grammar, terminal DFAs, vocabulary and token trie) and
// owns only the slots' DFAs plus the cache entries that depend on them: a frontier that
// contains a slot terminal is cached in the binding, every other frontier in the skeleton (so
// all bindings warm one cache), and a whole mask is memoised in the skeleton unless computing
// it consulted a slot's automaton. The skeleton is never recompiled or modified by a binding
// (apart from its thread-safe caches).
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar.hpp"
#include "state_equiv.hpp"
#include "vocab.hpp"

namespace corral {

class MaskPool;
class InteriorSummary;
class DistinctCorrection;
class CountedShare;

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
  // Further groups, shared with the entries of equivalent states (see the header) or with a
  // delta walk's anchor (delta_walk.cpp); the matcher processes them like `groups`, and the
  // shared entry's own `shared` after them (a chain: a shared short part may be a delta entry
  // whose groups are its anchor's). Null when there are none.
  std::shared_ptr<const FrontierEntry> shared;
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

/// One slot's values for CompiledGrammar::bind (unencoded UTF-8 strings).
struct SlotValues {
  std::string name;
  std::vector<std::string> values;
};

class CompiledGrammar : public std::enable_shared_from_this<CompiledGrammar> {
 public:
  CompiledGrammar(std::shared_ptr<const Vocabulary> vocab, Grammar grammar, const Limits& limits);

  const Grammar& grammar() const { return *grammar_; }
  /// Per terminal: the automaton the parser and the mask walk use (the grammar's own, or for a
  /// slot terminal of a binding, the binding's).
  const std::vector<const Dfa*>& dfas() const { return dfas_; }
  /// Distinct slot names of the grammar, sorted.
  const std::vector<std::string>& slot_names() const { return slot_names_; }
  /// Does the grammar have slots that are not bound (a skeleton)? Such a grammar has no matcher.
  bool needs_binding() const { return !slot_names_.empty() && !skeleton_; }
  /// The skeleton this grammar binds (null unless it is a binding).
  const std::shared_ptr<const CompiledGrammar>& skeleton() const { return skeleton_; }
  /// Bind every slot of this skeleton to its values: builds one DFA per slot terminal straight
  /// from the values (sorted, a minimal trie: no regex, no NFA) and returns a grammar that
  /// matches like this one with those values in place. Cost: linear in the values' bytes plus
  /// the DFA table; nothing of the skeleton is copied. A grammar without slots and an empty
  /// list returns itself. Throws SlotError (unknown, missing or repeated name; empty list;
  /// empty, duplicate or invalid-UTF-8 value; binding a binding) or LimitExceeded
  /// (max_slot_values, max_slot_bytes, max_dfa_states).
  std::shared_ptr<const CompiledGrammar> bind(const std::vector<SlotValues>& slots) const;
  /// DFA states of the bound slots' automata (0 unless this is a binding).
  std::size_t slot_states() const {
    std::size_t n = 0;
    for (const Dfa& d : slot_dfas_) n += d.num_states();
    return n;
  }
  /// How many bindings were made from this grammar.
  std::uint64_t bindings_made() const { return bindings_made_.load(std::memory_order_relaxed); }
  const Vocabulary& vocab() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocab_ptr() const { return vocab_; }
  /// The mask correction of the grammar's distinct groups (distinct.hpp; null when it has
  /// none): built by the first matcher (a scan of the vocabulary) and shared by every other.
  const std::shared_ptr<const DistinctCorrection>& distinct_correction() const;
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

  /// Process-wide switch for tests and benchmarks: off, every entry is walked the reference way
  /// (each frontier element stepped on its own at each trie node); on (the default), walks of
  /// several elements step product states (product_walk.hpp). Both give identical entries.
  /// Also off for a grammar whose limits force the reference path (mask_share_min_states at
  /// its maximum: no sharing of any kind), so a test can compare two grammars in one process.
  static void set_mask_fast_paths(bool on);
  static bool mask_fast_paths();
  /// Process-wide switch for the interior skip alone (on by default; tests turn it off to
  /// reach the delta walk on frontiers it would otherwise take).
  static void set_interior_skip(bool on);

  using Signature = std::pair<std::uint64_t, std::uint64_t>;
  /// Memoised whole mask for a parser-state signature (null on a miss).
  std::shared_ptr<const std::vector<std::uint32_t>> memo_get(const Signature& sig) const;
  /// Store a whole mask row (mask_words words). Bounded by Limits::max_mask_memo_mb: when full
  /// the memo is cleared (cheap to refill; keeps memory bounded without per-hit bookkeeping).
  /// `uses_slots`: computing the mask consulted a slot's automaton, so it belongs to this
  /// binding; otherwise a binding stores it in its skeleton, for every binding to reuse.
  void memo_put(const Signature& sig, const std::uint32_t* row, bool uses_slots = false) const;
  std::size_t memo_entries() const;
  /// Cheap pre-check so grammars that never memoise (no parser work) skip the lookup.
  bool memo_empty() const {
    return memo_count_.load(std::memory_order_relaxed) == 0 && (!skeleton_ || skeleton_->memo_empty());
  }

  /// What a matcher snapshot (snapshot.hpp) records to refuse restoring on another grammar:
  /// [0..1] the grammar's identity (a hash of its artifact bytes, limits left out; a binding's
  /// is its skeleton's), [2..3] the binding's (a hash of its slot automata; zero when
  /// unbound). Computed on first use (defined in snapshot.cpp), then cached.
  const std::array<std::uint64_t, 4>& snapshot_identity() const;

  /// Cache figures of this object only (for a binding: the slot-dependent entries).
  std::size_t cache_entries() const;
  std::size_t cache_bytes() const;
  /// Short parts shared by equivalent states (see the header).
  std::size_t shared_entries() const;
  std::uint64_t cache_hits() const { return hits_.load(); }
  /// Misses served by the vocabulary's pool (entries another grammar computed).
  std::uint64_t pool_hits() const { return pool_hits_.load(); }
  std::uint64_t cache_misses() const { return misses_.load(); }
  /// Short parts derived from the counted-string summary instead of walked (count_summary.hpp).
  std::uint64_t summary_entries() const { return summary_hits_.load(); }
  /// Walks of several frontier elements done through product states (product_walk.hpp).
  std::uint64_t product_walks() const { return product_walks_.load(); }
  /// One-element entries (or short parts) derived from another state's walk (delta_walk.cpp).
  std::uint64_t delta_entries() const { return delta_hits_.load(); }
  /// Whole-vocabulary walks that skipped the clean subtrees (interior_summary.hpp).
  std::uint64_t interior_walks() const { return interior_walks_.load(); }

 private:
  struct BindingTag {};

 public:
  /// A binding of `skeleton` (use bind()): `slot_dfas[i]` is the automaton of terminal
  /// `slot_terminals[i]`.
  CompiledGrammar(BindingTag, std::shared_ptr<const CompiledGrammar> skeleton,
                  std::vector<std::int32_t> slot_terminals, std::vector<Dfa> slot_dfas);

 private:
  // Which trie nodes a walk covers: all of them, only those at depth <= D (the short part),
  // or only the tokens and dead nodes deeper than D (the long part).
  enum class WalkPart { All, Short, Long };
  FrontierEntry compute_entry(const std::vector<std::uint64_t>& key, WalkPart part) const;
  /// Does the entry for `key` come from a shared short part? If so, `rep_key` is the key of
  /// that part (the state replaced by its ≈_D representative).
  bool share_key(const std::vector<std::uint64_t>& key, std::vector<std::uint64_t>& rep_key) const;
  /// The cached short part for a representative key (computed on a miss).
  std::shared_ptr<const FrontierEntry> short_entry(const std::vector<std::uint64_t>& rep_key) const;
  /// Does a frontier key read a slot terminal (so its entry belongs to the binding)?
  bool key_reads_slot(const std::vector<std::uint64_t>& key) const;

  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const Grammar> grammar_;  // shared by a skeleton and its bindings
  Limits limits_;
  bool names_tokens_ = false;
  std::vector<const Dfa*> dfas_;
  std::vector<std::uint8_t> slot_terminal_;  // per terminal
  std::vector<std::string> slot_names_;
  // Bindings only: the skeleton (kept alive, its caches shared) and the slots' automata
  // (dfas_ points into slot_dfas_, which is never resized after construction).
  std::shared_ptr<const CompiledGrammar> skeleton_;
  std::vector<Dfa> slot_dfas_;
  mutable std::atomic<std::uint64_t> bindings_made_{0};
  mutable std::once_flag identity_once_;
  mutable std::array<std::uint64_t, 4> identity_{};
  mutable std::once_flag distinct_once_;
  mutable std::shared_ptr<const DistinctCorrection> distinct_;
  mutable std::shared_mutex mu_;
  mutable std::unordered_map<std::vector<std::uint64_t>, std::shared_ptr<const FrontierEntry>, FrontierKeyHash> cache_;
  mutable std::size_t cache_bytes_ = 0;
  mutable std::unordered_map<std::vector<std::uint64_t>, std::shared_ptr<const FrontierEntry>, FrontierKeyHash> short_cache_;
  // Per terminal, its ≈_D classes (built on first use; guarded by equiv_mu_).
  mutable std::mutex equiv_mu_;
  mutable std::vector<std::unique_ptr<BoundedEquivalence>> equiv_;
  // The vocabulary's cross-grammar pool (mask_pool.hpp) and, per terminal, its pool id
  // (-2: not asked yet; -1: not pooled), guarded by equiv_mu_.
  std::shared_ptr<MaskPool> pool_;
  mutable std::vector<std::int32_t> pool_ids_;
  // Short parts derived from earlier walks (count_summary.hpp); created on first use, null
  // when the vocabulary has no summary.
  mutable std::once_flag counted_once_;
  mutable std::shared_ptr<CountedShare> counted_;
  CountedShare* counted_share() const;
  /// The pool key for `key` (empty when a terminal is not pooled).
  std::vector<std::uint64_t> pool_key(const std::vector<std::uint64_t>& key) const;
  mutable std::atomic<std::uint64_t> hits_{0}, misses_{0}, pool_hits_{0}, summary_hits_{0}, product_walks_{0},
      delta_hits_{0}, interior_walks_{0};
  // Per (terminal, state) key element: is the state interior-universal (interior_summary.hpp)?
  // Guarded by equiv_mu_.
  mutable std::unordered_map<std::uint64_t, bool> universal_;
  // The same from inside a character or an escape (J state != boundary), per (element, J state),
  // and per frontier key whose elements are universal only together (guarded by equiv_mu_;
  // the latter cleared past kMaxJointKeys).
  mutable std::map<std::pair<std::uint64_t, std::int32_t>, bool> universal_inside_;
  static constexpr std::size_t kMaxJointKeys = 1 << 12;
  mutable std::unordered_map<std::vector<std::uint64_t>, bool, FrontierKeyHash> joint_universal_;
  /// The vocabulary's interior summary when a whole-vocabulary walk of `key` may skip clean
  /// subtrees (fast paths on, no subtree or slot element, some element interior-universal or
  /// the elements jointly so); null otherwise.
  const InteriorSummary* interior_for(const std::vector<std::uint64_t>& key) const;
  // Delta walks (delta_walk.cpp): per part (whole vocabulary, short part), a few walked
  // entries of broad frontiers to derive others from (guarded by equiv_mu_).
  using Anchor = std::pair<std::vector<std::uint64_t>, std::shared_ptr<const FrontierEntry>>;
  mutable std::array<std::vector<Anchor>, 2> anchors_;
  mutable std::array<std::size_t, 2> anchor_next_{};
  /// Can `key`'s entry be derived by a delta walk (one element per terminal, no subtree or slot
  /// element, live on many first bytes), and is it worth keeping as an anchor?
  bool delta_candidate(const std::vector<std::uint64_t>& key) const;
  void note_anchor(const std::vector<std::uint64_t>& key, bool short_part,
                   const std::shared_ptr<const FrontierEntry>& entry) const;
  /// The entry (whole vocabulary, or the short part) of `key` derived from the anchor whose
  /// live elements agree with it on the most first bytes; null when none agrees enough.
  std::shared_ptr<const FrontierEntry> delta_entry(const std::vector<std::uint64_t>& key, bool short_part) const;
  bool fast_paths() const { return mask_fast_paths() && limits_.mask_share_min_states != 0xFFFFFFFFu; }
  struct SigHash {
    std::size_t operator()(const Signature& s) const { return static_cast<std::size_t>(s.first); }
  };
  mutable std::shared_mutex memo_mu_;
  mutable std::atomic<std::size_t> memo_count_{0};
  mutable std::unordered_map<Signature, std::shared_ptr<const std::vector<std::uint32_t>>, SigHash> memo_;
};

}  // namespace corral
