// test_regex_memo.cpp — the process-wide memo of regex terminal trees (regex_memo.hpp): a
// terminal met again is the same shared tree, its modes are told apart, a hit never hides a
// limit the parse or the JSON spelling would raise, and a grammar compiled from shared trees
// builds the automata a cold one builds.
#include <string>

#include "automaton_memo.hpp"
#include "compile.hpp"
#include "grammar.hpp"
#include "json_string.hpp"
#include "regex_memo.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

NodePtr first_body(const std::string& text, const Limits& limits = Limits()) {
  return parse_grammar_text(text, "root", limits).rules.at(0).body;
}

Grammar build(const std::string& text, const Limits& limits = Limits()) {
  Budget budget(limits.max_compile_ms);
  return lower_grammar(parse_grammar_text(text, "root", limits), limits, budget);
}

}  // namespace

TEST(regex_memo_shares_a_terminal_across_grammars_and_tells_modes_apart) {
  clear_regex_memo();
  const NodePtr a = first_body("root ::= /[a-z]{2,5}x/j\n");
  const NodePtr b = first_body("root ::= /[a-z]{2,5}x/j\n");
  EXPECT(a == b);  // the second parse took the first one's tree
  const NodePtr plain = first_body("root ::= /[a-z]{2,5}x/\n");
  const NodePtr canonical = first_body("root ::= /[a-z]{2,5}x/c\n");
  EXPECT(plain != a && canonical != a && plain != canonical);
  // A plain regex matches its text as bytes; the JSON spellings are another tree.
  EXPECT(print_regex(plain) == "[a-z]{2,5}x");
  EXPECT(print_regex(a) != print_regex(plain));
  clear_regex_memo();
  const NodePtr c = first_body("root ::= /[a-z]{2,5}x/j\n");
  EXPECT(c != a);                                // emptied: parsed anew
  EXPECT(print_regex(c) == print_regex(a));      // to an equal tree
}

TEST(regex_memo_never_hides_a_limit) {
  clear_regex_memo();
  const std::string text = "root ::= /(?:ab|cd){40}/\n";
  first_body(text);  // kept under the default limits
  Limits small;
  small.max_nfa_states = 50;
  EXPECT_THROWS(first_body(text, small), LimitExceeded);
  Limits shallow;
  shallow.max_nesting = 3;
  const std::string nested = "root ::= /((((a))))/\n";
  first_body(nested);
  EXPECT_THROWS(first_body(nested, shallow), LimitExceeded);
  // Kept under the small limit, the tree serves the default limits too.
  clear_regex_memo();
  const std::string ok = "root ::= /(?:ab|cd){3}/\n";
  const NodePtr under_small = first_body(ok, small);
  EXPECT(first_body(ok) == under_small);
}

TEST(regex_memo_keeps_failures_out_and_long_patterns_out) {
  clear_regex_memo();
  EXPECT_THROWS(first_body("root ::= /[a-/\n"), CompileError);
  EXPECT_THROWS(first_body("root ::= /[a-/\n"), CompileError);  // still an error
  std::string longp(kRegexMemoMaxPattern + 1, 'a');
  const std::string text = "root ::= /" + longp + "/\n";
  EXPECT(first_body(text) != first_body(text));  // too long to keep: parsed each time
}

TEST(regex_memo_shared_trees_build_the_automata_of_a_cold_compile) {
  const std::string text =
      "root ::= \"{\" ( \"\\\"\" /(?s:.){1,40}/j \"\\\"\" | /-?(?:0|[1-9][0-9]*)/ ) \",\" "
      "\"\\\"\" /(?s:.){1,40}/j \"\\\"\" \"}\"\n";
  clear_regex_memo();
  clear_automaton_memo();
  clear_json_string_memo();
  const Grammar cold = build(text);
  const Grammar warm = build(text);  // every regex from the memo, every automaton too
  clear_automaton_memo();
  const Grammar warm_regexes = build(text);  // shared trees, automata built again
  EXPECT(cold.terminals.size() == warm.terminals.size());
  EXPECT(cold.terminals.size() == warm_regexes.terminals.size());
  for (std::size_t i = 0; i < cold.terminals.size(); ++i) {
    EXPECT(cold.terminals[i].dfa.same_as(warm.terminals[i].dfa));
    EXPECT(cold.terminals[i].dfa.same_as(warm_regexes.terminals[i].dfa));
  }
}
