// grammar.hpp — the grammar IR: a context-free grammar whose terminals are regular expressions
// over bytes, plus its text frontend (GBNF-compatible) and its lowering.
//
// Two forms:
//  * GrammarAst — what the text parser produces: named rules, each an expression tree
//    (regex_ast.hpp) that may contain RuleRef nodes.
//  * Grammar — what the engine consumes: productions over nonterminals and terminals, where each
//    terminal is a maximal *regular* piece of a rule body compiled to a minimal byte DFA.
// Lowering merges every regular sub-expression (literals, classes, non-recursive rules, their
// sequences and repetitions) into one terminal. That never changes the language, because the
// Earley parser (earley.hpp) lets a terminal end at *any* accepting DFA state — terminals are not
// greedy lexemes — so merging only removes parser work.
// Invariants of Grammar: nonterminal 0 is the augmented start `start ::= root` with exactly one
// production (production 0); every nonterminal and terminal is productive (derives some string);
// DFAs contain only live states.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dfa.hpp"
#include "limits.hpp"
#include "regex_ast.hpp"

namespace corral {

/// A keyed member group (`%keyed(...)`, see keyed.hpp): the body of a rule that matches one or
/// more members separated by `sep`, in any order, each declared member at most once, the
/// `required` ones all present, and the `extra` member (undeclared keys) any number of times.
struct KeyedAst {
  NodePtr sep;
  std::vector<NodePtr> members;        // declared members, key index = position
  std::vector<std::uint32_t> required;  // key indices, ascending
  NodePtr extra;                       // null: no undeclared members
  // `%key(...)` rules inside `extra` (keyed.hpp): the keys of undeclared members, remembered
  // so that no two are equal; empty: undeclared keys are not remembered.
  std::vector<std::int32_t> key_rules;
  // Per member (empty, or one entry per member): the key indices that must be present when it
  // is (`^{i,j}` before a member, keyed.hpp), ascending.
  std::vector<std::vector<std::uint32_t>> deps;
  // `%unique{min,max}(sep; item, ...)` (unique.hpp): a group of distinct items whose number is
  // bounded; `%keyed{min,max}(...)`: members counted with the undeclared ones (keyed.hpp).
  // max_count 0 means no bound but the number of members.
  std::uint32_t min_count = 1, max_count = 0;
  // `%distinct{min,max}(sep; item)` (distinct.hpp): ONE item language whose closed items must be
  // pairwise distinct JSON values (members holds that one item).
  bool distinct = false;
};

struct RuleAst {
  std::string name;
  std::shared_ptr<const KeyedAst> keyed;  // set: the rule is a keyed group (body is a placeholder)
  NodePtr body;      // null while only referenced, never defined
  bool key_rule = false;     // `%key(...)` of a keyed group (a nonterminal of its own, never inlined)
  std::size_t pos = 0;       // offset of the definition
  std::size_t ref_pos = 0;   // offset of the first reference (for "undefined rule" errors)
};

/// A reference to one vocabulary token by id (`<[128009]>`) or by exact text (`<|eot_id|>`):
/// the only way a grammar can allow a special token. In the tree it is a RuleRef whose rule
/// index is token_ref_rule(k) for entry k of GrammarAst::tokens.
struct TokenRef {
  std::string text;      // token text (when id < 0)
  std::int32_t id = -1;  // token id (when given as <[id]>)
  std::size_t pos = 0;
};
inline std::int32_t token_ref_rule(std::size_t k) { return -2 - static_cast<std::int32_t>(k); }
inline std::size_t token_ref_index(std::int32_t rule) { return static_cast<std::size_t>(-2 - rule); }

/// How a slot's values are spelled in the output.
enum class SlotSpelling : std::uint8_t {
  Raw,   // `${name}`: the UTF-8 bytes of one value (values must be non-empty)
  Json,  // `${name:json}`: one value as a whole JSON string, quotes included, spelled as
         // json.dumps(v, ensure_ascii=False) writes it (the empty string is allowed)
};

/// A slot (`${name}`, `${name:json}`): a terminal whose language — one of a list of strings —
/// is supplied later, per request, by binding values to the compiled grammar (slots.hpp), so a
/// cached skeleton never needs recompiling. In the tree it is a RuleRef whose rule index is
/// slot_ref_rule(k) for entry k of GrammarAst::slots (token references use -2, -3, ...; slots a
/// disjoint range far below).
struct SlotRef {
  std::string name;
  SlotSpelling spelling = SlotSpelling::Raw;
  std::size_t pos = 0;
};
inline constexpr std::int32_t kSlotRuleBase = -(1 << 30);
inline std::int32_t slot_ref_rule(std::size_t k) { return kSlotRuleBase - static_cast<std::int32_t>(k); }
inline bool is_slot_rule(std::int32_t rule) { return rule <= kSlotRuleBase; }
inline std::size_t slot_ref_index(std::int32_t rule) { return static_cast<std::size_t>(kSlotRuleBase - rule); }
/// The slot as written in grammar text: `${name}` or `${name:json}`.
inline std::string slot_text(const SlotRef& s) {
  return "${" + s.name + (s.spelling == SlotSpelling::Json ? ":json}" : "}");
}

struct GrammarAst {
  std::vector<RuleAst> rules;
  std::vector<TokenRef> tokens;
  std::vector<SlotRef> slots;
  std::int32_t start = -1;
};

/// Parse grammar text (GBNF syntax plus `/regex/` terminals; see README "Grammar syntax").
/// `start_rule` names the rule the output must match (GBNF convention: "root").
/// Throws CompileError (line, column, what was expected) or LimitExceeded (max_nesting).
GrammarAst parse_grammar_text(std::string_view text, const std::string& start_rule,
                              const Limits& limits);

struct Symbol {
  std::int32_t v = 0;  // >= 0: nonterminal index; < 0: terminal ~v
  static Symbol nonterminal(std::int32_t i) { return Symbol{i}; }
  static Symbol terminal(std::int32_t i) { return Symbol{~i}; }
  bool is_terminal() const { return v < 0; }
  std::int32_t index() const { return v < 0 ? ~v : v; }
};

/// Production::key values besides a declared key index.
inline constexpr std::int32_t kNoKey = -1, kExtraKey = -2;
/// Production::role: keyed groups parse with productions that shortest-string tables must not
/// use (they would close an object before its required keys) and give those tables one
/// production the parser never predicts (the required members in order).
enum ProductionRole : std::uint8_t { kParseAndMin = 0, kParseOnly = 1, kMinOnly = 2 };

struct Production {
  std::int32_t lhs = 0;
  std::vector<Symbol> rhs;
  std::int32_t key = kNoKey;  // keyed-group member production: the key it adds (keyed.hpp)
  std::uint8_t role = kParseAndMin;
};

/// A keyed group after lowering (keyed.hpp): nonterminal `nt` carries a set of seen keys.
struct KeyedGroup {
  std::int32_t nt = -1;
  std::uint32_t n_keys = 0;
  std::vector<std::uint32_t> required;  // ascending key indices < n_keys
  // Derived by finalize: per key, the production `nt ::= nt sep member_key` (its symbols from
  // index 1 spell "one more member"), used by shortest completions to add missing keys.
  std::vector<std::int32_t> rec_prod;
  // Per key (empty: no key has any): the keys that must be present when it is, ascending
  // (keyed.hpp: checked when the group closes). `required` is closed under them.
  std::vector<std::vector<std::uint32_t>> deps;
  std::vector<std::uint32_t> dep_keys;  // derived by finalize: the keys whose deps are not empty
  // Count bounds (unique.hpp, keyed.hpp): at least min_count and at most max_count members (0:
  // no upper bound), undeclared-key members included.
  std::uint32_t min_count = 1, max_count = 0;
  // Derived by finalize for a group with dependencies and a maximum (keyed.hpp): per key, the
  // keys its presence brings (itself and its dependencies, transitively) as 64-bit words; and,
  // when no undeclared member can pad the count up to min_count, `fits`: one bit per subset of
  // the keys (at most kMaxFitKeys of them), set when some dependency-closed superset of it that
  // holds the required keys has between min_count and max_count members.
  std::vector<std::vector<std::uint64_t>> closure;
  std::vector<std::uint64_t> fits;
  // Derived by finalize: the production `nt ::= nt sep extra` (-1: no undeclared-key member).
  std::int32_t extra_rec_prod = -1;
  // Derived by finalize (unique.hpp): keys in order of the cost of one more such member.
  std::vector<std::uint32_t> cheap_order;
  // `%distinct` groups (distinct.hpp): the nonterminal of one item (`value_nt ::= item`), whose
  // text is the value the parser remembers; -1 for keyed and unique groups. A distinct group
  // has one key (0), `aux` of its items is a ValueSets id, and max_count 0 means no bound.
  std::int32_t value_nt = -1;
  bool distinct() const { return value_nt >= 0; }
  // Keyed groups that remember their undeclared keys (`%key(...)`, keyed.hpp): the key
  // nonterminals, each the first symbol of an undeclared-member production. The values held
  // are a ValueSets id in the key set's bits from n_keys + 32 (after the member counter).
  std::vector<std::int32_t> key_nts;
  bool remembers_keys() const { return !key_nts.empty(); }
  std::uint32_t held_at() const { return n_keys + 32; }
};

struct Terminal {
  NodePtr regex;     // null for a token or slot terminal
  std::string text;  // token and slot terminals: as written (regex text is printed on demand)
  Dfa dfa;           // empty language for a token terminal and an (unbound) slot terminal
  // Token terminals match one vocabulary token (named in the grammar), never bytes.
  bool is_token = false;
  TokenRef token;
  std::int32_t token_id = -1;  // resolved against the vocabulary at compile time
  // Slot terminals get their DFA from a binding (CompiledGrammar::bind); the parser reads every
  // terminal's DFA through a per-binding table, never through `dfa` directly.
  bool is_slot = false;
  SlotRef slot;
};

/// A terminal as grammar text: `/regex/` (printed from its tree) for a regex terminal, the text
/// as written for a token or slot, and `text` for a regex terminal loaded from an artifact (which
/// keeps the printed form, not the tree).
std::string terminal_text(const Terminal& t);

class Grammar {
 public:
  std::vector<std::string> names;          // per nonterminal
  std::vector<Production> productions;     // production 0 is `start ::= root`
  std::vector<Terminal> terminals;
  std::vector<KeyedGroup> keyed;           // keyed groups (keyed.hpp)

  // Derived tables (filled by finalize()).
  std::vector<std::int32_t> group_of;              // per nonterminal: keyed group index or -1
  std::vector<std::int32_t> value_group_of;        // per nonterminal: the distinct group it is the item of, or -1
  std::vector<std::vector<std::int32_t>> by_lhs;   // productions of each nonterminal
  std::vector<std::uint8_t> nullable;              // per nonterminal
  std::vector<std::uint64_t> min_len;              // per nonterminal: shortest derivation (bytes)
  std::vector<std::int32_t> best_prod;             // per nonterminal: production achieving min_len
  // Per terminal: can some byte follow it in a sentence? A terminal that can only end the
  // output never needs the parser after it inside a token (it is a dead end there).
  std::vector<std::uint8_t> followable;
  // Flattened right-hand sides for the parser's hot loop: symbols of production p are
  // rhs_flat[rhs_begin[p] .. rhs_begin[p+1]); suffix_min[rhs_begin[p] + d] is the shortest
  // string derivable from symbols d.. of production p (d may equal the length: 0).
  std::vector<std::uint32_t> rhs_begin;
  std::vector<Symbol> rhs_flat;
  std::vector<std::uint64_t> suffix_min;  // len+1 entries per production, at rhs_begin[p] + p

  std::uint32_t rhs_len(std::uint32_t p) const { return rhs_begin[p + 1] - rhs_begin[p]; }
  std::uint64_t suffix_cost(std::uint32_t p, std::uint32_t d) const { return suffix_min[rhs_begin[p] + p + d]; }
  /// Shortest string of terminal t in bytes. A slot counts as its shortest possible value (1
  /// byte raw, 2 as a JSON string): the real values are only known per binding, so tables
  /// built from this (min_len, suffix_min) pick short completions that are valid for every
  /// binding but not always the shortest one.
  std::uint64_t terminal_min_len(std::int32_t t) const;
  /// Shortest string derivable from symbol s (bounded by `cap` bytes; LimitExceeded beyond),
  /// reading terminal t's automaton as dfas[t] (the skeleton's or a binding's table).
  void append_min_string(Symbol s, const Dfa* const* dfas, std::string& out, std::size_t cap) const;

  /// Per terminal, its own automaton (the DFA table of a grammar without bound slots).
  std::vector<const Dfa*> own_dfas() const {
    std::vector<const Dfa*> out;
    for (const Terminal& t : terminals) out.push_back(&t.dfa);
    return out;
  }

  /// Compute derived tables; drop unproductive productions; throws CompileError if the start
  /// symbol derives nothing.
  void finalize();
  /// Canonical text form: one rule per nonterminal, terminals as /regex/.
  std::string to_string() const;
};

/// The grammar's start rule can never complete: its language is empty. A CompileError (Python
/// sees corral.CompileError), distinct so that probe_expression can report "empty" as a value.
class EmptyLanguageError : public CompileError {
 public:
  using CompileError::CompileError;
};

/// Lower a parsed grammar to the engine IR (terminal merging, helper rules for repetition of
/// non-regular parts, DFA construction). Throws CompileError / LimitExceeded.
Grammar lower_grammar(const GrammarAst& ast, const Limits& limits, const Budget& budget);

/// Resolve the grammar's token terminals to ids of `vocab_tokens` (bytes per id). Throws
/// CompileError naming the token when it is not in the vocabulary or is ambiguous.
void resolve_token_terminals(Grammar& g, const std::vector<std::string>& vocab_tokens,
                             const std::vector<std::uint8_t>& special, const std::string& source);

/// A grammar with a single terminal: the whole output must match `regex`.
Grammar grammar_from_regex(const NodePtr& regex, const Limits& limits, const Budget& budget);

/// Text of the built-in RFC 8259 JSON grammar (any JSON value, surrounding whitespace allowed).
const char* json_grammar_text();

}  // namespace corral
