// test_finite_dfa.cpp — the direct construction of finite trees' DFAs (finite_dfa.hpp) against
// the general pipeline (Dfa::compile_by_subsets): both are minimal, so equal languages mean
// isomorphic automata, which `isomorphic` checks state by state over all 256 bytes (with the
// accepting flags, distances and shortest completions).
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
  EXPECT(!build_finite_automaton(parse_regex("a*", lim), lim, budget));
  EXPECT(!build_finite_automaton(parse_regex("ab{2,}", lim), lim, budget));
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
