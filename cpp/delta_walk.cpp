// delta_walk.cpp — a frontier's entry derived from the walked entry of a nearby frontier,
// walking only the trie nodes where the two frontiers' paths differ.
//
// Invariant: for frontiers K and R (each with distinct terminals) and E(R) the entry one walk
// of R gives (compute_entry with the same WalkPart, All or Short), delta_entry returns an entry
// the matcher turns into exactly the mask one walk of K would give (the same allowed bits; the
// same dead nodes, each under a group of the same split states with the same head, possibly
// split differently between groups). The walk follows the pair (K, R) down the trie. At a node
// where both have the same live (terminal, state) elements and neither has passed a place where
// a terminal could end (no group active on either side), everything below is the same for both
// walks — tokens allowed, groups split below (their state vectors mapped from R's element
// positions to K's by terminal: an element of one side without a live twin is dead there and
// below), dead nodes and heads — so E(R)'s bits and dead nodes there stand and the subtree is
// skipped. Everywhere else K's own walk decides: a node where K is live sets its tokens' bits
// and may split a group; a node where K is dead clears its whole subtree's bits and, under an
// active group of K, is recorded as a dead node; E(R)'s dead nodes at or below decided nodes
// are dropped.
// Why: under property_order="any" every set of keys already seen gives a new frontier after
// `{"` / `,"` (the keys not seen yet beside "a string that is none of the declared keys"), and
// inside a key every prefix state is new; each walked the whole trie because of the broad
// undeclared-key element (4-6 ms on a 128k vocabulary). Such frontiers differ from one walked
// before on a few first bytes, so the pair walk visits the root's children and a few subtrees.
// Bounds: tried only for broad frontiers (live on at least kMinBroad first bytes: narrow ones
// walk fast anyway) against anchors agreeing on at least kMinAgree of the 256 first bytes; at
// most kMaxAnchors anchors per part, the oldest replaced. Never used on the reference path.
#include "compiled_grammar.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>

namespace corral {
namespace {
constexpr int kMinAgree = 224;           // of 256 first bytes
constexpr int kMinBroad = 96;            // first bytes some element is live on
constexpr std::size_t kMaxAnchors = 16;  // per part

std::int32_t term_of(std::uint64_t k) { return static_cast<std::int32_t>(k >> 32); }
std::int32_t state_of(std::uint64_t k) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(k)); }
}  // namespace

bool CompiledGrammar::delta_candidate(const std::vector<std::uint64_t>& key) const {
  if (!fast_paths() || key.empty()) return false;
  for (std::size_t e = 0; e < key.size(); ++e) {
    if ((key[e] >> 32) == 0xFFFFFFFFull || slot_terminal_[static_cast<std::size_t>(key[e] >> 32)]) return false;
    if (e > 0 && term_of(key[e]) == term_of(key[e - 1])) return false;  // one element per terminal
  }
  int broad = 0;
  for (int b = 0; b < 256; ++b) {
    bool live = false;
    for (std::size_t e = 0; e < key.size() && !live; ++e)
      live = dfas_[static_cast<std::size_t>(term_of(key[e]))]->next(state_of(key[e]), static_cast<std::uint8_t>(b)) >= 0;
    broad += live ? 1 : 0;
  }
  return broad >= kMinBroad;
}

void CompiledGrammar::note_anchor(const std::vector<std::uint64_t>& key, bool short_part,
                                  const std::shared_ptr<const FrontierEntry>& entry) const {
  if (entry->allowed.empty() || entry->shared) return;
  std::lock_guard<std::mutex> lock(equiv_mu_);
  auto& list = anchors_[short_part ? 1 : 0];
  if (list.size() < kMaxAnchors) {
    list.emplace_back(key, entry);
  } else {
    list[anchor_next_[short_part ? 1 : 0]++ % kMaxAnchors] = {key, entry};
  }
}

std::shared_ptr<const FrontierEntry> CompiledGrammar::delta_entry(const std::vector<std::uint64_t>& key,
                                                                  bool short_part) const {
  const std::size_t mk = key.size();
  // The anchor whose live elements after each first byte are K's on the most bytes.
  std::vector<std::uint64_t> rkey;
  std::shared_ptr<const FrontierEntry> base;
  {
    std::lock_guard<std::mutex> lock(equiv_mu_);
    int best = kMinAgree - 1;
    for (const auto& [ak, e] : anchors_[short_part ? 1 : 0]) {
      if (ak == key) continue;
      int agree = 0;
      for (int b = 0; b < 256 && agree + (256 - b) > best; ++b) {
        // Merge by terminal (both keys are sorted, one element per terminal).
        bool same = true;
        std::size_t x = 0, y = 0;
        while (same && (x < mk || y < ak.size())) {
          const std::int32_t tx = x < mk ? term_of(key[x]) : INT32_MAX;
          const std::int32_t ty = y < ak.size() ? term_of(ak[y]) : INT32_MAX;
          const std::int32_t t = std::min(tx, ty);
          const Dfa& d = *dfas_[static_cast<std::size_t>(t)];
          const std::int32_t sx = tx == t ? d.next(state_of(key[x++]), static_cast<std::uint8_t>(b)) : -1;
          const std::int32_t sy = ty == t ? d.next(state_of(ak[y++]), static_cast<std::uint8_t>(b)) : -1;
          same = sx == sy;
        }
        agree += same ? 1 : 0;
      }
      if (agree > best) best = agree, rkey = ak, base = e;
    }
  }
  if (!base) return nullptr;
  const std::size_t mr = rkey.size();
  // Element positions by terminal: R's twin of each K element, and whether an R element has one.
  std::vector<std::int32_t> apos(mk, -1);
  std::vector<std::uint8_t> r_twin(mr, 0);
  for (std::size_t x = 0, y = 0; x < mk && y < mr;) {
    if (term_of(key[x]) < term_of(rkey[y])) ++x;
    else if (term_of(key[x]) > term_of(rkey[y])) ++y;
    else apos[x] = static_cast<std::int32_t>(y), r_twin[y] = 1, ++x, ++y;
  }
  std::vector<const Dfa*> kd(mk), rd(mr);
  std::vector<std::uint8_t> kf(mk), rf(mr);
  for (std::size_t e = 0; e < mk; ++e) {
    kd[e] = dfas_[static_cast<std::size_t>(term_of(key[e]))];
    kf[e] = grammar_->followable[static_cast<std::size_t>(term_of(key[e]))];
  }
  for (std::size_t e = 0; e < mr; ++e) {
    rd[e] = dfas_[static_cast<std::size_t>(term_of(rkey[e]))];
    rf[e] = grammar_->followable[static_cast<std::size_t>(term_of(rkey[e]))];
  }
  const TokenTrie& trie = vocab_->trie();
  const std::uint32_t share = vocab_->share_depth();
  const std::size_t depth = trie.max_depth() + 1;
  std::vector<std::int32_t> ks(depth * mk, -1), rs(depth * mr, -1), grp(depth, -1);
  std::vector<std::uint32_t> grp_split(depth, 0);
  std::vector<std::uint8_t> rgrp(depth, 0);
  for (std::size_t e = 0; e < mk; ++e) ks[e] = state_of(key[e]);
  for (std::size_t e = 0; e < mr; ++e) rs[e] = state_of(rkey[e]);
  FrontierEntry out;
  out.allowed = base->allowed;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> decided;  // node ranges K's walk decided
  std::map<std::vector<std::int32_t>, std::int32_t> group_ids;   // split states -> own group
  std::vector<std::vector<std::pair<std::string_view, std::int32_t>>> heads;
  auto head_of = [&](std::uint32_t node, std::uint32_t d0) {
    std::uint32_t leaf = node;
    while (trie.tokens_begin(leaf) == trie.tokens_end(leaf)) ++leaf;
    return std::string_view(vocab_->bytes(*trie.tokens_begin(leaf))).substr(d0, trie.depth(node) - d0);
  };
  auto set_bits = [&](std::uint32_t from, std::uint32_t to, bool on) {
    for (const std::int32_t* t = trie.tokens_begin(from); t != trie.tokens_begin(to); ++t) {
      const std::uint32_t bit = 1u << (*t & 31);
      auto& w = out.allowed[static_cast<std::size_t>(*t) >> 5];
      w = on ? (w | bit) : (w & ~bit);
    }
  };
  const std::uint32_t n = trie.num_nodes();
  std::uint32_t i = 1;
  while (i < n) {
    const std::uint32_t d = trie.depth(i);
    const std::uint32_t end = trie.subtree_end(i);
    if (short_part && d > share) {
      i = end;  // not the short part's: neither entry holds anything here
      continue;
    }
    const std::uint8_t b = trie.byte(i);
    std::int32_t* kc = &ks[d * mk];
    std::int32_t* rc = &rs[d * mr];
    bool klive = false, kacc = false, racc = false;
    for (std::size_t e = 0; e < mk; ++e) {
      const std::int32_t p = ks[(d - 1) * mk + e];
      kc[e] = p < 0 ? -1 : kd[e]->next(p, b);
      if (kc[e] >= 0) klive = true, kacc = kacc || (kf[e] && kd[e]->accepting(kc[e]));
    }
    for (std::size_t e = 0; e < mr; ++e) {
      const std::int32_t p = rs[(d - 1) * mr + e];
      rc[e] = p < 0 ? -1 : rd[e]->next(p, b);
      if (rc[e] >= 0) racc = racc || (rf[e] && rd[e]->accepting(rc[e]));
    }
    const std::int32_t g = grp[d - 1];
    const bool rg = rgrp[d - 1] != 0;
    if (g < 0 && !rg) {
      bool same = true;
      for (std::size_t e = 0; e < mk && same; ++e) same = kc[e] == (apos[e] < 0 ? -1 : rc[apos[e]]);
      for (std::size_t e = 0; e < mr && same; ++e) same = r_twin[e] || rc[e] < 0;
      if (same) {
        i = end;  // the same walk below for both: E(R)'s part stands
        continue;
      }
    }
    const bool has_children = end > i + 1;
    if (klive) {
      decided.emplace_back(i, i + 1);
      trie.set_token_bits(i, out.allowed.data());
      rgrp[d] = rg || (racc && has_children);  // where R's own walk splits a group
      if (g < 0 && kacc && has_children) {
        std::vector<std::int32_t> v(kc, kc + mk);
        auto [it, fresh] = group_ids.emplace(std::move(v), static_cast<std::int32_t>(out.groups.size()));
        if (fresh) {
          out.groups.push_back(FrontierEntry::Group{std::vector<std::int32_t>(kc, kc + mk), {}, {}});
          heads.emplace_back();
        }
        grp[d] = it->second;
        grp_split[d] = i;
      } else {
        grp[d] = g;
        grp_split[d] = grp_split[d - 1];
      }
      ++i;
    } else {
      // K dead here: nothing at or below is allowed outright (E(R) may have allowed some).
      decided.emplace_back(i, end);
      set_bits(i, end, false);  // (a short part holds no bit deeper than D: clearing those is moot)
      if (g >= 0) {
        auto& gr = out.groups[static_cast<std::size_t>(g)];
        heads[static_cast<std::size_t>(g)].emplace_back(head_of(i, trie.depth(grp_split[d - 1])),
                                                        static_cast<std::int32_t>(gr.dead.size()));
        gr.dead.push_back(i);
      }
      i = end;
    }
  }
  // `decided` is in trie order: sorted, its ranges disjoint.
  auto is_decided = [&](std::uint32_t node) {
    auto it = std::upper_bound(decided.begin(), decided.end(), std::make_pair(node, ~0u));
    return it != decided.begin() && node < std::prev(it)->second;
  };
  std::size_t group_bytes = 0;
  for (std::size_t gi = 0; gi < heads.size(); ++gi) {
    FrontierEntry::Group& g = out.groups[gi];
    g.heads = TokenTrie::build(std::move(heads[gi]));
    group_bytes += g.states.size() * 4 + g.dead.size() * 4 + g.heads.memory_bytes();
  }
  out.groups.erase(std::remove_if(out.groups.begin(), out.groups.end(),
                                  [](const FrontierEntry::Group& g) { return g.dead.empty(); }),
                   out.groups.end());
  // E(R)'s groups, less the dead nodes K's walk decided, their states mapped to K's positions.
  // When the positions are the same and no dead node was decided, the anchor is shared.
  bool same_positions = mk == mr;
  for (std::size_t e = 0; e < mk && same_positions; ++e) same_positions = apos[e] == static_cast<std::int32_t>(e);
  bool touched = false;
  for (const FrontierEntry::Group& bg : base->groups)
    for (std::uint32_t dead : bg.dead) touched = touched || is_decided(dead);
  if (same_positions && !touched) {
    if (!base->groups.empty()) out.shared = base;
  } else {
    for (const FrontierEntry::Group& bg : base->groups) {
      std::vector<std::int32_t> states(mk, -1);
      for (std::size_t e = 0; e < mk; ++e)
        if (apos[e] >= 0) states[e] = bg.states[static_cast<std::size_t>(apos[e])];
      bool any = false;
      for (std::int32_t st : states) any = any || st >= 0;
      FrontierEntry::Group ng{std::move(states), {}, {}};
      bool kept_all = true;
      for (std::uint32_t dead : bg.dead) kept_all = kept_all && !is_decided(dead);
      if (kept_all) {
        ng.heads = bg.heads;
        ng.dead = bg.dead;
      } else {
        std::vector<std::pair<std::string_view, std::int32_t>> kept;
        const TokenTrie& h = bg.heads;
        for (std::uint32_t j = 1; j < h.num_nodes(); ++j)
          for (const std::int32_t* x = h.tokens_begin(j); x != h.tokens_end(j); ++x) {
            const std::uint32_t dead = bg.dead[static_cast<std::size_t>(*x)];
            if (is_decided(dead)) continue;
            kept.emplace_back(head_of(dead, trie.depth(dead) - h.depth(j)), static_cast<std::int32_t>(ng.dead.size()));
            ng.dead.push_back(dead);
          }
        ng.heads = TokenTrie::build(std::move(kept));
      }
      if (ng.dead.empty()) continue;
      CORRAL_CHECK(any, "a kept group has a live element at its split");
      group_bytes += ng.states.size() * 4 + ng.dead.size() * 4 + ng.heads.memory_bytes();
      out.groups.push_back(std::move(ng));
    }
  }
  out.memory_bytes = sizeof(FrontierEntry) + 4 * out.allowed.size() + group_bytes;
  delta_hits_.fetch_add(1, std::memory_order_relaxed);
  return std::make_shared<const FrontierEntry>(std::move(out));
}

}  // namespace corral
