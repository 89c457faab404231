// regex_parser.cpp — Python `re` (3.11, str patterns) syntax → expression tree, for full match.
//
// In:  a UTF-8 pattern and the Limits.
// Out: a regular tree (regex_ast.hpp) whose language is the set of strings re.fullmatch
//      accepts; or CompileError (byte offset, line 1, 1-based code point column) for syntax
//      Python rejects or constructs that are not regular (backreferences, lookaround, ...), or
//      LimitExceeded (max_nesting, max_nfa_states) before any large structure is built.
// Invariant: recursion depth is bounded by limits.max_nesting; every repetition is checked
//      against max_nfa_states with a bottom-up size estimate as soon as it is parsed.
// Source: the grammar follows CPython's Lib/re/_parser.py (_parse, _escape, _class_escape,
//      _parse_flags), re-implemented here; IGNORECASE follows Lib/re/_compiler.py
//      (_optimize_charset, _compile) using tables generated from CPython.
#include "regex_parser.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "errors.hpp"
#include "unicode_tables.hpp"
#include "utf8.hpp"

namespace corral {

namespace {

constexpr std::uint32_t kMaxRepeat = 0xFFFFFFFFu;  // Python's MAXREPEAT; counts must be below

struct Flags {
  bool i = false, s = false, x = false, a = false, u = false, m = false;
};

bool is_ascii_digit(std::uint32_t c) { return c >= '0' && c <= '9'; }
bool is_oct_digit(std::uint32_t c) { return c >= '0' && c <= '7'; }
bool is_hex_digit(std::uint32_t c) {
  return is_ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
std::uint32_t hex_value(std::uint32_t c) {
  return is_ascii_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}
bool is_ascii_letter(std::uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_verbose_space(std::uint32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_surrogate(std::uint32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

// ---- IGNORECASE ---------------------------------------------------------------------------
// `re` lowercases both sides with the simple mapping: a cased literal c matches x iff
// lower(x) ∈ {lower(c)} ∪ EXTRA[lower(c)]; a class with a cased literal/range item matches x
// iff lower(x) is in {lower(p) | p item} ∪ EXTRA or in one of the class's categories.

const std::vector<std::pair<std::uint32_t, std::uint32_t>>& ascii_lower_pairs() {
  static const std::vector<std::pair<std::uint32_t, std::uint32_t>> v = [] {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (std::uint32_t c = 'A'; c <= 'Z'; ++c) out.emplace_back(c, c + 32);
    return out;
  }();
  return v;
}

const CharSet& changed_by_lower(bool ascii) {
  static const CharSet uni = [] {
    CharSet s;
    for (const auto& p : lower_pairs()) s.add(p.first, p.first);
    return s;
  }();
  static const CharSet asc = CharSet::range('A', 'Z');
  return ascii ? asc : uni;
}

bool cased(std::uint32_t c, bool ascii) { return ascii ? is_ascii_letter(c) : unicode_iscased(c); }

bool intersects(const CharSet& a, const CharSet& b) {
  const auto& x = a.ranges();
  const auto& y = b.ranges();
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    if (std::max(x[i].lo, y[j].lo) <= std::min(x[i].hi, y[j].hi)) return true;
    if (x[i].hi < y[j].hi) ++i; else ++j;
  }
  return false;
}

bool set_has_cased(const CharSet& s, bool ascii) {
  static const CharSet ascii_letters = [] {
    CharSet c = CharSet::range('A', 'Z');
    c.add('a', 'z');
    return c;
  }();
  static const CharSet uni_cased = [] {
    CharSet c;
    for (const auto& r : unicode::kCased) c.add(r.lo, r.hi);
    return c;
  }();
  return intersects(s, ascii ? ascii_letters : uni_cased);
}

// Code points x whose lowercase is in `lowers` (plus the members of `lowers` that are their own
// lowercase): {x | lower(x) ∈ lowers}.
CharSet lower_preimage(const CharSet& lowers, bool ascii) {
  const auto& pairs = ascii ? ascii_lower_pairs() : lower_pairs();
  CharSet extra;
  for (const auto& p : pairs)
    if (lowers.contains(p.second)) extra.add(p.first, p.first);
  CharSet out = charset_minus(lowers, changed_by_lower(ascii));
  out.add(extra);
  return out;
}

// The case-insensitive meaning of a class whose literal/range items are `items` and whose
// category escapes are `cats` (before negation).
CharSet fold_class(const CharSet& items, const CharSet& cats, bool ascii) {
  if (!set_has_cased(items, ascii)) {
    CharSet s = items;
    s.add(cats);
    return s;
  }
  const auto& pairs = ascii ? ascii_lower_pairs() : lower_pairs();
  CharSet lowers = charset_minus(items, changed_by_lower(ascii));
  CharSet mapped;
  for (const auto& p : pairs)
    if (items.contains(p.first)) mapped.add(p.second, p.second);
  lowers.add(mapped);
  if (!ascii) {
    CharSet extra;
    for (const auto& e : unicode::kExtraCases)
      if (lowers.contains(e.from)) extra.add(e.to, e.to);
    lowers.add(extra);
  }
  lowers.add(cats);
  return lower_preimage(lowers, ascii);
}

CharSet fold_literal(std::uint32_t c, bool ascii) {
  if (!cased(c, ascii)) return CharSet::single(c);
  const std::uint32_t lo = ascii ? ((c >= 'A' && c <= 'Z') ? c + 32 : c) : simple_lower(c);
  CharSet lowers = CharSet::single(lo);
  if (!ascii)
    for (const auto& e : unicode::kExtraCases)
      if (e.from == lo) lowers.add(e.to, e.to);
  CharSet out = lowers;
  const auto& by_lower = ascii ? ascii_lower_pairs() : lower_pairs_by_lower();
  for (const auto& r : lowers.ranges())
    for (std::uint32_t l = r.lo; l <= r.hi; ++l) {
      auto it = std::lower_bound(by_lower.begin(), by_lower.end(), l,
                                 [](const std::pair<std::uint32_t, std::uint32_t>& p, std::uint32_t v) {
                                   return p.second < v;
                                 });
      for (; it != by_lower.end() && it->second == l; ++it) out.add(CharSet::single(it->first));
    }
  return out;
}

// ---- the parser ---------------------------------------------------------------------------

struct Parsed {
  NodePtr node;
  std::uint64_t est = 1;
};

// One class-escape / escape result: a single code point or a category set.
struct Atom {
  bool is_set = false;
  std::uint32_t cp = 0;
  CharSet set;
};

class Parser {
 public:
  Parser(std::string_view pattern, const Limits& limits) : pattern_(pattern), limits_(limits) {
    std::size_t i = 0;
    while (i < pattern.size()) {
      std::uint32_t cp;
      const std::size_t at = i;
      if (!utf8_decode(pattern, i, cp))
        throw CompileError("invalid UTF-8 in pattern", at, 1, static_cast<int>(cps_.size()) + 1);
      cps_.push_back(cp);
      offs_.push_back(at);
    }
    offs_.push_back(pattern.size());
  }

  NodePtr run() {
    Parsed p = parse_sub(Flags{}, /*top=*/true);
    if (pos_ < cps_.size()) fail("unbalanced parenthesis", pos_);  // a stray ')'
    check_size(p.est, 0);
    return p.node;
  }

 private:
  [[noreturn]] void fail(const std::string& msg, std::size_t at) const {
    throw CompileError(msg, offs_[at], 1, static_cast<int>(at) + 1);
  }
  void check_size(std::uint64_t est, std::size_t at) const {
    if (est > limits_.max_nfa_states)
      throw LimitExceeded("max_nfa_states", est, limits_.max_nfa_states,
                          "regex expands to too many automaton states (at byte offset " +
                              std::to_string(offs_[at]) + ")");
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  std::uint32_t peek(std::size_t k = 0) const {
    return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0xFFFFFFFFu;
  }
  bool match(std::uint32_t c) {
    if (!at_end() && cps_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string text(std::size_t from, std::size_t to) const {
    return std::string(pattern_.substr(offs_[from], offs_[to] - offs_[from]));
  }

  Parsed parse_sub(Flags f, bool top) {
    std::vector<Parsed> alts;
    bool first = true;
    const std::size_t start = pos_;
    for (;;) {
      if (top) f = merge_global(f);
      alts.push_back(parse_seq(f, top, top && first));
      first = false;
      if (!match('|')) break;
    }
    if (alts.size() == 1) return alts[0];
    std::vector<NodePtr> kids;
    std::uint64_t est = 1;
    for (auto& a : alts) {
      kids.push_back(a.node);
      est = std::min<std::uint64_t>(est + a.est, std::uint64_t{1} << 62);
    }
    check_size(est, start);
    return {make_alt(std::move(kids), offs_[start]), est};
  }

  Flags merge_global(Flags f) const {
    f.i |= global_.i, f.s |= global_.s, f.x |= global_.x, f.a |= global_.a, f.m |= global_.m;
    return f;
  }

  void skip_verbose() {
    while (!at_end()) {
      const std::uint32_t c = cps_[pos_];
      if (is_verbose_space(c)) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && cps_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Parsed parse_seq(Flags f, bool top, bool first) {
    std::vector<Parsed> items;
    std::vector<bool> repeated;
    const std::size_t seq_start = pos_;
    std::uint64_t est = 0;
    bool any_token = false;  // an anchor was seen (global flags must precede it)
    while (!at_end()) {
      const std::uint32_t c = cps_[pos_];
      if (c == '|' || c == ')') break;
      const std::size_t start = pos_++;
      if (f.x && is_verbose_space(c)) continue;
      if (f.x && c == '#') {
        while (!at_end() && cps_[pos_] != '\n') ++pos_;
        continue;
      }
      switch (c) {
        case '[':
          items.push_back({make_chars(parse_class(f, start), offs_[start]), 1});
          repeated.push_back(false);
          break;
        case '.': {
          CharSet cs = CharSet::any();
          if (!f.s) cs = charset_minus(cs, CharSet::single('\n'));
          items.push_back({make_chars(std::move(cs), offs_[start]), 1});
          repeated.push_back(false);
          break;
        }
        case '^':
          start_anchor(top, items.empty(), start, "'^'");
          any_token = true;
          break;
        case '$':
          end_anchor(f, top, start, "'$'");
          break;
        case '*':
        case '+':
        case '?':
        case '{': {
          std::uint32_t lo = 0, hi = kMaxRepeat;
          if (c == '+') lo = 1;
          if (c == '?') hi = 1;
          if (c == '{' && !parse_braces(start, lo, hi)) {
            items.push_back({make_chars(fold(f, '{'), offs_[start]), 1});
            repeated.push_back(false);
            break;
          }
          if (items.empty()) fail("nothing to repeat", start);
          if (repeated.back()) fail("multiple repeat", start);
          if (match('?')) {
            // lazy: same language under full match
          } else if (peek() == '+') {
            fail("possessive quantifier " + text(start, pos_ + 1) + " is not supported", start);
          }
          const std::uint32_t max = hi == kMaxRepeat ? Node::kUnbounded : hi;
          Parsed& last = items.back();
          last.est = estimate_repeat_size(last.est, lo, max);
          check_size(last.est, start);
          last.node = make_repeat(last.node, lo, max, offs_[start]);
          repeated.back() = true;
          break;
        }
        case '(': {
          Parsed g;
          if (!parse_group(f, top, first && !any_token && items.empty(), start, g)) {
            if (top) f = merge_global(f);  // global flags apply from here on
            break;                         // (flags or a comment: no item)
          }
          items.push_back(std::move(g));
          repeated.push_back(false);
          break;
        }
        case '\\': {
          if (at_end()) fail("bad escape (end of pattern)", start);
          const std::uint32_t e = cps_[pos_];
          if (e == 'A') {
            ++pos_;
            start_anchor(top, items.empty(), start, "'\\A'");
            any_token = true;
            break;
          }
          if (e == 'Z') {
            ++pos_;
            end_anchor(f, top, start, "'\\Z'");
            break;
          }
          if (e == 'b' || e == 'B')
            fail(std::string("word boundary \\") + static_cast<char>(e) + " is not supported", start);
          Atom a = parse_escape(f, start, /*in_class=*/false);
          if (!a.is_set && is_surrogate(a.cp))
            fail("surrogate code point " + text(start, pos_) + " cannot appear in UTF-8 text", start);
          NodePtr n = make_chars(a.is_set ? std::move(a.set) : fold(f, a.cp), offs_[start]);
          items.push_back({std::move(n), 1});
          repeated.push_back(false);
          break;
        }
        default:
          items.push_back({make_chars(fold(f, c), offs_[start]), 1});
          repeated.push_back(false);
          break;
      }
    }
    std::vector<NodePtr> kids;
    for (auto& it : items) {
      kids.push_back(it.node);
      est = std::min<std::uint64_t>(est + it.est, std::uint64_t{1} << 62);
    }
    if (kids.empty()) return {make_empty(offs_[seq_start]), 1};
    return {make_concat(std::move(kids), offs_[seq_start]), est};
  }

  // A literal code point under the current flags.
  CharSet fold(const Flags& f, std::uint32_t cp) const {
    return f.i ? fold_literal(cp, f.a) : CharSet::single(cp);
  }

  void start_anchor(bool top, bool nothing_before, std::size_t at, const char* what) {
    if (!top || !nothing_before)
      fail(std::string(what) +
               " is only supported at the start of the pattern or of a top-level alternative "
               "(patterns are matched in full)",
           at);
  }

  void end_anchor(const Flags& f, bool top, std::size_t at, const char* what) {
    // Everything up to the end of this alternative must be more end anchors / trivia.
    std::size_t save = pos_;
    for (;;) {
      if (f.x) skip_verbose();
      if (at_end() || peek() == '|') break;
      if (peek() == '$') { ++pos_; continue; }
      if (peek() == '\\' && peek(1) == 'Z') { pos_ += 2; continue; }
      if (peek() == '(' && peek(1) == '?' && peek(2) == '#') {
        while (!at_end() && peek() != ')') ++pos_;
        if (at_end()) break;
        ++pos_;
        continue;
      }
      if (peek() == ')' && top) break;  // reported as unbalanced parenthesis later
      const std::uint32_t q = peek();
      if (q == '*' || q == '+' || q == '?') fail("nothing to repeat", pos_);
      if (q == '{') {
        std::size_t qs = pos_;
        ++pos_;
        std::uint32_t lo, hi;
        if (parse_braces(qs, lo, hi)) fail("nothing to repeat", qs);
        pos_ = qs;
      }
      fail(std::string(what) +
               " is only supported at the end of the pattern or of a top-level alternative "
               "(patterns are matched in full)",
           at);
    }
    if (!top)
      fail(std::string(what) +
               " is only supported at the end of the pattern or of a top-level alternative "
               "(patterns are matched in full)",
           at);
    pos_ = save;
  }

  // At pos_ just after '{' (at index `open`): parses "m}", "m,n}", ",n}", "m,}", ",}".
  // Returns false (pos_ restored to after '{') when this is not a quantifier: a literal '{'.
  bool parse_braces(std::size_t open, std::uint32_t& lo, std::uint32_t& hi) {
    const std::size_t here = pos_;
    if (peek() == '}') return false;
    auto digits = [&](bool& any, bool& big) {
      std::uint64_t v = 0;
      any = false, big = false;
      while (!at_end() && is_ascii_digit(cps_[pos_])) {
        any = true;
        v = v * 10 + (cps_[pos_++] - '0');
        if (v >= kMaxRepeat) big = true, v = kMaxRepeat;
      }
      return static_cast<std::uint32_t>(v);
    };
    bool lo_any, lo_big, hi_any = false, hi_big = false;
    std::uint32_t a = digits(lo_any, lo_big), b = 0;
    bool comma = match(',');
    if (comma) b = digits(hi_any, hi_big);
    if (!match('}')) {
      pos_ = here;
      return false;
    }
    lo = lo_any ? a : 0;
    hi = comma ? (hi_any ? b : kMaxRepeat) : lo;
    if (lo_big || hi_big) fail("the repetition number is too large", open);
    if (hi < lo) fail("min repeat greater than max repeat", open);
    return true;
  }

  // '(' already consumed at `start`. Returns false when the group produced no item
  // (a comment or global flags).
  bool parse_group(Flags f, bool top, bool first, std::size_t start, Parsed& out) {
    Flags inner = f;
    if (match('?')) {
      if (at_end()) fail("unexpected end of pattern", start);
      const std::uint32_t ch = cps_[pos_++];
      if (ch == 'P') {
        if (match('<')) {
          const std::size_t name_start = pos_;
          while (!at_end() && peek() != '>') ++pos_;
          if (at_end()) fail("missing >, unterminated name", name_start);
          std::string name = text(name_start, pos_);
          check_group_name(name, name_start);
          ++pos_;
          if (!names_.insert(name).second)
            fail("redefinition of group name '" + name + "'", name_start);
        } else if (match('=')) {
          fail("backreferences (?P=name) are not supported (not a regular language)", start);
        } else {
          fail("unknown extension ?P" + (at_end() ? std::string() : text(pos_, pos_ + 1)), start);
        }
      } else if (ch == ':') {
        // non-capturing
      } else if (ch == '#') {
        while (!at_end() && peek() != ')') ++pos_;
        if (at_end()) fail("missing ), unterminated comment", start);
        ++pos_;
        return false;
      } else if (ch == '=' || ch == '!') {
        fail("lookahead assertions are not supported", start);
      } else if (ch == '<') {
        if (peek() == '=' || peek() == '!') fail("lookbehind assertions are not supported", start);
        fail("unknown extension ?<" + (at_end() ? std::string() : text(pos_, pos_ + 1)), start);
      } else if (ch == '(') {
        fail("conditional groups (?(...)...) are not supported", start);
      } else if (ch == '>') {
        fail("atomic groups (?>...) are not supported", start);
      } else if (ch < 0x80 && std::string("aiLmsxtu-").find(static_cast<char>(ch)) != std::string::npos) {
        if (parse_flags(ch, start, inner)) {  // global
          if (!first || !top) fail("global flags not at the start of the expression", start);
          return false;
        }
      } else {
        fail("unknown extension ?" + text(pos_ - 1, pos_), start);
      }
    }
    ++depth_;
    if (depth_ > nesting_limit(limits_))
      throw LimitExceeded("max_nesting", depth_, nesting_limit(limits_),
                          "regex groups nested too deeply (at byte offset " +
                              std::to_string(offs_[start]) + ")" + nesting_note(limits_));
    out = parse_sub(inner, /*top=*/false);
    --depth_;
    if (!match(')')) fail("missing ), unterminated subpattern", start);
    return true;
  }

  void check_group_name(const std::string& name, std::size_t at) const {
    if (name.empty()) fail("missing group name", at);
    bool ok = true;
    std::size_t i = 0;
    bool first = true;
    while (i < name.size()) {
      std::uint32_t cp;
      utf8_decode(name, i, cp);
      if (cp == '_' || is_ascii_letter(cp) || (!first && is_ascii_digit(cp))) {
      } else if (cp >= 0x80 && unicode_word().contains(cp) && !(first && unicode_digit().contains(cp))) {
      } else {
        ok = false;
      }
      first = false;
    }
    if (!ok) fail("bad character in group name '" + name + "'", at);
  }

  // At pos_ just after the first flag char `ch`. Global flags "(?ims)" update global_ and return
  // true; scoped "(?i-s:...)" update `inner` and return false (pos_ after ':').
  bool parse_flags(std::uint32_t ch, std::size_t start, Flags& inner) {
    Flags add, del;
    auto set_flag = [&](Flags& fl, std::uint32_t c) {
      switch (c) {
        case 'i': fl.i = true; break;
        case 's': fl.s = true; break;
        case 'x': fl.x = true; break;
        case 'a': fl.a = true; break;
        case 'u': fl.u = true; break;
        case 'm': fl.m = true; break;
        case 'L': fail("bad inline flags: cannot use 'L' flag with a str pattern", start);
        case 't': fail("the template flag (?t) is not supported", start);
        default: fail("unknown flag", pos_ - 1);
      }
    };
    auto is_flag = [](std::uint32_t c) {
      return c < 0x80 && std::string("aiLmsxtu").find(static_cast<char>(c)) != std::string::npos;
    };
    if (ch != '-') {
      for (;;) {
        set_flag(add, ch);
        if (add.a && add.u) fail("bad inline flags: flags 'a', 'u' and 'L' are incompatible", start);
        if (at_end()) fail("missing -, : or )", pos_);
        ch = cps_[pos_++];
        if (ch == ')' || ch == '-' || ch == ':') break;
        if (!is_flag(ch))
          fail(ch < 0x80 && is_ascii_letter(ch) ? "unknown flag" : "missing -, : or )", pos_ - 1);
      }
    }
    if (ch == ')') {
      if ((global_.a && add.u) || (global_.u && add.a))
        fail("bad inline flags: flags 'a', 'u' and 'L' are incompatible", start);
      global_.i |= add.i, global_.s |= add.s, global_.x |= add.x, global_.a |= add.a,
          global_.u |= add.u, global_.m |= add.m;
      inner = merge_global(inner);
      return true;
    }
    if (ch == '-') {
      if (at_end()) fail("missing flag", pos_);
      ch = cps_[pos_++];
      if (!is_flag(ch)) fail(is_ascii_letter(ch) ? "unknown flag" : "missing flag", pos_ - 1);
      for (;;) {
        if (ch == 'a' || ch == 'u' || ch == 'L')
          fail("bad inline flags: cannot turn off flags 'a', 'u' and 'L'", start);
        set_flag(del, ch);
        if (at_end()) fail("missing :", pos_);
        ch = cps_[pos_++];
        if (ch == ':') break;
        if (!is_flag(ch)) fail(is_ascii_letter(ch) ? "unknown flag" : "missing :", pos_ - 1);
      }
    }
    if ((add.i && del.i) || (add.s && del.s) || (add.x && del.x) || (add.m && del.m))
      fail("bad inline flags: flag turned on and off", start);
    if (add.i) inner.i = true;
    if (add.s) inner.s = true;
    if (add.x) inner.x = true;
    if (add.m) inner.m = true;
    if (add.a) inner.a = true, inner.u = false;
    if (add.u) inner.u = true, inner.a = false;
    if (del.i) inner.i = false;
    if (del.s) inner.s = false;
    if (del.x) inner.x = false;
    if (del.m) inner.m = false;
    return false;
  }

  // Escape at `start` ('\\' consumed, pos_ at the escaped char). Categories come back as sets.
  Atom parse_escape(const Flags& f, std::size_t start, bool in_class) {
    const std::uint32_t c = cps_[pos_++];
    Atom a;
    auto cat = [&](const CharSet& s, bool negate) {
      a.is_set = true;
      a.set = negate ? s.negated() : s;
      return a;
    };
    switch (c) {
      case 'd': return cat(f.a ? ascii_digit() : unicode_digit(), false);
      case 'D': return cat(f.a ? ascii_digit() : unicode_digit(), true);
      case 'w': return cat(f.a ? ascii_word() : unicode_word(), false);
      case 'W': return cat(f.a ? ascii_word() : unicode_word(), true);
      case 's': return cat(f.a ? ascii_space() : unicode_space(), false);
      case 'S': return cat(f.a ? ascii_space() : unicode_space(), true);
      case 'a': a.cp = 7; return a;
      case 'f': a.cp = '\f'; return a;
      case 'n': a.cp = '\n'; return a;
      case 'r': a.cp = '\r'; return a;
      case 't': a.cp = '\t'; return a;
      case 'v': a.cp = '\v'; return a;
      case '\\': a.cp = '\\'; return a;
      case 'b':  // only reaches here inside a class
        a.cp = 8;
        return a;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        std::uint64_t v = 0;
        std::size_t got = 0;
        while (got < want && !at_end() && is_hex_digit(cps_[pos_])) {
          v = v * 16 + hex_value(cps_[pos_++]);
          ++got;
        }
        if (got != want) fail("incomplete escape " + text(start, pos_), start);
        if (v > 0x10FFFF) fail("bad escape " + text(start, pos_), start);
        a.cp = static_cast<std::uint32_t>(v);
        return a;
      }
      case 'N':
        fail("named Unicode escapes \\N{...} are not supported", start);
      default:
        break;
    }
    if (in_class) {
      if (is_oct_digit(c)) {
        std::uint32_t v = c - '0';
        for (int k = 0; k < 2 && !at_end() && is_oct_digit(cps_[pos_]); ++k) v = v * 8 + (cps_[pos_++] - '0');
        if (v > 0377) fail("octal escape value " + text(start, pos_) + " outside of range 0-0o377", start);
        a.cp = v;
        return a;
      }
      if (is_ascii_digit(c) || is_ascii_letter(c)) fail("bad escape " + text(start, pos_), start);
      a.cp = c;
      return a;
    }
    if (c == '0') {
      std::uint32_t v = 0;
      for (int k = 0; k < 2 && !at_end() && is_oct_digit(cps_[pos_]); ++k) v = v * 8 + (cps_[pos_++] - '0');
      a.cp = v;
      return a;
    }
    if (is_ascii_digit(c)) {
      if (!at_end() && is_ascii_digit(cps_[pos_])) {
        const std::uint32_t d2 = cps_[pos_++];
        if (is_oct_digit(c) && is_oct_digit(d2) && !at_end() && is_oct_digit(cps_[pos_])) {
          const std::uint32_t v = (c - '0') * 64 + (d2 - '0') * 8 + (cps_[pos_++] - '0');
          if (v > 0377) fail("octal escape value " + text(start, pos_) + " outside of range 0-0o377", start);
          a.cp = v;
          return a;
        }
      }
      fail("backreferences (" + text(start, pos_) + ") are not supported (not a regular language)", start);
    }
    if (is_ascii_letter(c)) fail("bad escape " + text(start, pos_), start);
    a.cp = c;
    return a;
  }

  // '[' consumed at `start`.
  CharSet parse_class(const Flags& f, std::size_t start) {
    const bool negate = match('^');
    CharSet items, cats;
    bool any_item = false;
    auto unterminated = [&]() { fail("unterminated character set", start); };
    auto atom_at = [&](std::size_t at) {
      Atom a;
      if (cps_[at] == '\\') {
        pos_ = at + 1;
        if (at_end()) unterminated();
        a = parse_escape(f, at, /*in_class=*/true);
      } else {
        a.cp = cps_[at];
        pos_ = at + 1;
      }
      return a;
    };
    for (;;) {
      if (at_end()) unterminated();
      const std::size_t at = pos_;
      if (cps_[at] == ']' && any_item) {
        ++pos_;
        break;
      }
      Atom a1 = atom_at(at);
      any_item = true;
      if (match('-')) {
        if (at_end()) unterminated();
        if (peek() == ']') {
          ++pos_;
          add_atom(a1, items, cats, at);
          items.add('-', '-');
          break;
        }
        const std::size_t at2 = pos_;
        Atom a2 = atom_at(at2);
        if (a1.is_set || a2.is_set)
          fail("bad character range " + text(at, pos_), at);
        if (a2.cp < a1.cp) fail("bad character range " + text(at, pos_), at);
        items.add(a1.cp, a2.cp);  // surrogates inside a range are dropped
      } else {
        add_atom(a1, items, cats, at);
      }
    }
    CharSet result;
    if (f.i) {
      result = fold_class(items, cats, f.a);
    } else {
      result = items;
      result.add(cats);
    }
    return negate ? result.negated() : result;
  }

  void add_atom(const Atom& a, CharSet& items, CharSet& cats, std::size_t at) const {
    if (a.is_set) {
      cats.add(a.set);
      return;
    }
    if (is_surrogate(a.cp))
      fail("surrogate code point " + text(at, pos_) + " cannot appear in UTF-8 text", at);
    items.add(a.cp, a.cp);
  }

  std::string_view pattern_;
  const Limits& limits_;
  std::vector<std::uint32_t> cps_;
  std::vector<std::size_t> offs_;
  std::size_t pos_ = 0;
  std::uint32_t depth_ = 0;
  Flags global_;
  std::set<std::string> names_;
};

}  // namespace

NodePtr parse_regex(std::string_view pattern, const Limits& limits) {
  return Parser(pattern, limits).run();
}

}  // namespace corral
