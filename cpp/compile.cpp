// compile.cpp — parse, lower and bind a constraint to a vocabulary (see compile.hpp).
#include "compile.hpp"

#include <algorithm>
#include <optional>

#include "compile_times.hpp"
#include "distinct.hpp"
#include "item_values.hpp"
#include "regex_parser.hpp"

namespace corral {

CompileTimes& compile_times() {
  thread_local CompileTimes times;
  return times;
}

namespace {

// Lowering with the automata built inside it counted apart (compile_times.hpp).
template <class F>
Grammar timed_lowering(F&& lower) {
  CompileTimes& ct = compile_times();
  const std::uint64_t automata0 = ct.automata_ns;
  std::uint64_t total = 0;
  Grammar g = [&] {
    StageTimer t(total);
    return lower();
  }();
  ct.lower_ns += total - std::min(total, ct.automata_ns - automata0);
  return g;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern,
                                                     std::shared_ptr<const Vocabulary> vocab,
                                                     const Limits& limits) {
  Budget budget(limits.max_compile_ms);
  CompileTimes& ct = compile_times();
  NodePtr tree = [&] {
    StageTimer t(ct.parse_ns);
    return parse_regex(pattern, limits);
  }();
  Grammar g = timed_lowering([&] { return grammar_from_regex(tree, limits, budget); });
  StageTimer t(ct.bind_ns);
  ++ct.compiles;
  return std::make_shared<const CompiledGrammar>(std::move(vocab), std::move(g), limits);
}

std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view text, const std::string& start_rule,
                                                       std::shared_ptr<const Vocabulary> vocab,
                                                       const Limits& limits) {
  Budget budget(limits.max_compile_ms);
  CompileTimes& ct = compile_times();
  GrammarAst ast = [&] {
    StageTimer t(ct.parse_ns);
    return parse_grammar_text(text, start_rule, limits);
  }();
  Grammar g = timed_lowering([&] { return lower_grammar(ast, limits, budget); });
  StageTimer t(ct.bind_ns);
  ++ct.compiles;
  resolve_token_terminals(g, vocab->tokens(), vocab->special_flags(), std::string(text));
  return std::make_shared<const CompiledGrammar>(std::move(vocab), std::move(g), limits);
}

std::shared_ptr<const CompiledGrammar> compile_json(std::shared_ptr<const Vocabulary> vocab,
                                                    const Limits& limits) {
  return compile_grammar(json_grammar_text(), "root", std::move(vocab), limits);
}

namespace {

// `root ::= rhs` lowered with at most `max_states` DFA states per terminal: the grammar, or
// (Kind::Empty / Kind::TooBig, no grammar) when its language is empty or over the budget.
// Malformed text throws CompileError. Shared by the probes below.
struct LoweredProbe {
  ProbeResult::Kind kind;
  std::optional<Grammar> grammar;
};

LoweredProbe lower_probe(std::string_view rhs, std::uint32_t max_states, const Limits& limits) {
  Limits l = limits;
  l.max_dfa_states = max_states;
  Budget budget(l.max_compile_ms);
  std::string text = "root ::= ";
  text.append(rhs);
  text += "\n";
  GrammarAst ast = parse_grammar_text(text, "root", l);  // malformed text: CompileError
  try {
    return {ProbeResult::Kind::States, lower_grammar(ast, l, budget)};
  } catch (const EmptyLanguageError&) {
    return {ProbeResult::Kind::Empty, std::nullopt};
  } catch (const LimitExceeded&) {
    return {ProbeResult::Kind::TooBig, std::nullopt};
  }
}

}  // namespace

ProbeResult probe_expression(std::string_view rhs, std::uint32_t max_states, const Limits& limits) {
  const LoweredProbe p = lower_probe(rhs, max_states, limits);
  if (!p.grammar) return {p.kind, 0};
  std::uint64_t states = 0;
  for (const Terminal& t : p.grammar->terminals)
    if (!t.is_token && !t.is_slot) states += t.dfa.num_states();
  return {ProbeResult::Kind::States, states};
}

int probe_open_ended(std::string_view rhs, std::uint32_t max_states, const Limits& limits, bool sinks_ok) {
  // The question is about the language, not about how a grammar splits it into terminals: an
  // expression the lowering splits (a format's starred label group) is asked again with the
  // merge threshold raised, so that it becomes one automaton (still within max_states).
  for (int attempt = 0; attempt < 2; ++attempt) {
    Limits l = limits;
    if (attempt == 1) l.max_nfa_states = std::max<std::uint32_t>(l.max_nfa_states, 1u << 20);
    const LoweredProbe p = lower_probe(rhs, max_states, l);
    if (!p.grammar) return p.kind == ProbeResult::Kind::TooBig ? -1 : 0;
    const Terminal* only = nullptr;
    bool several = false;
    for (const Terminal& t : p.grammar->terminals) {
      if (t.is_token || t.is_slot) return 0;
      several = several || only != nullptr;
      only = &t;
    }
    if (several) continue;
    return only != nullptr && every_prefix_open_ended(only->dfa, sinks_ok) ? 1 : 0;
  }
  return 0;
}

std::int64_t probe_item_values(std::string_view rhs, std::uint32_t max_states, const Limits& limits) {
  const LoweredProbe p = lower_probe(rhs, max_states, limits);
  if (!p.grammar) return -1;
  const Terminal* only = nullptr;
  for (const Terminal& t : p.grammar->terminals) {
    if (t.is_token || t.is_slot || only != nullptr) return -1;
    only = &t;
  }
  if (only == nullptr) return -1;
  const ItemValues iv = analyse_item_values(only->dfa, kMaxDistinctItems + 1, kMaxDistinctItems);
  return iv.ok ? static_cast<std::int64_t>(iv.total) : -1;
}

void check_regex(std::string_view pattern, const Limits& limits) {
  Budget budget(limits.max_compile_ms);
  (void)grammar_from_regex(parse_regex(pattern, limits), limits, budget);
}

}  // namespace corral
