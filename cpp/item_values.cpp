// item_values.cpp — see item_values.hpp.
#include "item_values.hpp"

#include <algorithm>
#include <deque>

namespace corral {
namespace {

// Decoder contexts of a JSON string read byte by byte.
enum Ctx : std::uint8_t {
  kUnset,
  kOpen,  // before the opening quote
  kB,     // between characters
  kR1,    // inside a raw UTF-8 character, 1..3 continuation bytes to go
  kR2,
  kR3,
  kE,     // after `\`
  kU0,    // after `\u` and 0..3 hex digits (d: the first was d/D; h: a high surrogate so far)
  kU1,
  kU1d,
  kU2,
  kU2h,
  kU3,
  kU3h,
  kHS,    // after a high surrogate: `\u` and a low one must follow
  kHE,
  kHU0,
  kHU1,
  kEnd,   // after the closing quote
  kBad,
  kN,     // numeric items (canonical integers): inside the number, not a value yet ("-")
  kNA,    // ... a value (accepting: "-1"), which more digits may extend
};

bool is_hex(std::uint8_t b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

std::uint8_t step(std::uint8_t c, std::uint8_t b) {
  switch (c) {
    case kOpen: return b == '"' ? kB : kBad;
    case kB:
      if (b == '"') return kEnd;
      if (b == '\\') return kE;
      if (b >= 0x20 && b < 0x80) return kB;
      if (b >= 0xC2 && b <= 0xDF) return kR1;
      if (b >= 0xE0 && b <= 0xEF) return kR2;
      if (b >= 0xF0 && b <= 0xF4) return kR3;
      return kBad;
    case kR1: return b >= 0x80 && b <= 0xBF ? kB : kBad;
    case kR2: return b >= 0x80 && b <= 0xBF ? kR1 : kBad;
    case kR3: return b >= 0x80 && b <= 0xBF ? kR2 : kBad;
    case kE:
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') return kB;
      return b == 'u' ? kU0 : kBad;
    case kU0: return b == 'd' || b == 'D' ? kU1d : is_hex(b) ? kU1 : kBad;
    case kU1d:
      if ((b >= '8' && b <= '9') || (b >= 'a' && b <= 'b') || (b >= 'A' && b <= 'B')) return kU2h;
      return is_hex(b) ? kU2 : kBad;
    case kU1: return is_hex(b) ? kU2 : kBad;
    case kU2: return is_hex(b) ? kU3 : kBad;
    case kU2h: return is_hex(b) ? kU3h : kBad;
    case kU3: return is_hex(b) ? kB : kBad;
    case kU3h: return is_hex(b) ? kHS : kBad;
    case kHS: return b == '\\' ? kHE : kBad;
    case kHE: return b == 'u' ? kHU0 : kBad;
    case kHU0: return b == 'd' || b == 'D' ? kHU1 : kBad;
    // (then two hex digits, as after `\u00`: the minimal automaton shares those states)
    case kHU1: return (b >= 'c' && b <= 'f') || (b >= 'C' && b <= 'F') ? kU2 : kBad;
    default: return kBad;
  }
}

bool raw_context(std::uint8_t c) { return c == kB || c == kR1 || c == kR2 || c == kR3 || c == kN || c == kNA; }

// The canonical spellings of the characters that have no raw one (json.dumps, ensure_ascii=False).
const std::vector<std::string>& canonical_escapes() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = {"\\\"", "\\\\", "\\b", "\\f", "\\n", "\\r", "\\t"};
    const char* hex = "0123456789abcdef";
    for (int c = 0; c < 0x20; ++c) {
      if (c == 0x08 || c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D) continue;
      v.push_back(std::string("\\u00") + hex[c >> 4] + hex[c & 15]);
    }
    return v;
  }();
  return all;
}

std::int32_t walk(const Dfa& d, std::int32_t s, std::string_view bytes) {
  for (char ch : bytes) {
    if (s < 0) return s;
    s = d.next(s, static_cast<std::uint8_t>(ch));
  }
  return s;
}

std::uint32_t add_capped(std::uint32_t a, std::uint64_t b, std::uint32_t cap) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(cap, a + b));
}

// The canonical integers -?(0|[1-9][0-9]*) without -0, byte by byte: 0 start, 1 after '-',
// 2 after a leading 0 (no digit may follow), 3 after a nonzero leading digit; -1: not canonical.
int canonical_step(int c, std::uint8_t b) {
  const bool digit = b >= '0' && b <= '9';
  switch (c) {
    case 0: return b == '-' ? 1 : b == '0' ? 2 : digit ? 3 : -1;
    case 1: return digit && b != '0' ? 3 : -1;
    case 3: return digit ? 3 : -1;
    default: return -1;
  }
}

// Numeric items: every string of the language is a canonical integer (checked on the product
// with canonical_step), so distinct strings are distinct values and counting values is counting
// accepted strings. Fills iv.ctx / count / total; false when the language is not of that kind.
bool analyse_numeric(const Dfa& d, ItemValues& iv) {
  const std::uint32_t n = d.num_states();
  iv.ctx.assign(n, kUnset);
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> out(n);  // (target, bytes)
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(n) * 4, 0);        // (state, canonical state)
  std::vector<std::pair<std::int32_t, int>> todo{{d.start(), 0}};
  seen[static_cast<std::size_t>(d.start()) * 4] = 1;
  iv.ctx[static_cast<std::size_t>(d.start())] = kN;
  while (!todo.empty()) {
    const auto [s, c] = todo.back();
    todo.pop_back();
    const bool fresh = out[static_cast<std::size_t>(s)].empty();
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(s, static_cast<std::uint8_t>(b));
      if (t < 0) continue;
      const int nc = canonical_step(c, static_cast<std::uint8_t>(b));
      if (nc < 0 || (d.accepting(t) && nc < 2)) return false;  // not a canonical integer
      const auto ti = static_cast<std::size_t>(t);
      iv.ctx[ti] = d.accepting(t) ? kNA : kN;
      if (fresh) out[static_cast<std::size_t>(s)].emplace_back(static_cast<std::uint32_t>(t), 1);
      if (!seen[ti * 4 + static_cast<std::size_t>(nc)]) {
        seen[ti * 4 + static_cast<std::size_t>(nc)] = 1;
        todo.emplace_back(t, nc);
      }
    }
  }
  // Counts: [accepting] + the counts after each byte (canonical: one value per string), by
  // Kahn's algorithm; a state that reaches a cycle has infinitely many (capped).
  iv.count.assign(n, 0);
  std::vector<std::vector<std::uint32_t>> rev(n);
  std::vector<std::uint32_t> left(n, 0), ready;
  for (std::uint32_t s = 0; s < n; ++s) {
    if (iv.ctx[s] == kUnset) continue;
    left[s] = static_cast<std::uint32_t>(out[s].size());
    for (const auto& e : out[s]) rev[e.first].push_back(s);
    if (left[s] == 0) ready.push_back(s);
  }
  std::vector<char> done(n, 0);
  while (!ready.empty()) {
    const std::uint32_t s = ready.back();
    ready.pop_back();
    std::uint32_t v = iv.ctx[s] == kNA ? 1 : 0;
    for (const auto& e : out[s]) v = add_capped(v, iv.count[e.first], iv.cap);
    iv.count[s] = v;
    done[s] = 1;
    for (std::uint32_t p : rev[s])
      if (--left[p] == 0) ready.push_back(p);
  }
  for (std::uint32_t s = 0; s < n; ++s)
    if (iv.ctx[s] != kUnset && !done[s]) iv.count[s] = iv.cap;
  iv.total = iv.count[static_cast<std::size_t>(d.start())];
  iv.numeric = true;
  return true;
}

// Plain decimals -?(0|[1-9][0-9]*)(\.[0-9]+)? byte by byte (decimal items): 0 start, 1 after
// '-', 2 after a leading 0, 3 in nonzero integer digits, 4 after '.', 5 in fraction digits;
// -1: not a plain decimal. Accepting: 2, 3, 5.
int decimal_step(int c, std::uint8_t b) {
  const bool digit = b >= '0' && b <= '9';
  switch (c) {
    case 0: return b == '-' ? 1 : b == '0' ? 2 : digit ? 3 : -1;
    case 1: return b == '0' ? 2 : digit ? 3 : -1;
    case 2: return b == '.' ? 4 : -1;
    case 3: return digit ? 3 : b == '.' ? 4 : -1;
    case 4: return digit ? 5 : -1;
    case 5: return digit ? 5 : -1;
    default: return -1;
  }
}
constexpr int kDecimalContexts = 6;
bool decimal_accepting(int c) { return c == 2 || c == 3 || c == 5; }

// The spellings of one decimal value that may follow a text in decimal context `c` once `w0`
// (a completion) is appended: a tiny automaton, as a transition function over its states.
//   zero value from the start or after '-':  -?0(\.0+)?   (the sign only from the start)
//   else: A then, when the value has fraction digits F (trailing zeros trimmed), '.' F 0*,
//   otherwise (\.0+)? -- where A is the rest of the integer part (and sign); in a fraction
//   context: F 0* directly.
struct Spellings {
  std::string head;    // exact bytes first (sign and integer digits still to come)
  bool minus_optional = false;  // zero from the start: "-" may come first
  bool in_fraction = false;     // the text is already past '.'
  std::string frac;    // fraction digits of the value still to come (trimmed)
  // Cursor: 0..head.size() inside head (with the optional minus: -1 before it), then
  // phase 1 (after head: '.' may come), 2 (after '.': frac), 3 (zeros).
  struct Cursor {
    int pos = 0;     // in head (phase 0) or in frac (phase 2)
    int phase = 0;
    bool operator==(const Cursor& o) const { return pos == o.pos && phase == o.phase; }
  };
  Cursor start() const {
    if (in_fraction) return Cursor{0, 2};
    return Cursor{minus_optional ? -1 : 0, 0};
  }
  // The cursor after byte b, or phase -1 when b leaves the spellings.
  Cursor step(Cursor c, std::uint8_t b) const {
    if (c.phase == 0) {
      if (c.pos == -1) {
        if (b == '-') return Cursor{0, 0};
        c.pos = 0;
      }
      if (c.pos < static_cast<int>(head.size())) {
        return static_cast<std::uint8_t>(head[static_cast<std::size_t>(c.pos)]) == b ? Cursor{c.pos + 1, 0} : Cursor{0, -1};
      }
      c.phase = 1;
    }
    if (c.phase == 1) return b == '.' ? Cursor{0, 2} : Cursor{0, -1};
    if (c.phase == 2 && c.pos < static_cast<int>(frac.size()))
      return static_cast<std::uint8_t>(frac[static_cast<std::size_t>(c.pos)]) == b ? Cursor{c.pos + 1, 2} : Cursor{0, -1};
    return b == '0' ? Cursor{c.pos, 3} : Cursor{0, -1};
  }
  // May the text end here (a complete spelling; the item automaton decides about "5.")?
  bool complete(Cursor c) const {
    if (c.phase == 0) return c.pos >= 0 && c.pos == static_cast<int>(head.size()) && frac.empty() && !in_fraction;
    if (c.phase == 1) return frac.empty();
    return c.pos >= static_cast<int>(frac.size());
  }
};

// The spellings after a text in context `c` completed by `w0` (an accepted completion).
Spellings spellings_of(int c, const std::string& w0) {
  Spellings sp;
  // Split w0 into what precedes '.', and the fraction digits.
  const std::size_t dot = w0.find('.');
  std::string before = dot == std::string::npos ? w0 : w0.substr(0, dot);
  std::string frac = dot == std::string::npos ? std::string() : w0.substr(dot + 1);
  if (c == 4 || c == 5) {  // already in the fraction: w0 is fraction digits only
    frac = w0;
    before.clear();
    sp.in_fraction = true;
  }
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  sp.frac = frac;
  const bool zero = frac.empty() && (before == "0" || before == "-0");
  if ((c == 0 || c == 1) && zero) {
    sp.head = "0";
    sp.minus_optional = c == 0;
    return sp;
  }
  sp.head = before;
  return sp;
}

// Decimal items: every string is a plain decimal (checked on the product with decimal_step),
// compared as exact decimals. Their values after a prefix are one (the prefix is pinned:
// "5" under maximum 5, "-" under minimum 0, "0." under maximum 0) or infinitely many (decimals
// are dense and the converter's ranges are intervals); per state and decoder context, whether
// every completion spells the value of the shortest one (`single`).
bool analyse_decimal(const Dfa& d, ItemValues& iv) {
  const std::uint32_t n = d.num_states();
  if (n > 4096) return false;  // (bounds of hundreds of digits: not counted, the item stays reported)
  // Live states (some accepting state reachable): only their transitions are paths of items.
  std::vector<std::vector<std::uint32_t>> rev(n);
  for (std::uint32_t s = 0; s < n; ++s)
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b));
      if (t >= 0) rev[static_cast<std::size_t>(t)].push_back(s);
    }
  std::vector<char> live(n, 0);
  std::vector<std::uint32_t> todo;
  for (std::uint32_t s = 0; s < n; ++s)
    if (d.accepting(static_cast<std::int32_t>(s))) {
      live[s] = 1;
      todo.push_back(s);
    }
  // Shortest completion per live state: breadth first backwards from the accepting states.
  iv.shortest.assign(n, std::string());
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const std::uint32_t t = todo[i];
    for (std::uint32_t p : rev[t]) {
      if (live[p]) continue;
      for (int b = 0; b < 256; ++b)
        if (d.next(static_cast<std::int32_t>(p), static_cast<std::uint8_t>(b)) == static_cast<std::int32_t>(t)) {
          live[p] = 1;
          iv.shortest[p] = static_cast<char>(b) + iv.shortest[t];
          todo.push_back(p);
          break;
        }
    }
  }
  if (!live[static_cast<std::size_t>(d.start())]) return false;
  // Decoder contexts per state (a bit each), from the product with decimal_step.
  std::vector<std::uint8_t> ctxs(n, 0);
  std::vector<std::pair<std::int32_t, int>> stack{{d.start(), 0}};
  ctxs[static_cast<std::size_t>(d.start())] = 1;
  while (!stack.empty()) {
    const auto [s, c] = stack.back();
    stack.pop_back();
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(s, static_cast<std::uint8_t>(b));
      if (t < 0 || !live[static_cast<std::size_t>(t)]) continue;
      const int nc = decimal_step(c, static_cast<std::uint8_t>(b));
      if (nc < 0 || (d.accepting(t) && !decimal_accepting(nc))) return false;  // not a plain decimal
      std::uint8_t& m = ctxs[static_cast<std::size_t>(t)];
      if (!(m >> nc & 1)) {
        m = static_cast<std::uint8_t>(m | 1u << nc);
        stack.emplace_back(t, nc);
      }
    }
  }
  // Per state and context: does every live path from the state stay within the spellings of
  // the value its shortest completion gives (a product walk with the Spellings cursor)?
  iv.single.assign(n, 0);
  iv.ctx.assign(n, kUnset);
  iv.count.assign(n, 0);
  std::vector<std::pair<std::int32_t, Spellings::Cursor>> walk;
  std::vector<char> seen;
  for (std::uint32_t s = 0; s < n; ++s) {
    if (ctxs[s] == 0) continue;
    iv.ctx[s] = d.accepting(static_cast<std::int32_t>(s)) ? kNA : kN;
    for (int c = 0; c < kDecimalContexts; ++c) {
      if (!(ctxs[s] >> c & 1)) continue;
      const Spellings sp = spellings_of(c, iv.shortest[s]);
      // (cursor codes: phase 0 at pos -1..head, phase 2 at 0..frac, phase 3)
      const std::size_t h = sp.head.size() + 2, k = h + sp.frac.size() + 2;
      auto code = [&](std::int32_t q, Spellings::Cursor cur) {
        const std::size_t at = cur.phase == 0 ? static_cast<std::size_t>(cur.pos + 1)
                               : cur.phase == 2 ? h + static_cast<std::size_t>(cur.pos)
                                                : k - 1;
        return static_cast<std::size_t>(q) * k + at;
      };
      bool one = true;
      walk.assign(1, {static_cast<std::int32_t>(s), sp.start()});
      seen.assign(static_cast<std::size_t>(n) * k, 0);
      seen[code(walk[0].first, walk[0].second)] = 1;
      while (!walk.empty() && one) {
        const auto [q, cur] = walk.back();
        walk.pop_back();
        if (d.accepting(q) && !sp.complete(cur)) one = false;
        for (int b = 0; b < 256 && one; ++b) {
          const std::int32_t t = d.next(q, static_cast<std::uint8_t>(b));
          if (t < 0 || !live[static_cast<std::size_t>(t)]) continue;
          const Spellings::Cursor nc = sp.step(cur, static_cast<std::uint8_t>(b));
          if (nc.phase < 0) {
            one = false;
            break;
          }
          char& mark = seen[code(t, nc)];
          if (!mark) {
            mark = 1;
            walk.emplace_back(t, nc);
          }
        }
      }
      if (one) iv.single[s] = static_cast<std::uint8_t>(iv.single[s] | 1u << c);
    }
    iv.count[s] = iv.single[s] != 0 ? 1 : iv.cap;
  }
  iv.total = iv.count[static_cast<std::size_t>(d.start())];
  iv.numeric = iv.decimal = true;
  return true;
}

}  // namespace

bool ItemValues::closed(std::int32_t state) const { return ctx[static_cast<std::size_t>(state)] == kEnd; }
bool ItemValues::accepts(std::int32_t state) const { return !decimal && ctx[static_cast<std::size_t>(state)] == kNA; }

std::uint32_t ItemValues::adds(std::int32_t from, std::int32_t to) const {
  const std::uint8_t a = ctx[static_cast<std::size_t>(from)], b = ctx[static_cast<std::size_t>(to)];
  if (raw_context(a)) return raw_context(b) ? 1 : 0;  // (`\` starts an escape; `"` closes)
  return a != kOpen && b == kB ? 1 : 0;
}

namespace {
ItemValues& finish(ItemValues& iv, const std::vector<std::vector<std::uint32_t>>& pred, std::uint32_t n);
}  // namespace

ItemValues analyse_item_values(const Dfa& d, std::uint32_t cap, std::uint32_t small) {
  ItemValues iv;
  iv.cap = cap;
  iv.small = small;
  const std::uint32_t n = d.num_states();
  if (n == 0 || d.empty_language() || d.accepting(d.start())) return iv;
  std::vector<std::vector<std::uint32_t>> pred(n);
  if (d.next(d.start(), '"') < 0) {  // not a JSON string: maybe a numeric item
    if (!analyse_numeric(d, iv) && !analyse_decimal(d, iv)) return iv;
    for (std::uint32_t s = 0; s < n; ++s)
      for (int b = 0; b < 256; ++b) {
        const std::int32_t t = d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b));
        if (t >= 0 && iv.ctx[s] != kUnset) pred[static_cast<std::size_t>(t)].push_back(s);
      }
    return finish(iv, pred, n);
  }
  // 1. One decoder context per state, from the start state (before the opening quote).
  iv.ctx.assign(n, kUnset);
  std::vector<std::int32_t> todo{d.start()};
  iv.ctx[static_cast<std::size_t>(d.start())] = kOpen;
  while (!todo.empty()) {
    const std::int32_t s = todo.back();
    todo.pop_back();
    const std::uint8_t c = iv.ctx[static_cast<std::size_t>(s)];
    if (d.accepting(s) != (c == kEnd)) return iv;  // only the closing quote accepts
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(s, static_cast<std::uint8_t>(b));
      if (t < 0) continue;
      const std::uint8_t nc = step(c, static_cast<std::uint8_t>(b));
      if (nc == kBad) return iv;  // a byte no JSON string has there
      std::uint8_t& tc = iv.ctx[static_cast<std::size_t>(t)];
      if (tc == kUnset) {
        tc = nc;
        todo.push_back(t);
      } else if (tc != nc) {
        return iv;  // one state, two contexts
      }
      pred[static_cast<std::size_t>(t)].push_back(static_cast<std::uint32_t>(s));
    }
  }
  // 2. Counts of the raw-context states (Kahn's algorithm from the states with no successor).
  iv.count.assign(n, 0);
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> out(n);  // (target, paths)
  std::vector<std::uint32_t> close(n, 0);
  for (std::uint32_t s = 0; s < n; ++s) {
    const std::uint8_t c = iv.ctx[s];
    if (!raw_context(c)) continue;
    auto& e = out[s];
    const auto si = static_cast<std::int32_t>(s);
    for (int b = 0; b < 256; ++b) {
      if (c == kB && (b == '"' || b == '\\')) continue;
      const std::int32_t t = d.next(si, static_cast<std::uint8_t>(b));
      if (t >= 0) e.emplace_back(static_cast<std::uint32_t>(t), 1);
    }
    if (c == kB) {
      const std::int32_t q = d.next(si, '"');
      close[s] = q >= 0 && d.accepting(q) ? 1 : 0;
      for (const std::string& esc : canonical_escapes()) {
        const std::int32_t t = walk(d, si, esc);
        if (t >= 0) e.emplace_back(static_cast<std::uint32_t>(t), 1);
      }
    }
    std::sort(e.begin(), e.end());
    std::size_t w = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (w > 0 && e[w - 1].first == e[i].first) {
        e[w - 1].second += e[i].second;
      } else {
        e[w++] = e[i];
      }
    }
    e.resize(w);
  }
  std::vector<std::vector<std::uint32_t>> rev(n);
  std::vector<std::uint32_t> left(n, 0);
  std::vector<std::uint32_t> ready;
  for (std::uint32_t s = 0; s < n; ++s) {
    if (!raw_context(iv.ctx[s])) continue;
    left[s] = static_cast<std::uint32_t>(out[s].size());
    for (const auto& [t, m] : out[s]) rev[t].push_back(s);
    if (left[s] == 0) ready.push_back(s);
  }
  std::vector<char> done(n, 0);
  while (!ready.empty()) {
    const std::uint32_t s = ready.back();
    ready.pop_back();
    std::uint32_t v = close[s];
    for (const auto& [t, m] : out[s]) v = add_capped(v, static_cast<std::uint64_t>(m) * iv.count[t], cap);
    iv.count[s] = v;
    done[s] = 1;
    for (std::uint32_t p : rev[s])
      if (--left[p] == 0) ready.push_back(p);
  }
  for (std::uint32_t s = 0; s < n; ++s)
    if (raw_context(iv.ctx[s]) && !done[s]) iv.count[s] = cap;  // reaches a cycle
  // 3. Escape states: the count after one way of finishing the character (a lower bound);
  // the start state: the count after the opening quote; the closed state: one value (itself).
  for (std::uint32_t s = 0; s < n; ++s) {
    const std::uint8_t c = iv.ctx[s];
    if (raw_context(c) || c == kUnset) continue;
    if (c == kEnd) {
      iv.count[s] = 1;
      continue;
    }
    std::int32_t q = static_cast<std::int32_t>(s);
    for (int guard = 0; guard < 16 && q >= 0 && !raw_context(iv.ctx[static_cast<std::size_t>(q)]); ++guard) {
      std::int32_t nq = -1;
      for (int b = 0; b < 256 && nq < 0; ++b) {
        const std::int32_t t = d.next(q, static_cast<std::uint8_t>(b));
        if (t >= 0 && iv.ctx[static_cast<std::size_t>(t)] != kEnd) nq = t;
      }
      q = nq;
    }
    iv.count[s] = q >= 0 && raw_context(iv.ctx[static_cast<std::size_t>(q)]) ? iv.count[static_cast<std::size_t>(q)] : 0;
  }
  const std::int32_t first = d.next(d.start(), '"');
  iv.total = first >= 0 ? iv.count[static_cast<std::size_t>(first)] : 0;
  return finish(iv, pred, n);
}

namespace {

// Distances to the states that may be dead ends for a group holding `small` values; sets `ok`.
ItemValues& finish(ItemValues& iv, const std::vector<std::vector<std::uint32_t>>& pred, std::uint32_t n) {
  const std::uint32_t small = iv.small;
  iv.dist.assign(n, UINT32_MAX);
  std::deque<std::uint32_t> q;
  for (std::uint32_t s = 0; s < n; ++s)
    if (iv.ctx[s] != kUnset && iv.ctx[s] != kEnd && iv.count[s] <= small) {
      iv.dist[s] = 0;
      q.push_back(s);
      iv.finite_somewhere = true;
    }
  while (!q.empty()) {
    const std::uint32_t s = q.front();
    q.pop_front();
    for (std::uint32_t p : pred[s])
      if (iv.dist[p] == UINT32_MAX) {
        iv.dist[p] = iv.dist[s] + 1;
        q.push_back(p);
      }
  }
  iv.ok = true;
  return iv;
}

struct Enumerator {
  const Dfa& d;
  const ItemValues& iv;
  const ValueSets& values;
  std::uint32_t set;
  std::uint32_t held;
  std::string& text;

  bool held_value() {
    text.push_back('"');
    const bool h = values.has(set, value_hash(text));
    text.pop_back();
    return h;
  }
  bool sub(std::int32_t t, std::string_view bytes) {
    const std::size_t at = text.size();
    text.append(bytes);
    const bool r = all_held(t);
    text.resize(at);
    return r;
  }
  // Numeric items: is every value from `s` held (`strict`: not counting the value `text` is
  // now, when `s` accepts)? Canonical integers: the text is the value.
  bool all_held_numeric(std::int32_t s, bool strict) {
    const bool value = iv.ctx[static_cast<std::size_t>(s)] == kNA;
    if (iv.count[static_cast<std::size_t>(s)] - (strict && value ? 1 : 0) > held) return false;
    if (value && !strict && !values.has(set, value_hash(text))) return false;
    for (int b = 0; b < 256; ++b) {
      const std::int32_t t = d.next(s, static_cast<std::uint8_t>(b));
      if (t < 0) continue;
      text.push_back(static_cast<char>(b));
      const bool r = all_held_numeric(t, false);
      text.pop_back();
      if (!r) return false;
    }
    return true;
  }
  // Decimal items: is the one value of every completion from `s` held (false when the text's
  // decoder context leaves the state more than one value)? Completions spell the same value
  // as the item closing now, so `strict` changes nothing here.
  bool all_held_decimal(std::int32_t s) {
    int c = 0;
    for (char ch : text) {
      c = decimal_step(c, static_cast<std::uint8_t>(ch));
      if (c < 0) return false;
    }
    if (!(iv.single[static_cast<std::size_t>(s)] >> c & 1)) return false;
    const std::size_t at = text.size();
    text += iv.shortest[static_cast<std::size_t>(s)];
    const bool h = values.has(set, value_hash(text));
    text.resize(at);
    return h;
  }
  // Is the value of every completion from `s` (the text so far in `text`) held?
  bool all_held(std::int32_t s) {
    const std::uint8_t c = iv.ctx[static_cast<std::size_t>(s)];
    if (c == kEnd) return false;  // (not called on a closed item)
    // More values than held (for a state inside an escape, the count is a lower bound).
    if (iv.count[static_cast<std::size_t>(s)] > held) return false;
    if (c == kB) {
      const std::int32_t q = d.next(s, '"');
      const bool closes = q >= 0 && d.accepting(q);
      if (closes && !held_value()) return false;
      if (closes && iv.count[static_cast<std::size_t>(s)] == 1) return true;  // (its only value)
      for (const std::string& esc : canonical_escapes()) {
        const std::int32_t t = walk(d, s, esc);
        if (t >= 0 && !sub(t, esc)) return false;
      }
    }
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<std::uint8_t>(b);
      if (c == kB && (b == '"' || b == '\\')) continue;  // (the close and the escapes: above)
      // Inside an escape begun in the prefix, one case of each hex letter: the other spells
      // the same character.
      if (!raw_context(c) && b >= 'A' && b <= 'F' && d.next(s, static_cast<std::uint8_t>(b + 32)) >= 0) continue;
      const std::int32_t t = d.next(s, byte);
      if (t < 0) continue;
      if (c == kOpen) return sub(t, std::string_view("\"", 1));
      const char ch = static_cast<char>(b);
      if (!sub(t, std::string_view(&ch, 1))) return false;
    }
    return true;
  }
};

}  // namespace

bool prefix_dead(const Dfa& d, const ItemValues& iv, std::int32_t state, std::string& text, const ValueSets& values,
                 const std::vector<std::uint32_t>& sets, bool strict) {
  if (sets.empty()) return false;
  for (std::uint32_t set : sets) {
    const std::uint32_t held = values.count(set);
    if (!iv.maybe_dead(state, held, strict)) return false;
    Enumerator e{d, iv, values, set, held, text};
    const bool all = iv.decimal ? e.all_held_decimal(state) : iv.numeric ? e.all_held_numeric(state, strict) : e.all_held(state);
    if (!all) return false;
  }
  return true;
}

}  // namespace corral
