// test_automaton_memo.cpp — the process-wide automaton memo (automaton_memo.hpp): a compile that
// takes a terminal's DFA or an `&`/`-` product from the memo builds, state for state, the
// automata a cold compile builds — whatever alphabet the product was memoised over (a probe of
// it alone, another grammar with other characters around it) — and a hit never hides a limit.
#include <string>
#include <vector>

#include "automaton_memo.hpp"
#include "compile.hpp"
#include "grammar.hpp"
#include "json_string.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

Grammar build(const std::string& text, const Limits& limits = Limits()) {
  Budget budget(limits.max_compile_ms);
  return lower_grammar(parse_grammar_text(text, "root", limits), limits, budget);
}

// Every regex terminal of `a` is the same automaton as the same-numbered one of `b`.
bool same_terminals(const Grammar& a, const Grammar& b) {
  if (a.terminals.size() != b.terminals.size()) return false;
  for (std::size_t i = 0; i < a.terminals.size(); ++i)
    if (!a.terminals[i].dfa.same_as(b.terminals[i].dfa)) return false;
  return true;
}

template <class E, class F>
bool throws(F&& f) {
  try {
    f();
  } catch (const E&) {
    return true;
  }
  return false;
}

const std::vector<std::string>& grammars() {
  static const std::vector<std::string> g = {
      // a product inside a JSON string, with other characters around it in the same terminal
      "root ::= \"{\\\"id\\\": \\\"\" ( /[a-z0-9_-]+/j & /(?s:.){3,40}/j ) \"\\\"}\"\n",
      // the same product, written alone (what the converter probes), and beside other classes
      "root ::= /[a-z0-9_-]+/j & /(?s:.){3,40}/j\n",
      "root ::= \"[\" ( /[a-z0-9_-]+/j & /(?s:.){3,40}/j ) \"|\" /[\\u0400-\\u04ff]{2}/ \"]\"\n",
      // difference and canonical spelling, a counted string, a plain JSON string
      "root ::= \"\\\"\" ( /(?s:.){0,30}/c - /(?:id|name)/c ) \"\\\"\" | \"x\" /[0-9]{1,3}/\n",
      "root ::= \"\\\"\" /(?s:.){0,64}/j \"\\\"\" \",\" \"\\\"\" /(?s:.)*/j \"\\\"\"\n",
      // a product under repetition in a recursive rule
      "root ::= \"(\" ( ( /[a-c]+/ & /.{1,4}/ ) | root )* \")\"\n",
  };
  return g;
}

// The same tree in new nodes (nothing cached in them).
NodePtr deep_copy(const NodePtr& n) {
  std::vector<NodePtr> kids;
  for (const auto& k : n->kids) kids.push_back(deep_copy(k));
  switch (n->kind) {
    case NodeKind::Empty: return make_empty();
    case NodeKind::Chars: return make_chars(n->chars);
    case NodeKind::Concat: return make_concat(std::move(kids));
    case NodeKind::Alt: return make_alt(std::move(kids));
    case NodeKind::Repeat: return make_repeat(kids[0], n->min, n->max);
    default: break;
  }
  throw InternalError("deep_copy: unexpected node kind");
}

}  // namespace

TEST(memo_hits_build_the_automata_a_cold_compile_builds) {
  // Cold: each grammar compiled with an empty memo.
  std::vector<Grammar> cold;
  for (const std::string& text : grammars()) {
    clear_automaton_memo();
    clear_json_string_memo();
    cold.push_back(build(text));
  }
  // Warm, in two orders, so every product and terminal is met again over other alphabets.
  for (int order = 0; order < 2; ++order) {
    clear_automaton_memo();
    const std::uint64_t hits0 = automaton_memo_stats().hits;
    for (std::size_t k = 0; k < grammars().size(); ++k) {
      const std::size_t i = order == 0 ? k : grammars().size() - 1 - k;
      EXPECT(same_terminals(build(grammars()[i]), cold[i]));
    }
    for (std::size_t i = 0; i < grammars().size(); ++i) EXPECT(same_terminals(build(grammars()[i]), cold[i]));
    EXPECT(automaton_memo_stats().hits > hits0 + grammars().size());
  }
}

TEST(memo_reuses_a_probed_product_in_the_final_compile) {
  clear_automaton_memo();
  const std::string product = "/[a-z]+/j & /(?s:.){0,200}/j";
  EXPECT(probe_expression(product, 20000, Limits{}).kind == ProbeResult::Kind::States);
  const std::uint64_t hits0 = automaton_memo_stats().hits;
  Grammar warm = build("root ::= \"\\\"\" ( " + product + " ) \"\\\"\"\n");
  EXPECT(automaton_memo_stats().hits > hits0);
  clear_automaton_memo();
  EXPECT(same_terminals(warm, build("root ::= \"\\\"\" ( " + product + " ) \"\\\"\"\n")));
}

TEST(memo_never_hides_a_limit) {
  clear_automaton_memo();
  const std::string text = "root ::= \"<\" ( /[a-z]+/ & /.{0,300}/ ) \">\"\n";
  build(text);  // memoised under the default limits
  Limits small;
  small.max_dfa_states = 100;
  EXPECT(throws<LimitExceeded>([&] { build(text, small); }));
  // Built under the small limit a smaller product succeeds; the default limits reuse it.
  clear_automaton_memo();
  const std::string ok = "root ::= \"<\" ( /[a-z]+/ & /.{0,20}/ ) \">\"\n";
  Grammar a = build(ok, small);
  const std::uint64_t hits0 = automaton_memo_stats().hits;
  EXPECT(same_terminals(build(ok), a));
  EXPECT(automaton_memo_stats().hits > hits0);
}

TEST(structural_keys_cached_in_shared_nodes_stay_exact_across_compiles_and_clears) {
  // The JSON spellings of a class are one process-wide tree; its id is cached in its nodes, so
  // a second StructuralKeys (another compile) must give it the same key, an equal tree built
  // apart the same key, and a different tree another key — also after the table was emptied
  // (the cached ids are then stale and must not be used).
  clear_automaton_memo();
  const NodePtr shared = json_string_chars(CharSet::range('a', 'z'));
  const NodePtr again = json_string_chars(CharSet::range('a', 'z'));
  EXPECT(shared == again);  // (the memo of spellings hands out one tree)
  auto concat = [&](const NodePtr& x, std::uint32_t cp) { return make_concat({x, make_chars(CharSet::single(cp))}); };
  for (int round = 0; round < 2; ++round) {
    StructuralKeys a, b;
    const std::string ka = a.of(concat(shared, 'x'));
    EXPECT(ka == b.of(concat(shared, 'x')));       // a fresh, equal tree over the shared node
    EXPECT(ka != b.of(concat(shared, 'y')));       // one leaf differs
    EXPECT(a.of(shared) == b.of(shared));
    EXPECT(a.of(shared) != a.of(json_string_chars(CharSet::range('a', 'y'))));
    // A tree equal to the shared one but built node by node (nothing cached in it) gets its key.
    const NodePtr rebuilt = deep_copy(shared);
    EXPECT(rebuilt != shared);
    EXPECT(b.of(rebuilt) == a.of(shared));
    clear_automaton_memo();  // a new generation: every cached id is stale
    StructuralKeys c;
    EXPECT(c.of(shared) != a.of(shared));  // a fresh id (the old key names the old generation)
    EXPECT(c.of(concat(shared, 'x')) == StructuralKeys().of(concat(shared, 'x')));
    EXPECT(c.of(concat(shared, 'x')) != c.of(concat(shared, 'y')));
  }
}
