// compiled_grammar.cpp — the frontier trie walk that fills the shared mask cache.
// See compiled_grammar.hpp for what an entry holds and why.
#include "compiled_grammar.hpp"

#include "compile_times.hpp"
#include "count_summary.hpp"
#include "distinct.hpp"
#include "item_values.hpp"
#include "interior_summary.hpp"
#include "mask_pool.hpp"
#include "product_walk.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <type_traits>

namespace corral {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Vocabulary> vocab, Grammar grammar,
                                 const Limits& limits)
    : vocab_(std::move(vocab)), grammar_(std::make_shared<const Grammar>(std::move(grammar))), limits_(limits) {
  for (const Terminal& t : grammar_->terminals) {
    names_tokens_ = names_tokens_ || t.is_token;
    dfas_.push_back(&t.dfa);
    slot_terminal_.push_back(t.is_slot ? 1 : 0);
    if (t.is_slot) slot_names_.push_back(t.slot.name);
  }
  std::sort(slot_names_.begin(), slot_names_.end());
  slot_names_.erase(std::unique(slot_names_.begin(), slot_names_.end()), slot_names_.end());
  pool_ = std::static_pointer_cast<MaskPool>(
      vocab_->attachment([]() -> std::shared_ptr<void> { return std::make_shared<MaskPool>(); }));
  // The vocabulary's counted-string summary is built here, once per vocabulary (a few ms on a
  // 128k vocabulary), rather than inside the first mask that needs it.
  if (limits_.mask_share_min_states != 0xFFFFFFFFu) {
    counted_share();
    pool_->interior_summary(*vocab_);  // likewise (interior_summary.hpp)
  }
}

CompiledGrammar::CompiledGrammar(BindingTag, std::shared_ptr<const CompiledGrammar> skeleton,
                                 std::vector<std::int32_t> slot_terminals, std::vector<Dfa> slot_dfas)
    : vocab_(skeleton->vocab_),
      grammar_(skeleton->grammar_),
      limits_(skeleton->limits_),
      names_tokens_(skeleton->names_tokens_),
      dfas_(skeleton->dfas_),
      slot_terminal_(skeleton->slot_terminal_),
      slot_names_(skeleton->slot_names_),
      skeleton_(std::move(skeleton)),
      slot_dfas_(std::move(slot_dfas)),
      pool_(skeleton_->pool_) {
  CORRAL_CHECK(slot_terminals.size() == slot_dfas_.size(), "one DFA per slot terminal");
  for (std::size_t i = 0; i < slot_terminals.size(); ++i)
    dfas_[static_cast<std::size_t>(slot_terminals[i])] = &slot_dfas_[i];
}

namespace {
std::atomic<bool> g_fast_paths{true};
std::atomic<bool> g_interior_skip{true};
}  // namespace

void CompiledGrammar::set_interior_skip(bool on) { g_interior_skip.store(on, std::memory_order_relaxed); }

void CompiledGrammar::set_mask_fast_paths(bool on) { g_fast_paths.store(on, std::memory_order_relaxed); }
bool CompiledGrammar::mask_fast_paths() { return g_fast_paths.load(std::memory_order_relaxed); }

bool CompiledGrammar::key_reads_slot(const std::vector<std::uint64_t>& key) const {
  for (std::uint64_t k : key) {
    const std::uint64_t t = k >> 32;
    if (t != 0xFFFFFFFFull && slot_terminal_[static_cast<std::size_t>(t)]) return true;
  }
  return false;
}

std::shared_ptr<const FrontierEntry> CompiledGrammar::frontier_entry(
    const std::vector<std::uint64_t>& key) const {
  // A binding keeps only what its slots change; everything else is the skeleton's, shared.
  if (skeleton_ && !key_reads_slot(key)) return skeleton_->frontier_entry(key);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  StageTimer timer(compile_times().walk_ns);
  // Computed outside the lock: two threads may race to compute the same entry; the first
  // insert wins and both results are identical.
  std::shared_ptr<const FrontierEntry> entry;
  const std::vector<std::uint64_t> pkey = pool_key(key);
  if (!pkey.empty()) entry = pool_->get(pkey);  // computed by another grammar with these automata
  const bool computed = !entry;
  std::vector<std::uint64_t> rep_key;
  if (!computed) {
    // Reused as is: the pool's automata are state for state those of this grammar's key.
    pool_hits_.fetch_add(1, std::memory_order_relaxed);
  } else if (share_key(key, rep_key)) {
    // Short part shared by the state's ≈_D class, long part walked from the state itself.
    std::shared_ptr<const FrontierEntry> base = short_entry(rep_key);
    FrontierEntry e = compute_entry(key, WalkPart::Long);
    const std::size_t words = vocab_->mask_words();
    const std::size_t groups_bytes = e.memory_bytes - sizeof(FrontierEntry) - 4 * (e.allowed.size() + e.allowed_ids.size());
    if (!base->allowed.empty() || !e.allowed.empty() || base->allowed_ids.size() + e.allowed_ids.size() > words) {
      std::vector<std::uint32_t> bits = base->allowed.empty() ? std::vector<std::uint32_t>(words, 0) : base->allowed;
      for (std::size_t w = 0; w < e.allowed.size(); ++w) bits[w] |= e.allowed[w];
      for (const std::vector<std::int32_t>* ids : {&base->allowed_ids, static_cast<const std::vector<std::int32_t>*>(&e.allowed_ids)})
        for (std::int32_t t : *ids) bits[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
      e.allowed = std::move(bits);
      e.allowed_ids.clear();
      e.allowed_ids.shrink_to_fit();
    } else {
      e.allowed_ids.insert(e.allowed_ids.end(), base->allowed_ids.begin(), base->allowed_ids.end());
    }
    // (base may hold no groups of its own and share a delta anchor's: keep the chain.)
    if (!base->groups.empty() || base->shared) e.shared = base;
    e.memory_bytes = sizeof(FrontierEntry) + 4 * (e.allowed.size() + e.allowed_ids.size()) + groups_bytes;
    entry = std::make_shared<const FrontierEntry>(std::move(e));
  } else {
    // A broad frontier: derived from a walked one that differs from it little, if any; one
    // whose walk skips the clean subtrees is walked (that costs less than a delta walk).
    const bool delta = delta_candidate(key) && !interior_for(key);
    if (delta) entry = delta_entry(key, false);
    if (!entry) {
      entry = std::make_shared<const FrontierEntry>(compute_entry(key, WalkPart::All));
      if (delta) note_anchor(key, false, entry);
    }
  }
  if (computed && !pkey.empty()) pool_->put(pkey, entry);
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto [it, inserted] = cache_.emplace(key, entry);
  if (inserted) cache_bytes_ += entry->memory_bytes;
  return it->second;
}

std::vector<std::uint64_t> CompiledGrammar::pool_key(const std::vector<std::uint64_t>& key) const {
  std::vector<std::uint64_t> out;
  if (limits_.mask_share_min_states == 0xFFFFFFFFu) return out;  // the reference path: own walks only
  out.reserve(key.size());
  std::lock_guard<std::mutex> lock(equiv_mu_);
  if (pool_ids_.empty()) pool_ids_.assign(dfas_.size(), -2);
  for (std::uint64_t k : key) {
    const std::uint64_t t = k >> 32;
    if (t == 0xFFFFFFFFull) {
      out.push_back(k);  // subtree element: the vocabulary's trie node
      continue;
    }
    std::int32_t& id = pool_ids_[static_cast<std::size_t>(t)];
    if (id == -2) id = slot_terminal_[t] ? -1 : pool_->dfa_id(*dfas_[t], grammar_);
    if (id < 0) return {};
    const std::uint64_t follow = grammar_->followable[static_cast<std::size_t>(t)] ? 1 : 0;
    out.push_back((static_cast<std::uint64_t>(id) << 33) | (follow << 32) | (k & 0xFFFFFFFFull));
  }
  return out;
}

bool CompiledGrammar::share_key(const std::vector<std::uint64_t>& key, std::vector<std::uint64_t>& rep_key) const {
  const std::size_t m = key.size();
  const bool subtree = m == 2 && (key[1] >> 32) == 0xFFFFFFFFull;
  if (!(m == 1 || subtree) || (key[0] >> 32) == 0xFFFFFFFFull) return false;
  const auto t = static_cast<std::size_t>(key[0] >> 32);
  if (slot_terminal_[t] || vocab_->share_depth() == 0) return false;
  const Dfa& d = *dfas_[t];
  if (d.num_states() < limits_.mask_share_min_states) return false;
  std::int32_t rep;
  {
    std::lock_guard<std::mutex> lock(equiv_mu_);
    if (equiv_.empty()) equiv_.resize(dfas_.size());
    if (!equiv_[t]) equiv_[t] = std::make_unique<BoundedEquivalence>(d, vocab_->share_depth());
    rep = equiv_[t]->representative(static_cast<std::int32_t>(static_cast<std::uint32_t>(key[0])));
  }
  rep_key = key;
  rep_key[0] = key_element(static_cast<std::int32_t>(t), rep);
  return true;
}

std::shared_ptr<const FrontierEntry> CompiledGrammar::short_entry(const std::vector<std::uint64_t>& rep_key) const {
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = short_cache_.find(rep_key);
    if (it != short_cache_.end()) return it->second;
  }
  // A whole-vocabulary short part may follow from an earlier walk of the terminal (the summary
  // path, count_summary.hpp); otherwise walk it, and keep it as an anchor for later states.
  std::shared_ptr<const FrontierEntry> entry;
  CountedShare* cs = rep_key.size() == 1 ? counted_share() : nullptr;
  const auto term = static_cast<std::int32_t>(rep_key[0] >> 32);
  const auto state = static_cast<std::int32_t>(static_cast<std::uint32_t>(rep_key[0]));
  if (cs) entry = cs->derive(term, *dfas_[static_cast<std::size_t>(term)], state);
  if (entry) {
    summary_hits_.fetch_add(1, std::memory_order_relaxed);
  } else if (delta_candidate(rep_key) && (entry = delta_entry(rep_key, true))) {
    // derived from another representative's short part (delta_walk.cpp)
  } else {
    entry = std::make_shared<const FrontierEntry>(compute_entry(rep_key, WalkPart::Short));
    if (cs) cs->add_anchor(term, state, entry);
    if (delta_candidate(rep_key)) note_anchor(rep_key, true, entry);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto [it, inserted] = short_cache_.emplace(rep_key, entry);
  if (inserted) cache_bytes_ += entry->memory_bytes;
  return it->second;
}

CountedShare* CompiledGrammar::counted_share() const {
  std::call_once(counted_once_, [&] {
    if (auto summary = pool_->count_summary(*vocab_)) counted_ = std::make_shared<CountedShare>(*vocab_, std::move(summary));
  });
  return counted_.get();
}

std::shared_ptr<const std::vector<std::uint32_t>> CompiledGrammar::memo_get(const Signature& sig) const {
  // Whether a state's mask depends on the slots is a property of the state (the parser work
  // before it first meets a slot item is the same for every binding), so a signature is in at
  // most one of the two memos.
  if (memo_count_.load(std::memory_order_relaxed) != 0) {
    std::shared_lock<std::shared_mutex> lock(memo_mu_);
    auto it = memo_.find(sig);
    if (it != memo_.end()) return it->second;
  }
  return skeleton_ ? skeleton_->memo_get(sig) : nullptr;
}

void CompiledGrammar::memo_put(const Signature& sig, const std::uint32_t* row, bool uses_slots) const {
  if (skeleton_ && !uses_slots) {
    skeleton_->memo_put(sig, row);
    return;
  }
  const std::size_t words = vocab_->mask_words();
  const std::size_t cap = static_cast<std::size_t>(limits_.max_mask_memo_mb) * 1024 * 1024 / (words * 4 + 64);
  if (cap == 0) return;
  auto v = std::make_shared<const std::vector<std::uint32_t>>(row, row + words);
  std::unique_lock<std::shared_mutex> lock(memo_mu_);
  if (memo_.size() >= cap) memo_.clear();
  memo_.emplace(sig, std::move(v));
  memo_count_.store(memo_.size(), std::memory_order_relaxed);
}

std::size_t CompiledGrammar::memo_entries() const {
  std::shared_lock<std::shared_mutex> lock(memo_mu_);
  return memo_.size();
}

std::size_t CompiledGrammar::cache_entries() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return cache_.size();
}

std::size_t CompiledGrammar::shared_entries() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return short_cache_.size();
}

std::size_t CompiledGrammar::cache_bytes() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return cache_bytes_;
}

const InteriorSummary* CompiledGrammar::interior_for(const std::vector<std::uint64_t>& key) const {
  if (!fast_paths() || key.empty() || !g_interior_skip.load(std::memory_order_relaxed)) return nullptr;
  for (std::uint64_t k : key) {
    const std::uint64_t t = k >> 32;
    if (t == 0xFFFFFFFFull || slot_terminal_[static_cast<std::size_t>(t)]) return nullptr;
  }
  // Bounded search per state: a few thousand pairs cover the "none of the declared keys"
  // automata of real schemas; past it the state is treated as not universal (walked as before).
  constexpr std::size_t kMaxPairs = 1 << 13;
  std::lock_guard<std::mutex> lock(equiv_mu_);
  // One element from J state j (the boundary, or inside a character or an escape), memoised.
  auto single = [&](std::uint64_t k, std::int32_t j) {
    if (j != InteriorSummary::kBoundary) {
      auto it = universal_inside_.find({k, j});
      if (it == universal_inside_.end()) {
        const Dfa& d = *dfas_[static_cast<std::size_t>(k >> 32)];
        const auto st = static_cast<std::int32_t>(static_cast<std::uint32_t>(k));
        it = universal_inside_.emplace(std::make_pair(k, j), interior_universal(d, st, kMaxPairs, nullptr, j)).first;
      }
      return it->second;
    }
    auto it = universal_.find(k);
    if (it == universal_.end()) {
      const Dfa& d = *dfas_[static_cast<std::size_t>(k >> 32)];
      std::vector<std::int32_t> also;
      const bool yes = interior_universal(d, static_cast<std::int32_t>(static_cast<std::uint32_t>(k)), kMaxPairs, &also);
      for (std::int32_t st : also) universal_.emplace(key_element(static_cast<std::int32_t>(k >> 32), st), true);
      it = universal_.emplace(k, yes).first;
    }
    return it->second;
  };
  for (std::uint64_t k : key)
    if (single(k, InteriorSummary::kBoundary)) return &pool_->interior_summary(*vocab_);
  // No element alone, but maybe their union: the key positions of objects with undeclared
  // keys, whose "none of the declared keys" automaton is one terminal per first letter.
  constexpr std::size_t kMaxJointElements = 64;
  constexpr std::size_t kMaxTuples = 1 << 12;
  if (key.size() < 2 || key.size() > kMaxJointElements) return nullptr;
  auto it = joint_universal_.find(key);
  if (it == joint_universal_.end()) {
    std::vector<const Dfa*> dfas(key.size());
    std::vector<std::int32_t> states(key.size());
    for (std::size_t e = 0; e < key.size(); ++e) {
      dfas[e] = dfas_[static_cast<std::size_t>(key[e] >> 32)];
      states[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(key[e]));
    }
    const bool yes = jointly_interior_universal(dfas, states, kMaxTuples, [&](std::size_t e, std::int32_t j, std::int32_t st) {
      return single(key_element(static_cast<std::int32_t>(key[e] >> 32), st), j);
    });
    if (joint_universal_.size() >= kMaxJointKeys) joint_universal_.clear();  // bounded; cheap to refill
    it = joint_universal_.emplace(key, yes).first;
  }
  return it->second ? &pool_->interior_summary(*vocab_) : nullptr;
}

FrontierEntry CompiledGrammar::compute_entry(const std::vector<std::uint64_t>& key, WalkPart part) const {
  std::uint32_t root = 0;
  std::size_t m = key.size();
  if (m > 0 && (key[m - 1] >> 32) == 0xFFFFFFFFull) {
    root = static_cast<std::uint32_t>(key[m - 1]);
    --m;
  }
  // The long part of a whole-vocabulary entry walks the long tokens' own compact trie; its
  // dead nodes are recorded as trie() nodes (what the matcher reads).
  const bool long_trie = part == WalkPart::Long && root == 0;
  const TokenTrie& trie = long_trie ? vocab_->long_trie() : vocab_->trie();
  const std::uint32_t root_depth = trie.depth(root);
  std::vector<const Dfa*> dfas(m);
  std::vector<std::uint8_t> followable(m);
  std::vector<std::int32_t> states((trie.max_depth() + 1) * (m == 0 ? 1 : m), -1);
  for (std::size_t e = 0; e < m; ++e) {
    dfas[e] = dfas_[static_cast<std::size_t>(key[e] >> 32)];
    followable[e] = grammar_->followable[static_cast<std::size_t>(key[e] >> 32)];
    states[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(key[e]));
  }
  FrontierEntry out;
  const bool dense = root == 0 && part != WalkPart::Long;
  if (dense) out.allowed.assign(vocab_->mask_words(), 0);
  // The share depth splits the trie for WalkPart::Short / Long (absolute node depths).
  const std::uint32_t share = vocab_->share_depth();
  // Active group and the depth its split happened at, per trie depth.
  std::vector<std::int32_t> grp(trie.max_depth() + 1, -1);
  std::vector<std::uint32_t> grp_split(trie.max_depth() + 1, 0);
  std::map<std::vector<std::int32_t>, std::int32_t> group_ids;
  std::vector<std::vector<std::pair<std::string_view, std::int32_t>>> heads;

  // Several elements: the walk steps one *product state* (the tuple of the elements' states,
  // interned on first sight) per trie node, through a table filled lazily per (product state,
  // joint byte class), so a node costs one lookup however many elements the frontier has. The
  // tuples, and so the entry, are exactly those of stepping every element (kTuple); past
  // kMaxProductCells table cells the walk starts over that way.
  // Only whole-vocabulary walks: a subtree below a dead node is small, and the table's setup
  // would cost more than stepping each element there.
  const bool fast = fast_paths();
  const bool product = m > 1 && root == 0 && fast;
  // Interior skip (interior_summary.hpp): an element keeps every clean token alive, so the
  // subtrees of clean tokens are neither walked nor needed: their tokens are ORed in below.
  const InteriorSummary* interior = part == WalkPart::All && dense ? interior_for(key) : nullptr;
  ProductWalk prod;
  if (product) prod.init(dfas, followable, states.data());
  std::vector<std::int32_t> pstate(product ? trie.max_depth() + 1 : 0, -1);
  if (product) pstate[0] = 0;

  // The walk, instantiated for a single frontier element (the common case inside a terminal,
  // where it is fully unrolled), for several through product states, and for any number by
  // stepping each element (the fallback). Returns false if the product table overflowed.
  auto walk = [&](auto fixed_m) -> bool {
    constexpr std::size_t kM = decltype(fixed_m)::value;
    constexpr bool kProduct = kM == kProductWalk;
    const std::size_t mm = kM != 0 && !kProduct ? kM : m;
    const std::uint32_t n = trie.subtree_end(root);
    const Dfa* const dfa0 = m > 0 ? dfas[0] : nullptr;
    const bool follow0 = m > 0 && followable[0];
    std::uint32_t i = root + 1;
    while (i < n) {
    if (interior && interior->clean_subtree(i)) {
      i = trie.subtree_end(i);
      continue;
    }
    const std::uint32_t dabs = trie.depth(i);
    if (part == WalkPart::Short ? dabs > share : part == WalkPart::Long && dabs <= share && trie.max_token_depth(i) <= share) {
      i = trie.subtree_end(i);  // not this part's: nothing below is deeper than D / deeper than D
      continue;
    }
    // Long part: what lies at depth <= D is the short part's (only walked through here).
    const bool emit = part != WalkPart::Long || dabs > share;
    const std::uint32_t d = dabs - root_depth;  // depth relative to the walk's root
    const std::uint8_t b = trie.byte(i);
    bool live = false, acc = false;
    std::int32_t* cur = nullptr;
    std::int32_t np = -1;
    if constexpr (kProduct) {
      np = prod.next(pstate[d - 1], b);
      if (np == ProductWalk::kOverflow) return false;
      pstate[d] = np;
      if (np >= 0) {
        live = true;
        acc = prod.acc[static_cast<std::size_t>(np)] != 0;
      }
    } else if constexpr (kM == 1) {
      // One element: its accepting flag is read only where a split can happen (below), off
      // the path from one node's state to the next.
      cur = &states[d];
      const std::int32_t s = states[d - 1];
      cur[0] = s < 0 ? -1 : dfa0->next(s, b);
      live = cur[0] >= 0;
    } else {
      const std::int32_t* parent = &states[(d - 1) * mm];
      cur = &states[d * mm];
      for (std::size_t e = 0; e < mm; ++e) {
        const std::int32_t s = parent[e];
        const std::int32_t ns = s < 0 ? -1 : dfas[e]->next(s, b);
        cur[e] = ns;
        if (ns >= 0) {
          live = true;
          // Only a terminal that something can follow makes a split worth the parser's time.
          acc = acc || (followable[e] && dfas[e]->accepting(ns));
        }
      }
    }
    const std::int32_t g = grp[d - 1];
    if (live) {
      if (fast && dense) {
        trie.set_token_bits(i, out.allowed.data());  // branch-free for the common 0 or 1 token
      } else {
        // The reference path keeps the plain loop, so the comparison tests (fast against
        // reference masks) check set_token_bits against it.
        for (const std::int32_t* t = trie.tokens_begin(i); emit && t != trie.tokens_end(i); ++t) {
          if (dense) out.allowed[static_cast<std::size_t>(*t) >> 5] |= 1u << (*t & 31);
          else out.allowed_ids.push_back(*t);
        }
      }
      if constexpr (kM == 1) acc = g < 0 && follow0 && dfa0->accepting(cur[0]);
      if (g < 0 && acc && trie.subtree_end(i) > i + 1) {
        std::vector<std::int32_t> v;
        if constexpr (kProduct) v = prod.tuple(np);
        else v.assign(cur, cur + mm);
        auto it = group_ids.find(v);
        std::int32_t id;
        if (it == group_ids.end()) {
          id = static_cast<std::int32_t>(out.groups.size());
          out.groups.push_back(FrontierEntry::Group{v, {}, {}});
          heads.emplace_back();
          group_ids.emplace(std::move(v), id);
        } else {
          id = it->second;
        }
        grp[d] = id;
        grp_split[d] = i;
      } else {
        grp[d] = g;
        grp_split[d] = grp_split[d - 1];
      }
      ++i;
    } else {
      // Dead lexically: if a group is active above, the matcher checks this subtree with the
      // parser from the group's split node; otherwise no token below can be valid.
      if (g >= 0 && emit) {
        // Head: the bytes from the split node through this node, read off a token below it.
        std::uint32_t leaf = i;
        while (trie.tokens_begin(leaf) == trie.tokens_end(leaf)) ++leaf;
        const std::uint32_t d0 = trie.depth(grp_split[d - 1]);
        auto& gr = out.groups[static_cast<std::size_t>(g)];
        heads[static_cast<std::size_t>(g)].emplace_back(
            std::string_view(vocab_->bytes(*trie.tokens_begin(leaf))).substr(d0, dabs - d0),
            static_cast<std::int32_t>(gr.dead.size()));
        gr.dead.push_back(long_trie ? vocab_->long_to_full(i) : i);
      }
      i = trie.subtree_end(i);
    }
  }
  if constexpr (kProduct) product_walks_.fetch_add(1, std::memory_order_relaxed);
  return true;
  };
  if (m == 1) {
    walk(std::integral_constant<std::size_t, 1>{});
  } else if (!product || !walk(std::integral_constant<std::size_t, kProductWalk>{})) {
    if (product) {  // the product table overflowed: start over stepping each element
      if (dense) std::fill(out.allowed.begin(), out.allowed.end(), 0u);
      out.allowed_ids.clear();
      out.groups.clear();
      heads.clear();
      group_ids.clear();
      std::fill(grp.begin(), grp.end(), -1);
    }
    walk(std::integral_constant<std::size_t, 0>{});
  }
  if (interior) {
    const std::vector<std::uint32_t>& clean = interior->clean_bits();
    for (std::size_t w = 0; w < clean.size(); ++w) out.allowed[w] |= clean[w];
    interior_walks_.fetch_add(1, std::memory_order_relaxed);
  }
  if (root != 0 && out.allowed_ids.size() > vocab_->mask_words()) {
    // Many ids: a dense mask is both smaller and faster to apply.
    out.allowed.assign(vocab_->mask_words(), 0);
    for (std::int32_t t : out.allowed_ids) out.allowed[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
    out.allowed_ids.clear();
    out.allowed_ids.shrink_to_fit();
  }
  out.memory_bytes = out.allowed.size() * 4 + out.allowed_ids.size() * 4 + sizeof(FrontierEntry);
  // A group whose tokens all stayed inside the terminals has nothing for the parser to check.
  std::size_t kept = 0;
  for (std::size_t gi = 0; gi < out.groups.size(); ++gi) {
    if (out.groups[gi].dead.empty()) continue;
    auto& g = out.groups[kept++];
    if (kept - 1 != gi) g = std::move(out.groups[gi]);
    g.heads = TokenTrie::build(std::move(heads[gi]));
    out.memory_bytes += g.states.size() * 4 + g.dead.size() * 4 + g.heads.memory_bytes();
  }
  out.groups.resize(kept);
  return out;
}

const std::shared_ptr<const DistinctCorrection>& CompiledGrammar::distinct_correction() const {
  std::call_once(distinct_once_, [this] {
    const auto& groups = grammar().keyed;
    if (std::any_of(groups.begin(), groups.end(), [](const KeyedGroup& k) { return k.distinct() || k.remembers_keys(); }))
      distinct_ = std::make_shared<const DistinctCorrection>(grammar(), dfas().data(), vocab());
  });
  return distinct_;
}

}  // namespace corral
