// test_finite_dfa.cpp — the direct construction of finite trees' DFAs (finite_dfa.hpp) against
// the general pipeline (Dfa::compile_by_subsets): both are minimal, so equal languages mean
// isomorphic automata, which `isomorphic` checks state by state over all 256 bytes (with the
// accepting flags, distances and shortest completions).
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "dfa.hpp"
#include "errors.hpp"
#include "finite_dfa.hpp"
#include "json_string.hpp"
#include "regex_parser.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

// True when `a` and `b` are the same automaton up to state numbering.
bool isomorphic(const Dfa& a, const Dfa& b) {
  if (a.num_states() != b.num_states() || a.empty_language() != b.empty_language()) return false;
  if (a.empty_language()) return true;
  std::vector<std::int32_t> to_b(a.num_states(), -1), to_a(b.num_states(), -1);
  std::vector<std::pair<std::int32_t, std::int32_t>> queue{{a.start(), b.start()}};
  to_b[static_cast<std::size_t>(a.start())] = b.start();
  to_a[static_cast<std::size_t>(b.start())] = a.start();
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const auto [x, y] = queue[q];
    if (a.accepting(x) != b.accepting(y) || a.distance_to_accept(x) != b.distance_to_accept(y) ||
        a.shortest_completion(x) != b.shortest_completion(y))
      return false;
    for (int c = 0; c < 256; ++c) {
      const std::int32_t nx = a.next(x, static_cast<std::uint8_t>(c)), ny = b.next(y, static_cast<std::uint8_t>(c));
      if ((nx == Dfa::kDead) != (ny == Dfa::kDead)) return false;
      if (nx == Dfa::kDead) continue;
      std::int32_t& fx = to_b[static_cast<std::size_t>(nx)];
      std::int32_t& fy = to_a[static_cast<std::size_t>(ny)];
      if (fx < 0 && fy < 0) {
        fx = ny, fy = nx;
        queue.emplace_back(nx, ny);
      } else if (fx != ny || fy != nx) {
        return false;
      }
    }
  }
  return queue.size() == a.num_states();
}

// Both routes for one tree; checks the direct route was taken.
bool same_both_ways(const NodePtr& n, const Limits& lim = Limits()) {
  Budget budget(60000);
  const std::optional<FiniteAutomaton> fa = build_finite_automaton(n, lim, budget);
  if (!fa) return false;
  const Dfa direct = Dfa::compile(n, lim, budget);
  const Dfa general = Dfa::compile_by_subsets(n, lim, budget);
  return fa->size() == direct.num_states() && isomorphic(direct, general);
}

NodePtr lit(const std::string& s) {
  std::u32string u;
  for (unsigned char c : s) u.push_back(c);
  return make_literal(u);
}

// What the converter makes of a declared key: `"` spellings `"` ws `:` ws.
NodePtr key_terminal(const std::u32string& key, JsonEscapes mode) {
  Limits lim;
  const NodePtr ws = make_repeat(make_chars([] {
                                   CharSet cs;
                                   for (char c : std::string(" \t\n\r")) cs.add(static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(c));
                                   return cs;
                                 }()),
                                 0, 16);
  return make_concat({lit("\""), json_string_content(make_literal(key), lim, mode), lit("\""), ws, lit(":"), ws});
}

const std::uint32_t kAwkward[] = {'"',    '\\',   '/',    0x00,    0x08,    0x09,    0x0A,     0x0C,
                                  0x0D,   0x1F,   0x7F,   0x80,    0xE9,    0x7FF,   0x800,    0x4E2D,
                                  0xD7FF, 0xE000, 0xFFFD, 0xFFFF,  0x10000, 0x1F600, 0x10FFFF, 'a',
                                  'Z',    'f',    'u',    '0',     ' ',     '$',     '-',      '_'};

bool full_digits(const Dfa& d) {
  std::int32_t st = d.start();
  for (char c : std::string("123")) st = st == Dfa::kDead ? st : d.next(st, static_cast<std::uint8_t>(c));
  return st != Dfa::kDead && d.accepting(st);
}

}  // namespace

TEST(finite_dfa_keys_equal_the_pipeline) {
  std::mt19937 rng(12);
  std::vector<std::u32string> keys = {U"name", U"", U"a\"b", U"back\\slash", U"\u00e9t\u00e9", U"\U0001F600",
                                      U"tab\there", U"x/y", U"\u4e2d\u6587", U"$schema"};
  for (int i = 0; i < 150; ++i) {
    std::u32string k;
    const int len = static_cast<int>(rng() % 12);
    for (int j = 0; j < len; ++j) {
      const std::uint32_t r = rng() % 4;
      k.push_back(r == 0 ? kAwkward[rng() % (sizeof kAwkward / sizeof kAwkward[0])]
                  : r == 1 ? 0x20 + rng() % 0x5F
                  : r == 2 ? 0xA0 + rng() % 0xD000
                           : 0x10000 + rng() % 0x100000);
    }
    keys.push_back(k);
  }
  for (const auto& k : keys) {
    for (JsonEscapes mode : {JsonEscapes::Any, JsonEscapes::Canonical}) {
      EXPECT(same_both_ways(key_terminal(k, mode)));
      EXPECT(same_both_ways(json_string_content(make_literal(k), Limits(), mode)));
    }
  }
}

TEST(finite_dfa_enums_equal_the_pipeline) {
  // An enum's alternation of quoted JSON strings: past 16 alternatives the builder groups the
  // alternatives by their first node through a hash table and lays the groups out by a
  // counting sort (below 16, a linear scan): both paths, with shared prefixes (common first
  // characters and whole words that are prefixes of others), repeated values, and the empty
  // string, against the pipeline.
  std::mt19937 rng(31);
  const std::u32string alphabet = U"abcAB_\u00e9\"/";
  for (int round = 0; round < 12; ++round) {
    const std::size_t count = round < 4 ? 3 + rng() % 14 : 17 + rng() % 300;
    std::vector<NodePtr> alts;
    for (std::size_t i = 0; i < count; ++i) {
      std::u32string w;
      const std::size_t len = rng() % 7;
      for (std::size_t j = 0; j < len; ++j) w.push_back(alphabet[rng() % alphabet.size()]);
      const JsonEscapes mode = round % 2 ? JsonEscapes::Canonical : JsonEscapes::Any;
      alts.push_back(make_concat({lit("\""), json_string_content(make_literal(w), Limits(), mode), lit("\"")}));
      if (i % 5 == 0) alts.push_back(alts.back());  // the same value twice
    }
    EXPECT(same_both_ways(make_alt(alts)));
  }
}

TEST(finite_dfa_regexes_equal_the_pipeline) {
  const char* patterns[] = {
      "",           "a",           "abc|abd|ab|a",   "(?:a|ab)(?:c|bcd)?", "[a-z]{2,5}",       "(?:ab){0,4}b?",
      "x{0}",       "(?:a?){3,6}", "[^a]{1,3}",      "(?s:.){0,20}",       "(?s:.){3}",        "[\\x00-\\x7f]{0,4}",
      "[\\u0800-\\uffff]{1,2}",    "[\\U00010000-\\U0010ffff]", "[\\u07ff-\\u0801\\ud7ff\\ue000]{2}",
      "(?:0|[1-9][0-9]{0,3})(?:\\.[0-9]{1,2})?", "(?:foo|bar|baz|qux|quux|foobar){1,3}", "[ab]{0,6}a[ab]{3}",
      "[0-9]{4}-[0-9]{2}-[0-9]{2}",      "(?:(?:a|b){0,2}c){0,3}",
      "value_0|value_1|value_2|value_10|value_11|value_12|value_20|val|v|alue_1", "(?:ab|ac|ad|b){0,3}(?:a|ab|abc)",
  };
  Limits lim;
  for (const char* p : patterns) {
    const NodePtr n = parse_regex(p, lim);
    EXPECT(same_both_ways(n));
    EXPECT(same_both_ways(json_string_content(n, lim, JsonEscapes::Any)));
    EXPECT(same_both_ways(json_string_content(n, lim, JsonEscapes::Canonical)));
  }
  // Random classes, repeated.
  std::mt19937 rng(5);
  for (int i = 0; i < 60; ++i) {
    CharSet cs;
    for (int r = 0; r < 3; ++r) {
      const std::uint32_t lo = kAwkward[rng() % (sizeof kAwkward / sizeof kAwkward[0])];
      cs.add(lo, std::min<std::uint32_t>(0x10FFFF, lo + rng() % 300));
    }
    const NodePtr n = make_repeat(make_chars(cs), rng() % 2, 1 + rng() % 4);
    EXPECT(same_both_ways(n));
    EXPECT(same_both_ways(json_string_content(n, lim, JsonEscapes::Any)));
  }
}

namespace {

// The converter's "none of these names" regex (json_schema/patterns.py, _not_in_regex_of):
// at each trie node, stopping where no name ends, leaving the trie by another character (then
// anything), or going on; past a leaf, one or more characters.
std::u32string escaped(char32_t c) {
  const std::u32string special = U"\\.^$|?*+()[]{}-/";
  return special.find(c) != std::u32string::npos ? std::u32string{U'\\', c} : std::u32string{c};
}
std::u32string not_names(const std::vector<std::u32string>& names, std::size_t depth = 0) {
  bool stops = false;
  std::vector<char32_t> kids;
  for (const auto& n : names) {
    if (n.size() == depth) stops = true;
    else if (std::find(kids.begin(), kids.end(), n[depth]) == kids.end()) kids.push_back(n[depth]);
  }
  std::vector<std::u32string> alts;
  if (!stops) alts.push_back(U"");
  if (kids.empty()) {
    alts.push_back(U"(?s:.)+");
  } else {
    std::u32string cls = U"[^";
    for (char32_t c : kids) cls += escaped(c);
    alts.push_back(cls + U"](?s:.)*");
    for (char32_t c : kids) {
      std::vector<std::u32string> sub;
      for (const auto& n : names)
        if (n.size() > depth && n[depth] == c) sub.push_back(n);
      alts.push_back(escaped(c) + U"(?:" + not_names(sub, depth + 1) + U")");
    }
  }
  std::u32string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? U"|" : U"") + alts[i];
  return out;
}
std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) out += static_cast<char>(c);
    else if (c < 0x800) out += static_cast<char>(0xC0 | (c >> 6)), out += static_cast<char>(0x80 | (c & 0x3F));
    else if (c < 0x10000)
      out += static_cast<char>(0xE0 | (c >> 12)), out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
          out += static_cast<char>(0x80 | (c & 0x3F));
    else
      out += static_cast<char>(0xF0 | (c >> 18)), out += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
          out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

}  // namespace

TEST(finite_dfa_key_complements_equal_the_pipeline) {
  // The undeclared-key terminal: `"` (none of the names) `"` ws `:` ws, a trie whose exits
  // end in the one cyclic part, a star of any character in front of `"`.
  std::mt19937 rng(31);
  Limits lim;
  const NodePtr ws = parse_regex("[ \\t\\n\\r]{0,16}", lim);
  std::vector<std::vector<std::u32string>> sets = {
      {U"name"}, {U"name", U"age"}, {U"a", U"ab", U"abc"}, {U""}, {U"", U"x"}, {U"id", U"_id", U"$schema", U"a\"b"}};
  // Names starting with every other letter: a first-letter class of more than 16 ranges.
  std::vector<std::u32string> alternate;
  for (char32_t c = 'a'; c <= 'z'; c += 2) alternate.push_back(std::u32string{c, U'x'}), alternate.push_back({c - 32});
  sets.push_back(alternate);
  for (int i = 0; i < 24; ++i) {
    std::vector<std::u32string> names;
    const int count = 1 + static_cast<int>(rng() % 12);
    for (int j = 0; j < count; ++j) {
      std::u32string k;
      const int len = static_cast<int>(rng() % 9);
      for (int c = 0; c < len; ++c)
        k.push_back(rng() % 3 != 0 ? 'a' + rng() % 4
                    : i % 3 == 0   ? kAwkward[rng() % (sizeof kAwkward / sizeof kAwkward[0])]
                                   : U"\"\\/\x01\t\x1f\x7f $-_"[rng() % 11]);
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
    sets.push_back(names);
  }
  int declined = 0;
  auto ascii = [](const std::vector<std::u32string>& names) {
    for (const auto& n : names)
      for (char32_t c : n)
        if (c >= 0x80) return false;
    return true;
  };
  for (const auto& names : sets) {
    const NodePtr body = parse_regex(utf8(not_names(names)), lim);
    for (JsonEscapes mode : {JsonEscapes::Any, JsonEscapes::Canonical}) {
      const NodePtr content = json_string_content(body, lim, mode);
      const NodePtr kt = make_concat({lit("\""), content, lit("\""), ws, lit(":"), ws});
      // (A class of more than 16 UTF-8 sequences, from names with non-ASCII and astral
      // characters, keeps the pipeline; names of ASCII characters never do.)
      Budget budget(60000);
      if (!build_finite_automaton(kt, lim, budget)) {
        EXPECT(!ascii(names));
        ++declined;
        continue;
      }
      EXPECT(same_both_ways(kt));
      EXPECT(same_both_ways(content));
    }
    EXPECT(!ascii(names) || same_both_ways(body));
  }
  EXPECT(declined < static_cast<int>(sets.size()) / 2);
}

TEST(finite_dfa_stars_equal_the_pipeline) {
  const char* patterns[] = {
      "a*",          "ab{2,}",         "[a-z]+",       "[a-z]*\"",      "x(?s:.)*",        "(?s:.)+",
      "(?:ab|c)*d",  "a[0-9]*|b[0-9]*|c", "(?:0|[1-9][0-9]*)", "(?:a|b[0-9]{2})*", "-?[0-9]+z|y", "[^\"]{2,}\"",
      "(?:\\\\.|[^\\\\])*",  "(?:foo|bar)+",  "abc(?:x|yz){3,}|ab", "(?:[\\u0800-\\uffff])*", "q|(?:[ab]c)*",
  };
  Limits lim;
  int direct = 0;
  for (const char* p : patterns) {
    const NodePtr n = parse_regex(p, lim);
    EXPECT(same_both_ways(n));
    // In a JSON string body a star's escapes and what follows can both start with `\\`: the
    // direct route declines those (the pipeline builds them); what it builds must be equal.
    for (JsonEscapes mode : {JsonEscapes::Any, JsonEscapes::Canonical}) {
      const NodePtr j = json_string_content(n, lim, mode);
      Budget budget(60000);
      if (!build_finite_automaton(j, lim, budget)) continue;
      ++direct;
      EXPECT(same_both_ways(j));
    }
  }
  EXPECT(direct >= 20);
  // Random classes, starred, in front of a random tail whose first character is not in them.
  std::mt19937 rng(8);
  for (int i = 0; i < 60; ++i) {
    CharSet cs;
    for (int r = 0; r < 3; ++r) {
      const std::uint32_t lo = kAwkward[rng() % (sizeof kAwkward / sizeof kAwkward[0])];
      cs.add(lo, std::min<std::uint32_t>(0x10FFFF, lo + rng() % 300));
    }
    std::uint32_t stop = 'A';
    while (stop < 0x7F && cs.contains(stop)) ++stop;
    if (cs.contains(stop)) continue;  // (no ASCII stop character left: a tail could overlap)
    const NodePtr tail = make_concat({make_chars(CharSet::single(stop)), make_repeat(make_chars(cs), 0, rng() % 3)});
    const NodePtr n = make_concat({make_repeat(make_chars(cs), rng() % 3, Node::kUnbounded), tail});
    EXPECT(same_both_ways(n));
    EXPECT(same_both_ways(make_alt({n, make_concat({make_chars(cs), tail})})));
  }
}

TEST(finite_dfa_counted_string) {
  // A JSON string of at most 64 code points: the shape of `maxLength` terminals.
  Limits lim;
  const NodePtr n = make_concat(
      {lit("\""), make_repeat(json_string_any_char(JsonEscapes::Any), 0, 64), lit("\"")});
  EXPECT(same_both_ways(n));
}

TEST(finite_dfa_leaves_other_trees_to_the_pipeline) {
  Limits lim;
  Budget budget(60000);
  // Stars the direct route declines: inside a counted repetition, two different stars, a
  // star whose kid can start like what follows it, a kid that is not prefix-free or matches ε.
  for (const char* p : {"(?:a*b){2}", "(?:ab+){1,3}", "a*b*", "a*|b*", "[0-9]*|[0-9]*x", "a*a", "[a-c]*b",
                        "(?:a|ab)*", "(?:a?)*", "(?:a|b{0,2})*c"}) {
    const NodePtr n = parse_regex(p, lim);
    EXPECT(!build_finite_automaton(n, lim, budget));
  }
  EXPECT(!build_finite_automaton(make_intersect({parse_regex("[ab]{3}", lim), parse_regex("a.b", lim)}), lim, budget));
  EXPECT(!build_finite_automaton(make_concat({lit("a"), make_rule_ref(0)}), lim, budget));
  // A class of many UTF-8 sequences (Unicode digits) is left to the pipeline, which builds it.
  const NodePtr digits = parse_regex("\\d{1,3}", lim);
  EXPECT(!build_finite_automaton(digits, lim, budget));
  EXPECT(full_digits(Dfa::compile(digits, lim, budget)));
  // The empty language: no states, as the pipeline gives.
  const NodePtr none = make_concat({lit("a"), make_chars(CharSet())});
  const std::optional<FiniteAutomaton> fa = build_finite_automaton(none, lim, budget);
  EXPECT(fa && fa->size() == 0);
  EXPECT(Dfa::compile(none, lim, budget).empty_language());
}

TEST(finite_dfa_limits_match_the_pipeline) {
  // Over max_dfa_states: both routes refuse; over max_nfa_states: the estimate refuses first.
  Limits lim;
  lim.max_dfa_states = 50;
  Budget budget(60000);
  const NodePtr big = parse_regex("[a-z]{0,80}", lim);
  EXPECT_THROWS(Dfa::compile(big, lim, budget), LimitExceeded);
  EXPECT_THROWS(Dfa::compile_by_subsets(big, lim, budget), LimitExceeded);
  Limits nfa_lim;
  nfa_lim.max_nfa_states = 100;
  const NodePtr wide = parse_regex("[a-z]{0,300}", Limits());
  EXPECT(!build_finite_automaton(wide, nfa_lim, budget));
  EXPECT_THROWS(Dfa::compile(wide, nfa_lim, budget), LimitExceeded);
}

TEST(finite_dfa_compile_direct_within_a_cap) {
  // Dfa::compile_direct (what the lowering asks of a big starred alternation): the direct
  // route's automaton when it takes the tree within the state cap, nothing otherwise. The
  // converter's form of the undeclared-key complement: one quoted string per first letter.
  Limits lim;
  Budget budget(60000);
  const std::vector<std::u32string> names = {U"check_in_date", U"check_out_date", U"location", U"num_guests", U"num_rooms"};
  std::vector<NodePtr> branches;
  std::vector<std::u32string> alts;
  {
    // The top-level branches of not_names(names), each between quotes.
    const std::u32string all = not_names(names);
    std::size_t depth = 0, from = 0;
    for (std::size_t i = 0; i <= all.size(); ++i) {
      if (i == all.size() || (depth == 0 && all[i] == U'|')) {
        alts.push_back(all.substr(from, i - from));
        from = i + 1;
      } else if (all[i] == U'\\') {
        ++i;
      } else if (all[i] == U'(' || all[i] == U'[') {
        ++depth;
      } else if (all[i] == U')' || all[i] == U']') {
        --depth;
      }
    }
  }
  EXPECT(alts.size() == 5);  // "", the other first letters, c…, l…, n…
  for (const auto& a : alts) {
    const NodePtr content = json_string_content(parse_regex(utf8(a), lim), lim, JsonEscapes::Any);
    branches.push_back(make_concat({lit("\""), content, lit("\"")}));
  }
  const NodePtr alt = make_alt(branches);
  const std::optional<Dfa> direct = Dfa::compile_direct(alt, lim, budget, 4096);
  EXPECT(direct.has_value());
  if (direct) EXPECT(isomorphic(*direct, Dfa::compile_by_subsets(alt, lim, budget)));
  EXPECT(!Dfa::compile_direct(alt, lim, budget, direct ? direct->num_states() - 1 : 0));  // over the cap
  EXPECT(!Dfa::compile_direct(parse_regex("a*b*", lim), lim, budget, 4096));  // outside the direct route
}
