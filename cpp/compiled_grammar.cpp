// compiled_grammar.cpp — the frontier trie walk that fills the shared mask cache.
// See compiled_grammar.hpp for what an entry holds and why.
#include "compiled_grammar.hpp"

#include <map>
#include <mutex>

namespace corral {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Vocabulary> vocab, Grammar grammar,
                                 const Limits& limits)
    : vocab_(std::move(vocab)), grammar_(std::move(grammar)), limits_(limits) {}

std::shared_ptr<const FrontierEntry> CompiledGrammar::frontier_entry(
    const std::vector<std::uint64_t>& key) const {
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  // Computed outside the lock: two threads may race to compute the same entry; the first
  // insert wins and both results are identical.
  auto entry = std::make_shared<const FrontierEntry>(compute_entry(key));
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto [it, inserted] = cache_.emplace(key, entry);
  if (inserted) cache_bytes_ += entry->memory_bytes;
  return it->second;
}

std::size_t CompiledGrammar::cache_entries() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return cache_.size();
}

std::size_t CompiledGrammar::cache_bytes() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return cache_bytes_;
}

FrontierEntry CompiledGrammar::compute_entry(const std::vector<std::uint64_t>& key) const {
  const TokenTrie& trie = vocab_->trie();
  const std::size_t m = key.size();
  std::vector<const Dfa*> dfas(m);
  std::vector<std::int32_t> states((trie.max_depth() + 1) * (m == 0 ? 1 : m), -1);
  for (std::size_t e = 0; e < m; ++e) {
    dfas[e] = &grammar_.terminals[static_cast<std::size_t>(key[e] >> 32)].dfa;
    states[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(key[e]));
  }
  FrontierEntry out;
  out.allowed.assign(vocab_->mask_words(), 0);
  // Active group and the depth its split happened at, per trie depth.
  std::vector<std::int32_t> grp(trie.max_depth() + 1, -1);
  std::vector<std::uint32_t> grp_depth(trie.max_depth() + 1, 0);
  std::map<std::vector<std::int32_t>, std::int32_t> group_ids;
  std::vector<std::vector<std::pair<std::string_view, std::int32_t>>> group_tokens;

  const std::uint32_t n = trie.num_nodes();
  std::uint32_t i = 1;
  while (i < n) {
    const std::uint32_t d = trie.depth(i);
    const std::uint8_t b = trie.byte(i);
    const std::int32_t* parent = &states[(d - 1) * m];
    std::int32_t* cur = &states[d * m];
    bool live = false, acc = false;
    for (std::size_t e = 0; e < m; ++e) {
      const std::int32_t s = parent[e];
      const std::int32_t ns = s < 0 ? -1 : dfas[e]->next(s, b);
      cur[e] = ns;
      if (ns >= 0) {
        live = true;
        acc = acc || dfas[e]->accepting(ns);
      }
    }
    const std::int32_t g = grp[d - 1];
    if (live) {
      for (const std::int32_t* t = trie.tokens_begin(i); t != trie.tokens_end(i); ++t)
        out.allowed[static_cast<std::size_t>(*t) >> 5] |= 1u << (*t & 31);
      if (g < 0 && acc && trie.subtree_end(i) > i + 1) {
        std::vector<std::int32_t> v(cur, cur + m);
        auto it = group_ids.find(v);
        std::int32_t id;
        if (it == group_ids.end()) {
          id = static_cast<std::int32_t>(group_tokens.size());
          group_ids.emplace(std::move(v), id);
          group_tokens.emplace_back();
        } else {
          id = it->second;
        }
        grp[d] = id;
        grp_depth[d] = d;
      } else {
        grp[d] = g;
        grp_depth[d] = grp_depth[d - 1];
      }
      ++i;
    } else {
      if (g >= 0) {
        // Every token below needs the parser from the split point on.
        const std::uint32_t split = grp_depth[d - 1];
        for (std::uint32_t j = i; j < trie.subtree_end(i); ++j)
          for (const std::int32_t* t = trie.tokens_begin(j); t != trie.tokens_end(j); ++t)
            group_tokens[static_cast<std::size_t>(g)].emplace_back(
                std::string_view(vocab_->bytes(*t)).substr(split), *t);
      }
      i = trie.subtree_end(i);
    }
  }
  out.groups.resize(group_tokens.size());
  for (const auto& [v, id] : group_ids) out.groups[static_cast<std::size_t>(id)].states = v;
  out.memory_bytes = out.allowed.size() * 4 + sizeof(FrontierEntry);
  for (std::size_t gi = 0; gi < group_tokens.size(); ++gi) {
    out.groups[gi].suffixes = TokenTrie::build(std::move(group_tokens[gi]));
    out.memory_bytes += out.groups[gi].suffixes.memory_bytes() + m * 4;
  }
  return out;
}

}  // namespace corral
