// json_string.cpp — decoded-text regex → encoded JSON string body regex (see json_string.hpp).
//
// One decoded character of a set S is spelled as
//   raw                          S − {`"`, `\`, U+0000..U+001F}
//   | `\` ( short               members of S among " \ / b f n r t
//         | `u` ( hex4(U ∩ BMP)                                  — \uXXXX
//               | hex4(highs) `\u` hex4(lows) ... ) )            — surrogate pairs for U ∩ astral
// where U, the characters spelled with `\u`, is all of S in JsonEscapes::Any. The canonical
// mode (json.dumps(s, ensure_ascii=False)) is the same construction with fewer choices: no `\/`,
// U = S's controls that have no short escape, and hex digits in lower case only. Since every
// character then has exactly one spelling, the raw, short and `\u` parts never overlap.
// hex4(V) is the exact regex for a set V of 16-bit values written as 4 hex digits (either case):
// a trie over hex digit positions in which the digits whose remaining sets are equal share one
// branch (their digit classes merge), and a full remaining block is `[0-9A-Fa-f]{k}`. Astral
// members are grouped by the set of low surrogates that follows each high surrogate, so a range
// like [😀-🙏] or all of U+10000..U+10FFFF becomes a single `highs \u lows` branch.
#include "json_string.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "errors.hpp"
#include "utf8.hpp"

namespace corral {
namespace {

using Ranges = std::vector<CodepointRange>;

struct RangesLess {
  bool operator()(const Ranges& a, const Ranges& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(), [](const CodepointRange& x, const CodepointRange& y) {
          return x.lo != y.lo ? x.lo < y.lo : x.hi < y.hi;
        });
  }
};
struct HexKeyLess {
  bool operator()(const std::pair<int, Ranges>& a, const std::pair<int, Ranges>& b) const {
    return a.first != b.first ? a.first < b.first : RangesLess()(a.second, b.second);
  }
};

// The hex digit characters for the digit values in `mask` (bit d = digit d): lower case, plus
// upper case unless `lower_only` (Python's json writes `\u001f`, never `\u001F`).
CharSet hex_digit_class(std::uint32_t mask, bool lower_only) {
  CharSet cs;
  for (std::uint32_t d = 0; d < 16; ++d) {
    if (!(mask & (1u << d))) continue;
    if (d < 10) {
      cs.add('0' + d, '0' + d);
    } else {
      cs.add('a' + d - 10, 'a' + d - 10);
      if (!lower_only) cs.add('A' + d - 10, 'A' + d - 10);
    }
  }
  return cs;
}


// The characters JSON forbids raw inside a string: `"`, `\` and the C0 controls.
const CharSet& must_escape() {
  static const CharSet cs = [] {
    CharSet c = CharSet::range(0, 0x1F);
    c.add('"', '"');
    c.add('\\', '\\');
    return c;
  }();
  return cs;
}

// Short escapes: decoded character -> the letter after `\`.
struct ShortEscape {
  std::uint32_t cp;
  char letter;
};
constexpr ShortEscape kShort[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {0x08, 'b'},
                                  {0x0C, 'f'}, {0x0A, 'n'}, {0x0D, 'r'}, {0x09, 't'}};

NodePtr lit(char c) { return make_chars(CharSet::single(static_cast<std::uint8_t>(c))); }

// The process-wide memo of JsonStringBuilder::shared_chars, per spelling mode.
struct CharsMemo {
  std::mutex mu;
  std::map<Ranges, std::pair<NodePtr, std::uint64_t>, RangesLess> by_mode[2];
};
CharsMemo& chars_memo() {
  static CharsMemo m;
  return m;
}

class JsonStringBuilder {
 public:
  JsonStringBuilder(const Limits& limits, JsonEscapes escapes)
      : limits_(limits), canonical_(escapes == JsonEscapes::Canonical) {}

  NodePtr transform(const NodePtr& n) {
    auto it = node_memo_.find(n.get());
    if (it != node_memo_.end()) return it->second;
    NodePtr out;
    switch (n->kind) {
      case NodeKind::Empty:
        out = n;
        break;
      case NodeKind::Chars:
        out = chars(n->chars);
        break;
      case NodeKind::Concat:
      case NodeKind::Alt: {
        std::vector<NodePtr> kids;
        kids.reserve(n->kids.size());
        for (const auto& k : n->kids) kids.push_back(transform(k));
        out = n->kind == NodeKind::Concat ? make_concat(std::move(kids), n->pos)
                                          : make_alt(std::move(kids), n->pos);
        break;
      }
      case NodeKind::Repeat:
        out = make_repeat(transform(n->kids[0]), n->min, n->max, n->pos);
        break;
      // Exact because decoding is a function: the encodings of A ∩ B are the encodings of A
      // that are also encodings of B (likewise for A − B). This holds in both modes (the
      // canonical encodings are a subset of all encodings, each decoding to one string).
      case NodeKind::Intersect: {
        std::vector<NodePtr> kids;
        for (const auto& k : n->kids) kids.push_back(transform(k));
        out = make_intersect(std::move(kids), n->pos);
        break;
      }
      case NodeKind::Difference:
        out = make_difference(transform(n->kids[0]), transform(n->kids[1]), n->pos);
        break;
      case NodeKind::RuleRef:
        CORRAL_CHECK(false, "json_string_content: the tree contains a rule reference");
    }
    node_memo_.emplace(n.get(), out);
    return out;
  }

  NodePtr chars(const CharSet& s) {
    std::pair<NodePtr, std::uint64_t> built = shared_chars(s);
    if (built.second > limits_.max_nfa_states)
      throw LimitExceeded("max_nfa_states", built.second, limits_.max_nfa_states,
                          "the JSON spellings of one character class alone need too many NFA states");
    return built.first;
  }

 private:
  NodePtr build_chars(const CharSet& s) {
    if (s.empty()) return make_chars(CharSet());
    std::vector<NodePtr> top;
    // Raw: everything but the characters JSON requires to be escaped (in both modes).
    CharSet raw = charset_minus(s, must_escape());
    if (!raw.empty()) top.push_back(make_chars(raw));

    std::vector<NodePtr> after_backslash;
    CharSet short_cs, short_decoded;
    for (const auto& e : kShort) {
      // `/` is never escaped canonically: it may be written raw.
      if (!s.contains(e.cp) || (canonical_ && e.cp == '/')) continue;
      short_cs.add(static_cast<std::uint8_t>(e.letter), static_cast<std::uint8_t>(e.letter));
      short_decoded.add(e.cp, e.cp);
    }
    if (!short_cs.empty()) after_backslash.push_back(make_chars(short_cs));

    std::vector<NodePtr> after_u;
    Ranges bmp, astral;
    const CharSet u = u_escaped(s, short_decoded);  // named: ranges() of a temporary would dangle
    for (const auto& r : u.ranges()) {
      if (r.lo <= 0xFFFF) bmp.push_back({r.lo, std::min<std::uint32_t>(r.hi, 0xFFFF)});
      if (r.hi >= 0x10000) astral.push_back({std::max<std::uint32_t>(r.lo, 0x10000), r.hi});
    }
    if (NodePtr h = hex(bmp, 4)) after_u.push_back(h);
    for (NodePtr& p : surrogate_pairs(astral)) after_u.push_back(std::move(p));
    if (!after_u.empty()) after_backslash.push_back(make_concat({lit('u'), make_alt(std::move(after_u))}));
    if (!after_backslash.empty())
      top.push_back(make_concat({lit('\\'), make_alt(std::move(after_backslash))}));
    return make_alt(std::move(top));
  }

  // The members of `s` that are spelled `\uXXXX` (or as a surrogate pair): all of them when any
  // spelling is allowed; canonically only the controls without a short escape (`short_decoded`).
  CharSet u_escaped(const CharSet& s, const CharSet& short_decoded) const {
    if (!canonical_) return s;
    return charset_minus(charset_intersect(s, CharSet::range(0, 0x1F)), short_decoded);
  }

  CharSet digits(std::uint32_t mask) const { return hex_digit_class(mask, canonical_); }

  // `[0-9A-Fa-f]{n}` (`[0-9a-f]{n}` canonically), shared per n.
  NodePtr any_hex(int n) {
    NodePtr& slot = any_hex_[n];
    if (!slot) slot = make_repeat(make_chars(digits(0xFFFF)), static_cast<std::uint32_t>(n),
                                  static_cast<std::uint32_t>(n));
    return slot;
  }

  // Exact regex for the values `rs` (sorted, disjoint, within [0, 16^n)) written as n hex digits;
  // null for an empty set.
  NodePtr hex(const Ranges& rs, int n) {
    if (rs.empty()) return nullptr;
    const std::uint32_t size = 1u << (4 * n);
    if (rs.size() == 1 && rs[0].lo == 0 && rs[0].hi == size - 1) return any_hex(n);
    auto key = std::make_pair(n, rs);
    auto it = hex_memo_.find(key);
    if (it != hex_memo_.end()) return it->second;
    NodePtr out;
    if (n == 1) {
      std::uint32_t mask = 0;
      for (const auto& r : rs)
        for (std::uint32_t d = r.lo; d <= r.hi; ++d) mask |= 1u << d;
      out = make_chars(digits(mask));
    } else {
      const std::uint32_t sub = size / 16;
      Ranges parts[16];
      for (const auto& r : rs) {
        for (std::uint32_t d = r.lo / sub; d <= r.hi / sub; ++d) {
          const std::uint32_t base = d * sub;
          parts[d].push_back({std::max(r.lo, base) - base, std::min(r.hi, base + sub - 1) - base});
        }
      }
      // Group the leading digits whose remaining sets are equal (first-seen order).
      std::vector<std::pair<std::uint32_t, const Ranges*>> groups;  // digit mask, rest
      for (std::uint32_t d = 0; d < 16; ++d) {
        if (parts[d].empty()) continue;
        bool found = false;
        for (auto& g : groups)
          if (*g.second == parts[d]) {
            g.first |= 1u << d;
            found = true;
            break;
          }
        if (!found) groups.push_back({1u << d, &parts[d]});
      }
      std::vector<NodePtr> alts;
      for (const auto& g : groups)
        alts.push_back(make_concat({make_chars(digits(g.first)), hex(*g.second, n - 1)}));
      out = make_alt(std::move(alts));
    }
    hex_memo_.emplace(std::move(key), out);
    return out;
  }

  // `hex4(highs) \u hex4(lows)` branches (after the first `\u`) for astral ranges.
  std::vector<NodePtr> surrogate_pairs(const Ranges& astral) {
    std::vector<NodePtr> out;
    if (astral.empty()) return out;
    // Per high surrogate index h (0..1023), in increasing h, the low surrogate indices
    // (0..1023) that follow it, grouped by that set. A range covers whole blocks of 1024 in
    // its middle: those high surrogates are added as one run (a class such as "any character
    // but these few" spans all 1024, and is spelled once per class).
    std::map<Ranges, std::size_t, RangesLess> group_of;  // low set -> index in groups
    std::vector<std::pair<Ranges, const Ranges*>> groups;  // high code units, low set
    auto add = [&](std::uint32_t h_lo, std::uint32_t h_hi, const Ranges& lows) {
      auto [it, fresh] = group_of.emplace(lows, groups.size());
      if (fresh) groups.push_back({Ranges{}, &it->first});
      Ranges& highs = groups[it->second].first;
      if (!highs.empty() && highs.back().hi + 1 == 0xD800 + h_lo)
        highs.back().hi = 0xD800 + h_hi;
      else
        highs.push_back({0xD800 + h_lo, 0xD800 + h_hi});
    };
    constexpr std::uint32_t kNone = 0xFFFFFFFFu;
    std::uint32_t cur_h = kNone;  // the high index whose lows `cur` collects
    Ranges cur;
    auto flush = [&] {
      if (cur_h != kNone) add(cur_h, cur_h, cur);
      cur.clear();
      cur_h = kNone;
    };
    for (const auto& r : astral) {
      const std::uint32_t vlo = r.lo - 0x10000, vhi = r.hi - 0x10000;
      const std::uint32_t hlo = vlo >> 10, hhi = vhi >> 10;
      if (cur_h != hlo) flush(), cur_h = hlo;
      if (hlo == hhi) {
        cur.push_back({vlo - (hlo << 10), vhi - (hlo << 10)});
        continue;
      }
      cur.push_back({vlo - (hlo << 10), 0x3FF});
      flush();
      if (hhi > hlo + 1) add(hlo + 1, hhi - 1, Ranges{{0, 0x3FF}});
      cur_h = hhi;
      cur.push_back({0, vhi - (hhi << 10)});
    }
    flush();
    for (const auto& [highs, lows] : groups) {
      Ranges low_units;
      for (const auto& r : *lows) low_units.push_back({0xDC00 + r.lo, 0xDC00 + r.hi});
      out.push_back(make_concat({hex(highs, 4), lit('\\'), lit('u'), hex(low_units, 4)}));
    }
    return out;
  }

  // The spellings of one character class and their NFA size, from the process-wide memo: the
  // same classes (any character, a pattern's [a-z0-9_-], ...) recur in every `/re/j` of every
  // grammar, and building one class's `\uXXXX` trie and surrogate pairs costs far more than the
  // rest of the transform. Trees are immutable, so sharing them is safe; the memo holds at most
  // kCharsMemoEntries classes per mode (it is emptied when full).
  std::pair<NodePtr, std::uint64_t> shared_chars(const CharSet& s) {
    static constexpr std::size_t kCharsMemoEntries = 4096;
    CharsMemo& memo = chars_memo();
    std::mutex& mu = memo.mu;
    auto& m = memo.by_mode[canonical_ ? 1 : 0];
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = m.find(s.ranges());
      if (it != m.end()) return it->second;
    }
    NodePtr out = build_chars(s);  // outside the lock: equal inputs give equal trees
    std::pair<NodePtr, std::uint64_t> entry{out, estimate_nfa_size(out)};
    std::lock_guard<std::mutex> lock(mu);
    if (m.size() >= kCharsMemoEntries) m.clear();
    return m.emplace(s.ranges(), std::move(entry)).first->second;
  }

  const Limits& limits_;
  const bool canonical_;  // JsonEscapes::Canonical; the memos below hold this mode's trees only
  std::unordered_map<const Node*, NodePtr> node_memo_;
  std::map<std::pair<int, Ranges>, NodePtr, HexKeyLess> hex_memo_;
  NodePtr any_hex_[5];
};

}  // namespace

NodePtr json_string_content(const NodePtr& decoded, const Limits& limits, JsonEscapes escapes) {
  JsonStringBuilder b(limits, escapes);
  return b.transform(decoded);
}

void clear_json_string_memo() {
  CharsMemo& m = chars_memo();
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto& by : m.by_mode) by.clear();
}

NodePtr json_string_chars(const CharSet& cs, JsonEscapes escapes) {
  Limits unlimited;
  unlimited.max_nfa_states = 0xFFFFFFFFu;
  JsonStringBuilder b(unlimited, escapes);
  return b.chars(cs);
}

NodePtr json_string_any_char(JsonEscapes escapes) {
  static const NodePtr any = json_string_chars(CharSet::any(), JsonEscapes::Any);
  static const NodePtr canonical = json_string_chars(CharSet::any(), JsonEscapes::Canonical);
  return escapes == JsonEscapes::Canonical ? canonical : any;
}

}  // namespace corral
