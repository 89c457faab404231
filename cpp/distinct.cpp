// distinct.cpp — see distinct.hpp for the construct, how masks stay exact and why it is bounded.
#include "distinct.hpp"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "earley.hpp"
#include "errors.hpp"
#include "item_values.hpp"
#include "vocab.hpp"

namespace corral {
namespace {
constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max() / 4;

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

ValueHash hash_tagged(char tag, std::string_view s) {
  std::uint64_t a = 0xCBF29CE484222325ull ^ static_cast<std::uint8_t>(tag), b = 0x84222325CBF29CE4ull + static_cast<std::uint8_t>(tag);
  for (char c : s) {
    const auto x = static_cast<std::uint8_t>(c);
    a = (a ^ x) * 0x100000001B3ull;
    b = (b + x + 1) * 0x9E3779B97F4A7C15ull;
    b ^= b >> 29;
  }
  ValueHash h{mix64(a ^ s.size()), mix64(b + 0x632BE59BD9B4E019ull)};
  h.h1 |= 1;  // never the "unknown" hash
  return h;
}

void put_utf8(std::uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {  // (lone surrogates too: generalised UTF-8, still one value each)
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A JSON string's value (its UTF-8 after unescaping); false when `t` is not one.
bool json_string_value(std::string_view t, std::string& out) {
  if (t.size() < 2 || t.front() != '"' || t.back() != '"') return false;
  auto hex4 = [&](std::size_t i, std::uint32_t& v) {
    if (i + 4 > t.size() - 1) return false;
    v = 0;
    for (std::size_t k = i; k < i + 4; ++k) {
      const int d = hex_digit(t[k]);
      if (d < 0) return false;
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  };
  for (std::size_t i = 1; i + 1 < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') return false;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 2 >= t.size()) return false;  // the escaped character must precede the closing quote
    ++i;
    switch (t[i]) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        std::uint32_t v = 0;
        if (!hex4(i + 1, v)) return false;
        i += 4;
        std::uint32_t lo = 0;
        if (v >= 0xD800 && v < 0xDC00 && i + 2 < t.size() - 1 && t[i + 1] == '\\' && t[i + 2] == 'u' && hex4(i + 3, lo) &&
            lo >= 0xDC00 && lo < 0xE000) {
          v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
        put_utf8(v, out);
        break;
      }
      default: return false;
    }
  }
  return true;
}

// A JSON number's exact value as `[-]digits e exponent` with no leading or trailing zero digit
// ("0" for zero, whatever its sign); false when `t` is not a JSON number or its exponent is huge.
bool json_number_value(std::string_view t, std::string& out) {
  std::size_t i = 0;
  const bool neg = i < t.size() && t[i] == '-';
  if (neg) ++i;
  std::string digits;
  std::int64_t exp = 0;
  const std::size_t int_at = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') digits.push_back(t[i++]);
  if (i == int_at) return false;
  if (i < t.size() && t[i] == '.') {
    const std::size_t frac_at = ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      digits.push_back(t[i++]);
      --exp;
    }
    if (i == frac_at) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) eneg = t[i++] == '-';
    const std::size_t exp_at = i;
    std::int64_t e = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      e = e * 10 + (t[i++] - '0');
      if (e > (std::int64_t{1} << 50)) return false;
    }
    if (i == exp_at) return false;
    exp += eneg ? -e : e;
  }
  if (i != t.size()) return false;
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    out = "0";
    return true;
  }
  std::size_t last = digits.find_last_not_of('0');
  exp += static_cast<std::int64_t>(digits.size() - 1 - last);
  out = (neg ? "-" : "") + digits.substr(first, last + 1 - first) + "e" + std::to_string(exp);
  return true;
}

}  // namespace

ValueHash value_hash(std::string_view text, std::string* decoded) {
  std::string v;
  if (!text.empty() && text.front() == '"') {
    if (json_string_value(text, v)) {
      if (decoded != nullptr) decoded->append(v);
      return hash_tagged('s', v);
    }
    v.clear();
  } else if (!text.empty() && (text.front() == '-' || (text.front() >= '0' && text.front() <= '9'))) {
    if (json_number_value(text, v)) {
      // (as written: the counted numeric items are canonical integers, item_values.hpp)
      if (decoded != nullptr) decoded->append(text);
      return hash_tagged('n', v);
    }
  }
  return hash_tagged('x', text);  // true/false/null, and any other item: by its exact text
}

bool every_prefix_open_ended(const Dfa& d, bool sinks_ok) {
  const std::uint32_t n = d.num_states();
  if (n == 0) return false;
  std::vector<std::vector<std::uint32_t>> succ(n), pred(n);
  for (std::uint32_t s = 0; s < n; ++s)
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b));
      if (t < 0) continue;
      const auto u = static_cast<std::uint32_t>(t);
      if (succ[s].empty() || succ[s].back() != u) succ[s].push_back(u);
      pred[u].push_back(s);
    }
  for (auto& v : succ) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  auto flood = [&](std::vector<std::uint32_t> todo, const std::vector<std::vector<std::uint32_t>>& edges,
                   const std::vector<char>* within) {
    std::vector<char> seen(n, 0);
    for (std::uint32_t s : todo) seen[s] = 1;
    while (!todo.empty()) {
      const std::uint32_t s = todo.back();
      todo.pop_back();
      for (std::uint32_t t : edges[s])
        if (!seen[t] && (within == nullptr || (*within)[t])) {
          seen[t] = 1;
          todo.push_back(t);
        }
    }
    return seen;
  };
  std::vector<std::uint32_t> finals;
  for (std::uint32_t s = 0; s < n; ++s)
    if (d.accepting(static_cast<std::int32_t>(s))) finals.push_back(s);
  if (d.empty_language()) return false;
  const auto start = static_cast<std::uint32_t>(d.start());
  const std::vector<char> reach = flood({start}, succ, nullptr);
  const std::vector<char> coreach = flood(finals, pred, nullptr);
  std::vector<char> live(n, 0);
  for (std::uint32_t s = 0; s < n; ++s) live[s] = reach[s] && coreach[s];
  if (!live[start]) return false;
  // Live states on a cycle of live states: those that reach themselves within the live part.
  std::vector<std::uint32_t> cyclic;
  for (std::uint32_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    std::vector<std::uint32_t> next;
    for (std::uint32_t t : succ[s])
      if (live[t]) next.push_back(t);
    if (flood(next, succ, &live)[s]) cyclic.push_back(s);
  }
  const std::vector<char> to_cycle = flood(cyclic, pred, &live);
  for (std::uint32_t s = 0; s < n; ++s)
    if (live[s] && !to_cycle[s] && !(sinks_ok && succ[s].empty() && d.accepting(static_cast<std::int32_t>(s))))
      return false;
  return true;
}

bool ValueSets::has(std::uint32_t set, const ValueHash& v) const {
  if (!v.known()) return false;
  constexpr std::uint32_t kIndexFrom = 32;  // below this a walk is as fast as a lookup
  if (entries[set].count < kIndexFrom) {
    for (std::uint32_t s = set; s != 0; s = entries[s].parent)
      if (entries[s].value == v) return true;
    return false;
  }
  if (memo_set_ != set) {
    forget();
    for (std::uint32_t s = set; s != 0; s = entries[s].parent) memo_.insert(entries[s].value);
    memo_set_ = set;
  }
  return memo_.count(v) != 0;
}

std::uint32_t ValueSets::with(std::uint32_t set, const ValueHash& v, std::string_view text) {
  // The newest entries are the likeliest twins (one completion advancing several items).
  const std::size_t n = entries.size();
  for (std::size_t k = n; k > 1 && k + 8 > n; --k)
    if (entries[k - 1].parent == set && entries[k - 1].value == v) return static_cast<std::uint32_t>(k - 1);
  texts_.append(text);
  entries.push_back(Entry{set, entries[set].count + 1, v, static_cast<std::uint32_t>(texts_.size())});
  return static_cast<std::uint32_t>(n);
}

std::uint64_t ValueSets::signature(std::uint32_t set) const {
  return set == 0 ? 0 : mix64(0xD157'1AC7'0000'0000ull + entries[set].count);
}

std::uint64_t distinct_missing_cost(const Grammar& g, const KeyedGroup& kg, std::uint32_t have) {
  if (have >= kg.min_count) return 0;
  const std::uint64_t one = g.suffix_cost(static_cast<std::uint32_t>(kg.rec_prod[0]), 1);
  return std::min(kInf, one * (kg.min_count - have));
}

void append_distinct_missing(const Grammar& g, const KeyedGroup& kg, std::uint32_t have, const Dfa* const* dfas,
                             std::string& out, std::size_t cap) {
  const auto p = static_cast<std::uint32_t>(kg.rec_prod[0]);
  for (std::uint32_t n = have; n < kg.min_count; ++n)
    for (std::uint32_t q = g.rhs_begin[p] + 1; q < g.rhs_begin[p + 1]; ++q) g.append_min_string(g.rhs_flat[q], dfas, out, cap);
}

std::string distinct_completion(EarleyParser& p, std::size_t cap) {
  const std::size_t mark = p.num_sets();
  std::string out;
  try {
    // Each repair makes the item being closed one byte longer and, but for a `0`, changes its
    // value, so this ends: a value can equal at most one remembered value per length, and a
    // `0` is written only when no other byte can be ("1.0", "1.00", ... are all 1: a decimal
    // repaired with zeros would never end).
    while (true) {
      if (out.size() > cap) throw LimitExceeded("max_completion_bytes", out.size(), cap, "the shortest completion is too long");
      const std::string c = p.shortest_completion(cap - out.size());
      std::size_t i = 0;
      while (i < c.size() && p.push_byte(static_cast<std::uint8_t>(c[i]))) ++i;
      out.append(c, 0, i);
      if (i == c.size()) break;
      // c[i] would close a duplicate: write the smallest other byte the parser takes there.
      const auto bits = p.next_bytes();
      bool moved = false;
      for (int pass = 0; pass < 2 && !moved; ++pass)
        for (int b = 0; b < 256 && !moved; ++b) {
          if (b == static_cast<std::uint8_t>(c[i]) || (b == '0') == (pass == 0) ||
              !(bits[static_cast<std::size_t>(b >> 6)] >> (b & 63) & 1))
            continue;
          if (p.push_byte(static_cast<std::uint8_t>(b))) {
            out.push_back(static_cast<char>(b));
            moved = true;
          }
        }
      CORRAL_CHECK(moved, "no completion avoids a duplicate item");
    }
  } catch (...) {
    p.pop_to(mark);
    throw;
  }
  p.pop_to(mark);
  return out;
}

namespace {

using ByteSet = std::array<std::uint64_t, 4>;
void add_bytes(ByteSet& to, const ByteSet& from, bool& changed) {
  for (std::size_t w = 0; w < 4; ++w) {
    const std::uint64_t v = to[w] | from[w];
    changed = changed || v != to[w];
    to[w] = v;
  }
}

// Per nonterminal, the bytes that may come right after it in a sentence (FIRST/FOLLOW at the
// byte level, by fixpoints), or with `before`, right before it (LAST/PRECEDE: the same on the
// mirrored productions). A token terminal (one vocabulary token, bytes not known here) counts
// as every byte; the ends of the output add none.
std::vector<ByteSet> neighbour_bytes(const Grammar& g, const Dfa* const* dfas, bool before) {
  const std::size_t nts = g.names.size();
  std::vector<ByteSet> first_t(g.terminals.size(), ByteSet{});
  std::vector<std::uint8_t> null_t(g.terminals.size(), 0);
  for (std::size_t t = 0; t < g.terminals.size(); ++t) {
    if (g.terminals[t].is_token) {
      first_t[t].fill(~0ull);
      continue;
    }
    const Dfa& d = *dfas[t];
    if (d.num_states() == 0) continue;
    null_t[t] = d.accepting(d.start()) ? 1 : 0;
    // First bytes, or (before) last bytes: those that enter an accepting state from some state.
    const auto from = before ? 0u : static_cast<std::uint32_t>(d.start());
    const std::uint32_t to = before ? d.num_states() : from + 1;
    for (std::uint32_t q = from; q < to; ++q)
      for (int b = 0; b < 256; ++b) {
        const std::int32_t n = d.next(static_cast<std::int32_t>(q), static_cast<std::uint8_t>(b));
        if (n >= 0 && (!before || d.accepting(n))) first_t[t][static_cast<std::size_t>(b >> 6)] |= 1ull << (b & 63);
      }
  }
  // (before: a production read right to left)
  auto sym = [&](std::uint32_t p, std::uint32_t i) {
    return before ? g.rhs_flat[g.rhs_begin[p + 1] - 1 - i] : g.rhs_flat[g.rhs_begin[p] + i];
  };
  auto nullable = [&](Symbol x) {
    return x.is_terminal() ? null_t[static_cast<std::size_t>(x.index())] != 0 : g.nullable[static_cast<std::size_t>(x.index())] != 0;
  };
  std::vector<ByteSet> first(nts, ByteSet{});
  auto first_of = [&](Symbol x) -> const ByteSet& {
    return x.is_terminal() ? first_t[static_cast<std::size_t>(x.index())] : first[static_cast<std::size_t>(x.index())];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint32_t p = 0; p < g.productions.size(); ++p)
      for (std::uint32_t i = 0; i < g.rhs_len(p); ++i) {
        add_bytes(first[static_cast<std::size_t>(g.productions[p].lhs)], first_of(sym(p, i)), changed);
        if (!nullable(sym(p, i))) break;
      }
  }
  std::vector<ByteSet> follow(nts, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint32_t p = 0; p < g.productions.size(); ++p) {
      // Right to left: `rest` is FIRST of the symbols after i, plus FOLLOW(lhs) while they are nullable.
      ByteSet rest = follow[static_cast<std::size_t>(g.productions[p].lhs)];
      for (std::uint32_t i = g.rhs_len(p); i-- > 0;) {
        const Symbol x = sym(p, i);
        if (!x.is_terminal()) add_bytes(follow[static_cast<std::size_t>(x.index())], rest, changed);
        bool unused = false;
        if (nullable(x)) {
          add_bytes(rest, first_of(x), unused);
        } else {
          rest = first_of(x);
        }
      }
    }
  }
  return follow;
}

}  // namespace

DistinctCorrection::DistinctCorrection(const Grammar& g, const Dfa* const* dfas, const Vocabulary& vocab) {
  // Where inside a token can the parser (checking on) refuse what the cached mask (checking off)
  // allows? Only where an item closes with a held value and the parse then needs the group to
  // go past it: the last terminal of an item production reaches an accepting state on byte b
  // and either the token ends there with a state that reads nothing more (a sink: the item is
  // dropped), or the token's next byte c cannot continue the terminal (the item must have ended
  // there). A close the terminal can extend at the token's end is no refusal yet: the item
  // stays live ("15" with 15 held may become "150"), and the next step's frontier, built with
  // checking on, already lacks what would follow a refused value. These byte-level facts over
  // every state over-approximate the events, so the correction still replays every token that
  // could be refused. An item that does not end with a terminal makes every byte an event.
  // A close at the token's end is an event only where the item is a sink there: a one-byte
  // token (the item may be open before it) or the token's last two bytes (a, b) that enter a
  // sink from some state, or b entering one from the start right after a byte that may come
  // before an item (`, 0`: a leading zero reads nothing more).
  std::array<bool, 256> at_end{};
  std::vector<bool> end_pair(256 * 256, false);
  std::vector<bool> then(256 * 256, false);  // then[b * 256 + c]: b closes, c may follow the item
  auto all = [&] {
    at_end.fill(true);
    end_pair.assign(end_pair.size(), true);
    then.assign(then.size(), true);
  };
  auto has = [](const ByteSet& set, int b) { return (set[static_cast<std::size_t>(b >> 6)] >> (b & 63) & 1) != 0; };
  const std::vector<ByteSet> follow = neighbour_bytes(g, dfas, false);
  const std::vector<ByteSet> precede = neighbour_bytes(g, dfas, true);
  keys_only_ = std::none_of(g.keyed.begin(), g.keyed.end(), [](const KeyedGroup& k) { return k.distinct(); });
  // The item nonterminals: a distinct group's item, or the keys a keyed group remembers
  // (keyed.hpp: `%key(...)`, each read right inside the group's undeclared-member productions).
  std::vector<std::int32_t> item_nts;
  for (const KeyedGroup& kg : g.keyed) {
    if (kg.distinct()) {
      item_nts.push_back(kg.value_nt);
      // (open_values also needs the separator to be terminals only: inside it, the group's
      // own items are in the current set.)
      const auto rec = static_cast<std::uint32_t>(kg.rec_prod[0]);
      for (std::uint32_t q = g.rhs_begin[rec] + 1; q + 1 < g.rhs_begin[rec + 1]; ++q)
        simple_ = simple_ && g.rhs_flat[q].is_terminal();
      continue;
    }
    if (!kg.remembers_keys()) continue;
    // (no condition on the separator: an open key is found through its own item's origin, and
    // a key opened inside the token is an open_close_ token, below)
    keys_ = true;
    item_nts.insert(item_nts.end(), kg.key_nts.begin(), kg.key_nts.end());
  }
  // A token may open a remembered key after a value closed and close it (`1,"a"`): the
  // current set then holds no item of the group, so such tokens (a byte before a key, one
  // that starts it, then a close) are replayed whenever any value is remembered (open_close_).
  std::vector<bool> opens(256 * 256, false);
  std::array<bool, 256> key_first{};  // bytes a remembered key may start with
  for (const std::int32_t vnt : item_nts) {
    const ByteSet& after = follow[static_cast<std::size_t>(vnt)];
    const ByteSet& before = precede[static_cast<std::size_t>(vnt)];
    const std::int32_t vg = g.value_group_of[static_cast<std::size_t>(vnt)];
    const bool is_key = vg >= 0 && !g.keyed[static_cast<std::size_t>(vg)].distinct();
    for (std::int32_t prod : g.by_lhs[static_cast<std::size_t>(vnt)]) {
      const auto pr = static_cast<std::uint32_t>(prod);
      const Symbol last = g.rhs_flat[g.rhs_begin[pr + 1] - 1];
      // (open_values finds a group from an item of its item: every position inside the item
      // must be an item of the item's own productions, so they read terminals only)
      for (std::uint32_t q = g.rhs_begin[pr]; q < g.rhs_begin[pr + 1]; ++q) simple_ = simple_ && g.rhs_flat[q].is_terminal();
      if (!last.is_terminal() || g.terminals[static_cast<std::size_t>(last.index())].is_token) {
        all();
        simple_ = false;
        continue;
      }
      const Dfa& d = *dfas[last.index()];
      if (is_key)
        for (int c = 0; c < 256; ++c)
          if (d.next(d.start(), static_cast<std::uint8_t>(c)) >= 0) {
            key_first[static_cast<std::size_t>(c)] = true;
            for (int b = 0; b < 256; ++b)
              if (has(before, b)) opens[static_cast<std::size_t>(b) * 256 + static_cast<std::size_t>(c)] = true;
          }
      // A parse that uses a close inside the token goes on with a byte that may follow the
      // item (`after`: the separator's first bytes, or what follows the group), so the pairs
      // are (a byte into an accepting state, a byte of `after`) - whether or not the item
      // could also read that byte (`a|abc` with separator `b`: "aba"). A token that ends at a
      // close leaves the item alive (it may go on: "15" to "150") unless it is a sink there;
      // a live item can still reach a value, a new one unless the prefix is dead, which
      // dead_prefix_tokens finds.
      std::vector<char> sink(d.num_states(), 0);
      for (std::uint32_t q = 0; q < d.num_states(); ++q) {
        bool none = d.accepting(static_cast<std::int32_t>(q));
        for (int c = 0; c < 256 && none; ++c) none = d.next(static_cast<std::int32_t>(q), static_cast<std::uint8_t>(c)) < 0;
        sink[q] = none ? 1 : 0;
      }
      for (std::uint32_t q = 0; q < d.num_states(); ++q)
        for (int b = 0; b < 256; ++b) {
          const std::int32_t n = d.next(static_cast<std::int32_t>(q), static_cast<std::uint8_t>(b));
          if (n < 0) continue;
          if (d.accepting(n))
            for (int c = 0; c < 256; ++c)
              if (has(after, c)) then[static_cast<std::size_t>(b) * 256 + static_cast<std::size_t>(c)] = true;
          if (sink[static_cast<std::size_t>(n)]) {
            at_end[static_cast<std::size_t>(b)] = true;
            if (static_cast<std::int32_t>(q) == d.start())
              for (int a = 0; a < 256; ++a)
                if (has(before, a)) end_pair[static_cast<std::size_t>(a) * 256 + static_cast<std::size_t>(b)] = true;
          }
          // (the pair into a sink from a state reached by a byte a)
          for (int c = 0; c < 256; ++c) {
            const std::int32_t m = d.next(n, static_cast<std::uint8_t>(c));
            if (m >= 0 && sink[static_cast<std::size_t>(m)]) end_pair[static_cast<std::size_t>(b) * 256 + static_cast<std::size_t>(c)] = true;
          }
        }
    }
  }
  // Items with finitely many values somewhere (item_values.hpp): their dead prefixes. A token
  // may enter one after opening the item itself (` "-` or `,"a`, marked below), and tokens
  // that go on from an open item's state (the item predicted at its start included) are found
  // per step by a walk of the vocabulary (dead_prefix_tokens).
  table_.assign(g.terminals.size(), nullptr);
  for (const std::int32_t vnt : item_nts) {
    const KeyedGroup& kg = g.keyed[static_cast<std::size_t>(g.value_group_of[static_cast<std::size_t>(vnt)])];
    // (a keyed group's max counts its declared members too: it bounds no key's values)
    const std::uint32_t small = kg.max_count == 0 || !kg.distinct() ? kMaxDistinctItems : kg.max_count - 1;
    for (std::int32_t prod : g.by_lhs[static_cast<std::size_t>(vnt)]) {
      const auto pr = static_cast<std::uint32_t>(prod);
      const Symbol only = g.rhs_flat[g.rhs_begin[pr]];
      if (g.rhs_len(pr) != 1 || !only.is_terminal() || g.terminals[static_cast<std::size_t>(only.index())].is_token)
        continue;
      const auto ti = static_cast<std::size_t>(only.index());
      if (table_[ti] != nullptr && table_[ti]->small >= small) continue;
      auto iv = std::make_unique<ItemValues>(analyse_item_values(*dfas[only.index()], kMaxDistinctItems + 1, small));
      if (!iv->ok || !iv->finite_somewhere) continue;
      // A token may close one item and open the next in a dead prefix (` "-` when "-" is held
      // and the item is ^[-_a]$; `,1` when 1 and 10..19 are held under maximum 19): mark each
      // byte that may come before an item followed by one the item may start with.
      {
        const Dfa& d = *dfas[only.index()];
        const ByteSet& before = precede[static_cast<std::size_t>(vnt)];
        for (int c = 0; c < 256; ++c) {
          if (d.next(d.start(), static_cast<std::uint8_t>(c)) < 0) continue;
          for (int b = 0; b < 256; ++b)
            if (has(before, b)) then[static_cast<std::size_t>(b) * 256 + static_cast<std::size_t>(c)] = true;
        }
      }
      table_[ti] = iv.get();
      owned_.push_back(std::move(iv));
      counted_ = true;
    }
  }
  for (std::uint32_t t = 0; t < vocab.size(); ++t) {
    const auto id = static_cast<std::int32_t>(t);
    if (vocab.is_special(id)) continue;
    const std::string_view bytes = vocab.bytes(id);
    std::size_t n = 0;
    // (a key may open at the token's start, the parser then before it, e.g. after `,`: a close
    // from the next byte on is one it may refuse)
    std::size_t open_from = !bytes.empty() && key_first[static_cast<std::uint8_t>(bytes[0])] ? 1 : bytes.size();
    bool open_close = false;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const auto b = static_cast<std::uint8_t>(bytes[i]);
      bool event = false;
      if (i + 1 == bytes.size()) {
        event = bytes.size() == 1 ? at_end[b] : end_pair[static_cast<std::size_t>(static_cast<std::uint8_t>(bytes[i - 1])) * 256 + b];
      } else {
        event = then[static_cast<std::size_t>(b) * 256 + static_cast<std::uint8_t>(bytes[i + 1])];
      }
      n += event ? 1 : 0;
      open_close = open_close || (event && i >= open_from);
      // (a key may start at i + 1: a close from there on is one it may refuse)
      if (i + 1 < bytes.size() && opens[static_cast<std::size_t>(b) * 256 + static_cast<std::uint8_t>(bytes[i + 1])])
        open_from = std::min(open_from, i + 1);
    }
    if (n >= 1) one_.push_back(id);
    if (n >= 2) two_.push_back(id);
    if (open_close) {
      open_close_.push_back(id);
      // The keys it may spell: from each place a key may open, to the next unescaped quote.
      std::vector<ValueHash> keys;
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        const bool at = i == 0 ? key_first[static_cast<std::uint8_t>(bytes[0])]
                               : opens[static_cast<std::size_t>(static_cast<std::uint8_t>(bytes[i - 1])) * 256 +
                                       static_cast<std::uint8_t>(bytes[i])];
        if (!at) continue;
        std::size_t j = i + 1;
        while (j < bytes.size() && bytes[j] != '"') j += bytes[j] == '\\' ? 2 : 1;
        if (j < bytes.size()) keys.push_back(value_hash(bytes.substr(i, j + 1 - i)));
      }
      open_close_keys_.push_back(std::move(keys));
    }
  }
  keys_only_ = keys_only_ && keys_;
  is_two_.assign(vocab.size(), false);
  for (std::int32_t t : two_) is_two_[static_cast<std::size_t>(t)] = true;
}

void DistinctCorrection::apply(EarleyParser& p, const Vocabulary& vocab, std::uint32_t* row) const {
  // With no value remembered by an open group, only a token that closes two items can hold a
  // duplicate. Where the groups are is only known for items that read terminals only: otherwise any
  // value remembered anywhere counts.
  bool remembered = false;
  if (simple_) {
    remembered = p.open_values();
  } else {
    for (const ValueSets::Entry& e : p.values().entries) remembered = remembered || e.value.known();
  }
  // With items of finitely many values, a token that closes one item may open the next in a
  // dead prefix: every token with a close or an opening quote is a candidate (one_), and so
  // are those that take an open item to a dead prefix (dead_prefix_tokens).
  const std::vector<std::int32_t>& base = remembered || counted_ ? one_ : two_;
  std::vector<std::int32_t> extra;
  if (keys_ && !remembered) {
    // A key opened and closed inside the token can only be refused when it spells a value some
    // group holds: only those tokens are replayed (an unknown spelling: always).
    struct Hash {
      std::size_t operator()(const ValueHash& v) const { return static_cast<std::size_t>(v.h1 ^ (v.h2 * 0x9E3779B97F4A7C15ull)); }
    };
    std::unordered_set<ValueHash, Hash> held;
    for (const ValueSets::Entry& e : p.values().entries)
      if (e.value.known()) held.insert(e.value);
    for (std::size_t i = 0; !held.empty() && i < open_close_.size(); ++i) {
      bool maybe = false;
      for (const ValueHash& v : open_close_keys_[i]) maybe = maybe || !v.known() || held.count(v) != 0;
      if (maybe) extra.push_back(open_close_[i]);
    }
  }
  if (counted_ && remembered) {
    for (std::size_t i = p.cur_begin(); i < p.cur_end(); ++i) {
      const Item& it = p.item(i);
      const std::int32_t t = p.scanning_terminal(it);
      if (t < 0 || it.dstate < 0 || table_[static_cast<std::size_t>(t)] == nullptr) continue;
      if (p.grammar().value_group_of[static_cast<std::size_t>(p.grammar().productions[it.prod].lhs)] < 0) continue;
      dead_prefix_tokens(p, it, t, vocab, row, extra);
    }
  }
  // Keys open at the token's start in a grammar whose only remembered values are keys (no
  // %distinct group, no counted key): a token with one place a close could be refused can only
  // be refused there by the open key closing with a held value (another key would first need
  // this one closed: a second place). That is read directly, the key's automaton run over the
  // token and the text it closes with looked up, instead of replaying the token.
  struct OpenKey {
    const Dfa* d;
    std::int32_t state;
    std::string text;
    std::vector<std::uint32_t> held;
  };
  std::vector<OpenKey> open;
  bool direct = keys_only_ && remembered && !counted_;
  for (std::size_t i = p.cur_begin(); direct && i < p.cur_end(); ++i) {
    const Item& it = p.item(i);
    if (p.grammar().value_group_of[static_cast<std::size_t>(p.grammar().productions[it.prod].lhs)] < 0) continue;
    const std::int32_t t = p.scanning_terminal(it);
    if (t < 0 || it.dstate < 0) continue;
    OpenKey k{p.dfas()[t], it.dstate, {}, {}};
    direct = p.item_text(it.origin, k.text);
    p.waiting_value_sets(it, k.held);
    open.push_back(std::move(k));
  }
  direct = direct && !open.empty();
  auto may_refuse = [&](std::int32_t t) {
    const std::string_view bytes = vocab.bytes(t);
    for (const OpenKey& k : open) {
      std::int32_t st = k.state;
      for (std::size_t i = 0; i < bytes.size() && st >= 0; ++i) {
        st = k.d->next(st, static_cast<std::uint8_t>(bytes[i]));
        if (st < 0 || !k.d->accepting(st)) continue;
        const ValueHash v = value_hash(k.text + std::string(bytes.substr(0, i + 1)));
        for (std::uint32_t s : k.held)
          if (p.values().has(s, v)) return true;
      }
    }
    return false;
  };
  const bool was = p.check_values();
  p.set_check_values(true);
  const std::size_t mark = p.num_sets();
  const std::size_t vs = p.values().size();
  for (std::size_t k = 0; k < base.size() + extra.size(); ++k) {
    const std::int32_t t = k < base.size() ? base[k] : extra[k - base.size()];
    if (!(row[static_cast<std::size_t>(t) >> 5] >> (t & 31) & 1u)) continue;
    if (direct && k < base.size() && !is_two_[static_cast<std::size_t>(t)] && !may_refuse(t)) continue;
    bool ok = true;
    try {
      for (char c : vocab.bytes(t))
        if (!p.push_byte(static_cast<std::uint8_t>(c))) {
          ok = false;
          break;
        }
    } catch (...) {
      p.pop_to(mark);
      p.values().truncate(vs);
      p.set_check_values(was);
      throw;
    }
    p.pop_to(mark);
    p.values().truncate(vs);
    if (!ok) row[static_cast<std::size_t>(t) >> 5] &= ~(1u << (t & 31));
  }
  p.set_check_values(was);
}

}  // namespace corral

namespace corral {

void DistinctCorrection::dead_prefix_tokens(EarleyParser& p, const Item& it, std::int32_t t, const Vocabulary& vocab,
                                            const std::uint32_t* row, std::vector<std::int32_t>& out) const {
  // A walk of the vocabulary trie from the item's state. A dead prefix's value begins some held
  // value, so the walk follows only bytes that keep the item's decoded text so far a prefix of
  // one of the values the (first) group holds: their texts, sorted, narrowed to a range per
  // byte (an escape narrows it when it ends). It also skips the subtrees with no token long
  // enough to reach a state that may be a dead prefix (ItemValues::dist). A token ending in
  // such a state is checked directly (prefix_dead) and, when it is dead for this item, kept
  // for the replay, which asks the whole parser.
  const ItemValues& iv = *table_[static_cast<std::size_t>(t)];
  const Dfa& d = *p.dfas()[t];
  std::vector<std::uint32_t> sets;
  p.waiting_value_sets(it, sets);
  std::uint32_t held = 0;
  for (std::uint32_t s : sets) held = std::max(held, p.values().count(s));
  if (held == 0) return;
  std::string text;
  if (!p.item_text(it.origin, text)) return;
  std::vector<std::string_view> vals;
  for (std::uint32_t e = sets[0]; e != 0; e = p.values().entries[e].parent) vals.push_back(p.values().text(e));
  std::sort(vals.begin(), vals.end());
  // The decoded text so far, and where an unfinished escape begins (npos: none).
  std::string dec;
  std::size_t esc = std::string::npos;
  auto decode_escape = [&](std::string_view spelled, std::string& into) {
    std::string q = "\"";
    q.append(spelled);
    q.push_back('"');
    return json_string_value(q, into);
  };
  std::int32_t st = d.start();
  for (std::size_t k = 0; k < text.size() && st >= 0; ++k) {
    const std::int32_t n = d.next(st, static_cast<std::uint8_t>(text[k]));
    if (n < 0) return;
    if (iv.adds(st, n) == 1 && esc == std::string::npos) {
      dec.push_back(text[k]);
    } else if (iv.adds(st, n) == 1) {
      if (!decode_escape(std::string_view(text).substr(esc, k + 1 - esc), dec)) return;
      esc = std::string::npos;
    } else if (k > 0 && esc == std::string::npos && text[k] == '\\') {
      esc = k;
    }
    st = n;
  }
  // The held values that begin with `dec`, narrowed by `byte` at position `at`.
  struct Range {
    std::uint32_t lo, hi;
  };
  auto narrow = [&](Range r, std::size_t at, char byte) {
    auto first = std::lower_bound(vals.begin() + r.lo, vals.begin() + r.hi, byte, [&](std::string_view v, char b) {
      return v.size() <= at || static_cast<std::uint8_t>(v[at]) < static_cast<std::uint8_t>(b);
    });
    auto last = std::upper_bound(first, vals.begin() + r.hi, byte, [&](char b, std::string_view v) {
      return static_cast<std::uint8_t>(b) < static_cast<std::uint8_t>(v[at]);
    });
    return Range{static_cast<std::uint32_t>(first - vals.begin()), static_cast<std::uint32_t>(last - vals.begin())};
  };
  Range all{0, static_cast<std::uint32_t>(vals.size())};
  // (Decimal items: a held value may be spelled otherwise than its prefix, 5 as "5.0": no
  // narrowing by text; their dead prefixes are few states, which `dist` finds.)
  const bool by_text = !iv.decimal;
  for (std::size_t k = 0; by_text && k < dec.size() && all.lo < all.hi; ++k) all = narrow(all, k, dec[k]);
  if (all.lo >= all.hi) return;
  const std::size_t base = text.size();
  const TokenTrie& trie = vocab.trie();
  struct Frame {
    std::uint32_t node;
    std::int32_t state;
    Range range;
    std::uint32_t at;   // decoded bytes matched
    std::uint32_t esc;  // where an unfinished escape begins in `text` (UINT32_MAX: none)
  };
  const auto no_esc = std::numeric_limits<std::uint32_t>::max();
  std::vector<Frame> stack{{0, it.dstate, all, static_cast<std::uint32_t>(dec.size()),
                            esc == std::string::npos ? no_esc : static_cast<std::uint32_t>(esc)}};
  std::string one;
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    const std::uint32_t depth = trie.depth(f.node);
    text.resize(base + depth);
    if (depth > 0) text[base + depth - 1] = static_cast<char>(trie.byte(f.node));
    if (depth > 0 && trie.tokens_begin(f.node) != trie.tokens_end(f.node) && iv.maybe_dead(f.state, held)) {
      bool any = false;
      for (const std::int32_t* k = trie.tokens_begin(f.node); k != trie.tokens_end(f.node) && !any; ++k)
        any = (row[static_cast<std::size_t>(*k) >> 5] >> (*k & 31) & 1u) != 0;
      if (any && prefix_dead(d, iv, f.state, text, p.values(), sets))
        out.insert(out.end(), trie.tokens_begin(f.node), trie.tokens_end(f.node));
    }
    for (std::uint32_t c = f.node + 1; c < trie.subtree_end(f.node); c = trie.subtree_end(c)) {
      const std::int32_t s = d.next(f.state, trie.byte(c));
      if (s < 0 || iv.closed(s)) continue;  // (a close: one_)
      const std::uint32_t reach = trie.max_token_depth(c);
      if (reach < trie.depth(c) || reach - trie.depth(c) < iv.dist[static_cast<std::size_t>(s)]) continue;
      Frame next{c, s, f.range, f.at, f.esc};
      const char byte = static_cast<char>(trie.byte(c));
      if (!by_text) {
        // (no narrowing)
      } else if (iv.adds(f.state, s) == 1 && f.esc == no_esc) {  // a raw byte: one decoded byte
        next.range = narrow(f.range, f.at, byte);
        ++next.at;
      } else if (iv.adds(f.state, s) == 1) {  // an escape ends here
        text.resize(base + trie.depth(c));
        text[base + trie.depth(c) - 1] = byte;
        one.clear();
        if (!decode_escape(std::string_view(text).substr(f.esc), one)) continue;
        for (char b : one) {
          if (next.range.lo >= next.range.hi) break;
          next.range = narrow(next.range, next.at++, b);
        }
        next.esc = no_esc;
      } else if (f.esc == no_esc && byte == '\\') {
        next.esc = static_cast<std::uint32_t>(base + trie.depth(c) - 1);
      }
      if (next.range.lo >= next.range.hi) continue;  // begins no held value
      stack.push_back(next);
    }
  }
}

}  // namespace corral
