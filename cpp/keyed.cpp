// keyed.cpp — see keyed.hpp for the construct and why it stays bounded.
#include "keyed.hpp"

#include <algorithm>
#include <string>

#include "distinct.hpp"
#include "errors.hpp"
#include "item_values.hpp"

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

// Sets of declared keys of a group with dependencies and a maximum (derive_fit_tables), as
// 64-bit words of n_keys bits.
using Words = std::vector<std::uint64_t>;

bool bit(const Words& w, std::uint32_t b) { return (b >> 6) < w.size() && ((w[b >> 6] >> (b & 63)) & 1) != 0; }

void or_into(Words& a, const Words& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (std::size_t i = 0; i < b.size(); ++i) a[i] |= b[i];
}

std::uint32_t popcount(const Words& w) {
  std::uint32_t n = 0;
  for (std::uint64_t x : w) n += static_cast<std::uint32_t>(__builtin_popcountll(x));
  return n;
}

std::uint32_t extras_of(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set) {
  return counts_extras(kg) ? ks.counter(set, kg.n_keys) : 0;
}

// The declared keys of `set`, `key` (when declared) and the required ones, closed under deps.
Words closed_keys(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set, std::int32_t key) {
  Words out((kg.n_keys + 63) / 64, 0);
  const Words& w = ks.words[set];
  for (std::size_t i = 0; i < w.size() && i * 64 < kg.n_keys; ++i)
    for (std::uint64_t x = w[i]; x != 0; x &= x - 1) {
      const auto j = static_cast<std::uint32_t>(i * 64 + static_cast<std::size_t>(__builtin_ctzll(x)));
      if (j < kg.n_keys) or_into(out, kg.closure[j]);
    }
  if (key >= 0) or_into(out, kg.closure[static_cast<std::size_t>(key)]);
  for (std::uint32_t r : kg.required) or_into(out, kg.closure[r]);
  return out;
}

// Can a group whose closed declared keys are `c`, with `extras` undeclared members, still close
// (keyed.hpp: undeclared members pad up to min; without them, the `fits` table says)?
bool completes(const KeyedGroup& kg, const Words& c, std::uint32_t extras) {
  if (!kg.fits.empty()) {
    const std::uint64_t m = c.empty() ? 0 : c[0];
    return ((kg.fits[m >> 6] >> (m & 63)) & 1) != 0;
  }
  return popcount(c) + extras <= kg.max_count;
}

// Grow the closed set `c` towards min_count: the first member of `order` not in it whose
// closure still lets the group close, again and again; the keys it adds are appended to
// `added`. Returns the undeclared members still needed to reach min_count.
std::uint32_t grow_to_min(const KeyedGroup& kg, Words& c, std::uint32_t extras, const std::vector<std::uint32_t>& order,
                          std::vector<std::uint32_t>& added) {
  while (popcount(c) + extras < kg.min_count) {
    bool grew = false;
    for (std::uint32_t j : order) {
      if (bit(c, j)) continue;
      Words next = c;
      or_into(next, kg.closure[j]);
      if (!completes(kg, next, extras)) continue;
      for (std::uint32_t b = 0; b < kg.n_keys; ++b)
        if (bit(next, b) && !bit(c, b)) added.push_back(b);
      c = std::move(next);
      grew = true;
      break;
    }
    if (!grew) break;
  }
  const std::uint32_t have = popcount(c) + extras;
  return have < kg.min_count ? kg.min_count - have : 0;
}
}  // namespace

void derive_fit_tables(KeyedGroup& kg, bool has_extra, const std::vector<char>& writable, const std::string& name) {
  const std::uint32_t n = kg.n_keys;
  kg.closure.assign(n, Words((n + 63) / 64, 0));
  kg.fits.clear();
  for (std::uint32_t j = 0; j < n; ++j) {
    Words& c = kg.closure[j];
    std::vector<std::uint32_t> todo{j};
    c[j >> 6] |= 1ull << (j & 63);
    while (!todo.empty()) {
      const std::uint32_t k = todo.back();
      todo.pop_back();
      for (std::uint32_t d : kg.deps[k])
        if (!bit(c, d)) {
          c[d >> 6] |= 1ull << (d & 63);
          todo.push_back(d);
        }
    }
  }
  Words req((n + 63) / 64, 0);
  for (std::uint32_t r : kg.required) or_into(req, kg.closure[r]);
  const std::uint32_t n_req = popcount(req);
  if (n_req > kg.max_count)
    throw CompileError(name + " requires " + std::to_string(n_req) + " members but allows at most " +
                       std::to_string(kg.max_count));
  if (has_extra || kg.min_count <= n_req) return;  // every closed set holding `req` reaches min
  if (n > kMaxFitKeys)
    throw CompileError(name + " has dependencies, a maximum count and a minimum above its required members: "
                       "that needs a table over the subsets of at most " + std::to_string(kMaxFitKeys) +
                       " keys, and it has " + std::to_string(n));
  // ok[m]: m is closed, holds the required keys, only writable ones, and has a count in range;
  // then fits[m] = some superset of m is ok (an OR over supersets, one key at a time).
  const std::uint64_t all = 1ull << n, reqm = req.empty() ? 0 : req[0];
  std::uint64_t writable_m = 0;
  for (std::uint32_t j = 0; j < n; ++j)
    if (writable[j]) writable_m |= 1ull << j;
  std::vector<char> f(all, 0);
  for (std::uint64_t m = 0; m < all; ++m) {
    std::uint64_t cl = 0;
    for (std::uint64_t x = m; x != 0; x &= x - 1) cl |= kg.closure[static_cast<std::size_t>(__builtin_ctzll(x))][0];
    const auto size = static_cast<std::uint32_t>(__builtin_popcountll(m));
    f[m] = cl == m && (m & reqm) == reqm && (m & ~writable_m) == 0 && size >= kg.min_count && size <= kg.max_count;
  }
  for (std::uint32_t b = 0; b < n; ++b)
    for (std::uint64_t m = 0; m < all; ++m)
      if (!(m >> b & 1) && f[m | (1ull << b)]) f[m] = 1;
  if (!f[0])
    throw CompileError(name + ": no set of members meets its dependencies with between " + std::to_string(kg.min_count) +
                       " and " + std::to_string(kg.max_count) + " members");
  kg.fits.assign((all + 63) / 64, 0);
  for (std::uint64_t m = 0; m < all; ++m)
    if (f[m]) kg.fits[m >> 6] |= 1ull << (m & 63);
}

std::vector<std::uint32_t> fitting_member_list(const KeyedGroup& kg, bool has_extra) {
  Words c((kg.n_keys + 63) / 64, 0);
  for (std::uint32_t r : kg.required) or_into(c, kg.closure[r]);
  std::vector<std::uint32_t> order(kg.n_keys), added;
  for (std::uint32_t j = 0; j < kg.n_keys; ++j) order[j] = j;
  // A group is never empty: with no required key, one member (or an undeclared one) at least.
  if (kg.min_count <= 1 && popcount(c) == 0 && has_extra) return {};
  grow_to_min(kg, c, 0, order, added);
  std::vector<std::uint32_t> out;
  for (std::uint32_t b = 0; b < kg.n_keys; ++b)
    if (bit(c, b)) out.push_back(b);
  return out;
}

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

std::uint64_t KeySets::hash_without_counter(std::uint32_t set, std::uint32_t at) const {
  std::vector<std::uint64_t> w = words[set];
  for (std::uint32_t b = 0; b < 32; ++b) {
    const std::size_t bit = static_cast<std::size_t>(at) + b;
    if ((bit >> 6) < w.size()) w[bit >> 6] &= ~(1ull << (bit & 63));
  }
  while (!w.empty() && w.back() == 0) w.pop_back();
  return w.empty() ? 0 : hash_words(w);
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
  if (!kg.closure.empty())  // dependencies beside the maximum
    return completes(kg, closed_keys(kg, ks, set, key), extras_of(kg, ks, set) + (key == kExtraKey ? 1 : 0));
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
  if (!kg.closure.empty()) {  // dependencies beside a maximum: only additions that still fit
    Words c = closed_keys(kg, ks, set, key);
    for (std::uint32_t j = 0; j < kg.n_keys; ++j)
      if (bit(c, j) && !present(j)) out.push_back(kg.rec_prod[j]);
    if (kg.min_count <= 1) return;
    std::vector<std::uint32_t> added;
    const std::uint32_t extras = extras_of(kg, ks, set) + (key == kExtraKey ? 1 : 0);
    const std::uint32_t more = grow_to_min(kg, c, extras, kg.cheap_order, added);
    for (std::uint32_t j : added) out.push_back(kg.rec_prod[j]);
    for (std::uint32_t i = 0; i < more && kg.extra_rec_prod >= 0; ++i) out.push_back(kg.extra_rec_prod);
    return;
  }
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
  // The cheapest other members up to min, each with its dependencies (a group with deps and a
  // maximum took the branch above, so overshooting min is fine here).
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
      if (grp.deps.size() != grp.n_keys || grp.distinct())
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
  for (std::size_t k = 0; k < g.keyed.size(); ++k) {
    KeyedGroup& kg = g.keyed[k];
    kg.closure.clear();
    kg.fits.clear();
    if (kg.deps.empty() || kg.max_count == 0) continue;
    std::vector<char> writable(kg.n_keys, 0);
    for (std::uint32_t j = 0; j < kg.n_keys; ++j) writable[j] = kg.rec_prod[j] >= 0 ? 1 : 0;
    derive_fit_tables(kg, kg.extra_rec_prod >= 0, writable,
                      "keyed group '" + g.names[static_cast<std::size_t>(kg.nt)] + "'");
  }
  // Remembered undeclared keys (`%key(...)`): each key nonterminal is one terminal whose every
  // prefix but a closed key has infinitely many continuations (a refused key then always has
  // another way on: distinct.hpp), read only by the group's own undeclared-member productions,
  // every one of which reads one.
  for (std::size_t k = 0; k < g.keyed.size(); ++k) {
    const KeyedGroup& kg = g.keyed[k];
    if (!kg.remembers_keys()) continue;
    const std::string name = "keyed group '" + g.names[static_cast<std::size_t>(kg.nt)] + "'";
    if (kg.distinct()) throw CompileError(name + ": a %distinct group has no undeclared keys");
    for (std::int32_t x : kg.key_nts) {
      const auto v = static_cast<std::size_t>(x);
      if (x <= 0 || v >= n || g.value_group_of[v] >= 0 || g.group_of[v] >= 0)
        throw CompileError(name + ": an invalid or repeated key nonterminal");
      g.value_group_of[v] = static_cast<std::int32_t>(k);
      // (finalize_keyed runs before the flat right-hand sides exist: read the productions)
      const auto& prods = g.by_lhs[v];
      const std::vector<Symbol>* rhs = prods.size() == 1 ? &g.productions[static_cast<std::size_t>(prods[0])].rhs : nullptr;
      const Symbol only = rhs != nullptr && rhs->size() == 1 ? (*rhs)[0] : Symbol{};
      const bool one = rhs != nullptr && rhs->size() == 1 && only.is_terminal() &&
                       !g.terminals[static_cast<std::size_t>(only.index())].is_token &&
                       !g.terminals[static_cast<std::size_t>(only.index())].is_slot;
      // Exact when every open key prefix has infinitely many values (a refused close is then
      // the only dead end), or when the key is a JSON string whose values item_values.hpp
      // counts (its dead prefixes are refused like a %distinct item's) and has infinitely
      // many of them (so the group never holds them all).
      bool exact = one && every_prefix_open_ended(g.terminals[static_cast<std::size_t>(only.index())].dfa, true);
      if (one && !exact) {
        const ItemValues iv = analyse_item_values(g.terminals[static_cast<std::size_t>(only.index())].dfa,
                                                  kMaxDistinctItems + 1, kMaxDistinctItems);
        exact = iv.ok && !iv.numeric && iv.total > kMaxDistinctItems;
      }
      if (!exact)
        throw CompileError(name + ": a %key(...) must be one JSON string expression with infinitely many values, "
                                  "whose every prefix has infinitely many continuations or whose values can be "
                                  "counted (so a repeated key can always become another)");
    }
  }
  for (std::size_t p = 0; p < g.productions.size(); ++p) {
    const Production& pr = g.productions[p];
    const std::int32_t grp = g.group_of[static_cast<std::size_t>(pr.lhs)];
    std::size_t keys_read = 0;
    for (Symbol s : pr.rhs) {
      if (s.is_terminal()) continue;
      const std::int32_t vg = g.value_group_of[static_cast<std::size_t>(s.index())];
      if (vg < 0 || g.keyed[static_cast<std::size_t>(vg)].distinct()) continue;
      if (vg != grp || (pr.key != kExtraKey && pr.role != kMinOnly))  // (min-only: never parsed)
        throw CompileError("a %key(...) nonterminal is read outside its group's undeclared members");
      ++keys_read;
    }
    if (grp >= 0 && pr.key == kExtraKey && pr.role != kMinOnly &&
        g.keyed[static_cast<std::size_t>(grp)].remembers_keys() && keys_read != 1)
      throw CompileError("keyed group '" + g.names[static_cast<std::size_t>(pr.lhs)] +
                         "': an undeclared member must read exactly one %key(...)");
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
