// regex_ast.hpp — the expression tree shared by the regex parser and the grammar frontend.
//
// In:  built by regex_parser.cpp (Python `re` syntax) and grammar_parser.cpp (GBNF text).
// Out: lowered by grammar_lower.cpp into CFG productions whose terminals are regular
//      sub-expressions, each compiled to a byte DFA by dfa.cpp.
// Invariants: a CharSet's ranges are sorted, disjoint, non-adjacent, within [0, 0x10FFFF] and
// never contain surrogates (U+D800..U+DFFF cannot be encoded in UTF-8); nodes are immutable
// and shared (shared_ptr<const Node>) apart from one cache that never changes what a node
// means (structural_id); RuleRef only appears in grammar expressions.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace corral {

struct CodepointRange {
  std::uint32_t lo, hi;  // inclusive
  bool operator==(const CodepointRange& o) const { return lo == o.lo && hi == o.hi; }
};

/// A set of Unicode scalar values, kept normalised (see invariants above).
class CharSet {
 public:
  CharSet() = default;
  static CharSet single(std::uint32_t cp);
  static CharSet range(std::uint32_t lo, std::uint32_t hi);
  static CharSet any();  // every scalar value

  void add(std::uint32_t lo, std::uint32_t hi);
  void add(const CharSet& other);
  CharSet negated() const;  // complement within the scalar values
  bool contains(std::uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodepointRange>& ranges() const { return ranges_; }
  bool operator==(const CharSet& o) const { return ranges_ == o.ranges_; }

 private:
  void normalize();
  std::vector<CodepointRange> ranges_;
};

enum class NodeKind : std::uint8_t {
  Empty,    // matches the empty string
  Chars,    // one code point from `chars` (an empty set matches nothing)
  Concat,   // kids in sequence
  Alt,      // any one of kids
  Repeat,   // kids[0] repeated min..max times (max == kUnbounded for no upper bound)
  RuleRef,  // a grammar nonterminal (grammar expressions only)
  // Language algebra (grammar expressions only: Python `re` has no syntax for it). Kept as
  // nodes rather than rewritten to plain regex because complement/intersection can blow up
  // exponentially as regex text; nfa.cpp compiles them through a product DFA instead.
  Intersect,   // strings matched by every kid (two or more kids)
  Difference,  // strings matched by kids[0] and not by kids[1] (exactly two kids)
};

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  static constexpr std::uint32_t kUnbounded = 0xFFFFFFFFu;
  NodeKind kind = NodeKind::Empty;
  CharSet chars;              // Chars
  std::vector<NodePtr> kids;  // Concat, Alt, Intersect, Difference, Repeat (one kid)
  std::uint32_t min = 0, max = 0;  // Repeat
  std::int32_t rule = -1;     // RuleRef: index into the grammar's rule table
  std::size_t pos = 0;        // byte offset in the source text (for error messages)
  // The node's structural id (automaton_memo.hpp), 0 until first asked: a cache, not part of
  // the tree. Nodes shared by every compile (the JSON spellings of a class) are keyed once per
  // process instead of once per compile. Valid only in the generation it names.
  mutable std::atomic<std::uint64_t> structural_id{0};
  // tree_facts' cache: computed from the subtree alone, so shared trees (regex_memo.hpp) keep
  // it across compiles.
  // tree_flags is 0 until set; written after tree_size (release), read before it (acquire).
  mutable std::atomic<std::uint64_t> tree_size{0};
  mutable std::atomic<std::uint8_t> tree_flags{0};
};

NodePtr make_empty(std::size_t pos = 0);
NodePtr make_chars(CharSet cs, std::size_t pos = 0);
NodePtr make_literal(const std::u32string& text, std::size_t pos = 0);  // Concat of Chars
NodePtr make_concat(std::vector<NodePtr> kids, std::size_t pos = 0);    // flattens, drops Empty
NodePtr make_alt(std::vector<NodePtr> kids, std::size_t pos = 0);       // flattens
NodePtr make_repeat(NodePtr kid, std::uint32_t min, std::uint32_t max, std::size_t pos = 0);
NodePtr make_rule_ref(std::int32_t rule, std::size_t pos = 0);
NodePtr make_intersect(std::vector<NodePtr> kids, std::size_t pos = 0);  // flattens; one kid: itself
NodePtr make_difference(NodePtr minuend, NodePtr subtrahend, std::size_t pos = 0);
/// Facts about a subtree, computed once per node and cached in it (Node::tree_size/tree_flags):
/// `size` is estimate_nfa_size - 1 (what a parent adds up), `regular` no RuleRef below,
/// `algebra` an Intersect/Difference here or below. estimate_nfa_size, is_regular and
/// has_algebra read it, and so does the lowering, which asks of every subtree on its way down.
struct TreeFacts {
  std::uint64_t size;
  bool regular;
  bool algebra;
};
TreeFacts tree_facts(const Node& n);
/// True when the tree contains an Intersect or Difference node.
bool has_algebra(const NodePtr& n);

/// True when the expression contains no RuleRef (so it can become one DFA terminal).
bool is_regular(const NodePtr& n);
/// Canonical regex text (Python `re` syntax, escaped so it re-parses to the same tree);
/// RuleRef prints as `<rule N>`. Used by the grammar printer. Intersect/Difference have no
/// `re` spelling: they print as `(?:A&B)` / `(?:A-B)` for diagnostics only (the grammar
/// printer writes trees containing them in grammar syntax instead).
std::string print_regex(const NodePtr& n);
/// Upper bound on the NFA states the tree expands to (counted repetition multiplied out);
/// saturates instead of overflowing. Lets callers refuse `a{0,100000}` before building it.
/// For Intersect/Difference it counts the operands only: the product automaton's size is not
/// known before it is built, and its construction enforces max_dfa_states/max_nfa_states.
std::uint64_t estimate_nfa_size(const NodePtr& n);
/// The repetition rule inside estimate_nfa_size: states for `kid{min,max}` given the kid's
/// estimate (lets a parser track sizes bottom-up without re-walking subtrees).
std::uint64_t estimate_repeat_size(std::uint64_t kid, std::uint32_t min, std::uint32_t max);

}  // namespace corral
