// unique.cpp — see unique.hpp for the construct, why masks stay exact and why it is bounded.
#include "unique.hpp"

#include <algorithm>
#include <limits>

#include "errors.hpp"

namespace corral {
namespace {
constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max() / 4;

// The keys a group item holds once it completes: aux, plus its own key.
std::uint32_t count_after(const KeySets& ks, std::uint32_t aux, std::int32_t key) {
  const std::uint32_t n = key_count(ks, aux);
  return key >= 0 && !ks.has(aux, static_cast<std::uint32_t>(key)) ? n + 1 : n;
}

bool absent(const KeySets& ks, std::uint32_t aux, std::int32_t key, std::uint32_t j) {
  return static_cast<std::int32_t>(j) != key && !ks.has(aux, j);
}
}  // namespace

std::uint32_t key_count(const KeySets& ks, std::uint32_t set) {
  std::uint32_t n = 0;
  for (std::uint64_t w : ks.words[set]) n += static_cast<std::uint32_t>(__builtin_popcountll(w));
  return n;
}

void finalize_unique(Grammar& g) {
  for (KeyedGroup& kg : g.keyed) {
    kg.cheap_order.clear();
    if (!has_count_bounds(kg)) continue;
    const std::string name = "unique group '" + g.names[static_cast<std::size_t>(kg.nt)] + "'";
    if (kg.distinct()) {  // distinct.hpp: unboundedly many values, so only the bounds to check
      if (kg.min_count < 1 || (kg.max_count != 0 && kg.max_count < kg.min_count))
        throw CompileError(name + ": invalid count bounds");
      if (kg.rec_prod[0] < 0) throw CompileError(name + ": no production adds an item");
      kg.cheap_order.push_back(0);
      continue;
    }
    if (!kg.required.empty()) throw CompileError(name + ": count bounds with required members");
    for (const Production& p : g.productions)
      if (p.lhs == kg.nt && p.key == kExtraKey) throw CompileError(name + ": count bounds with an undeclared-key member");
    if (kg.min_count < 1 || (kg.max_count != 0 && kg.max_count < kg.min_count))
      throw CompileError(name + ": invalid count bounds " + std::to_string(kg.min_count) + ".." +
                         std::to_string(kg.max_count));
    for (std::uint32_t j = 0; j < kg.n_keys; ++j)
      if (kg.rec_prod[j] >= 0) kg.cheap_order.push_back(j);
    if (kg.cheap_order.size() < kg.min_count)
      throw CompileError(name + " needs " + std::to_string(kg.min_count) + " distinct items but only " +
                         std::to_string(kg.cheap_order.size()) + " can be written");
    std::stable_sort(kg.cheap_order.begin(), kg.cheap_order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[a]), 1) <
             g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[b]), 1);
    });
  }
}

std::uint64_t count_missing_cost(const Grammar& g, const KeyedGroup& kg, const KeySets& ks, std::uint32_t aux,
                                 std::int32_t key) {
  if (kg.min_count <= 1) return 0;
  std::uint32_t have = count_after(ks, aux, key);
  std::uint64_t cost = 0;
  for (std::uint32_t j : kg.cheap_order) {
    if (have >= kg.min_count) break;
    if (!absent(ks, aux, key, j)) continue;
    cost = std::min(kInf, cost + g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[j]), 1));
    ++have;
  }
  return cost;
}

void append_count_missing(const Grammar& g, const KeyedGroup& kg, const KeySets& ks, std::uint32_t aux,
                          std::int32_t key, const Dfa* const* dfas, std::string& out, std::size_t cap) {
  if (kg.min_count <= 1) return;
  std::uint32_t have = count_after(ks, aux, key);
  for (std::uint32_t j : kg.cheap_order) {
    if (have >= kg.min_count) break;
    if (!absent(ks, aux, key, j)) continue;
    const auto p = static_cast<std::uint32_t>(kg.rec_prod[j]);
    for (std::uint32_t q = g.rhs_begin[p] + 1; q < g.rhs_begin[p + 1]; ++q) g.append_min_string(g.rhs_flat[q], dfas, out, cap);
    ++have;
  }
}

}  // namespace corral
