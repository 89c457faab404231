// grammar_parser.cpp — grammar text → GrammarAst.
//
// In:  UTF-8 text in llama.cpp GBNF syntax (`name ::= alternatives`, `|`, grouping, `* + ?`,
//      `{m}` `{m,}` `{m,n}`, "literals" with escapes, [classes] with ranges/negation/escapes,
//      `.`, `# comments`) extended with `/regex/` terminals in Python `re` syntax (`/regex/j`:
//      over decoded JSON string contents, matched in every encoded form; `/regex/c`: only in
//      the canonical form of json.dumps(s, ensure_ascii=False)) and the language
//      operators `A & B` (intersection) and `A - B` (difference), which bind looser than
//      concatenation and tighter than `|`, and whose operands must be regular; and slots
//      `${name}` / `${name:json}`, terminals whose values are bound later (grammar.hpp SlotRef).
// Out: one expression tree per rule (RuleRef nodes point into the rule table).
// Invariants: every error is a CompileError with line and column and what was expected; nesting
// is bounded by Limits::max_nesting so hostile input cannot overflow the stack.
// A rule body may span lines; it ends where the next `name ::=` starts (GBNF is stricter; this
// is a superset).
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "grammar.hpp"
#include "json_string.hpp"
#include "regex_memo.hpp"
#include "regex_parser.hpp"

namespace corral {
namespace {

bool is_name_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(unsigned char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-'; }

class GrammarParser {
 public:
  GrammarParser(std::string_view text, const Limits& limits) : s_(text), limits_(limits) {}

  GrammarAst parse(const std::string& start_rule) {
    skip_ws();
    while (pos_ < s_.size()) {
      std::size_t name_pos = pos_;
      if (!is_name_start(peek())) fail("expected a rule name (like `root ::= ...`)");
      std::string name = parse_name();
      skip_ws();
      if (!consume("::=")) fail("expected `::=` after rule name '" + name + "'");
      std::int32_t idx = rule_index(name, name_pos);
      RuleAst& r = ast_.rules[static_cast<std::size_t>(idx)];
      if (r.body) {
        fail_at(name_pos, "rule '" + name + "' is defined twice (first at " + where(r.pos) + ")");
      }
      r.pos = name_pos;
      skip_ws();
      if (peek() == '%') {
        parse_keyed(idx);
        skip_ws();
        continue;
      }
      NodePtr body = parse_alternatives(0);
      ast_.rules[static_cast<std::size_t>(idx)].body = body;
      skip_ws();
    }
    for (const RuleAst& r : ast_.rules) {
      if (!r.body) fail_at(r.ref_pos, "undefined rule '" + r.name + "'");
    }
    for (const Operand& o : operands_) check_regular(o);
    auto it = index_.find(start_rule);
    if (it == index_.end()) {
      if (ast_.rules.empty()) throw CompileError("the grammar is empty: it defines no rules");
      throw CompileError("the grammar has no rule named '" + start_rule + "' (the start rule)");
    }
    ast_.start = it->second;
    return std::move(ast_);
  }

 private:
  // One operand of `&` / `-`, kept for the regularity check at the end of parsing.
  struct Operand {
    NodePtr tree;
    char op;             // '&' or '-' (the first operand of a chain: the first operator)
    std::size_t op_pos;  // offset of the operator
  };

  unsigned char peek(std::size_t k = 0) const {
    return pos_ + k < s_.size() ? static_cast<unsigned char>(s_[pos_ + k]) : 0;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  bool consume(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return true;
    }
    return false;
  }

  std::string where(std::size_t off) const {
    auto lc = line_col(off);
    return "line " + std::to_string(lc.first) + ", column " + std::to_string(lc.second);
  }
  std::pair<int, int> line_col(std::size_t off) const {
    int line = 1, col = 1;
    for (std::size_t i = 0; i < off && i < s_.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(s_[i]);
      if (c == '\n') {
        ++line;
        col = 1;
      } else if ((c & 0xC0) != 0x80) {
        ++col;
      }
    }
    return {line, col};
  }
  [[noreturn]] void fail_at(std::size_t off, const std::string& msg) const {
    auto lc = line_col(off);
    throw CompileError(msg, off, lc.first, lc.second);
  }
  [[noreturn]] void fail(const std::string& msg) const {
    std::string found = at_end() ? "end of input" : describe_here();
    fail_at(pos_, msg + ", found " + found);
  }
  std::string describe_here() const {
    // Up to 12 characters, cut at a UTF-8 character boundary.
    std::size_t n = 0, chars = 0;
    while (pos_ + n < s_.size() && s_[pos_ + n] != '\n') {
      if ((static_cast<unsigned char>(s_[pos_ + n]) & 0xC0) != 0x80 && ++chars > 12) break;
      ++n;
    }
    return "'" + std::string(s_.substr(pos_, n)) + "'";
  }

  // Whitespace including newlines and comments.
  void skip_ws() {
    while (!at_end()) {
      unsigned char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // `%keyed(sep; member, !member, ^{0,2} member, ...; extra)` as a whole rule body (keyed.hpp):
  // `!` marks a required member, `^{i,j}` the members (by position) that must be present when
  // this one is, the optional third part is the member for undeclared keys. `%keyed{min,max}`
  // bounds the number of members, undeclared ones included. The rule's body becomes a
  // placeholder that references every part and the rule itself, so the regularity analysis
  // (which only reads bodies) treats it as recursive.
  //
  // `%unique{min,max}(sep; item, item, ...)` (unique.hpp): the same group with count bounds and
  // neither required members nor undeclared keys; `{min,}` has no upper bound, no braces is `{1,}`.
  void parse_keyed(std::int32_t idx) {
    const std::size_t start = pos_;
    auto k = std::make_shared<KeyedAst>();
    // `%distinct{min,max}(sep; item)` (distinct.hpp): one item, whose closed values differ.
    k->distinct = consume("%distinct");
    const bool unique = k->distinct || consume("%unique");
    if (!unique && !consume("%keyed")) fail("expected `%keyed(`, `%unique(` or `%distinct(` (the only `%` forms)");
    const char* form = k->distinct ? "%distinct" : unique ? "%unique" : "%keyed";
    parse_count_bounds(*k, form);
    skip_ws();
    if (!consume("(")) fail(std::string("expected `(` after ") + form);
    const bool outer = in_keyed_;
    in_keyed_ = true;
    auto expr = [&](const char* what) {
      skip_ws();
      const std::size_t at = pos_;
      NodePtr n = parse_alternatives(1);
      if (n->kind == NodeKind::Empty && pos_ == at) fail(std::string("expected ") + what + " in " + form + "(...)");
      skip_ws();
      return n;
    };
    k->sep = expr("a separator");
    if (!consume(";")) fail(std::string("expected `;` after the ") + form + " separator");
    std::vector<std::pair<std::vector<std::uint32_t>, std::size_t>> deps;  // per member, and where
    while (true) {
      skip_ws();
      const bool req = !unique && consume("!");
      if (req) k->required.push_back(static_cast<std::uint32_t>(k->members.size()));
      skip_ws();
      deps.emplace_back(std::vector<std::uint32_t>{}, pos_);
      if (!unique && consume("^")) deps.back().first = parse_key_list();
      k->members.push_back(expr(unique ? "an item" : "a member"));
      if (k->distinct || !consume(",")) break;  // %distinct has exactly one item
    }
    if (!unique && consume(";")) {
      // `%key(...)` may mark the key of each undeclared member here (keyed.hpp).
      key_owner_ = idx;
      key_rules_ = &k->key_rules;
      k->extra = expr("the member for undeclared keys");
      key_rules_ = nullptr;
    }
    if (!consume(")")) fail(std::string("expected `)` to close ") + form + "( opened at " + where(start));
    const std::size_t n = k->members.size();
    if (!k->distinct && !k->extra && k->min_count > n)
      fail_at(start, std::string(form) + " needs at least " + std::to_string(k->min_count) + " distinct " +
                         (unique ? "items" : "members") + " but lists only " + std::to_string(n));
    bool any_dep = false;
    for (const auto& [list, at] : deps) {
      for (std::uint32_t j : list)
        if (j >= n) fail_at(at, "`^{...}` names member " + std::to_string(j) + " but the group has " + std::to_string(n));
      any_dep = any_dep || !list.empty();
    }
    if (any_dep) {
      for (auto& d : deps) k->deps.push_back(std::move(d.first));
      close_required(*k);
    }
    in_keyed_ = outer;
    std::vector<NodePtr> parts{k->sep};
    parts.insert(parts.end(), k->members.begin(), k->members.end());
    if (k->extra) parts.push_back(k->extra);
    parts.push_back(make_rule_ref(idx, start));
    RuleAst& r = ast_.rules[static_cast<std::size_t>(idx)];
    r.body = make_alt(std::move(parts), start);
    r.keyed = std::move(k);
  }

  // `{i,j,...}` after `^`: member indices, returned ascending without repeats.
  std::vector<std::uint32_t> parse_key_list() {
    skip_ws();
    if (!consume("{")) fail("expected `{` after `^` (the members this one needs, as `^{0,2}`)");
    std::vector<std::uint32_t> out;
    while (true) {
      skip_ws();
      out.push_back(parse_small_number("member index", "`^{...}`"));
      skip_ws();
      if (consume("}")) break;
      if (!consume(",")) fail("expected `,` or `}` in `^{...}`");
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // A required member's dependencies are required too: close `required` under `deps`, so that
  // every group that closes with its required members closes with their dependencies as well.
  static void close_required(KeyedAst& k) {
    std::vector<char> req(k.members.size(), 0);
    std::vector<std::uint32_t> todo = k.required;
    for (std::uint32_t r : todo) req[r] = 1;
    while (!todo.empty()) {
      const std::uint32_t r = todo.back();
      todo.pop_back();
      for (std::uint32_t j : k.deps[r])
        if (!req[j]) {
          req[j] = 1;
          todo.push_back(j);
        }
    }
    k.required.clear();
    for (std::uint32_t j = 0; j < req.size(); ++j)
      if (req[j]) k.required.push_back(j);
  }

  std::uint32_t parse_small_number(const char* what, const std::string& form) {
    const std::size_t at = pos_;
    std::uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (v > (1u << 30)) fail_at(at, std::string("the ") + what + " in " + form + " is too large");
      ++pos_;
    }
    if (pos_ == at) fail(std::string("expected the ") + what + " in " + form);
    return static_cast<std::uint32_t>(v);
  }

  // `{min,max}` / `{min,}` after %unique, %distinct or %keyed (absent: {1,}).
  void parse_count_bounds(KeyedAst& k, const char* form) {
    if (!consume("{")) return;
    const std::string f = std::string(form) + "{min,max}";
    const std::size_t at = pos_;
    k.min_count = parse_small_number("minimum count", f);
    if (!consume(",")) fail("expected `,` in " + f);
    k.max_count = peek() == '}' ? 0 : parse_small_number("maximum count", f);
    if (!consume("}")) fail("expected `}` to close " + f);
    if (k.min_count < 1)
      fail_at(at, std::string("the minimum count of ") + form + " must be at least 1 (write the empty case outside it)");
    if (k.max_count != 0 && k.max_count < k.min_count)
      fail_at(at, std::string("the maximum count of ") + form + " is below its minimum");
  }

  std::string parse_name() {
    std::size_t b = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }

  std::int32_t rule_index(const std::string& name, std::size_t ref_pos) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    auto idx = static_cast<std::int32_t>(ast_.rules.size());
    if (ast_.rules.size() >= limits_.max_productions)
      throw LimitExceeded("max_productions", ast_.rules.size() + 1, limits_.max_productions,
                          "the grammar defines too many rules");
    RuleAst r;
    r.name = name;
    r.ref_pos = ref_pos;
    ast_.rules.push_back(std::move(r));
    index_.emplace(name, idx);
    return idx;
  }

  // Does the input at pos_ start a new rule definition (`name ::=`)?
  bool at_rule_start() const {
    std::size_t p = pos_;
    if (p >= s_.size() || !is_name_start(static_cast<unsigned char>(s_[p]))) return false;
    while (p < s_.size() && is_name_char(static_cast<unsigned char>(s_[p]))) ++p;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  void enter(std::size_t depth) const {
    if (depth > nesting_limit(limits_))
      throw LimitExceeded("max_nesting", depth, nesting_limit(limits_),
                          "grammar nesting too deep at " + where(pos_) + nesting_note(limits_));
  }

  NodePtr parse_alternatives(std::size_t depth) {
    enter(depth);
    std::size_t start = pos_;
    std::vector<NodePtr> alts;
    alts.push_back(parse_algebra(depth));
    while (true) {
      skip_ws();
      if (!consume("|")) break;
      skip_ws();
      alts.push_back(parse_algebra(depth));
    }
    return alts.size() == 1 ? alts[0] : make_alt(std::move(alts), start);
  }

  // sequence ( ('&' | '-') sequence )*, left to right. A left-to-right chain of `&` and `-`
  // always equals (first ∩ every `&` operand) − (union of the `-` operands), because
  // (P − N) ∩ C = (P ∩ C) − N and (P − N) − C = P − (N ∪ C); building that form directly keeps
  // the tree two levels deep however long the chain is.
  NodePtr parse_algebra(std::size_t depth) {
    const std::size_t start = pos_;
    NodePtr first = parse_sequence(depth);
    skip_ws();
    if (peek() != '&' && peek() != '-') return first;
    if (pos_ == start) fail_at(pos_, std::string("expected an expression before `") + static_cast<char>(peek()) + "`");
    std::vector<NodePtr> keep{first}, drop;
    std::vector<Operand> operands{{first, static_cast<char>(peek()), pos_}};
    while (peek() == '&' || peek() == '-') {
      const char op = static_cast<char>(peek());
      const std::size_t op_pos = pos_;
      ++pos_;
      skip_ws();
      const std::size_t operand_pos = pos_;
      NodePtr rhs = parse_sequence(depth);
      if (pos_ == operand_pos) fail(std::string("expected an expression after `") + op + "`");
      (op == '&' ? keep : drop).push_back(rhs);
      operands.push_back({rhs, op, op_pos});
      skip_ws();
    }
    operands_.insert(operands_.end(), operands.begin(), operands.end());
    NodePtr both = make_intersect(std::move(keep), start);
    return drop.empty() ? both : make_difference(both, make_alt(std::move(drop), start), start);
  }

  NodePtr parse_sequence(std::size_t depth) {
    std::size_t start = pos_;
    std::vector<NodePtr> items;
    while (true) {
      skip_ws();
      if (at_end()) break;
      unsigned char c = peek();
      if (c == '|' || c == ')' || c == '&' || c == '-') break;
      if (in_keyed_ && (c == ',' || c == ';')) break;
      if (at_rule_start()) break;
      NodePtr atom = parse_atom(depth);
      items.push_back(parse_quantifiers(atom, depth));
    }
    if (items.empty()) return make_empty(start);
    return items.size() == 1 ? items[0] : make_concat(std::move(items), start);
  }

  // Each quantifier wraps the atom in one more node, so stacked ones (`"a"****`) count as
  // nesting: the tree, and every recursion over it downstream, stays max_nesting deep.
  NodePtr parse_quantifiers(NodePtr atom, std::size_t depth) {
    std::size_t wraps = 0;
    while (!at_end()) {
      std::size_t qpos = pos_;
      unsigned char c = peek();
      if (c == '*' || c == '+' || c == '?' || c == '{') enter(depth + ++wraps);
      if (c == '*') {
        ++pos_;
        atom = make_repeat(atom, 0, Node::kUnbounded, qpos);
      } else if (c == '+') {
        ++pos_;
        atom = make_repeat(atom, 1, Node::kUnbounded, qpos);
      } else if (c == '?') {
        ++pos_;
        atom = make_repeat(atom, 0, 1, qpos);
      } else if (c == '{') {
        ++pos_;
        skip_inline_ws();
        std::uint32_t lo = parse_count("a repetition count");
        std::uint32_t hi = lo;
        skip_inline_ws();
        if (consume(",")) {
          skip_inline_ws();
          hi = (peek() == '}') ? Node::kUnbounded : parse_count("an upper repetition bound");
          skip_inline_ws();
        }
        if (!consume("}")) fail("expected `}` to close the repetition");
        if (hi < lo) fail_at(qpos, "repetition {m,n} has n < m");
        atom = make_repeat(atom, lo, hi, qpos);
      } else {
        break;
      }
    }
    return atom;
  }

  void skip_inline_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t')) ++pos_;
  }

  std::uint32_t parse_count(const char* what) {
    if (!(peek() >= '0' && peek() <= '9')) fail(std::string("expected ") + what);
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) fail_at(pos_, "repetition count too large (at most 1000000)");
      ++pos_;
    }
    return static_cast<std::uint32_t>(v);
  }

  NodePtr parse_atom(std::size_t depth) {
    std::size_t start = pos_;
    unsigned char c = peek();
    if (c == '"' || c == '\'') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '/') return parse_regex_terminal();
    if (c == '<') return parse_token_ref();
    if (c == '$') return parse_slot();
    if (c == '.') {
      ++pos_;
      return make_chars(CharSet::any(), start);
    }
    if (c == '%' && s_.substr(pos_, 5) == "%key(") {
      // The key of an undeclared member (keyed.hpp): a hidden rule of its own, whose text
      // the parser reads when it completes (`#` never appears in a rule name written by hand).
      if (key_rules_ == nullptr)
        fail("`%key(...)` marks the key of an undeclared member: only in the last part of %keyed(...)");
      pos_ += 5;
      skip_ws();
      std::vector<std::int32_t>* rules = key_rules_;
      key_rules_ = nullptr;  // (no %key inside a key)
      NodePtr inner = parse_alternatives(depth + 1);
      key_rules_ = rules;
      skip_ws();
      if (!consume(")")) fail("expected `)` to close the %key( opened at " + where(start));
      const std::string name = ast_.rules[static_cast<std::size_t>(key_owner_)].name + "#key" +
                               std::to_string(key_rules_->size());
      const std::int32_t r = rule_index(name, start);
      ast_.rules[static_cast<std::size_t>(r)].body = inner;
      ast_.rules[static_cast<std::size_t>(r)].key_rule = true;
      ast_.rules[static_cast<std::size_t>(r)].pos = start;
      key_rules_->push_back(r);
      return make_rule_ref(r, start);
    }
    if (c == '(') {
      ++pos_;
      skip_ws();
      NodePtr inner = parse_alternatives(depth + 1);
      skip_ws();
      if (!consume(")")) fail("expected `)` to close the group opened at " + where(start));
      return inner;
    }
    if (is_name_start(c)) {
      std::string name = parse_name();
      return make_rule_ref(rule_index(name, start), start);
    }
    fail("expected a literal, character class, rule name, `(`, `.`, /regex/ or ${slot}");
  }

  // Decode one UTF-8 code point at pos_.
  std::uint32_t next_codepoint() {
    unsigned char c = peek();
    std::size_t start = pos_;
    if (c < 0x80) {
      ++pos_;
      return c;
    }
    int n = (c >= 0xF0 && c < 0xF8) ? 3 : (c >= 0xE0) ? 2 : (c >= 0xC2 && c < 0xE0) ? 1 : -1;
    if (n < 0) fail_at(start, "invalid UTF-8 in grammar text");
    std::uint32_t cp = c & (0x3F >> n);
    for (int i = 1; i <= n; ++i) {
      unsigned char d = peek(static_cast<std::size_t>(i));
      if ((d & 0xC0) != 0x80) fail_at(start, "invalid UTF-8 in grammar text");
      cp = (cp << 6) | (d & 0x3F);
    }
    pos_ += static_cast<std::size_t>(n) + 1;
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      fail_at(start, "invalid UTF-8 in grammar text");
    return cp;
  }

  std::uint32_t parse_hex(int digits) {
    std::uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      unsigned char d = peek();
      int x = (d >= '0' && d <= '9') ? d - '0' : (d >= 'a' && d <= 'f') ? d - 'a' + 10
              : (d >= 'A' && d <= 'F') ? d - 'A' + 10 : -1;
      if (x < 0) fail("expected " + std::to_string(digits) + " hex digits in escape");
      v = v * 16 + static_cast<std::uint32_t>(x);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class, with escapes. Returns the code point.
  std::uint32_t parse_char() {
    if (at_end()) fail("unexpected end of input");
    std::size_t start = pos_;
    if (peek() != '\\') return next_codepoint();
    ++pos_;
    if (at_end()) fail("unfinished escape");
    unsigned char e = peek();
    ++pos_;
    std::uint32_t cp;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case 'f': return '\f';
      case 'v': return '\v';
      case 'x': cp = parse_hex(2); break;
      case 'u': cp = parse_hex(4); break;
      case 'U': cp = parse_hex(8); break;
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^':
        return e;
      default:
        fail_at(start, std::string("unknown escape `\\") + static_cast<char>(e) + "`");
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail_at(start, "escape is not a Unicode scalar value");
    return cp;
  }

  NodePtr parse_literal() {
    std::size_t start = pos_;
    unsigned char quote = peek();
    ++pos_;
    std::u32string text;
    while (true) {
      if (at_end() || peek() == '\n')
        fail_at(start, "unterminated string literal (missing closing quote)");
      if (peek() == quote) {
        ++pos_;
        break;
      }
      text.push_back(parse_char());
    }
    return text.empty() ? make_empty(start) : make_literal(text, start);
  }

  NodePtr parse_class() {
    std::size_t start = pos_;
    ++pos_;  // [
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    CharSet cs;
    while (true) {
      if (at_end() || peek() == '\n')
        fail_at(start, "unterminated character class (missing `]`)");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      std::size_t item_pos = pos_;
      std::uint32_t lo = parse_char();
      std::uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail_at(item_pos, "character range is out of order (end before start)");
      }
      cs.add(lo, hi);
    }
    if (negate) cs = cs.negated();
    return make_chars(cs, start);
  }

  // <[123]> names a token by id; <...> (through the first '>') names a token by its text.
  NodePtr parse_token_ref() {
    std::size_t start = pos_;
    TokenRef ref;
    ref.pos = start;
    if (peek(1) == '[') {
      pos_ += 2;
      std::uint64_t v = 0;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a token id in <[...]>");
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        if (v > 0x7FFFFFFF) fail_at(start, "token id too large");
        ++pos_;
      }
      if (!consume("]>")) fail("expected `]>` to close the token id");
      ref.id = static_cast<std::int32_t>(v);
    } else {
      std::size_t end = s_.find('>', pos_);
      std::size_t nl = s_.find('\n', pos_);
      if (end == std::string_view::npos || (nl != std::string_view::npos && nl < end))
        fail_at(start, "unterminated token reference (expected `>`), e.g. <|eot_id|> or <[128009]>");
      ref.text = std::string(s_.substr(start, end + 1 - start));
      pos_ = end + 1;
    }
    ast_.tokens.push_back(std::move(ref));
    return make_rule_ref(token_ref_rule(ast_.tokens.size() - 1), start);
  }

  // ${name} (the raw bytes of one bound value) or ${name:json} (one bound value as a whole JSON
  // string). Names use rule-name characters; the values come later (CompiledGrammar::bind).
  NodePtr parse_slot() {
    const std::size_t start = pos_;
    if (peek(1) != '{') fail("expected `{` after `$` (a slot is written ${name} or ${name:json})");
    pos_ += 2;
    if (!is_name_start(peek())) fail("expected a slot name (letters, digits, `_`, `-`) in ${...}");
    SlotRef slot;
    slot.name = parse_name();
    slot.pos = start;
    if (consume(":")) {
      const std::size_t kind_pos = pos_;
      const std::string kind = parse_name();
      if (kind != "json")
        fail_at(kind_pos, "unknown slot spelling `" + kind + "` (a slot is ${name}: the raw value, or "
                          "${name:json}: the value as a JSON string)");
      slot.spelling = SlotSpelling::Json;
    }
    if (!consume("}")) fail("expected `}` to close the slot ${" + slot.name);
    ast_.slots.push_back(std::move(slot));
    return make_rule_ref(slot_ref_rule(ast_.slots.size() - 1), start);
  }

  // What a reference to rule index r < 0 (a token or a slot) names, for error messages.
  std::string external_ref(std::int32_t r) const {
    if (is_slot_rule(r)) return "the slot " + slot_text(ast_.slots[slot_ref_index(r)]) + " (bound later)";
    return "the token " + ast_.tokens[token_ref_index(r)].text;
  }

  NodePtr parse_regex_terminal() {
    std::size_t start = pos_;
    ++pos_;  // opening /
    std::size_t body = pos_;
    bool in_class = false;
    while (true) {
      if (at_end() || peek() == '\n') fail_at(start, "unterminated /regex/ (missing closing `/`)");
      unsigned char c = peek();
      if (c == '\\') {
        pos_ += 2;
        continue;
      }
      if (c == '[') in_class = true;
      else if (c == ']') in_class = false;
      else if (c == '/' && !in_class) break;
      ++pos_;
    }
    std::string_view pattern = s_.substr(body, pos_ - body);
    ++pos_;  // closing /
    std::optional<JsonEscapes> json = parse_regex_flags();
    const char mode = !json ? '\0' : *json == JsonEscapes::Canonical ? 'c' : 'j';
    if (NodePtr shared = memo_regex_terminal(pattern, mode, limits_)) return shared;
    NodePtr n;
    try {
      n = parse_regex(pattern, limits_);
    } catch (const CompileError& e) {
      fail_at(body + e.offset(), "in /regex/: " + e.bare_message());
    }
    if (json) n = json_string_content(n, limits_, *json);
    memo_put_regex_terminal(pattern, mode, limits_, n);
    return n;
  }

  // Flags: letters right after a regex terminal's closing `/`. Each makes the regex describe
  // decoded JSON string contents, matched in their encoded spelling (json_string.hpp): `j` every
  // spelling, `c` only the canonical one. They are alternatives, so at most one may be given.
  std::optional<JsonEscapes> parse_regex_flags() {
    std::optional<JsonEscapes> json;
    while (!at_end() && ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))) {
      const char flag = static_cast<char>(peek());
      if (flag != 'j' && flag != 'c')
        fail_at(pos_, std::string("unknown regex flag `") + flag +
                          "` (the flags are `j`: /regex/j matches every JSON spelling of string "
                          "contents, and `c`: /regex/c only their canonical spelling)");
      const JsonEscapes mode = flag == 'j' ? JsonEscapes::Any : JsonEscapes::Canonical;
      if (json) {
        if (*json == mode) fail_at(pos_, std::string("regex flag `") + flag + "` given twice");
        fail_at(pos_, "regex flags `j` and `c` exclude each other (every JSON spelling, or only "
                      "the canonical one)");
      }
      json = mode;
      ++pos_;
    }
    return json;
  }

  // ---- operands of `&` / `-` must be regular ----------------------------------------------
  // Checked once every rule is known (a rule may be defined after its use). An operand may use
  // rules, but nothing reachable from it may be recursive or name a token: intersection and
  // difference are computed on finite automata.

  // Fails at the first reference of `o` that makes it non-regular.
  void check_regular(const Operand& o) {
    std::vector<const Node*> stack{o.tree.get()};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!operand_seen_.insert(n).second) continue;  // regex and `/…/j` `/…/c` trees share subtrees
      for (const auto& k : n->kids) stack.push_back(k.get());
      if (n->kind != NodeKind::RuleRef) continue;
      std::string why = n->rule < 0 ? "it names " + external_ref(n->rule) : irregular_reason(n->rule);
      if (!why.empty())
        fail_at(n->pos, std::string("an operand of `") + o.op + "` (at " + where(o.op_pos) +
                            ") must be regular (no recursion, no token references, no slots), but " + why);
    }
  }

  // Why rule r is not regular ("" when it is), by an iterative depth-first walk of the rules it
  // reaches. Verdicts are memoised, so checking every operand costs O(grammar size) in all.
  std::string irregular_reason(std::int32_t r0) {
    if (rule_state_.empty()) rule_state_.assign(ast_.rules.size(), 0);  // 0 new, 1 open, 2 regular
    struct Frame {
      std::int32_t rule;
      std::vector<const Node*> todo;  // nodes of its body not yet visited
    };
    auto open = [&](std::int32_t r) {
      rule_state_[static_cast<std::size_t>(r)] = 1;
      return Frame{r, {ast_.rules[static_cast<std::size_t>(r)].body.get()}};
    };
    auto name = [&](std::int32_t r) { return "'" + ast_.rules[static_cast<std::size_t>(r)].name + "'"; };
    auto path = [&](const std::vector<Frame>& frames, std::size_t from) {  // "'a' -> 'b'"
      std::string p;
      for (std::size_t i = from; i < frames.size(); ++i) p += (i > from ? " -> " : "") + name(frames[i].rule);
      return p;
    };
    if (rule_state_[static_cast<std::size_t>(r0)] == 2) return "";
    std::vector<Frame> frames{open(r0)};
    while (!frames.empty()) {
      Frame& f = frames.back();
      if (f.todo.empty()) {
        rule_state_[static_cast<std::size_t>(f.rule)] = 2;
        frames.pop_back();
        continue;
      }
      const Node* n = f.todo.back();
      f.todo.pop_back();
      if (!body_seen_.insert(n).second) continue;
      for (const auto& k : n->kids) f.todo.push_back(k.get());
      if (n->kind != NodeKind::RuleRef) continue;
      if (n->rule < 0) {
        const std::string via = frames.size() > 1 ? " (reached as " + path(frames, 0) + ")" : "";
        return "rule " + name(f.rule) + via + " names " + external_ref(n->rule);
      }
      const auto c = static_cast<std::size_t>(n->rule);
      if (rule_state_[c] == 2) continue;
      if (rule_state_[c] == 1) {
        std::size_t from = 0;
        while (frames[from].rule != n->rule) ++from;
        return "rule " + name(n->rule) + " is recursive (" + path(frames, from) + " -> " + name(n->rule) + ")";
      }
      frames.push_back(open(n->rule));  // invalidates f: the loop re-reads frames.back()
    }
    return "";
  }

  std::string_view s_;
  const Limits& limits_;
  std::size_t pos_ = 0;
  bool in_keyed_ = false;  // inside %keyed(...): `,` and `;` end an expression
  // While parsing the undeclared member of a %keyed group: where `%key(...)` rules go, and
  // the group's rule (names them).
  std::vector<std::int32_t>* key_rules_ = nullptr;
  std::int32_t key_owner_ = -1;
  GrammarAst ast_;
  std::unordered_map<std::string, std::int32_t> index_;
  std::vector<Operand> operands_;
  std::vector<std::uint8_t> rule_state_;  // per rule, for irregular_reason
  // Nodes already visited by each walk. Separate sets: an operand walk must not hide, from the
  // rule walk, a reference it is in the middle of checking (`a ::= "x" & a`).
  std::unordered_set<const Node*> operand_seen_, body_seen_;
};

}  // namespace

GrammarAst parse_grammar_text(std::string_view text, const std::string& start_rule,
                              const Limits& limits) {
  return GrammarParser(text, limits).parse(start_rule);
}

}  // namespace corral
