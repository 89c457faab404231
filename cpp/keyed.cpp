// keyed.cpp — see keyed.hpp for the construct and why it stays bounded.
#include "keyed.hpp"

#include <algorithm>
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
  return intern(std::move(w));
}

std::uint32_t KeySets::intern(std::vector<std::uint64_t> w) {
  while (!w.empty() && w.back() == 0) w.pop_back();  // canonical: equal sets, equal words
  if (w.empty()) return 0;
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

std::uint32_t KeySets::count_below(std::uint32_t set, std::uint32_t limit) const {
  const auto& w = words[set];
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < w.size() && i * 64 < limit; ++i) {
    std::uint64_t x = w[i];
    if (limit - i * 64 < 64) x &= (1ull << (limit - i * 64)) - 1;
    n += static_cast<std::uint32_t>(__builtin_popcountll(x));
  }
  return n;
}

std::uint32_t KeySets::counter(std::uint32_t set, std::uint32_t at) const {
  std::uint32_t v = 0;
  for (std::uint32_t b = 0; b < 32; ++b)
    if (has(set, at + b)) v |= 1u << b;
  return v;
}

std::uint32_t KeySets::with_counter(std::uint32_t set, std::uint32_t at, std::uint32_t value) {
  std::vector<std::uint64_t> w = words[set];
  const std::size_t need = (static_cast<std::size_t>(at) + 32 + 63) / 64;
  if (w.size() < need) w.resize(need, 0);
  for (std::uint32_t b = 0; b < 32; ++b) {
    const std::size_t bit = static_cast<std::size_t>(at) + b;
    const std::uint64_t m = 1ull << (bit & 63);
    w[bit >> 6] = (value >> b) & 1 ? (w[bit >> 6] | m) : (w[bit >> 6] & ~m);
  }
  return intern(std::move(w));
}

std::uint32_t member_count(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set) {
  const std::uint32_t declared = ks.count_below(set, kg.n_keys);
  return counts_extras(kg) ? declared + ks.counter(set, kg.n_keys) : declared;
}

std::uint32_t with_extra(const KeyedGroup& kg, KeySets& ks, std::uint32_t set) {
  if (!counts_extras(kg)) return set;
  const std::uint32_t v = ks.counter(set, kg.n_keys);
  // Without a maximum only "at least min_count" matters: stop counting there.
  if (kg.max_count == 0 && v >= kg.min_count) return set;
  return ks.with_counter(set, kg.n_keys, v + 1);
}

bool admits(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set, std::int32_t key) {
  if (key >= 0 && set != 0 && ks.has(set, static_cast<std::uint32_t>(key))) return false;
  if (kg.max_count == 0) return true;
  // Members once this one completes, plus the required ones it would still need.
  std::uint32_t n = member_count(kg, ks, set) + 1;
  for (std::uint32_t r : kg.required)
    if (static_cast<std::int32_t>(r) != key && !ks.has(set, r)) ++n;
  return n <= kg.max_count;
}

bool may_close(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set) {
  if (!ks.has_all(set, kg.required)) return false;
  for (std::uint32_t j : kg.dep_keys)
    if (ks.has(set, j) && !ks.has_all(set, kg.deps[j])) return false;
  return kg.min_count <= 1 || member_count(kg, ks, set) >= kg.min_count;
}

void missing_members(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set, std::int32_t key,
                     std::vector<std::int32_t>& out) {
  out.clear();
  auto present = [&](std::uint32_t j) { return static_cast<std::int32_t>(j) == key || ks.has(set, j); };
  std::vector<std::uint32_t> added;  // declared keys appended, to close under deps
  auto add = [&](std::uint32_t j) {
    if (present(j) || std::find(added.begin(), added.end(), j) != added.end()) return;
    added.push_back(j);
    out.push_back(kg.rec_prod[j]);
  };
  // Dependencies of the present keys and of those appended from `from` on (transitively):
  // `added` grows while it is read, so index it.
  auto close = [&](std::size_t from) {
    for (std::size_t i = from; i < added.size(); ++i)
      for (std::uint32_t d : kg.deps[added[i]]) add(d);
  };
  for (std::uint32_t r : kg.required) add(r);
  if (!kg.dep_keys.empty()) {
    for (std::uint32_t j : kg.dep_keys)
      if (present(j))
        for (std::uint32_t d : kg.deps[j]) add(d);
    close(0);
  }
  if (kg.min_count <= 1) return;
  const std::uint32_t base =
      member_count(kg, ks, set) + (key == kExtraKey || (key >= 0 && !ks.has(set, static_cast<std::uint32_t>(key))) ? 1 : 0);
  auto have = [&] { return base + static_cast<std::uint32_t>(added.size()); };
  // The cheapest other members up to min, each with its dependencies (a group with deps has no
  // maximum, so overshooting min is fine).
  for (std::uint32_t j : kg.cheap_order) {
    if (have() >= kg.min_count) return;
    if (present(j) || std::find(added.begin(), added.end(), j) != added.end()) continue;
    const std::size_t from = added.size();
    add(j);
    if (!kg.dep_keys.empty()) close(from);
  }
  for (std::uint32_t n = have(); n < kg.min_count && kg.extra_rec_prod >= 0; ++n) out.push_back(kg.extra_rec_prod);
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
    grp.extra_rec_prod = -1;
    grp.dep_keys.clear();
    if (!grp.deps.empty()) {
      const std::string name = "keyed group " + std::to_string(k);
      if (grp.deps.size() != grp.n_keys || grp.distinct() || grp.max_count != 0)
        throw CompileError(name + " has dependencies that do not fit it");
      for (std::uint32_t j = 0; j < grp.n_keys; ++j) {
        const auto& d = grp.deps[j];
        for (std::size_t i = 0; i < d.size(); ++i)
          if (d[i] >= grp.n_keys || (i > 0 && d[i] <= d[i - 1])) throw CompileError(name + " has an invalid dependency");
        if (!d.empty()) grp.dep_keys.push_back(j);
      }
      // `required` is closed under deps (the text parser closes it), so the min-only
      // production, read by shortest-string tables, lists a group that may close.
      for (std::uint32_t r : grp.required)
        for (std::uint32_t d : grp.deps[r])
          if (!std::binary_search(grp.required.begin(), grp.required.end(), d))
            throw CompileError(name + ": a required key needs a key that is not required");
    }
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
    if (rec && pr.key == kExtraKey) kg.extra_rec_prod = static_cast<std::int32_t>(p);
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
