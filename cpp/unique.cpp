// unique.cpp — see unique.hpp for the construct, why masks stay exact and why it is bounded.
#include "unique.hpp"

#include <algorithm>

#include "errors.hpp"
#include "item_values.hpp"

namespace corral {

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
      // An item with fewer values than min (item_values.hpp: one quoted JSON string terminal)
      // makes the group, and so the grammar, unsatisfiable from its start.
      const auto& prods = g.by_lhs[static_cast<std::size_t>(kg.value_nt)];
      if (kg.min_count > 1 && prods.size() == 1 && g.rhs_len(static_cast<std::uint32_t>(prods[0])) == 1) {
        const Symbol s = g.rhs_flat[g.rhs_begin[static_cast<std::uint32_t>(prods[0])]];
        const Terminal* t = s.is_terminal() ? &g.terminals[static_cast<std::size_t>(s.index())] : nullptr;
        if (t != nullptr && !t->is_token && !t->is_slot) {
          const ItemValues iv = analyse_item_values(t->dfa, kMaxDistinctItems + 1, 0);
          if (iv.ok && iv.total < kg.min_count)
            throw CompileError(name + " needs " + std::to_string(kg.min_count) + " distinct items but its item has only " +
                               std::to_string(iv.total) + " values");
        }
      }
      kg.cheap_order.push_back(0);
      continue;
    }
    // A counted %keyed group (keyed.hpp) may have required members and undeclared ones.
    if (kg.min_count < 1 || (kg.max_count != 0 && kg.max_count < kg.min_count))
      throw CompileError(name + ": invalid count bounds " + std::to_string(kg.min_count) + ".." +
                         std::to_string(kg.max_count));
    if (kg.max_count != 0 && kg.required.size() > kg.max_count)
      throw CompileError(name + " requires " + std::to_string(kg.required.size()) + " members but allows at most " +
                         std::to_string(kg.max_count));
    for (std::uint32_t j = 0; j < kg.n_keys; ++j)
      if (kg.rec_prod[j] >= 0) kg.cheap_order.push_back(j);
    if (kg.extra_rec_prod < 0 && kg.cheap_order.size() < kg.min_count)
      throw CompileError(name + " needs " + std::to_string(kg.min_count) + " distinct items but only " +
                         std::to_string(kg.cheap_order.size()) + " can be written");
    std::stable_sort(kg.cheap_order.begin(), kg.cheap_order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[a]), 1) <
             g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[b]), 1);
    });
  }
}

}  // namespace corral
