// test_grammar.cpp — grammar text → IR → Earley parser, through the C++ API.
#include <string>

#include "earley.hpp"
#include "grammar.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

Grammar build(const std::string& text, const Limits& limits = Limits()) {
  Budget budget(limits.max_compile_ms);
  return lower_grammar(parse_grammar_text(text, "root", limits), limits, budget);
}

bool parses(const Grammar& g, const std::string& s, bool* complete = nullptr) {
  const auto dfas = g.own_dfas();
  EarleyParser p(g, dfas.data(), 100000);
  for (char c : s)
    if (!p.push_byte(static_cast<std::uint8_t>(c))) return false;
  if (complete) *complete = p.accepting();
  return true;
}

bool accepts(const Grammar& g, const std::string& s) {
  bool complete = false;
  return parses(g, s, &complete) && complete;
}

}  // namespace

TEST(grammar_json_accepts_and_rejects) {
  Grammar g = build(json_grammar_text());
  EXPECT(accepts(g, R"G({"a": [1, 2.5e3, "x\n\u00e9"], "b": {"c": null}})G"));
  EXPECT(accepts(g, " [ ] "));
  EXPECT(accepts(g, "-0.5"));
  EXPECT(!accepts(g, "[1,]"));
  EXPECT(!accepts(g, "01"));
  EXPECT(!parses(g, "{\"a\n"));
  bool complete = true;
  EXPECT(parses(g, "{\"a\": [", &complete));
  EXPECT(!complete);
}

TEST(grammar_non_greedy_terminals_are_exact) {
  // Character-level semantics: "abcd" splits as "ab" "cd" even though "abc" is a longer match.
  Grammar g = build(R"G(root ::= ("ab" | "abc") "cd" x
x ::= "" | "[" x "]")G");
  EXPECT(accepts(g, "abcd"));
  EXPECT(accepts(g, "abccd"));
  EXPECT(accepts(g, "abcd[[]]"));
  EXPECT(!accepts(g, "abcd[[]"));
  // Greedy-lexer trap: [a-z]* followed by a literal that its class also matches.
  Grammar h = build(R"G(root ::= [a-z]* "z" ";" root | "")G");
  EXPECT(accepts(h, "abz;z;"));
  EXPECT(!accepts(h, "ab;"));
}

TEST(grammar_left_and_right_recursion_and_nullable) {
  Grammar g = build(R"G(root ::= list
list ::= list "," item | item | ""
item ::= "(" list ")" | [0-9]+)G");
  EXPECT(accepts(g, ""));
  EXPECT(accepts(g, "1,(2,(3,4),()),5"));
  EXPECT(!accepts(g, "1,(2"));
  std::string deep(2000, '(');
  deep += std::string(2000, ')');
  EXPECT(accepts(g, deep));
}

TEST(grammar_repetition_counts) {
  Grammar g = build(R"G(root ::= (x ","){2,3}
x ::= "[" x? "]")G");
  EXPECT(!accepts(g, "[],"));
  EXPECT(accepts(g, "[],[[]],"));
  EXPECT(accepts(g, "[],[],[],"));
  EXPECT(!accepts(g, "[],[],[],[],"));
}

TEST(grammar_prints_canonically) {
  Grammar g = build(R"G(root ::= "a" b
b ::= "b" b | "c")G");
  std::string s = g.to_string();
  EXPECT(s.find("start ::= root") != std::string::npos);
  EXPECT(s.find("b ::=") != std::string::npos);
}

TEST(earley_rollback_restores_state) {
  Grammar g = build(json_grammar_text());
  const auto dfas = g.own_dfas();
  EarleyParser p(g, dfas.data(), 100000);
  std::string a = R"G({"k": [1, 2)G";
  for (char c : a) EXPECT(p.push_byte(static_cast<std::uint8_t>(c)));
  std::size_t mark = p.num_sets();
  for (char c : std::string(", {\"z\": true}]")) EXPECT(p.push_byte(static_cast<std::uint8_t>(c)));
  p.pop_to(mark);
  EXPECT_EQ(p.shortest_completion(1000), std::string("]}"));
}

TEST(earley_shortest_completion_is_valid) {
  Grammar g = build(R"G(root ::= "<" tag ">" body "</" tag ">"
tag ::= [a-z]+
body ::= "" | root body | [^<>]+)G");
  const auto dfas = g.own_dfas();
  EarleyParser p(g, dfas.data(), 100000);
  for (char c : std::string("<ab><c>x")) EXPECT(p.push_byte(static_cast<std::uint8_t>(c)));
  std::string comp = p.shortest_completion(1000);
  for (char c : comp) EXPECT(p.push_byte(static_cast<std::uint8_t>(c)));
  EXPECT(p.accepting());
  EXPECT_EQ(comp.size(), std::size_t(8));  // "</a></a>"
}

TEST(grammar_stacked_quantifiers_count_as_nesting) {
  try {
    build("root ::= \"a\"" + std::string(10000, '*'));
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nesting"));
  }
  Grammar g = build("root ::= \"a\"*+?");
  EXPECT(accepts(g, "aaa"));
  EXPECT(accepts(g, ""));
}

TEST(grammar_nesting_ceiling_holds_whatever_max_nesting_says) {
  Limits limits;
  limits.max_nesting = 100000;
  const std::string text = "root ::= " + std::string(kMaxNestingCeiling + 1, '(') + "\"a\"" +
                           std::string(kMaxNestingCeiling + 1, ')');
  try {
    parse_grammar_text(text, "root", limits);
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nesting"));
  }
}

TEST(grammar_chain_of_regular_rules_is_not_inlined_past_the_nesting_limit) {
  // Each rule is regular; inlined all the way, the chain would be a tree 20,000 levels deep.
  const int n = 20000;
  std::string text = "root ::= r0\n";
  for (int i = 0; i < n; ++i) text += "r" + std::to_string(i) + " ::= \"(\" r" + std::to_string(i + 1) + " \")\"\n";
  text += "r" + std::to_string(n) + " ::= \"x\"\n";
  // What this checks is the shape (no 20,000-deep inlining), not speed: a Debug+ASan or TSan
  // build needs 5-6 s of CPU here, which a shared machine can stretch past the default 10 s
  // wall-clock budget. A two-minute budget still fails a real blow-up.
  Limits limits;
  limits.max_compile_ms = 120000;
  Grammar g = build(text, limits);
  EXPECT(accepts(g, std::string(n, '(') + "x" + std::string(n, ')')));
  EXPECT(!accepts(g, std::string(n, '(') + "x" + std::string(n - 1, ')')));
}

TEST(grammar_starred_alternation_refused_after_lowering_is_split) {
  // A big alternation with a star is accepted as one terminal on trust (grammar_lower.cpp,
  // finite_alt) when its shape is one finite_dfa builds; here each star is followed by the byte
  // it repeats (`a*a`), which finite_dfa cannot build, so the terminal fails in build_dfas and
  // lowering starts again with the alternation split into its branches. Same language either
  // way; a second compile meets the refusal in the memo and splits at once.
  std::string alts;
  for (int i = 0; i < 1000; ++i) alts += (i ? "|" : "") + std::string("x") + std::to_string(i) + "a*a";
  const std::string text = "root ::= /(?:" + alts + ")/ \";\"";
  for (int round = 0; round < 2; ++round) {
    Grammar g = build(text);
    EXPECT(g.terminals.size() > 2);  // split: one terminal per branch (and the ";")
    EXPECT(accepts(g, "x7a;"));
    EXPECT(accepts(g, "x999aaaa;"));
    EXPECT(accepts(g, "x12a;"));
    EXPECT(!accepts(g, "x7;"));
    EXPECT(!accepts(g, "x1000a;"));
    EXPECT(!accepts(g, "x7ab;"));
  }
  // The same size of alternation with stars finite_dfa builds (any character, then the end of
  // the alternative) stays one terminal (with the ";" merged beside it).
  std::string ok;
  for (int i = 0; i < 1000; ++i) ok += (i ? "|" : "") + std::string("y") + std::to_string(i) + "b[c-z]*";
  Grammar h = build("root ::= /(?:" + ok + ")/ \";\"");
  EXPECT(h.terminals.size() == 1);
  EXPECT(accepts(h, "y42bzz;"));
  EXPECT(accepts(h, "y42b;"));
  EXPECT(!accepts(h, "y42;"));
  EXPECT(!accepts(h, "y42ba;"));
}
