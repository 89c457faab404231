// grammar_lower.cpp — GrammarAst → Grammar (the engine IR).
//
// In:  rules as expression trees with RuleRefs.
// Out: productions whose terminals are maximal regular sub-expressions, each with a minimal DFA.
// Steps: (1) find the rules that are *regular* (not on a reference cycle, referencing only
// regular rules, small enough) and inline them; (2) lower each remaining rule body: regular
// runs of a sequence become one terminal, alternations and repetitions of non-regular parts
// become helper nonterminals (repetition is left-recursive, which Earley handles in constant
// space per item); (3) intern terminals by their canonical regex text and build their DFAs;
// (4) Grammar::finalize computes nullable/productive/min-length tables.
// Invariant: the language of the lowered grammar equals the language of the rule text.
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "automaton_memo.hpp"
#include "compile_times.hpp"
#include "dfa.hpp"
#include "finite_dfa.hpp"
#include "grammar.hpp"
#include "keyed.hpp"
#include "unique.hpp"

namespace corral {
namespace {

constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max() / 4;
// Regular rules at most this big (estimated NFA states) are always inlined where used, e.g.
// bounded whitespace, which then merges into the punctuation around it.
constexpr std::uint64_t kTinyRule = 32;

void collect_refs(const NodePtr& n, std::vector<std::int32_t>& out) {
  // Iterative: expression trees can be deep.
  std::vector<const Node*> stack{n.get()};
  while (!stack.empty()) {
    const Node* x = stack.back();
    stack.pop_back();
    if (x->kind == NodeKind::RuleRef && x->rule >= 0) out.push_back(x->rule);
    for (const auto& k : x->kids) stack.push_back(k.get());
  }
}

// Thrown by build_dfas when a terminal holding alternations finite_alt accepted on trust
// cannot be built directly within the cap: lowering starts again with them refused (split).
struct RefusedAlternations {
  std::vector<std::string> keys;
};

class Lowerer {
 public:
  Lowerer(const GrammarAst& ast, const Limits& limits, const Budget& budget,
          const std::unordered_set<std::string>& refused)
      : ast_(ast), limits_(limits), budget_(budget), refused_(refused) {}

  Grammar run() {
    find_regular_rules();
    g_.names.push_back("start");
    g_.productions.push_back(Production{0, {}});
    nt_of_rule_.assign(ast_.rules.size(), -1);
    Symbol root = rule_symbol(ast_.start);
    g_.productions[0].rhs = {root};
    // Lower rules breadth-first as they are referenced (unreferenced rules are dropped).
    while (!pending_.empty()) {
      auto [rule, nt] = pending_.back();
      pending_.pop_back();
      budget_.check("lowering the grammar");
      if (ast_.rules[static_cast<std::size_t>(rule)].keyed) {
        lower_keyed(*ast_.rules[static_cast<std::size_t>(rule)].keyed, nt);
        continue;
      }
      add_alternatives(nt, lower_alts(inlined(rule)));
    }
    build_dfas();
    g_.finalize();
    return std::move(g_);
  }

 private:
  // ---- (1) regular rules -------------------------------------------------------------
  void find_regular_rules() {
    const std::size_t n = ast_.rules.size();
    std::vector<std::vector<std::int32_t>> refs(n);
    for (std::size_t i = 0; i < n; ++i) collect_refs(ast_.rules[i].body, refs[i]);
    ref_count_.assign(n, 0);
    for (const auto& rs : refs)
      for (std::int32_t c : rs) ++ref_count_[static_cast<std::size_t>(c)];
    // Iterative DFS computing "regular": a rule is regular iff it is not on a cycle and all
    // its references are regular. state: 0 new, 1 on stack, 2 done.
    regular_.assign(n, 0);
    std::vector<std::uint8_t> state(n, 0);
    std::vector<std::uint8_t> cyclic(n, 0);
    for (std::size_t r0 = 0; r0 < n; ++r0) {
      if (state[r0]) continue;
      std::vector<std::pair<std::int32_t, std::size_t>> stack{{static_cast<std::int32_t>(r0), 0}};
      state[r0] = 1;
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        auto ru = static_cast<std::size_t>(r);
        if (next < refs[ru].size()) {
          std::int32_t c = refs[ru][next++];
          auto cu = static_cast<std::size_t>(c);
          if (state[cu] == 0) {
            state[cu] = 1;
            stack.push_back({c, 0});
          } else if (state[cu] == 1) {
            // Back edge: every rule on the stack from c up to r is on a cycle.
            for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
              cyclic[static_cast<std::size_t>(it->first)] = 1;
              if (it->first == c) break;
            }
          }
        } else {
          // A keyed group is never regular, nor the key of its undeclared members (keyed.hpp).
          bool reg = !cyclic[ru] && !ast_.rules[ru].keyed && !ast_.rules[ru].key_rule;
          for (std::int32_t c : refs[ru]) reg = reg && regular_[static_cast<std::size_t>(c)] && !cyclic[static_cast<std::size_t>(c)];
          regular_[ru] = reg;
          state[ru] = 2;
          stack.pop_back();
        }
      }
    }
    // A rule on a cycle found via a different DFS root may have been marked regular before the
    // cycle was discovered; repeat the propagation until stable.
    bool changed = true;
    while (changed) {
      changed = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!regular_[i]) continue;
        bool reg = !cyclic[i] && !ast_.rules[i].keyed && !ast_.rules[i].key_rule;
        for (std::int32_t c : refs[i]) reg = reg && regular_[static_cast<std::size_t>(c)];
        if (!reg) {
          regular_[i] = 0;
          changed = true;
        }
      }
    }
  }

  // Body of rule r with references to regular rules replaced by their (inlined) bodies.
  NodePtr inlined(std::int32_t r) {
    auto ru = static_cast<std::size_t>(r);
    if (regular_[ru]) {
      auto it = inline_cache_.find(r);
      if (it != inline_cache_.end()) return it->second;
    }
    NodePtr out = substitute(ast_.rules[ru].body);
    if (regular_[ru]) {
      // Inlining copies the rule's automaton into every use: a rule used in several places is
      // inlined only while the copies stay small; otherwise it stays one shared nonterminal
      // (chains of optional properties would otherwise grow quadratically).
      const std::uint64_t size = size_of(out);
      const std::uint64_t uses = std::max<std::uint32_t>(1, ref_count_[ru]);
      // A rule used in several places that is more than a tiny piece (a JSON string, say) also
      // stays shared: one terminal means one lazily computed mask entry for all its uses.
      if (size > merge_cap() || (uses > 1 && (size * uses > merge_cap() || size > kTinyRule))) {
        regular_[ru] = 0;
      } else {
        inline_cache_[r] = out;
      }
    }
    return out;
  }

  NodePtr substitute(const NodePtr& n) {
    DepthGuard guard(subst_depth_);
    // Nothing to substitute below (the regex of a `/…/` terminal, say): the walk would rebuild
    // nothing, and walking every regex of a big schema node by node was a large share of it.
    if (const TreeFacts info = tree_facts(*n); info.regular && !info.algebra) return n;
    switch (n->kind) {
      case NodeKind::RuleRef:
        if (n->rule >= 0 && regular_[static_cast<std::size_t>(n->rule)] &&
            subst_depth_ > kInlineDepthFactor * nesting_limit(limits_)) {
          // Inlining a chain of regular rules nests their bodies: past a few times the nesting
          // limit (tree levels; a rule is ~3) the rule stays a nonterminal, so the trees built
          // here (and every recursion over them) stay bounded however long the chain.
          regular_[static_cast<std::size_t>(n->rule)] = 0;
          return n;
        }
        if (n->rule >= 0 && regular_[static_cast<std::size_t>(n->rule)]) {
          NodePtr body = inlined(n->rule);
          if (regular_[static_cast<std::size_t>(n->rule)]) return body;
        }
        return n;
      case NodeKind::Concat:
      case NodeKind::Alt:
      case NodeKind::Repeat: {
        std::vector<NodePtr> kids;
        bool same = true;
        for (const auto& k : n->kids) {
          kids.push_back(substitute(k));
          same = same && kids.back() == k;
        }
        if (same) return n;
        return rebuild(*n, std::move(kids));
      }
      case NodeKind::Intersect:
      case NodeKind::Difference:
        // The operands become one automaton, so every rule they use is inlined whatever its
        // size or use count (the parser has checked that those rules are regular).
        return expand_rules(n);
      default:
        return n;
    }
  }

  // n with every rule reference replaced by the rule's fully expanded body. Rules used several
  // times become shared subtrees, so the tree can describe exponentially many NFA states with
  // little memory: the estimate is computed here bottom-up (memoised per node, never by walking
  // the expanded tree) and checked against max_nfa_states before anything walks it.
  NodePtr expand_rules(const NodePtr& n) {
    auto [out, size] = expand_sized(n);
    if (size > limits_.max_nfa_states)
      throw LimitExceeded("max_nfa_states", size, limits_.max_nfa_states,
                          "the operands of `&`/`-` expand to too many NFA states");
    return out;
  }

  std::pair<NodePtr, std::uint64_t> expand_sized(const NodePtr& n) {
    DepthGuard guard(expand_depth_);
    if (expand_depth_ > kInlineDepthFactor * nesting_limit(limits_))
      throw LimitExceeded("max_nesting", expand_depth_, kInlineDepthFactor * nesting_limit(limits_),
                          "the rules used in an operand of `&`/`-` nest too deeply (tree levels, at most " +
                              std::to_string(kInlineDepthFactor) + " x max_nesting)");
    if (n->kind == NodeKind::RuleRef) {
      CORRAL_CHECK(n->rule >= 0, "token reference in an operand of `&`/`-`");
      auto it = expanded_.find(n->rule);
      if (it != expanded_.end()) {
        CORRAL_CHECK(it->second.first != nullptr, "recursive rule in an operand of `&`/`-`");
        return it->second;
      }
      expanded_[n->rule] = {nullptr, 0};  // in progress: meeting it again would be a cycle
      auto body = expand_sized(ast_.rules[static_cast<std::size_t>(n->rule)].body);
      if (body.second > limits_.max_nfa_states)
        throw LimitExceeded("max_nfa_states", body.second, limits_.max_nfa_states,
                            "rule '" + ast_.rules[static_cast<std::size_t>(n->rule)].name +
                                "', used in an operand of `&`/`-`, expands to too many NFA states");
      expanded_[n->rule] = body;
      return body;
    }
    if (n->kids.empty()) return {n, 1};
    auto memo = expand_memo_.find(n.get());
    if (memo != expand_memo_.end()) return {std::get<0>(memo->second), std::get<1>(memo->second)};
    std::vector<NodePtr> kids;
    std::uint64_t size = n->kind == NodeKind::Concat || n->kind == NodeKind::Repeat ? 0 : 1;
    constexpr std::uint64_t kSat = std::uint64_t{1} << 62;
    bool same = true;
    for (const auto& k : n->kids) {
      auto sub = expand_sized(k);
      size = std::min(kSat, size + sub.second);
      same = same && sub.first == k;
      kids.push_back(std::move(sub.first));
    }
    if (n->kind == NodeKind::Repeat) size = estimate_repeat_size(size, n->min, n->max);
    NodePtr out = same ? n : rebuild(*n, std::move(kids));
    expand_memo_.emplace(n.get(), std::make_tuple(out, size, n));
    return {out, size};
  }

  static NodePtr rebuild(const Node& n, std::vector<NodePtr> kids) {
    switch (n.kind) {
      case NodeKind::Concat: return make_concat(std::move(kids), n.pos);
      case NodeKind::Alt: return make_alt(std::move(kids), n.pos);
      case NodeKind::Repeat: return make_repeat(kids[0], n.min, n.max, n.pos);
      case NodeKind::Intersect: return make_intersect(std::move(kids), n.pos);
      case NodeKind::Difference: return make_difference(kids[0], kids[1], n.pos);
      default: break;
    }
    throw InternalError("rebuilding a node without children");
  }

  // ---- (2) lowering -------------------------------------------------------------------
  using Seq = std::vector<Symbol>;

  std::int32_t new_nonterminal(const std::string& name) {
    if (g_.names.size() >= limits_.max_productions)
      throw LimitExceeded("max_productions", g_.names.size() + 1, limits_.max_productions,
                          "the lowered grammar has too many rules");
    g_.names.push_back(name);
    return static_cast<std::int32_t>(g_.names.size() - 1);
  }

  void add_alternatives(std::int32_t nt, std::vector<Seq> alts) {
    for (auto& a : alts) {
      if (g_.productions.size() >= limits_.max_productions)
        throw LimitExceeded("max_productions", g_.productions.size() + 1, limits_.max_productions,
                            "the lowered grammar has too many productions");
      g_.productions.push_back(Production{nt, std::move(a)});
    }
  }

  // A keyed group (keyed.hpp): K ::= m_j | K (sep m_j) per member (tagged with its key), plus,
  // when some key is required, the min-only production of the required members in order.
  // `sep m_j` is lowered as one sequence so the separator merges with the member's key into
  // one terminal (`,"name":`): a token like `, "` then stays inside a terminal instead of
  // needing the parser at the separator's end on every mask.
  void lower_keyed(const KeyedAst& k, std::int32_t nt) {
    if (k.distinct) {
      lower_distinct(k, nt);
      return;
    }
    const NodePtr sep = substitute(k.sep);
    const Seq sep_seq = lower_seq(sep);
    KeyedGroup grp;
    grp.nt = nt;
    grp.n_keys = static_cast<std::uint32_t>(k.members.size());
    grp.required = k.required;
    grp.deps = k.deps;
    // Count bounds (unique.hpp, keyed.hpp); without undeclared members a maximum of at least
    // the member count bounds nothing.
    grp.min_count = k.min_count;
    grp.max_count = !k.extra && k.max_count >= grp.n_keys ? 0 : k.max_count;
    const bool min_only = !k.required.empty() || k.min_count > 1 || !k.deps.empty();
    const std::uint8_t role = min_only ? kParseOnly : kParseAndMin;
    std::vector<Seq> seqs;
    auto add_member = [&](const NodePtr& member, const Seq& m, std::int32_t key) {
      Seq rec{Symbol::nonterminal(nt)};
      const Seq more = lower_seq(make_concat({sep, member}));
      rec.insert(rec.end(), more.begin(), more.end());
      add_alternatives(nt, {m, rec});
      for (std::size_t i = g_.productions.size() - 2; i < g_.productions.size(); ++i) {
        g_.productions[i].key = key;
        g_.productions[i].role = role;
      }
    };
    for (std::size_t j = 0; j < k.members.size(); ++j) {
      const NodePtr member = substitute(k.members[j]);
      seqs.push_back(lower_seq(member));
      add_member(member, seqs.back(), static_cast<std::int32_t>(j));
    }
    Seq extra_seq;
    if (k.extra) {
      const NodePtr extra = substitute(k.extra);
      if (!k.key_rules.empty() && extra->kind == NodeKind::Alt) {
        // Keys remembered (`%key(...)`): one member per alternative, so that each key
        // nonterminal sits right in the group's own productions (the parser reads the held
        // keys from the group item it advances).
        for (const NodePtr& alt : extra->kids) {
          const Seq seq = lower_seq(alt);
          if (extra_seq.empty()) extra_seq = seq;
          add_member(alt, seq, kExtraKey);
        }
      } else {
        extra_seq = lower_seq(extra);
        add_member(extra, extra_seq, kExtraKey);
      }
      for (std::int32_t r : k.key_rules) grp.key_nts.push_back(rule_symbol(r).index());
    }
    if (min_only) {
      // The required members in order (closed under deps by the text parser), then the first
      // other members, then undeclared ones, until min_count: a shortest-string table never
      // reads a list the group would refuse. Beside a maximum, members with dependencies are
      // chosen so that the list still fits (keyed.cpp).
      std::vector<std::uint32_t> firsts = k.required;
      if (!k.deps.empty() && grp.max_count != 0) {
        derive_fit_tables(grp, k.extra != nullptr, std::vector<char>(grp.n_keys, 1),
                          "keyed group '" + g_.names[static_cast<std::size_t>(nt)] + "'");
        firsts = fitting_member_list(grp, k.extra != nullptr);
      } else {
        if (firsts.empty() && !k.deps.empty()) firsts = smallest_closure(k);
        for (std::uint32_t j = 0; j < grp.n_keys && firsts.size() < k.min_count; ++j)
          if (std::find(firsts.begin(), firsts.end(), j) == firsts.end())
            for (std::uint32_t c : closure_of(k, j))  // with its dependencies (no maximum here)
              if (std::find(firsts.begin(), firsts.end(), c) == firsts.end()) firsts.push_back(c);
      }
      Seq all;
      for (std::size_t i = 0; i < firsts.size(); ++i) {
        if (i > 0) all.insert(all.end(), sep_seq.begin(), sep_seq.end());
        const Seq& m = seqs[firsts[i]];
        all.insert(all.end(), m.begin(), m.end());
      }
      for (std::size_t i = firsts.size(); i < k.min_count && k.extra; ++i) {
        if (i > 0) all.insert(all.end(), sep_seq.begin(), sep_seq.end());
        all.insert(all.end(), extra_seq.begin(), extra_seq.end());
      }
      add_alternatives(nt, {all});
      g_.productions.back().role = kMinOnly;
    }
    g_.keyed.push_back(std::move(grp));
  }

  // The member with the fewest members in its closure under deps, with that closure
  // (ascending): the smallest list of members a group with deps and no required ones closes with.
  static std::vector<std::uint32_t> smallest_closure(const KeyedAst& k) {
    std::vector<std::uint32_t> best;
    for (std::uint32_t j = 0; j < k.members.size(); ++j) {
      std::vector<std::uint32_t> c = closure_of(k, j);
      if (best.empty() || c.size() < best.size()) best = std::move(c);
    }
    std::sort(best.begin(), best.end());
    return best;
  }

  // Member j and every member it needs, directly or not (j itself when there are no deps).
  static std::vector<std::uint32_t> closure_of(const KeyedAst& k, std::uint32_t j) {
    std::vector<std::uint32_t> c{j};
    if (k.deps.empty()) return c;
    for (std::size_t i = 0; i < c.size(); ++i)
      for (std::uint32_t d : k.deps[c[i]])
        if (std::find(c.begin(), c.end(), d) == c.end()) c.push_back(d);
    return c;
  }

  // A distinct group (distinct.hpp): D ::= V | D sep V (key 0) and V ::= item, V its own
  // nonterminal so that the parser sees where each item starts and ends (its text is the value
  // it remembers); no min-only production (more items are appended by the parser's completion).
  void lower_distinct(const KeyedAst& k, std::int32_t nt) {
    KeyedGroup grp;
    grp.nt = nt;
    grp.n_keys = 1;
    grp.min_count = k.min_count;
    grp.max_count = k.max_count;
    grp.value_nt = new_nonterminal(g_.names[static_cast<std::size_t>(nt)] + "_item");
    add_alternatives(grp.value_nt, lower_alts(substitute(k.members[0])));
    Seq rec{Symbol::nonterminal(nt)};
    const Seq sep = lower_seq(substitute(k.sep));
    rec.insert(rec.end(), sep.begin(), sep.end());
    rec.push_back(Symbol::nonterminal(grp.value_nt));
    add_alternatives(nt, {Seq{Symbol::nonterminal(grp.value_nt)}, rec});
    for (std::size_t i = g_.productions.size() - 2; i < g_.productions.size(); ++i) g_.productions[i].key = 0;
    g_.keyed.push_back(std::move(grp));
  }

  Symbol rule_symbol(std::int32_t r) {
    auto ru = static_cast<std::size_t>(r);
    if (nt_of_rule_[ru] < 0) {
      nt_of_rule_[ru] = new_nonterminal(ast_.rules[ru].name);
      pending_.push_back({r, nt_of_rule_[ru]});
    }
    return Symbol::nonterminal(nt_of_rule_[ru]);
  }

  // Terminal identity is the structural key of its tree (automaton_memo.hpp). Printing
  // canonical regex text for every terminal was the dominant compile cost on large schemas; the
  // text is now produced only when the grammar is printed. Keys of shared subtrees are memoised.
  Symbol terminal_symbol(const NodePtr& regex) {
    const std::string& key = keys_.of(regex);
    auto it = terminal_ids_.find(key);
    if (it != terminal_ids_.end()) return Symbol::terminal(it->second);
    auto id = static_cast<std::int32_t>(g_.terminals.size());
    Terminal t;
    t.regex = regex;
    g_.terminals.push_back(std::move(t));
    terminal_keys_.resize(g_.terminals.size());
    terminal_keys_.back() = key;
    terminal_ids_.emplace(key, id);
    return Symbol::terminal(id);
  }

  // The terminal interned under `key` (one per distinct token reference or slot, however often
  // the grammar uses it), created on first use with `init` filling in its kind.
  template <class Init>
  Symbol interned_terminal(const std::string& key, const std::string& text, Init init) {
    auto it = terminal_ids_.find(key);
    if (it != terminal_ids_.end()) return Symbol::terminal(it->second);
    auto id = static_cast<std::int32_t>(g_.terminals.size());
    Terminal t;
    t.text = text;
    init(t);
    g_.terminals.push_back(std::move(t));
    terminal_ids_.emplace(key, id);
    return Symbol::terminal(id);
  }

  Symbol token_symbol(const TokenRef& ref) {
    std::string text = ref.id >= 0 ? "<[" + std::to_string(ref.id) + "]>" : ref.text;
    return interned_terminal("\x01" + text, text, [&](Terminal& t) {
      t.is_token = true;
      t.token = ref;
    });
  }

  // One terminal per (slot name, spelling), however often the grammar uses it: a binding builds
  // one automaton for it, and its mask-cache entries are shared by every use.
  Symbol slot_symbol(const SlotRef& ref) {
    const std::string text = slot_text(ref);
    return interned_terminal("\x02" + text, text, [&](Terminal& t) {
      t.is_slot = true;
      t.slot = ref;
    });
  }

  // A regular piece small enough to become (part of) one terminal. Bigger regular pieces —
  // typically a bounded repetition like (item){0,1000} — are lowered as grammar repetition of a
  // smaller terminal instead, so a large bound costs productions, not DFA states. Exception: a
  // *big piece* (below) stays one automaton.
  bool mergeable(const NodePtr& n) const {
    if (!regular_tree(n)) return false;
    if (size_of(n) <= merge_cap()) return true;
    if (big_piece(n)) return true;
    // Too big for one terminal: split it, unless splitting needs too many productions (then
    // the DFA limits decide, which the caller may have raised for exactly this regex).
    if (n->kind == NodeKind::Repeat) {
      const std::uint64_t span = n->max == Node::kUnbounded ? 1 : n->max - n->min;
      return static_cast<std::uint64_t>(n->min) + span > limits_.max_productions / 4;
    }
    return n->kind != NodeKind::Concat && n->kind != NodeKind::Alt;
  }
  // estimate_nfa_size and is_regular (tree_facts, cached in each node): lowering asks them of
  // every subtree on its way down.
  std::uint64_t size_of(const NodePtr& n) const { return std::min(kSatSize, tree_facts(*n).size + 1); }
  bool regular_tree(const NodePtr& n) const { return tree_facts(*n).regular; }
  static constexpr std::uint64_t kSatSize = std::uint64_t{1} << 62;  // estimate_nfa_size's cap

  std::uint64_t merge_cap() const { return std::max<std::uint64_t>(1000, limits_.max_nfa_states / 25); }

  // Big pieces: regular pieces over merge_cap that still become one terminal, together with
  // the small pieces around them (the quotes of a string), because splitting them costs far
  // more at decode time than their automaton costs to build:
  //  * a counted repetition of a short, bounded-length piece — one character of a counted
  //    string, `"(char){1,255}"` — up to counted_cap NFA states: its DFA grows linearly with
  //    the bound, and the mask entries of its positions are shared (compiled_grammar.hpp);
  //    as grammar repetition every token crossing a character would be a parser step, and a
  //    terminal that can end after every character makes every token a split;
  //  * `&` / `-`, which are one automaton anyway (their operands are always inlined);
  //  * an alternation with a star whose minimal automaton finite_dfa.cpp builds directly
  //    (with the small pieces merged beside it, within kFiniteAltStates + merge_cap states and
  //    max_dfa_states): "none of the declared keys", a trie of the names with star exits, whose
  //    NFA estimate (every character in every JSON spelling) is far above merge_cap while its
  //    automaton is linear in the names. Split, each alternative would be a terminal that can
  //    end after its first character, so every token running past a key would be a split for
  //    the mask's parser checks, and no alternative alone would keep the key's inside alive.
  //    Accepted on the shape of its tree; build_dfas then builds its terminal directly or
  //    throws, and lower_grammar lowers again with it split (finite_alt, RefusedAlternations);
  //  * a sequence of small pieces and at most one big piece.
  static constexpr std::uint64_t kCountedBody = 64;
  std::uint64_t counted_cap() const { return limits_.max_nfa_states / 4; }
  static bool bounded_length(const Node& n) {
    if (n.kind == NodeKind::RuleRef || n.kind == NodeKind::Intersect || n.kind == NodeKind::Difference) return false;
    if (n.kind == NodeKind::Repeat && n.max == Node::kUnbounded) return false;
    for (const auto& k : n.kids)
      if (!bounded_length(*k)) return false;
    return true;
  }
  static constexpr std::size_t kFiniteAltStates = 4096;
  bool finite_alt(const NodePtr& n) const {
    const TreeFacts info = tree_facts(*n);
    if (!info.regular || info.algebra || size_of(n) > limits_.max_nfa_states) return false;
    // Only alternations with a star (finite_dfa's one kind of cycle: the key complements).
    // Finite ones (big enums, format regexes) split as before: building their union directly
    // costs about 1 ms each (3,000 of them in jsonschemabench: +0.2 ms at the compile p50),
    // where their pieces, built one by one, cost little.
    if (bounded_length(*n)) return false;
    // By structure: a schema writes one object's complement wherever the object is used, and
    // each copy is its own tree.
    const std::string key = keys_.of(n);
    auto it = finite_alt_memo_.find(key);
    Verdict v;
    if (it != finite_alt_memo_.end()) {
      v = it->second;
    } else if (refused_.count(key) != 0 || memo_alternation_refused(key, limits_)) {
      v = Verdict::No;  // an earlier lowering could not build its terminal directly
    } else if (std::shared_ptr<const Dfa> known = memo_terminal(key, limits_)) {
      // Another compile built it (as a terminal of its own).
      v = known->num_states() <= std::min<std::size_t>(kFiniteAltStates, limits_.max_dfa_states) ? Verdict::Yes
                                                                                                : Verdict::No;
    } else {
      // On trust, when its shape is one finite_dfa builds: the terminal that will hold it (the
      // alternation with the quotes and punctuation merged beside it) is built directly in
      // build_dfas, within the cap, or lowering starts again with this alternation split.
      // Building the alternation alone here to count its states cost as much as that terminal
      // again (key complements: half of the automata time of large objects).
      v = finite_shape_one_star(n) ? Verdict::OnTrust : Verdict::No;
    }
    if (it == finite_alt_memo_.end()) finite_alt_memo_.emplace(key, v);
    if (v == Verdict::OnTrust) on_trust_.emplace(n.get(), n);
    return v != Verdict::No;
  }
  // The tree has finite_dfa's shape and every unbounded repetition in it repeats one subtree
  // (by structure): finite_dfa builds one kind of star per tree (the key complements' "any
  // character", one shared node); a format regex with stars of several classes would only
  // fail there, after the lowering.
  bool finite_shape_one_star(const NodePtr& n) const {
    std::vector<const Node*> kids;
    if (!finite_shape(n, &kids)) return false;
    if (kids.size() <= 1) return true;
    // Distinct nodes may still be equal trees.
    std::vector<const Node*> stack{n.get()};
    std::unordered_set<const Node*> seen;
    const std::string* key = nullptr;
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      if (x->kind == NodeKind::Repeat && x->max == Node::kUnbounded) {
        const std::string& k = keys_.of(x->kids[0]);
        if (key != nullptr && *key != k) return false;
        key = &k;
      }
      for (const auto& k : x->kids) stack.push_back(k.get());
    }
    return true;
  }
  bool big_piece(const NodePtr& n) const {
    switch (n->kind) {
      case NodeKind::Repeat:
        return n->max != Node::kUnbounded && size_of(n->kids[0]) <= kCountedBody &&
               bounded_length(*n->kids[0]) && size_of(n) <= counted_cap();
      case NodeKind::Intersect:
      case NodeKind::Difference:
        return true;
      case NodeKind::Alt:
        return finite_alt(n);
      case NodeKind::Concat: {
        std::uint64_t small = 0;
        int big = 0;
        for (const auto& k : n->kids) {
          const std::uint64_t sz = size_of(k);
          if (sz <= merge_cap()) small += sz;
          else if (big_piece(k)) ++big;
          else return false;
        }
        return big <= 1 && small <= merge_cap();
      }
      default:
        return false;
    }
  }

  std::vector<Seq> lower_alts(const NodePtr& n) {
    if (n->kind == NodeKind::Empty) return {Seq{}};
    if (mergeable(n)) return {Seq{terminal_symbol(n)}};
    if (n->kind == NodeKind::Alt) {
      std::vector<Seq> out;
      for (const auto& k : n->kids) {
        auto sub = lower_alts(k);
        for (auto& s : sub) out.push_back(std::move(s));
      }
      return out;
    }
    return {lower_seq(n)};
  }

  // A single sequence of symbols for n (helpers for nested alternation / repetition).
  Seq lower_seq(const NodePtr& n) {
    Seq out;
    if (n->kind == NodeKind::Concat) {
      std::vector<NodePtr> run;  // pending regular pieces, merged into one terminal
      std::uint64_t run_size = 0;  // of the small pieces
      bool run_big = false;        // holds a big piece (at most one per terminal)
      auto flush = [&] {
        if (run.empty()) return;
        out.push_back(terminal_symbol(run.size() == 1 ? run[0] : make_concat(run)));
        run.clear();
        run_size = 0;
        run_big = false;
      };
      for (const auto& k : n->kids) {
        if (k->kind == NodeKind::Empty) continue;
        if (mergeable(k)) {
          const std::uint64_t sz = size_of(k);
          if (sz > merge_cap() && big_piece(k)) {
            if (run_big) flush();
            run.push_back(k);
            run_big = true;
            continue;
          }
          if (run_size + sz > merge_cap()) flush();
          run.push_back(k);
          run_size += sz;
          continue;
        }
        flush();
        Seq sub = lower_seq(k);
        out.insert(out.end(), sub.begin(), sub.end());
      }
      flush();
      return out;
    }
    if (n->kind == NodeKind::Empty) return out;
    if (mergeable(n)) return {terminal_symbol(n)};
    if (n->kind == NodeKind::RuleRef) {
      if (n->rule >= 0) return {rule_symbol(n->rule)};
      if (is_slot_rule(n->rule)) return {slot_symbol(ast_.slots[slot_ref_index(n->rule)])};
      return {token_symbol(ast_.tokens[token_ref_index(n->rule)])};
    }
    if (n->kind == NodeKind::Alt) {
      std::int32_t h = new_nonterminal("alt_" + std::to_string(g_.names.size()));
      add_alternatives(h, lower_alts(n));
      return {Symbol::nonterminal(h)};
    }
    if (n->kind == NodeKind::Repeat) return {lower_repeat(n)};
    throw InternalError("unexpected node kind in lowering");
  }

  Symbol symbol_for(const NodePtr& n) {
    Seq s = lower_seq(n);
    if (s.size() == 1) return s[0];
    std::int32_t h = new_nonterminal("seq_" + std::to_string(g_.names.size()));
    add_alternatives(h, {s});
    return Symbol::nonterminal(h);
  }

  Symbol lower_repeat(const NodePtr& n) {
    Symbol x = symbol_for(n->kids[0]);
    const std::uint32_t lo = n->min, hi = n->max;
    std::uint64_t size = static_cast<std::uint64_t>(lo) + (hi == Node::kUnbounded ? 1 : hi - lo);
    if (size > limits_.max_productions)
      throw LimitExceeded("max_productions", size, limits_.max_productions,
                          "repetition of a recursive part is too large");
    std::string base = "rep_" + std::to_string(g_.names.size());
    std::int32_t h = new_nonterminal(base);
    Seq head(lo, x);
    if (hi == Node::kUnbounded) {
      // star ::= ε | star x   (left recursion: one Earley item per nesting, no stack growth)
      std::int32_t star = new_nonterminal(base + "_star");
      add_alternatives(star, {Seq{}, Seq{Symbol::nonterminal(star), x}});
      head.push_back(Symbol::nonterminal(star));
    } else if (hi > lo) {
      // opt_k ::= ε | x opt_{k-1}, built from the innermost outwards.
      std::int32_t prev = -1;
      for (std::uint32_t k = 1; k <= hi - lo; ++k) {
        std::int32_t opt = new_nonterminal(base + "_opt" + std::to_string(k));
        Seq more{x};
        if (prev >= 0) more.push_back(Symbol::nonterminal(prev));
        add_alternatives(opt, {Seq{}, more});
        prev = opt;
      }
      head.push_back(Symbol::nonterminal(prev));
    }
    add_alternatives(h, {head});
    return Symbol::nonterminal(h);
  }

  // ---- (3) terminals ------------------------------------------------------------------
  // The keys of the alternations accepted on trust inside a terminal's tree (they are big
  // pieces: subtrees within merge_cap cannot hold one and are not walked).
  std::vector<std::string> trusted_inside(const NodePtr& regex) const {
    std::vector<std::string> out;
    if (on_trust_.empty()) return out;
    std::vector<const NodePtr*> stack{&regex};
    std::unordered_set<const Node*> seen;
    while (!stack.empty()) {
      const NodePtr& n = *stack.back();
      stack.pop_back();
      if (!seen.insert(n.get()).second || size_of(n) <= merge_cap()) continue;
      if (on_trust_.count(n.get()) != 0) {
        out.push_back(keys_.of(n));
        continue;
      }
      for (const auto& k : n->kids) stack.push_back(&k);
    }
    return out;
  }

  void build_dfas() {
    StageTimer timer(compile_times().automata_ns);
    terminal_keys_.resize(g_.terminals.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < g_.terminals.size(); ++i) {
      Terminal& t = g_.terminals[i];
      if (t.is_token || t.is_slot) continue;
      budget_.check("building terminal automata");
      // Another compile may have built this automaton already (automaton_memo.hpp).
      const std::string& key = terminal_keys_[i];
      if (std::shared_ptr<const Dfa> known = memo_terminal(key, limits_)) {
        t.dfa = *known;
      } else if (std::vector<std::string> trusted = trusted_inside(t.regex); !trusted.empty()) {
        // Holds alternations finite_alt accepted on trust: directly or not at all.
        const std::size_t cap = std::min<std::size_t>(kFiniteAltStates + merge_cap(), limits_.max_dfa_states);
        std::optional<Dfa> dfa = Dfa::compile_direct(t.regex, limits_, budget_, cap);
        if (!dfa) throw RefusedAlternations{std::move(trusted)};
        t.dfa = std::move(*dfa);
        memo_put_terminal(key, limits_, t.dfa);
      } else {
        t.dfa = Dfa::compile(t.regex, limits_, budget_);
        memo_put_terminal(key, limits_, t.dfa);
      }
      total += t.dfa.num_states();
      if (total > limits_.max_total_dfa_states)
        throw LimitExceeded("max_total_dfa_states", total, limits_.max_total_dfa_states,
                            "the grammar's terminals need too many automaton states");
    }
  }

  const GrammarAst& ast_;
  const Limits& limits_;
  const Budget& budget_;
  Grammar g_;
  std::vector<std::uint8_t> regular_;
  std::unordered_map<std::int32_t, NodePtr> inline_cache_;
  // Recursion depths of substitute (inlining) and expand_sized (operands of &/-), in tree
  // levels: bounded by kInlineDepthFactor x the nesting limit.
  static constexpr std::uint32_t kInlineDepthFactor = 4;
  std::uint32_t subst_depth_ = 0;
  std::uint32_t expand_depth_ = 0;
  struct DepthGuard {
    std::uint32_t& depth;
    explicit DepthGuard(std::uint32_t& d) : depth(++d) {}
    ~DepthGuard() { --depth; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
  };
  // expand_sized: rule -> (body with all rules inlined, estimated NFA states), and the same per
  // node (holding the node itself, so its address cannot be reused while it is a key).
  std::unordered_map<std::int32_t, std::pair<NodePtr, std::uint64_t>> expanded_;
  std::unordered_map<const Node*, std::tuple<NodePtr, std::uint64_t, NodePtr>> expand_memo_;
  // finite_alt, per structural key: no; yes (its automaton is known to be within the cap); or
  // yes on trust (see build_dfas), and the nodes it said so of (held: no address reuse).
  enum class Verdict : std::uint8_t { No, Yes, OnTrust };
  mutable std::unordered_map<std::string, Verdict> finite_alt_memo_;
  mutable std::unordered_map<const Node*, NodePtr> on_trust_;
  const std::unordered_set<std::string>& refused_;  // alternations an earlier lowering split
  mutable StructuralKeys keys_;  // (finite_alt, a const query, keys its alternations too)
  std::vector<std::string> terminal_keys_;  // per terminal (empty for tokens and slots)
  std::vector<std::uint32_t> ref_count_;
  std::vector<std::int32_t> nt_of_rule_;
  std::vector<std::pair<std::int32_t, std::int32_t>> pending_;
  std::unordered_map<std::string, std::int32_t> terminal_ids_;
};

}  // namespace

std::uint64_t Grammar::terminal_min_len(std::int32_t t) const {
  // A named token is not bytes; count it as one so shortest completions avoid it when they can.
  if (terminals[static_cast<std::size_t>(t)].is_token) return 1;
  if (terminals[static_cast<std::size_t>(t)].is_slot)
    return terminals[static_cast<std::size_t>(t)].slot.spelling == SlotSpelling::Json ? 2 : 1;
  const Dfa& d = terminals[static_cast<std::size_t>(t)].dfa;
  return d.empty_language() ? kInf : d.distance_to_accept(d.start());
}

void Grammar::finalize() {
  const std::size_t n = names.size();
  const std::size_t np = productions.size();
  // Every pass below is a worklist over "which productions use symbol X" (linear in the
  // grammar's size): a round-robin fixpoint over all productions needs one pass per link of
  // the longest dependency chain, quadratic on a chain of 10,000 rules (a wide object's
  // member list).
  std::vector<std::uint64_t> term_len(terminals.size());
  for (std::size_t t = 0; t < terminals.size(); ++t) term_len[t] = terminal_min_len(static_cast<std::int32_t>(t));
  auto sym_len_of = [&](Symbol s, const std::vector<std::uint64_t>& nt) {
    return s.is_terminal() ? term_len[static_cast<std::size_t>(s.index())] : nt[static_cast<std::size_t>(s.index())];
  };
  // uses[x]: the productions whose right-hand side mentions nonterminal x (once per mention).
  std::vector<std::vector<std::int32_t>> uses(n);
  for (std::size_t p = 0; p < np; ++p)
    for (Symbol s : productions[p].rhs)
      if (!s.is_terminal()) uses[static_cast<std::size_t>(s.index())].push_back(static_cast<std::int32_t>(p));

  // Shortest derivation lengths: Knuth's generalisation of Dijkstra to grammars (the cost of a
  // production is a sum of non-negative lengths). A production becomes a candidate once every
  // nonterminal it mentions is final; the cheapest candidate finalises its left-hand side (ties:
  // the production written first). best_prod only refers to nonterminals finalised before, so
  // following it always terminates. Unproductive symbols stay at kInf.
  min_len.assign(n, kInf);
  best_prod.assign(n, -1);
  {
    std::vector<std::uint32_t> waiting(np, 0);  // mentions of not-yet-final nonterminals
    using Cand = std::pair<std::uint64_t, std::int32_t>;
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto cost = [&](std::size_t p) {
      std::uint64_t sum = 0;
      for (Symbol s : productions[p].rhs) sum = std::min(kInf, sum + sym_len_of(s, min_len));
      return sum;
    };
    for (std::size_t p = 0; p < np; ++p) {
      // Keyed groups: productions that parse but could close an object without its required
      // keys never define a shortest string (keyed.hpp).
      if (productions[p].role == kParseOnly) {
        waiting[p] = 0xFFFFFFFFu;
        continue;
      }
      for (Symbol s : productions[p].rhs) waiting[p] += s.is_terminal() ? 0 : 1;
      if (waiting[p] == 0) {
        const std::uint64_t c = cost(p);
        if (c < kInf) heap.emplace(c, static_cast<std::int32_t>(p));
      }
    }
    std::vector<std::uint8_t> final_nt(n, 0);
    while (!heap.empty()) {
      auto [c, p] = heap.top();
      heap.pop();
      auto lhs = static_cast<std::size_t>(productions[static_cast<std::size_t>(p)].lhs);
      if (final_nt[lhs]) continue;
      final_nt[lhs] = 1;
      min_len[lhs] = c;
      best_prod[lhs] = p;
      for (std::int32_t q : uses[lhs]) {
        if (--waiting[static_cast<std::size_t>(q)] == 0) {
          const std::uint64_t cq = cost(static_cast<std::size_t>(q));
          if (cq < kInf) heap.emplace(cq, q);
        }
      }
    }
  }
  auto sym_len = [&](Symbol s) { return sym_len_of(s, min_len); };
  if (min_len[0] >= kInf)
    throw EmptyLanguageError("the grammar matches no string at all (its start rule can never complete)");
  // Drop productions that mention an unproductive symbol: they can never be part of a parse,
  // and keeping them would let the parser hold items that cannot complete.
  std::vector<Production> kept;
  std::vector<std::int32_t> remap(productions.size(), -1);
  for (std::size_t p = 0; p < productions.size(); ++p) {
    bool ok = true;
    for (Symbol s : productions[p].rhs) ok = ok && sym_len(s) < kInf;
    if (ok) {
      remap[p] = static_cast<std::int32_t>(kept.size());
      kept.push_back(std::move(productions[p]));
    }
  }
  productions = std::move(kept);
  for (auto& b : best_prod) b = b >= 0 ? remap[static_cast<std::size_t>(b)] : -1;

  by_lhs.assign(n, {});
  for (std::size_t p = 0; p < productions.size(); ++p)
    if (productions[p].role != kMinOnly)  // read by shortest-string tables only (keyed.hpp)
      by_lhs[static_cast<std::size_t>(productions[p].lhs)].push_back(static_cast<std::int32_t>(p));

  nullable.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) nullable[i] = min_len[i] == 0;
  finalize_keyed(*this);

  // followable: fixpoint over "X can be followed by a non-empty string". A symbol can produce
  // a non-empty string unless its language is exactly {""}.
  std::vector<std::uint8_t> nt_nonempty(n, 0), nt_follow(n, 0);
  auto term_nonempty = [&](std::int32_t t) {
    const Terminal& term = terminals[static_cast<std::size_t>(t)];
    return term.is_token || term.is_slot || (!term.dfa.empty_language() && term.dfa.num_states() > 1) ||
           (!term.dfa.empty_language() && !term.dfa.matches_empty());
  };
  auto sym_nonempty = [&](Symbol s) {
    return s.is_terminal() ? term_nonempty(s.index()) : nt_nonempty[static_cast<std::size_t>(s.index())] != 0;
  };
  // Productions that mention each nonterminal, after the unproductive ones were dropped.
  for (auto& u : uses) u.clear();
  for (std::size_t p = 0; p < productions.size(); ++p)
    for (Symbol s : productions[p].rhs)
      if (!s.is_terminal()) uses[static_cast<std::size_t>(s.index())].push_back(static_cast<std::int32_t>(p));
  std::vector<std::int32_t> work;
  auto mark_nonempty = [&](std::int32_t x) {
    auto& slot = nt_nonempty[static_cast<std::size_t>(x)];
    if (!slot) slot = 1, work.push_back(x);
  };
  for (const Production& p : productions)
    for (Symbol s : p.rhs)
      if (s.is_terminal() && term_nonempty(s.index())) mark_nonempty(p.lhs);
  while (!work.empty()) {
    const std::int32_t x = work.back();
    work.pop_back();
    for (std::int32_t q : uses[static_cast<std::size_t>(x)]) mark_nonempty(productions[static_cast<std::size_t>(q)].lhs);
  }
  // followable: a symbol is followed by a byte when a later symbol of its production can
  // produce one, or when its production's left-hand side is followed by one.
  followable.assign(terminals.size(), 0);
  auto mark_follow = [&](Symbol s) {
    if (s.is_terminal()) {
      followable[static_cast<std::size_t>(s.index())] = 1;
    } else {
      auto& slot = nt_follow[static_cast<std::size_t>(s.index())];
      if (!slot) slot = 1, work.push_back(s.index());
    }
  };
  for (const Production& p : productions) {
    bool after = false;  // can the part after position i produce a byte?
    for (std::size_t i = p.rhs.size(); i-- > 0;) {
      if (after) mark_follow(p.rhs[i]);
      after = after || sym_nonempty(p.rhs[i]);
    }
  }
  while (!work.empty()) {
    const std::int32_t x = work.back();
    work.pop_back();
    for (std::int32_t q : by_lhs[static_cast<std::size_t>(x)])
      for (Symbol s : productions[static_cast<std::size_t>(q)].rhs) mark_follow(s);
  }

  rhs_begin.assign(productions.size() + 1, 0);
  rhs_flat.clear();
  suffix_min.clear();
  for (std::size_t p = 0; p < productions.size(); ++p) {
    rhs_begin[p] = static_cast<std::uint32_t>(rhs_flat.size());
    const auto& rhs = productions[p].rhs;
    std::vector<std::uint64_t> suf(rhs.size() + 1, 0);
    for (std::size_t d = rhs.size(); d-- > 0;) suf[d] = std::min(kInf, suf[d + 1] + sym_len(rhs[d]));
    for (std::size_t d = 0; d < rhs.size(); ++d) rhs_flat.push_back(rhs[d]);
    for (std::size_t d = 0; d <= rhs.size(); ++d) suffix_min.push_back(suf[d]);
  }
  rhs_begin[productions.size()] = static_cast<std::uint32_t>(rhs_flat.size());
  finalize_unique(*this);  // (orders members by suffix_min)
}

void Grammar::append_min_string(Symbol s, const Dfa* const* dfas, std::string& out, std::size_t cap) const {
  std::vector<Symbol> stack{s};
  while (!stack.empty()) {
    Symbol x = stack.back();
    stack.pop_back();
    if (x.is_terminal()) {
      const Terminal& term = terminals[static_cast<std::size_t>(x.index())];
      if (term.is_token)
        throw LimitExceeded("max_completion_bytes", 0, 0,
                            "the only completion needs the special token " + term.text + ", which is not bytes");
      const Dfa& d = *dfas[x.index()];
      out += d.shortest_completion(d.start());
    } else {
      std::int32_t p = best_prod[static_cast<std::size_t>(x.index())];
      CORRAL_CHECK(p >= 0, "productive nonterminal without a best production");
      const auto& rhs = productions[static_cast<std::size_t>(p)].rhs;
      for (auto it = rhs.rbegin(); it != rhs.rend(); ++it) stack.push_back(*it);
    }
    if (out.size() > cap)
      throw LimitExceeded("max_completion_bytes", out.size(), cap,
                          "the shortest completion is too long");
  }
}

namespace {

// A terminal in grammar syntax: `/regex/`, or — when it contains `&`/`-`, which Python `re`
// cannot spell — grammar operators over `/regex/` pieces, so the printed grammar re-parses.
// Every composite prints parenthesised, so one terminal is always one item of a production.
std::string print_terminal(const NodePtr& n) {
  if (!has_algebra(n)) return "/" + print_regex(n) + "/";
  auto join = [](const std::vector<NodePtr>& kids, const char* sep) {
    std::string out;
    for (std::size_t i = 0; i < kids.size(); ++i) out += (i ? sep : "") + print_terminal(kids[i]);
    return out;
  };
  switch (n->kind) {
    case NodeKind::Intersect: return "(" + join(n->kids, " & ") + ")";
    case NodeKind::Difference: return "(" + join(n->kids, " - ") + ")";
    case NodeKind::Alt: return "(" + join(n->kids, " | ") + ")";
    case NodeKind::Repeat: {
      const std::uint32_t lo = n->min, hi = n->max;
      const std::string q = hi == Node::kUnbounded ? (lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}")
                            : lo == 0 && hi == 1   ? "?"
                            : lo == hi             ? "{" + std::to_string(lo) + "}"
                                                   : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      return print_terminal(n->kids[0]) + q;
    }
    case NodeKind::Concat: {
      // Runs of plain kids print as one /regex/.
      std::vector<NodePtr> items, run;
      auto flush = [&] {
        if (!run.empty()) items.push_back(make_concat(run));
        run.clear();
      };
      for (const auto& k : n->kids) {
        if (has_algebra(k)) {
          flush();
          items.push_back(k);
        } else {
          run.push_back(k);
        }
      }
      flush();
      return "(" + join(items, " ") + ")";
    }
    default: break;
  }
  throw InternalError("unexpected node kind in a terminal");
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (std::size_t nt = 0; nt < names.size(); ++nt) {
    if (by_lhs.size() > nt && by_lhs[nt].empty()) continue;
    out += names[nt] + " ::=";
    bool first = true;
    for (std::size_t p = 0; p < productions.size(); ++p) {
      if (static_cast<std::size_t>(productions[p].lhs) != nt || productions[p].role == kMinOnly) continue;
      out += first ? " " : " | ";
      first = false;
      if (productions[p].rhs.empty()) out += "\"\"";
      bool sep = false;
      for (Symbol s : productions[p].rhs) {
        if (sep) out += " ";
        sep = true;
        if (s.is_terminal()) {
          const Terminal& t = terminals[static_cast<std::size_t>(s.index())];
          out += terminal_text(t);
        }
        else out += names[static_cast<std::size_t>(s.index())];
      }
    }
    if (group_of.size() > nt && group_of[nt] >= 0) {
      // The key bookkeeping is not grammar syntax: say what the productions above mean.
      const KeyedGroup& k = keyed[static_cast<std::size_t>(group_of[nt])];
      if (k.distinct()) {
        out += "  # distinct group (distinct.hpp): items " + std::to_string(k.min_count) + ".." +
               (k.max_count ? std::to_string(k.max_count) : std::string("n")) + " of " +
               names[static_cast<std::size_t>(k.value_nt)] + ", no two equal\n";
        continue;
      }
      out += "  # keyed group (keyed.hpp): " + std::to_string(k.n_keys) + " keys, each at most once; required:";
      for (std::uint32_t r : k.required) out += " " + std::to_string(r);
      for (std::size_t j = 0; j < k.deps.size(); ++j) {
        if (k.deps[j].empty()) continue;
        out += "; " + std::to_string(j) + " needs";
        for (std::uint32_t d : k.deps[j]) out += " " + std::to_string(d);
      }
      if (has_count_bounds(k))
        out += "; items " + std::to_string(k.min_count) + ".." + (k.max_count ? std::to_string(k.max_count) : std::string("n")) +
               " (unique.hpp)";
      if (k.remembers_keys()) {
        out += "; undeclared keys remembered, none repeated:";
        for (std::int32_t x : k.key_nts) out += " " + names[static_cast<std::size_t>(x)];
      }
    }
    out += "\n";
  }
  return out;
}

std::string terminal_text(const Terminal& t) {
  return t.is_token || t.is_slot || !t.regex ? t.text : print_terminal(t.regex);
}

Grammar lower_grammar(const GrammarAst& ast, const Limits& limits, const Budget& budget) {
  // Again without the alternations accepted on trust whose terminal could not be built
  // directly (rare: a key complement of thousands of names). Each round refuses at least one
  // more, so this ends; the automata built before a retry stay in the memo.
  std::unordered_set<std::string> refused;
  for (;;) {
    try {
      return Lowerer(ast, limits, budget, refused).run();
    } catch (const RefusedAlternations& r) {
      const std::size_t before = refused.size();
      refused.insert(r.keys.begin(), r.keys.end());
      for (const std::string& key : r.keys) memo_refuse_alternation(key, limits);  // for later compiles
      if (refused.size() == before) throw InternalError("lowering refused no new alternation");
    }
  }
}

void resolve_token_terminals(Grammar& g, const std::vector<std::string>& vocab_tokens,
                             const std::vector<std::uint8_t>& special, const std::string& source) {
  for (Terminal& t : g.terminals) {
    if (!t.is_token) continue;
    auto where = [&](const std::string& msg) {
      int line = 1, col = 1;
      for (std::size_t i = 0; i < t.token.pos && i < source.size(); ++i) {
        if (source[i] == '\n') {
          ++line;
          col = 1;
        } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
          ++col;
        }
      }
      return CompileError(msg, t.token.pos, line, col);
    };
    if (t.token.id >= 0) {
      if (static_cast<std::size_t>(t.token.id) >= vocab_tokens.size())
        throw where("token id " + std::to_string(t.token.id) + " is outside the vocabulary (" +
                    std::to_string(vocab_tokens.size()) + " tokens)");
      t.token_id = t.token.id;
      continue;
    }
    // By text: prefer a special token with exactly this text (that is what the syntax is for).
    std::int32_t found = -1, found_plain = -1;
    for (std::size_t i = 0; i < vocab_tokens.size(); ++i) {
      if (vocab_tokens[i] != t.token.text) continue;
      if (special[i] && found < 0) found = static_cast<std::int32_t>(i);
      if (!special[i] && found_plain < 0) found_plain = static_cast<std::int32_t>(i);
    }
    if (found < 0) found = found_plain;
    if (found < 0) throw where("the grammar names token " + t.token.text + ", which is not in the vocabulary");
    t.token_id = found;
  }
}

Grammar grammar_from_regex(const NodePtr& regex, const Limits& limits, const Budget& budget) {
  GrammarAst ast;
  RuleAst r;
  r.name = "root";
  r.body = regex;
  ast.rules.push_back(std::move(r));
  ast.start = 0;
  return lower_grammar(ast, limits, budget);
}

const char* json_grammar_text() {
  // RFC 8259. Whitespace is the RFC's [ \t\n\r]*; strings reject raw control characters.
  return R"GBNF(
root     ::= ws value ws
value    ::= object | array | string | number | "true" | "false" | "null"
object   ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member   ::= string ws ":" ws value
array    ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string   ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number   ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws       ::= [ \t\n\r]*
)GBNF";
}

}  // namespace corral
