// regex_ast.cpp — CharSet algebra, node constructors, and the canonical regex printer.
//
// In:  code point ranges and child nodes from the regex / grammar parsers.
// Out: normalised CharSets, simplified shared nodes, canonical Python-`re` text
//      (print_regex) and NFA size bounds (estimate_nfa_size).
// Invariant: CharSet ranges stay sorted, disjoint, non-adjacent, within [0, 0x10FFFF] and free
//      of surrogates after every operation; print_regex output re-parses (by Python `re` and by
//      parse_regex) to a tree with the same language, unless the tree has Intersect/Difference.
#include "regex_ast.hpp"

#include <algorithm>
#include <cstdio>

#include "errors.hpp"
#include "utf8.hpp"

namespace corral {

namespace {
constexpr std::uint32_t kMaxCp = 0x10FFFF;
constexpr std::uint32_t kSurLo = 0xD800, kSurHi = 0xDFFF;
}  // namespace

// ---------------------------------------------------------------------------------------------
// CharSet

CharSet CharSet::single(std::uint32_t cp) { return range(cp, cp); }

CharSet CharSet::range(std::uint32_t lo, std::uint32_t hi) {
  CharSet cs;
  cs.add(lo, hi);
  return cs;
}

CharSet CharSet::any() { return range(0, kMaxCp); }

void CharSet::add(std::uint32_t lo, std::uint32_t hi) {
  if (hi > kMaxCp) hi = kMaxCp;
  if (lo > hi) return;
  // Cut out the surrogate block.
  if (lo <= kSurHi && hi >= kSurLo) {
    if (lo < kSurLo) add(lo, kSurLo - 1);
    if (hi > kSurHi) add(kSurHi + 1, hi);
    return;
  }
  if (ranges_.empty() || lo > ranges_.back().hi + 1) {
    ranges_.push_back({lo, hi});
    return;
  }
  if (lo >= ranges_.back().lo) {  // overlaps or touches the last range
    ranges_.back().hi = std::max(ranges_.back().hi, hi);
    return;
  }
  ranges_.push_back({lo, hi});
  normalize();
}

void CharSet::add(const CharSet& other) {
  if (other.ranges_.empty()) return;
  if (ranges_.empty()) {
    ranges_ = other.ranges_;
    return;
  }
  std::vector<CodepointRange> merged;
  merged.reserve(ranges_.size() + other.ranges_.size());
  std::merge(ranges_.begin(), ranges_.end(), other.ranges_.begin(), other.ranges_.end(),
             std::back_inserter(merged),
             [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  ranges_.swap(merged);
  normalize();
}

void CharSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  out.reserve(ranges_.size());
  for (const auto& r : ranges_) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  ranges_.swap(out);
}

CharSet CharSet::negated() const {
  CharSet out;
  std::uint32_t next = 0;  // first code point not yet covered
  for (const auto& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCp) out.add(next, kMaxCp);
  return out;
}

bool CharSet::contains(std::uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](std::uint32_t v, const CodepointRange& r) { return v < r.lo; });
  if (it == ranges_.begin()) return false;
  --it;
  return cp <= it->hi;
}

// ---------------------------------------------------------------------------------------------
// Constructors

NodePtr make_empty(std::size_t pos) {
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Empty;
  n->pos = pos;
  return n;
}

NodePtr make_chars(CharSet cs, std::size_t pos) {
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Chars;
  n->chars = std::move(cs);
  n->pos = pos;
  return n;
}

NodePtr make_literal(const std::u32string& text, std::size_t pos) {
  std::vector<NodePtr> kids;
  kids.reserve(text.size());
  for (char32_t c : text) kids.push_back(make_chars(CharSet::single(static_cast<std::uint32_t>(c)), pos));
  return make_concat(std::move(kids), pos);
}

NodePtr make_concat(std::vector<NodePtr> kids, std::size_t pos) {
  std::vector<NodePtr> flat;
  flat.reserve(kids.size());
  for (auto& k : kids) {
    CORRAL_CHECK(k != nullptr, "null node in concat");
    if (k->kind == NodeKind::Empty) continue;
    if (k->kind == NodeKind::Concat)
      flat.insert(flat.end(), k->kids.begin(), k->kids.end());
    else
      flat.push_back(std::move(k));
  }
  if (flat.empty()) return make_empty(pos);
  if (flat.size() == 1) return flat[0];
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Concat;
  n->kids = std::move(flat);
  n->pos = pos;
  return n;
}

NodePtr make_alt(std::vector<NodePtr> kids, std::size_t pos) {
  std::vector<NodePtr> flat;
  flat.reserve(kids.size());
  for (auto& k : kids) {
    CORRAL_CHECK(k != nullptr, "null node in alternation");
    if (k->kind == NodeKind::Alt)
      flat.insert(flat.end(), k->kids.begin(), k->kids.end());
    else
      flat.push_back(std::move(k));
  }
  if (flat.empty()) return make_chars(CharSet(), pos);  // no alternative: empty language
  if (flat.size() == 1) return flat[0];
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Alt;
  n->kids = std::move(flat);
  n->pos = pos;
  return n;
}

NodePtr make_repeat(NodePtr kid, std::uint32_t min, std::uint32_t max, std::size_t pos) {
  CORRAL_CHECK(kid != nullptr, "null node in repeat");
  CORRAL_CHECK(min <= max && min != Node::kUnbounded, "repeat bounds out of order");
  if (max == 0) return make_empty(pos);
  if (min == 1 && max == 1) return kid;
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Repeat;
  n->kids.push_back(std::move(kid));
  n->min = min;
  n->max = max;
  n->pos = pos;
  return n;
}

NodePtr make_rule_ref(std::int32_t rule, std::size_t pos) {
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::RuleRef;
  n->rule = rule;
  n->pos = pos;
  return n;
}

NodePtr make_intersect(std::vector<NodePtr> kids, std::size_t pos) {
  std::vector<NodePtr> flat;
  flat.reserve(kids.size());
  for (auto& k : kids) {
    CORRAL_CHECK(k != nullptr, "null node in intersection");
    // Intersection is associative: flattening keeps `a & b & c & ...` one level deep.
    if (k->kind == NodeKind::Intersect)
      flat.insert(flat.end(), k->kids.begin(), k->kids.end());
    else
      flat.push_back(std::move(k));
  }
  CORRAL_CHECK(!flat.empty(), "intersection of nothing");
  if (flat.size() == 1) return flat[0];
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Intersect;
  n->kids = std::move(flat);
  n->pos = pos;
  return n;
}

NodePtr make_difference(NodePtr minuend, NodePtr subtrahend, std::size_t pos) {
  CORRAL_CHECK(minuend != nullptr && subtrahend != nullptr, "null node in difference");
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::Difference;
  n->kids = {std::move(minuend), std::move(subtrahend)};
  n->pos = pos;
  return n;
}

bool has_algebra(const NodePtr& n) { return tree_facts(*n).algebra; }

bool is_regular(const NodePtr& n) { return tree_facts(*n).regular; }

// ---------------------------------------------------------------------------------------------
// estimate_nfa_size — mirrors the Thompson construction in nfa.cpp: one state per Chars/Empty,
// one split per Alt, and counted repetition multiplied out.

namespace {
constexpr std::uint64_t kSat = std::uint64_t{1} << 62;
std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return std::min(kSat, a + b); }
std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSat / b ? kSat : std::min(kSat, a * b);
}
}  // namespace

std::uint64_t estimate_repeat_size(std::uint64_t kid, std::uint32_t min, std::uint32_t max) {
  if (max == Node::kUnbounded) {
    // (min-1) plain copies plus one looping copy (or one starred copy when min == 0).
    return min == 0 ? sat_add(kid, 1) : sat_add(sat_mul(kid, min), 1);
  }
  return sat_add(sat_mul(kid, min), sat_mul(sat_add(kid, 1), max - min));
}

TreeFacts tree_facts(const Node& n) {
  if (n.kids.empty())  // (a Concat without kids is the empty string: no state of its own)
    return {n.kind == NodeKind::Concat ? 0u : 1u, n.kind != NodeKind::RuleRef, false};
  // Cached: tree_flags bit 0 set, bit 1 regular, bit 2 algebra (written after tree_size).
  if (const std::uint8_t f = n.tree_flags.load(std::memory_order_acquire); f != 0)
    return {n.tree_size.load(std::memory_order_relaxed), (f & 2) != 0, (f & 4) != 0};
  // Concat adds nothing, Alt/Intersect/Difference one split, Repeat multiplies out its kid.
  std::uint64_t s = n.kind == NodeKind::Concat || n.kind == NodeKind::Repeat ? 0 : 1;
  bool reg = true;
  bool alg = n.kind == NodeKind::Intersect || n.kind == NodeKind::Difference;
  for (const auto& k : n.kids) {
    const TreeFacts sub = tree_facts(*k);
    s = sat_add(s, sub.size);
    reg = reg && sub.regular;
    alg = alg || sub.algebra;
  }
  if (n.kind == NodeKind::Repeat) s = estimate_repeat_size(s, n.min, n.max);
  n.tree_size.store(s, std::memory_order_relaxed);
  n.tree_flags.store(static_cast<std::uint8_t>(1 | (reg ? 2 : 0) | (alg ? 4 : 0)), std::memory_order_release);
  return {s, reg, alg};
}

std::uint64_t estimate_nfa_size(const NodePtr& n) { return sat_add(tree_facts(*n).size, 1); }

// ---------------------------------------------------------------------------------------------
// print_regex

namespace {

void hex_escape(std::string& out, std::uint32_t cp) {
  char buf[16];
  if (cp <= 0xFF)
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
  else if (cp <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  else
    std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
  out += buf;
}

// One code point as regex text; `in_class` selects the set of characters needing a backslash.
void print_cp(std::string& out, std::uint32_t cp, bool in_class) {
  switch (cp) {
    case '\n': out += "\\n"; return;
    case '\t': out += "\\t"; return;
    case '\r': out += "\\r"; return;
    case '\f': out += "\\f"; return;
    case '\v': out += "\\v"; return;
    default: break;
  }
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || (cp > 0x7F && unicode_space().contains(cp))) {
    hex_escape(out, cp);
    return;
  }
  if (cp < 0x80) {
    const char* special = in_class ? "\\]^-[&~|" : "\\.^$*+?{}[]|()# ";
    for (const char* p = special; *p; ++p)
      if (static_cast<std::uint32_t>(*p) == cp) {
        out += '\\';
        break;
      }
    out += static_cast<char>(cp);
    return;
  }
  utf8_append(out, cp);
}

// Class body items for `cs`: category escapes it fully contains, then the remaining ranges.
std::string class_items(CharSet cs) {
  std::string out;
  struct Cat { const CharSet* set; const char* text; };
  const Cat cats[] = {{&unicode_word(), "\\w"}, {&unicode_digit(), "\\d"}, {&unicode_space(), "\\s"}};
  auto count = [](const CharSet& x) {
    std::uint64_t n = 0;
    for (const auto& r : x.ranges()) n += r.hi - r.lo + 1;
    return n;
  };
  for (const auto& c : cats) {
    // A set smaller than the category cannot contain it: skip the (costly) subset test, which
    // matters because terminal identities print every class of every terminal.
    if (cs.empty() || count(cs) < count(*c.set)) continue;
    if (charset_subset(*c.set, cs)) {
      out += c.text;
      cs = charset_minus(cs, *c.set);
    }
  }
  for (const auto& r : cs.ranges()) {
    print_cp(out, r.lo, true);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    print_cp(out, r.hi, true);
  }
  return out;
}

void print_chars(std::string& out, const CharSet& cs) {
  if (cs.empty()) {
    out += "[^\\x00-\\U0010ffff]";
    return;
  }
  const auto& rs = cs.ranges();
  if (rs.size() == 1 && rs[0].lo == rs[0].hi) {
    print_cp(out, rs[0].lo, false);
    return;
  }
  const CharSet neg = cs.negated();
  if (neg.empty()) {
    out += "[\\s\\S]";
    return;
  }
  if (neg == CharSet::single('\n')) {
    out += '.';
    return;
  }
  struct Cat { const CharSet* set; const char* pos; const char* neg; };
  const Cat cats[] = {{&unicode_digit(), "\\d", "\\D"}, {&unicode_word(), "\\w", "\\W"},
                      {&unicode_space(), "\\s", "\\S"}};
  for (const auto& c : cats) {
    if (cs == *c.set) { out += c.pos; return; }
    if (neg == *c.set) { out += c.neg; return; }
  }
  std::string p = "[" + class_items(cs) + "]";
  std::string n = "[^" + class_items(neg) + "]";
  out += n.size() < p.size() ? n : p;
}

const char* kNoGroup = "(?:)";

// ctx: 0 = alternative branch / top, 1 = element of a concatenation, 2 = operand of a quantifier.
void print_node(std::string& out, const Node& n, int ctx) {
  switch (n.kind) {
    case NodeKind::Empty:
      out += kNoGroup;
      return;
    case NodeKind::Chars:
      print_chars(out, n.chars);
      return;
    case NodeKind::RuleRef:
      out += "<rule " + std::to_string(n.rule) + ">";
      return;
    case NodeKind::Concat: {
      if (n.kids.empty()) { out += kNoGroup; return; }
      if (ctx == 2) out += "(?:";
      for (const auto& k : n.kids) print_node(out, *k, 1);
      if (ctx == 2) out += ")";
      return;
    }
    case NodeKind::Alt: {
      if (n.kids.empty()) { print_chars(out, CharSet()); return; }
      if (ctx >= 1) out += "(?:";
      for (std::size_t i = 0; i < n.kids.size(); ++i) {
        if (i) out += '|';
        print_node(out, *n.kids[i], 0);
      }
      if (ctx >= 1) out += ")";
      return;
    }
    case NodeKind::Repeat: {
      if (ctx == 2) out += "(?:";
      print_node(out, *n.kids[0], 2);
      const std::uint32_t lo = n.min, hi = n.max;
      if (hi == Node::kUnbounded) {
        if (lo == 0) out += '*';
        else if (lo == 1) out += '+';
        else out += "{" + std::to_string(lo) + ",}";
      } else if (lo == 0 && hi == 1) {
        out += '?';
      } else if (lo == hi) {
        out += "{" + std::to_string(lo) + "}";
      } else {
        out += "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      }
      if (ctx == 2) out += ")";
      return;
    }
    case NodeKind::Intersect:
    case NodeKind::Difference: {
      const char* op = n.kind == NodeKind::Intersect ? "&" : "-";
      out += "(?:";
      for (std::size_t i = 0; i < n.kids.size(); ++i) {
        if (i) out += op;
        print_node(out, *n.kids[i], 1);
      }
      out += ")";
      return;
    }
  }
}

}  // namespace

std::string print_regex(const NodePtr& n) {
  std::string out;
  print_node(out, *n, 0);
  return out;
}

}  // namespace corral
