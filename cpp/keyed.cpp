// keyed.cpp — see keyed.hpp for the construct and why it stays bounded.
#include "keyed.hpp"

#include <string>

#include "errors.hpp"

namespace corral {
namespace {
std::uint64_t hash_words(const std::vector<std::uint64_t>& w) {
  std::uint64_t h = 0x9AE16A3B2F90404Full;
  for (std::uint64_t x : w) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h == 0 ? 1 : h;  // 0 is reserved for the empty set
}
}  // namespace

void KeySets::clear() {
  words.assign(1, {});
  hash.assign(1, 0);
  index.clear();
}

bool KeySets::has(std::uint32_t set, std::uint32_t key) const {
  const auto& w = words[set];
  const std::size_t i = key >> 6;
  return i < w.size() && ((w[i] >> (key & 63)) & 1) != 0;
}

bool KeySets::has_all(std::uint32_t set, const std::vector<std::uint32_t>& keys) const {
  for (std::uint32_t k : keys)
    if (!has(set, k)) return false;
  return true;
}

std::uint32_t KeySets::with(std::uint32_t set, std::uint32_t key) {
  if (has(set, key)) return set;
  std::vector<std::uint64_t> w = words[set];
  const std::size_t i = key >> 6;
  if (w.size() <= i) w.resize(i + 1, 0);
  w[i] |= 1ull << (key & 63);
  const std::uint64_t h = hash_words(w);
  auto& bucket = index[h];
  for (std::uint32_t id : bucket)
    if (words[id] == w) return id;
  const auto id = static_cast<std::uint32_t>(words.size());
  words.push_back(std::move(w));
  hash.push_back(h);
  bucket.push_back(id);
  return id;
}

void finalize_keyed(Grammar& g) {
  const std::size_t n = g.names.size();
  g.group_of.assign(n, -1);
  g.value_group_of.assign(n, -1);
  for (std::size_t k = 0; k < g.keyed.size(); ++k) {
    KeyedGroup& grp = g.keyed[k];
    if (grp.nt <= 0 || static_cast<std::size_t>(grp.nt) >= n || g.group_of[static_cast<std::size_t>(grp.nt)] >= 0)
      throw CompileError("keyed group " + std::to_string(k) + " names an invalid or repeated nonterminal");
    g.group_of[static_cast<std::size_t>(grp.nt)] = static_cast<std::int32_t>(k);
    if (grp.distinct()) {  // distinct.hpp: one key, an item nonterminal of its own
      const auto v = static_cast<std::size_t>(grp.value_nt);
      if (v == 0 || v >= n || grp.value_nt == grp.nt || g.value_group_of[v] >= 0 || grp.n_keys != 1 || !grp.required.empty())
        throw CompileError("distinct group " + std::to_string(k) + " is inconsistent");
      g.value_group_of[v] = static_cast<std::int32_t>(k);
    }
    for (std::size_t i = 0; i < grp.required.size(); ++i)
      if (grp.required[i] >= grp.n_keys || (i > 0 && grp.required[i] <= grp.required[i - 1]))
        throw CompileError("keyed group " + std::to_string(k) + " has an invalid required key");
    grp.rec_prod.assign(grp.n_keys, -1);
  }
  for (std::size_t p = 0; p < g.productions.size(); ++p) {
    const Production& pr = g.productions[p];
    const std::int32_t grp = g.group_of[static_cast<std::size_t>(pr.lhs)];
    if (grp < 0) {
      if (pr.key != kNoKey || pr.role != kParseAndMin)
        throw CompileError("production " + std::to_string(p) + " has a member key outside a keyed group");
      continue;
    }
    KeyedGroup& kg = g.keyed[static_cast<std::size_t>(grp)];
    if (pr.role == kMinOnly) {
      if (pr.key != kNoKey) throw CompileError("keyed group: the min-only production has a key");
      continue;
    }
    if (pr.key != kExtraKey && (pr.key < 0 || static_cast<std::uint32_t>(pr.key) >= kg.n_keys))
      throw CompileError("keyed group production " + std::to_string(p) + " has an invalid key");
    const bool rec = pr.rhs.size() >= 2 && !pr.rhs[0].is_terminal() && pr.rhs[0].index() == pr.lhs;
    if (rec && pr.key >= 0) kg.rec_prod[static_cast<std::size_t>(pr.key)] = static_cast<std::int32_t>(p);
  }
  for (std::size_t v = 0; v < n; ++v)
    if (g.value_group_of[v] >= 0 && g.group_of[v] >= 0)
      throw CompileError("distinct group " + std::to_string(g.value_group_of[v]) + ": its item is a group");
  for (std::size_t k = 0; k < g.keyed.size(); ++k) {
    const KeyedGroup& kg = g.keyed[k];
    if (kg.distinct() && g.nullable[static_cast<std::size_t>(kg.value_nt)])
      throw CompileError("distinct group '" + g.names[static_cast<std::size_t>(kg.nt)] + "': an item may not be empty");
    if (g.nullable[static_cast<std::size_t>(kg.nt)])
      throw CompileError("keyed group '" + g.names[static_cast<std::size_t>(kg.nt)] + "': a member may not be empty");
    for (std::uint32_t r : kg.required)
      if (kg.rec_prod[r] < 0)
        throw CompileError("keyed group '" + g.names[static_cast<std::size_t>(kg.nt)] + "': required member " +
                           std::to_string(r) + " can never be written");
  }
}

}  // namespace corral
