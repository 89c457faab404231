// nfa.cpp — regular tree → Thompson NFA over code point classes.
//
// In:  a regular tree (no RuleRef).
// Out: Nfa (nfa.hpp): the alphabet partition and an epsilon-NFA built right to left (each node
//      is compiled with its continuation state already known, so no patch lists are needed).
// Invariant: estimate_nfa_size bounds the state count (one state per Chars, one
//      split per Alt / optional or looping copy; shared fragments only lower it) except for the
//      spliced products below, whose states new_state counts against max_nfa_states as they are
//      made; counted repetition is expanded by copying.
// Intersect/Difference: each operand is built as its own fragment (ending in its own Match
//      state, unreachable from the main start), determinised and minimised over the *shared*
//      alphabet (sym_dfa.hpp); the product DFA is minimised and spliced back in as an ordinary
//      fragment: one Eps state per DFA state, one Char state per (state, target) pair. Working
//      on code point classes rather than bytes is exact because UTF-8 is injective:
//      enc(A) ∩ enc(B) = enc(A ∩ B) and enc(A) − enc(B) = enc(A − B).
// Algorithm: Thompson (1968) construction; the alphabet partition is the standard refinement of
//      elementary intervals by each set in turn.
#include "nfa.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "automaton_memo.hpp"
#include "errors.hpp"
#include "sym_dfa.hpp"

namespace corral {

namespace {

struct RangesLess {
  bool operator()(const std::vector<CodepointRange>& a, const std::vector<CodepointRange>& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](const CodepointRange& x, const CodepointRange& y) {
                                          return x.lo != y.lo ? x.lo < y.lo : x.hi < y.hi;
                                        });
  }
};

class NfaBuilder {
 public:
  NfaBuilder(const Limits& limits, const Budget& budget) : limits_(limits), budget_(budget) {}

  Nfa run(const NodePtr& root) {
    node_id_.reserve(256);
    memo_.reserve(256);
    collect_sets(*root);
    partition();
    nfa_.match = new_state(NfaState::Match);
    nfa_.start = build(*root, nfa_.match);
    if (root->kind == NodeKind::Intersect || root->kind == NodeKind::Difference)
      nfa_.whole = std::make_shared<const SymDfa>(algebra_memo_.at(node_id_.at(root.get())));
    return std::move(nfa_);
  }

 private:
  // Assigns every node a structural id (equal subtrees get equal ids) and every distinct
  // CharSet a set id.
  std::int32_t collect_sets(const Node& n) {
    auto known = node_id_.find(&n);
    if (known != node_id_.end()) return known->second;
    if (n.kind == NodeKind::RuleRef) throw InternalError("a grammar rule reference cannot be compiled to a DFA");
    std::vector<std::int64_t> key{static_cast<std::int64_t>(n.kind)};
    if (n.kind == NodeKind::Chars) {
      std::uint64_t h = 1469598103934665603ull;
      for (const auto& r : n.chars.ranges()) h = (h ^ (static_cast<std::uint64_t>(r.lo) << 21 ^ r.hi)) * 1099511628211ull;
      std::int32_t id = -1;
      auto range = set_hash_.equal_range(h);
      for (auto it = range.first; it != range.second; ++it)
        if (*sets_[static_cast<std::size_t>(it->second)] == n.chars) id = it->second;
      if (id < 0) {
        id = static_cast<std::int32_t>(sets_.size());
        set_hash_.emplace(h, id);
        sets_.push_back(&n.chars);
      }
      key.push_back(id);
      // Chars nodes are identified by their set alone: skip the generic key map.
      if (static_cast<std::size_t>(id) >= chars_struct_.size()) chars_struct_.resize(static_cast<std::size_t>(id) + 1, -1);
      std::int32_t& sid = chars_struct_[static_cast<std::size_t>(id)];
      if (sid < 0) {
        sid = next_struct_++;
        set_of_.emplace(sid, id);
      }
      node_id_.emplace(&n, sid);
      return sid;
    } else if (n.kind == NodeKind::Repeat) {
      key.push_back(n.min);
      key.push_back(n.max);
    }
    for (const auto& k : n.kids) key.push_back(collect_sets(*k));
    auto it = struct_id_.find(key);
    std::int32_t id;
    if (it == struct_id_.end()) {
      id = next_struct_++;
      struct_id_.emplace(std::move(key), id);
    } else {
      id = it->second;
    }
    node_id_.emplace(&n, id);
    return id;
  }

  // Elementary intervals between all range boundaries, refined set by set into classes.
  void partition() {
    std::vector<std::uint32_t> cuts;
    for (const CharSet* s : sets_)
      for (const auto& r : s->ranges()) {
        cuts.push_back(r.lo);
        cuts.push_back(r.hi + 1);
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    // Interval e = [cuts[e], cuts[e+1]-1]; surrogates never appear inside one because no set
    // contains them and every set boundary is a cut.
    const std::size_t ne = cuts.empty() ? 0 : cuts.size() - 1;
    std::vector<std::uint32_t> cls(ne, 0);  // 0 = in no set yet
    std::vector<std::uint32_t> remap_stamp, remap_to;
    std::uint32_t next_id = 1, round = 0;
    auto each_interval = [&](const CharSet& s, auto&& fn) {
      std::size_t e = 0;  // ranges are sorted: walk the cuts monotonically
      for (const auto& r : s.ranges()) {
        while (cuts[e] < r.lo) ++e;
        for (; e < ne && cuts[e] <= r.hi; ++e) fn(e);
      }
    };
    for (const CharSet* s : sets_) {
      ++round;
      each_interval(*s, [&](std::size_t e) {
        const std::uint32_t old = cls[e];
        if (old >= remap_stamp.size()) {
          remap_stamp.resize(old + 1, 0);
          remap_to.resize(old + 1, 0);
        }
        if (remap_stamp[old] != round) {
          remap_stamp[old] = round;
          remap_to[old] = next_id++;
        }
        cls[e] = remap_to[old];
      });
    }
    // Compact ids in order of first code point; intervals in no set get no class.
    std::vector<std::int32_t> final_id(next_id, -1);
    std::vector<std::int32_t> interval_class(ne, -1);
    for (std::size_t e = 0; e < ne; ++e) {
      if (cls[e] == 0) continue;
      auto& f = final_id[cls[e]];
      if (f < 0) {
        f = static_cast<std::int32_t>(nfa_.class_ranges.size());
        nfa_.class_ranges.emplace_back();
      }
      interval_class[e] = f;
      auto& rs = nfa_.class_ranges[static_cast<std::size_t>(f)];
      const std::uint32_t lo = cuts[e], hi = cuts[e + 1] - 1;
      if (!rs.empty() && rs.back().hi + 1 == lo)
        rs.back().hi = hi;
      else
        rs.push_back({lo, hi});
    }
    std::vector<std::uint32_t> seen(nfa_.class_ranges.size(), 0);
    std::uint32_t stamp = 0;
    for (const CharSet* s : sets_) {
      ++stamp;
      std::vector<std::uint32_t> list;
      each_interval(*s, [&](std::size_t e) {
        const auto c = static_cast<std::uint32_t>(interval_class[e]);
        if (seen[c] != stamp) {
          seen[c] = stamp;
          list.push_back(c);
        }
      });
      std::sort(list.begin(), list.end());
      nfa_.set_classes.push_back(std::move(list));
    }
  }

  std::int32_t new_state(NfaState::Kind kind) {
    if (nfa_.states.size() >= limits_.max_nfa_states)
      throw LimitExceeded("max_nfa_states", nfa_.states.size() + 1, limits_.max_nfa_states,
                          "regex expands to too many NFA states");
    if ((nfa_.states.size() & 1023) == 1023) budget_.check("building a regex NFA");
    nfa_.states.emplace_back();
    nfa_.states.back().kind = kind;
    return static_cast<std::int32_t>(nfa_.states.size() - 1);
  }

  // Compiles `n` so that it continues to state `next`; returns the entry state. Structurally
  // equal subtrees with the same continuation share one fragment, so alternatives with common
  // suffixes (`AB-\d{5}|CD-\d{5}`) share their tails and determinisation stays small.
  std::int32_t build(const Node& n, std::int32_t next) {
    if (n.kind == NodeKind::Empty) return next;
    const std::uint64_t memo_key =
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(node_id_.at(&n))) << 32 | static_cast<std::uint32_t>(next);
    auto hit = memo_.find(memo_key);
    if (hit != memo_.end()) return hit->second;
    const std::int32_t entry = build_fresh(n, next);
    memo_.emplace(memo_key, entry);
    return entry;
  }

  std::int32_t build_fresh(const Node& n, std::int32_t next) {
    switch (n.kind) {
      case NodeKind::Empty:
        return next;
      case NodeKind::Chars: {
        const std::int32_t s = new_state(NfaState::Char);
        nfa_.states[static_cast<std::size_t>(s)].set = set_of_.at(node_id_.at(&n));
        nfa_.states[static_cast<std::size_t>(s)].next = next;
        return s;
      }
      case NodeKind::Concat: {
        for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it) next = build(**it, next);
        return next;
      }
      case NodeKind::Alt: {
        const std::int32_t s = new_state(NfaState::Eps);
        std::vector<std::int32_t> entries;
        for (const auto& k : n.kids) entries.push_back(build(*k, next));
        nfa_.states[static_cast<std::size_t>(s)].eps = std::move(entries);
        return s;
      }
      case NodeKind::Repeat: {
        const Node& kid = *n.kids[0];
        std::int32_t cont = next;
        std::uint32_t plain = n.min;
        if (n.max == Node::kUnbounded) {
          // A looping copy: loop -> {kid -> loop, next}.
          const std::int32_t loop = new_state(NfaState::Eps);
          const std::int32_t body = build(kid, loop);
          nfa_.states[static_cast<std::size_t>(loop)].eps = {body, next};
          if (n.min == 0) {
            cont = loop;
          } else {
            cont = body;  // the first pass through the loop is mandatory
            plain = n.min - 1;
          }
        } else {
          for (std::uint32_t k = n.min; k < n.max; ++k) {
            const std::int32_t opt = new_state(NfaState::Eps);
            const std::int32_t body = build(kid, cont);
            nfa_.states[static_cast<std::size_t>(opt)].eps = {body, next};
            cont = opt;
          }
        }
        for (std::uint32_t k = 0; k < plain; ++k) cont = build(kid, cont);
        return cont;
      }
      case NodeKind::Intersect:
      case NodeKind::Difference:
        return embed(algebra_dfa(n), next);
      case NodeKind::RuleRef:
        break;
    }
    throw InternalError("a grammar rule reference cannot be compiled to a DFA");
  }

  // ---- Intersect / Difference ---------------------------------------------------------------

  // `n` compiled alone (over this NFA's alphabet) to a minimal DFA.
  SymDfa operand_dfa(const Node& n) {
    const std::int32_t accept = new_state(NfaState::Match);
    const std::int32_t entry = build(n, accept);
    SymDfa d = prune_dead(determinise(nfa_, entry, accept, limits_, budget_));
    return d.size() == 0 ? d : minimise(d, budget_);
  }

  // The minimal DFA of an Intersect/Difference node, computed once per distinct subtree (a
  // counted repetition embeds it many times), and taken from the process-wide memo when another
  // compile built it (the converter's probe of the same product, another schema).
  const SymDfa& algebra_dfa(const Node& n) {
    const std::int32_t id = node_id_.at(&n);
    auto hit = algebra_memo_.find(id);
    if (hit != algebra_memo_.end()) return hit->second;
    // A non-owning pointer: the tree outlives this builder, and so its key memo.
    const std::string& key = keys_.of(NodePtr(NodePtr(), &n));
    if (std::shared_ptr<const RangeDfa> known = memo_product(key, limits_))
      return algebra_memo_.emplace(id, from_ranges(*known)).first->second;
    const ProductOp op = n.kind == NodeKind::Intersect ? ProductOp::Intersect : ProductOp::Difference;
    SymDfa acc = operand_dfa(*n.kids[0]);
    for (std::size_t i = 1; i < n.kids.size() && acc.size() > 0; ++i) {
      acc = prune_dead(product(acc, operand_dfa(*n.kids[i]), op, limits_, budget_));
      if (acc.size() > 0) acc = minimise(acc, budget_);
    }
    memo_put_product(key, limits_, to_ranges(acc));
    return algebra_memo_.emplace(id, std::move(acc)).first->second;
  }

  // `d` (over this NFA's classes) with each (state, target) edge labelled by its code points.
  RangeDfa to_ranges(const SymDfa& d) const {
    RangeDfa r;
    r.start = d.start;
    r.acc = d.acc;
    r.out.resize(d.size());
    std::map<std::vector<CodepointRange>, std::int32_t, RangesLess> label_ids;
    std::map<std::int32_t, std::vector<CodepointRange>> by_target;  // ordered: deterministic
    for (std::size_t s = 0; s < d.size(); ++s) {
      by_target.clear();
      for (std::uint32_t c = 0; c < d.k; ++c) {
        const std::int32_t t = d.at(s, c);
        if (t < 0) continue;
        auto& rs = by_target[t];
        rs.insert(rs.end(), nfa_.class_ranges[c].begin(), nfa_.class_ranges[c].end());
      }
      for (auto& [t, rs] : by_target) {
        std::sort(rs.begin(), rs.end(), [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
        std::vector<CodepointRange> merged;
        for (const auto& x : rs) {
          if (!merged.empty() && merged.back().hi + 1 == x.lo) merged.back().hi = x.hi;
          else merged.push_back(x);
        }
        auto [it, fresh] = label_ids.emplace(std::move(merged), static_cast<std::int32_t>(r.labels.size()));
        if (fresh) r.labels.push_back(it->first);
        r.out[s].push_back({it->second, t});
      }
    }
    return r;
  }

  // A memoised product over this NFA's classes. Exact because the tree holds the product's
  // operands, so the partition refines theirs: every class lies inside or outside each label
  // (checked: a class straddling a label would mean the memo entry is not this tree's).
  SymDfa from_ranges(const RangeDfa& r) const {
    SymDfa d;
    d.k = nfa_.num_classes();
    d.start = r.start;
    d.acc = r.acc;
    d.trans.assign(r.acc.size() * d.k, -1);
    std::vector<std::vector<std::uint32_t>> classes(r.labels.size());
    for (std::size_t l = 0; l < r.labels.size(); ++l) {
      const auto& label = r.labels[l];
      for (std::uint32_t c = 0; c < d.k; ++c) {
        const auto& cr = nfa_.class_ranges[c];
        std::size_t inside = 0;
        for (const auto& x : cr) {
          auto it = std::upper_bound(label.begin(), label.end(), x.lo,
                                     [](std::uint32_t v, const CodepointRange& y) { return v < y.lo; });
          if (it != label.begin() && std::prev(it)->hi >= x.hi) ++inside;
        }
        CORRAL_CHECK(inside == 0 || inside == cr.size(), "memoised product label splits an alphabet class");
        if (inside) classes[l].push_back(c);
      }
    }
    for (std::size_t s = 0; s < r.out.size(); ++s)
      for (const auto& [l, t] : r.out[s])
        for (std::uint32_t c : classes[static_cast<std::size_t>(l)]) d.trans[s * d.k + c] = t;
    return d;
  }

  // Splices DFA `d` in as a fragment continuing to `next`; returns its entry state.
  std::int32_t embed(const SymDfa& d, std::int32_t next) {
    if (d.size() == 0) return new_state(NfaState::Eps);  // no way out: matches nothing
    std::vector<std::int32_t> entry(d.size());
    for (auto& e : entry) e = new_state(NfaState::Eps);
    std::map<std::int32_t, std::vector<std::uint32_t>> by_target;  // ordered: deterministic ids
    for (std::size_t s = 0; s < d.size(); ++s) {
      by_target.clear();
      for (std::uint32_t c = 0; c < d.k; ++c)
        if (d.at(s, c) >= 0) by_target[d.at(s, c)].push_back(c);
      std::vector<std::int32_t> out;
      for (auto& [t, classes] : by_target) {
        const std::int32_t ch = new_state(NfaState::Char);
        auto& st = nfa_.states[static_cast<std::size_t>(ch)];
        st.set = class_set(std::move(classes));
        st.next = entry[static_cast<std::size_t>(t)];
        out.push_back(ch);
      }
      if (d.acc[s]) out.push_back(next);
      nfa_.states[static_cast<std::size_t>(entry[s])].eps = std::move(out);
    }
    return entry[static_cast<std::size_t>(d.start)];
  }

  // Index in nfa_.set_classes of a sorted list of classes (appended when new).
  std::int32_t class_set(std::vector<std::uint32_t> classes) {
    auto it = class_set_ids_.find(classes);
    if (it != class_set_ids_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(nfa_.set_classes.size());
    nfa_.set_classes.push_back(classes);
    class_set_ids_.emplace(std::move(classes), id);
    return id;
  }

  const Limits& limits_;
  const Budget& budget_;
  Nfa nfa_;
  std::vector<const CharSet*> sets_;
  std::unordered_multimap<std::uint64_t, std::int32_t> set_hash_;
  std::unordered_map<const Node*, std::int32_t> node_id_;
  struct KeyHash {
    std::size_t operator()(const std::vector<std::int64_t>& v) const {
      std::uint64_t h = 1469598103934665603ull;
      for (std::int64_t x : v) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  std::unordered_map<std::vector<std::int64_t>, std::int32_t, KeyHash> struct_id_;
  std::unordered_map<std::int32_t, std::int32_t> set_of_;  // structural id of a Chars -> set id
  std::vector<std::int32_t> chars_struct_;                 // set id -> structural id
  std::int32_t next_struct_ = 0;  // structural id of a Chars -> set id
  std::unordered_map<std::uint64_t, std::int32_t> memo_;
  std::unordered_map<std::int32_t, SymDfa> algebra_memo_;  // structural id -> product DFA
  StructuralKeys keys_;                                    // of Intersect/Difference nodes
  std::map<std::vector<std::uint32_t>, std::int32_t> class_set_ids_;
};

}  // namespace

Nfa build_nfa(const NodePtr& regex, const Limits& limits, const Budget& budget) {
  if (estimate_nfa_size(regex) > limits.max_nfa_states)
    throw LimitExceeded("max_nfa_states", estimate_nfa_size(regex), limits.max_nfa_states,
                        "regex expands to too many NFA states");
  return NfaBuilder(limits, budget).run(regex);
}

}  // namespace corral
