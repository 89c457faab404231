// test_intersection.cpp — the grammar operators `A & B` (intersection) and `A - B` (difference):
// syntax, precedence, exact languages (cross-checked against the operands compiled alone),
// merging with neighbours, `/…/j` operands, errors and limits.
#include <random>
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

bool accepts(const Grammar& g, const std::string& s) {
  const auto dfas = g.own_dfas();
  EarleyParser p(g, dfas.data(), 100000);
  for (char c : s)
    if (!p.push_byte(static_cast<std::uint8_t>(c))) return false;
  return p.accepting();
}

// The CompileError that compiling `text` raises (fails the test when it compiles).
CompileError compile_error(const std::string& text) {
  try {
    build(text);
  } catch (const CompileError& e) {
    return e;
  }
  throw corral_test::Failure{"expected a CompileError for: " + text};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every string over `alphabet` up to `max_len` characters, plus random longer ones.
std::vector<std::string> sample_strings(const std::string& alphabet, std::size_t max_len, std::size_t extra) {
  std::vector<std::string> out{""};
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].size() == max_len) continue;
    for (char c : alphabet) out.push_back(out[i] + c);
  }
  std::mt19937 rng(12345);
  for (std::size_t i = 0; i < extra; ++i) {
    std::string s(rng() % (3 * max_len), ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST(algebra_intersection_and_difference_are_exact) {
  struct Case {
    const char* a;
    const char* b;
  };
  const Case cases[] = {
      {"/[a-c]+/", "/.{0,4}/"},
      {"/(ab|b)*c?/", "/[abc]*b[abc]/"},
      {"(\"a\" | \"bc\")*", "/a*(bc)*/"},
      {"/.*/", "/(a|b)*a(a|b){2}/"},
      {"/c*/", "\"\""},
  };
  const auto strings = sample_strings("abc", 6, 300);
  for (const Case& c : cases) {
    Grammar ga = build(std::string("root ::= ") + c.a);
    Grammar gb = build(std::string("root ::= ") + c.b);
    Grammar inter = build(std::string("root ::= ") + c.a + " & " + c.b);
    Grammar diff = build(std::string("root ::= ") + c.a + " - " + c.b);
    for (const std::string& s : strings) {
      const bool in_a = accepts(ga, s), in_b = accepts(gb, s);
      if (accepts(inter, s) != (in_a && in_b)) throw corral_test::Failure{std::string(c.a) + " & " + c.b + " on '" + s + "'"};
      if (accepts(diff, s) != (in_a && !in_b)) throw corral_test::Failure{std::string(c.a) + " - " + c.b + " on '" + s + "'"};
    }
  }
}

TEST(algebra_precedence_between_concatenation_and_alternation) {
  // `&` binds looser than concatenation and tighter than `|`.
  Grammar g = build(R"G(root ::= /[a-z]+/ & /.{0,5}/ | "q1")G");
  EXPECT(accepts(g, "abcde"));
  EXPECT(!accepts(g, "abcdef"));
  EXPECT(accepts(g, "q1"));
  Grammar h = build(R"G(root ::= "a" "b" & /.{2}/ "")G");
  EXPECT(accepts(h, "ab"));
  // A chain reads left to right: (A & B) - C - D.
  Grammar k = build(R"G(root ::= /[a-z]/ & /[a-m]/ - "b" - ("c" | "d"))G");
  EXPECT(accepts(k, "a"));
  EXPECT(accepts(k, "m"));
  EXPECT(!accepts(k, "b"));
  EXPECT(!accepts(k, "d"));
  EXPECT(!accepts(k, "n"));
  // (A - B) & C = (A & C) - B: the chain's set algebra does not depend on grouping.
  Grammar m = build(R"G(root ::= /[a-z]+/ - "ab" & /a./)G");
  EXPECT(accepts(m, "ac"));
  EXPECT(!accepts(m, "ab"));
  EXPECT(!accepts(m, "ba"));
}

TEST(algebra_keywords_excluded_and_merged_with_neighbours) {
  Grammar g = build(R"G(root ::= "\"" ident "\"" ("," "\"" ident "\"")*
ident ::= /[a-z_][a-z0-9_]*/ - ("if" | "else" | "while"))G");
  EXPECT(accepts(g, R"("iff","x","elsewhere")"));
  EXPECT(!accepts(g, R"("if")"));
  EXPECT(!accepts(g, R"("a","while")"));
  // The quotes and the operator's automaton are one terminal.
  Grammar h = build(R"G(root ::= "<" (/[a-z]+/ - "b") ">")G");
  EXPECT_EQ(h.terminals.size(), std::size_t(1));
  EXPECT(accepts(h, "<a>"));
  EXPECT(!accepts(h, "<b>"));
}

TEST(algebra_under_repetition_and_in_recursive_rules) {
  Grammar g = build(R"G(root ::= ((/[a-z]+/ & /.{0,2}/) ";"){2,3})G");
  EXPECT(accepts(g, "ab;c;"));
  EXPECT(accepts(g, "ab;c;de;"));
  EXPECT(!accepts(g, "abc;c;"));
  EXPECT(!accepts(g, "a;"));
  // A recursive rule may contain `&`, as long as its operands are regular.
  Grammar h = build(R"G(root ::= "(" root ")" | /[0-9]+/ - /0[0-9]+/)G");
  EXPECT(accepts(h, "((10))"));
  EXPECT(accepts(h, "0"));
  EXPECT(!accepts(h, "(01)"));
}

TEST(algebra_operands_may_use_regular_rules) {
  // `word` is used in several places and is big enough that the lowering would normally keep
  // it a shared nonterminal; as an operand it is inlined into the product automaton.
  Grammar g = build(R"G(root ::= (word & short) " " word " " (word - short)
word ::= /[a-z]+(-[a-z]+)*/
short ::= letter{1,3}
letter ::= [a-z-])G");
  EXPECT(accepts(g, "ab cd-ef abcd"));
  EXPECT(!accepts(g, "abcd cd abcd"));
  EXPECT(!accepts(g, "ab cd abc"));
}

TEST(algebra_json_string_operands_work_on_the_encoded_form) {
  Grammar g = build(R"G(root ::= "\"" (/[a-z]+/j & /.{0,3}/j) "\"")G");
  EXPECT(accepts(g, "\"abc\""));
  EXPECT(accepts(g, "\"\\u0061bc\""));  // \u0061 is one decoded character
  EXPECT(!accepts(g, "\"abcd\""));
  EXPECT(!accepts(g, "\"\\u0041\""));
  Grammar h = build(R"G(root ::= "\"" (/[a-z]+/j - /null|true/j) "\"")G");
  EXPECT(accepts(h, "\"nul\""));
  EXPECT(!accepts(h, "\"null\""));
  EXPECT(!accepts(h, "\"\\u006eull\""));  // every spelling of "null" is excluded
}

TEST(algebra_printed_grammar_reparses_to_the_same_language) {
  Grammar g = build(R"G(root ::= "<" ((/[a-z]+/ & /.{0,3}/) | "x" - "y")* ">" (/[0-9]+/ - "0"))G");
  const std::string text = g.to_string();
  EXPECT(contains(text, "&"));
  Limits limits;
  Budget budget(limits.max_compile_ms);
  Grammar again = lower_grammar(parse_grammar_text(text, "start", limits), limits, budget);
  for (const char* s : {"<abc>1", "<>10", "<x>0", "<abcd>1", "<ab x>1", "<y>1", "<a>01"})
    EXPECT_EQ(accepts(g, s), accepts(again, s));
}

TEST(algebra_empty_results) {
  // An operator whose language is empty is just an unproductive alternative...
  Grammar g = build(R"G(root ::= "a" (/b/ & /c/) | "d")G");
  EXPECT(accepts(g, "d"));
  EXPECT(!accepts(g, "ab"));
  // ...and a grammar that can match nothing at all is an error.
  EXPECT(contains(compile_error(R"G(root ::= /[a-z]+/ - /[a-z]*/)G").what(), "matches no string"));
}

TEST(algebra_minus_is_unaffected_in_classes_regexes_literals_and_names) {
  Grammar g = build(R"G(root ::= [a-c-]+ /[x-z]-/ "-" my-rule
my-rule ::= "-")G");
  EXPECT(accepts(g, "a-cy---"));
  Grammar h = build(R"G(root ::= my-rule - "b"
my-rule ::= [a-c])G");
  EXPECT(accepts(h, "a"));
  EXPECT(!accepts(h, "b"));
}

TEST(algebra_non_regular_operands_are_compile_errors) {
  CompileError e = compile_error("root ::= /[()]*/ & paren\nparen ::= \"(\" paren \")\" | \"\"");
  EXPECT(contains(e.what(), "recursive"));
  EXPECT(contains(e.what(), "'paren'"));
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 20);  // the reference inside the operand
  // Recursion reached through another rule, and a self-reference of the rule being defined.
  CompileError f = compile_error("root ::= \"x\" - wrap\nwrap ::= \"[\" inner \"]\"\ninner ::= wrap | \"\"");
  EXPECT(contains(f.what(), "'wrap' -> 'inner' -> 'wrap'"));
  EXPECT(contains(compile_error("root ::= \"a\" & root").what(), "recursive"));
  CompileError t = compile_error("root ::= /.*/ - <|eot_id|>");
  EXPECT(contains(t.what(), "token"));
  EXPECT_EQ(t.column(), 17);
  EXPECT(contains(compile_error("root ::= \"a\" & w\nw ::= \"b\" <[5]>").what(), "rule 'w' names the token"));
}

TEST(algebra_malformed_syntax_is_a_compile_error_with_position) {
  CompileError a = compile_error("root ::= & \"a\"");
  EXPECT(contains(a.what(), "expected an expression before `&`"));
  EXPECT_EQ(a.column(), 10);
  EXPECT(contains(compile_error("root ::= \"a\" &").what(), "expected an expression after `&`"));
  EXPECT(contains(compile_error("root ::= \"a\" - | \"b\"").what(), "expected an expression after `-`"));
  EXPECT(contains(compile_error("root ::= (\"a\" &)").what(), "expected an expression after `&`"));
  EXPECT(contains(compile_error("root ::= \"a\" |  - \"b\"").what(), "expected an expression before `-`"));
  EXPECT(contains(compile_error("root ::= \"a\" &\nx ::= \"b\"").what(), "expected an expression after `&`"));
}

TEST(algebra_products_respect_the_state_limits) {
  // Each operand is small; their product (7 * 11 states) is not.
  Limits small;
  small.max_dfa_states = 50;
  EXPECT_THROWS(build("root ::= /(a{7})*/ & /(a{11})*/", small), LimitExceeded);
  EXPECT(accepts(build("root ::= /(a{7})*/ & /(a{11})*/"), std::string(77, 'a')));
  EXPECT(!accepts(build("root ::= /(a{7})*/ & /(a{11})*/"), std::string(7, 'a')));
  // With default limits a hostile product stops at max_dfa_states instead of growing.
  try {
    build("root ::= /(a{101})*/ & /(a{103})*/ & /(a{107})*/");
    throw corral_test::Failure{"expected LimitExceeded"};
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_dfa_states"));
  }
  // Difference needs the subtrahend's DFA, so its blow-up is caught there.
  Limits tiny;
  tiny.max_dfa_states = 100;
  EXPECT_THROWS(build("root ::= /[ab]*/ - /[ab]*a[ab]{8}/", tiny), LimitExceeded);
}

TEST(algebra_operands_built_from_shared_rules_are_bounded) {
  // r40 names 2^40 copies of "ab" through sharing: refused by its size estimate, quickly.
  std::string text = "root ::= r40 & /.*/\nr0 ::= \"ab\"\n";
  for (int i = 1; i <= 40; ++i)
    text += "r" + std::to_string(i) + " ::= r" + std::to_string(i - 1) + " r" + std::to_string(i - 1) + "\n";
  try {
    build(text);
    throw corral_test::Failure{"expected LimitExceeded"};
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nfa_states"));
  }
  // A chain of rules is fine.
  std::string chain = "root ::= c0 - \"\"\n";
  for (int i = 0; i < 200; ++i) chain += "c" + std::to_string(i) + " ::= \"x\" c" + std::to_string(i + 1) + "?\n";
  chain += "c200 ::= \"y\"\n";
  Grammar g = build(chain);
  EXPECT(accepts(g, "xx"));
  EXPECT(!accepts(g, "y"));
}

TEST(algebra_error_names_the_path_to_a_token) {
  CompileError e = compile_error("root ::= \"a\" & outer\nouter ::= \"x\" inner\ninner ::= <|eot_id|>");
  EXPECT(contains(e.what(), "rule 'inner' (reached as 'outer' -> 'inner') names the token <|eot_id|>"));
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 16);
}
