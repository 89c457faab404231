// compile.hpp — the engine's entry points: constraint text + vocabulary → CompiledGrammar.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compiled_grammar.hpp"

namespace corral {

std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern,
                                                     std::shared_ptr<const Vocabulary> vocab,
                                                     const Limits& limits);
std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view text, const std::string& start_rule,
                                                       std::shared_ptr<const Vocabulary> vocab,
                                                       const Limits& limits);
std::shared_ptr<const CompiledGrammar> compile_json(std::shared_ptr<const Vocabulary> vocab,
                                                    const Limits& limits);

/// What probe_expression found out about one regular expression.
struct ProbeResult {
  enum class Kind { States, Empty, TooBig };
  Kind kind;
  std::uint64_t states;  // DFA states summed over the expression's terminals (Kind::States)
};

/// Build the automata of `rhs` (a grammar right-hand side without rule references, e.g. a
/// product `/a+/j & /(?s:.){0,64}/j - /id/j`) with at most `max_states` DFA states per terminal,
/// and report their size, that the language is empty, or that it needs more than the budget (or
/// another of `limits`). Needs no vocabulary. Malformed text still throws CompileError.
ProbeResult probe_expression(std::string_view rhs, std::uint32_t max_states, const Limits& limits);

/// For one regular expression (as probe_expression takes it) that lowers to one terminal:
/// 1 when every prefix of a word in its language has infinitely many accepted continuations
/// (distinct.hpp, every_prefix_open_ended), 0 when not (or it lowers to several terminals, or
/// is empty), -1 past `max_states` or another limit. The JSON Schema converter asks before it
/// makes a string item with a pattern or format a distinct group. With `sinks_ok`, accepting
/// states that read nothing more are exempt: it then asks what a `%key(...)` needs (keyed.hpp).
int probe_open_ended(std::string_view rhs, std::uint32_t max_states, const Limits& limits, bool sinks_ok = false);

/// For one regular expression that lowers to one terminal, a quoted JSON string
/// (`"\"" /.../j "\""`): how many distinct values its language holds (item_values.hpp; capped
/// at kMaxDistinctItems + 1, "that many or more"), or -1 when the analysis does not apply (not
/// such a string, several terminals, empty, or past `max_states` or another limit). The JSON
/// Schema converter asks before it makes a string item with finitely many values after some
/// prefix a distinct group: the matcher then refuses dead prefixes of the same automaton.
std::int64_t probe_item_values(std::string_view rhs, std::uint32_t max_states, const Limits& limits);

/// Compile `pattern` as compile_regex would, up to its automaton and without a vocabulary:
/// throws CompileError for what the engine cannot compile (syntax, lookaround, backreferences,
/// an empty language) and LimitExceeded past a limit. The converter checks every JSON Schema
/// `pattern` with it.
void check_regex(std::string_view pattern, const Limits& limits);

}  // namespace corral
