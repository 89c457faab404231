// compile.hpp — the engine's entry points: constraint text + vocabulary → CompiledGrammar.
#pragma once

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

}  // namespace corral
