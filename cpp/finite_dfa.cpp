// finite_dfa.cpp — direct construction of finite trees' minimal byte DFAs (see finite_dfa.hpp).
//
// Invariant of the builder: every state in `acc_`/`edges_` is live (accepting, or with an edge
// to a live state) and its edges are canonical (sorted, disjoint, adjacent ranges to one target
// merged), so the register's (accepting, edges) key identifies its language among the states
// built so far. States left unreachable by a union stay in the register and are dropped when
// the result is extracted.
#include "finite_dfa.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "flat_table.hpp"

namespace corral {
namespace {

using Edge = FiniteAutomaton::Edge;

// The tree is outside this path (or too big, or too deep for its recursion): use the pipeline.
struct Bail {};

// Recursion limits of build (tree depth) and unite (the longest common prefix of two united
// states, in bytes): past them the pipeline, whose loops are iterative, takes the tree.
constexpr std::uint32_t kMaxBuildDepth = 512;
constexpr std::uint32_t kMaxUniteDepth = 1024;
// Most UTF-8 sequences one character class may expand to on this path (see chars).
constexpr std::size_t kMaxSequences = 16;

// One UTF-8 byte-range sequence: code points whose encodings are the byte strings with byte j
// in [lo[j], hi[j]] (a "rectangle"; RFC 3629 ranges split at their lead and continuation bytes).
struct Utf8Seq {
  std::uint8_t len = 0;
  std::uint8_t lo[4]{}, hi[4]{};
};

int encode(std::uint32_t cp, std::uint8_t out[4]) {
  if (cp < 0x80) return out[0] = static_cast<std::uint8_t>(cp), 1;
  if (cp < 0x800) {
    out[0] = static_cast<std::uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<std::uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<std::uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<std::uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<std::uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<std::uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<std::uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<std::uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<std::uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Split [lo, hi] (no surrogates) into rectangles: first at the encoding-length boundaries, then
// wherever the low 6i bits of lo are not all 0 or those of hi not all 1 while the bits above
// differ — after which byte j of the encodings ranges independently of the others.
void utf8_sequences(std::uint32_t lo, std::uint32_t hi, std::vector<Utf8Seq>& out) {
  static constexpr std::uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF};
  for (std::uint32_t b : kBounds)
    if (lo <= b && b < hi) {
      utf8_sequences(lo, b, out);
      utf8_sequences(b + 1, hi, out);
      return;
    }
  std::uint8_t blo[4], bhi[4];
  const int n = encode(lo, blo);
  for (int i = 1; i < n; ++i) {
    const std::uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_sequences(lo, lo | m, out);
      utf8_sequences((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_sequences(lo, (hi & ~m) - 1, out);
      utf8_sequences(hi & ~m, hi, out);
      return;
    }
  }
  encode(hi, bhi);
  Utf8Seq s;
  s.len = static_cast<std::uint8_t>(n);
  for (int j = 0; j < n; ++j) s.lo[j] = blo[j], s.hi[j] = bhi[j];
  out.push_back(s);
}

struct PairHash {
  std::size_t operator()(const std::pair<const void*, std::int32_t>& p) const {
    const auto x = reinterpret_cast<std::uintptr_t>(p.first) * 0x9E3779B97F4A7C15ull;
    // Mixed again: the table takes the low bits, which the product leaves equal for aligned
    // addresses.
    return MixHash{}(x ^ static_cast<std::uint32_t>(p.second));
  }
};

class FiniteBuilder {
 public:
  // `hint`: about how many states and memo entries the tree needs (its NFA estimate), so the
  // tables of a small tree (most terminals are one key or one enum string) start small and
  // those of a big one do not grow step by step.
  FiniteBuilder(std::size_t cap, const Budget& budget, std::size_t hint)
      : cap_(cap), budget_(budget), built_(hint), united_(hint / 4) {
    std::size_t slots = 64;
    while (slots < 2 * hint && slots < (std::size_t{1} << 20)) slots *= 2;
    slots_.assign(slots, -1);
  }

  // Is the tree free of algebra and rule references, with every unbounded repetition of a
  // finite kid and outside every other repetition? (Its DAG, each node once per context: under
  // a repetition or not.) A star inside a counted kid would be copied by instantiate, which
  // only copies acyclic templates.
  // `star_kids` (optional): the distinct kids of its unbounded repetitions, by address.
  static bool eligible(const NodePtr& root, std::size_t hint, std::vector<const Node*>* star_kids = nullptr) {
    std::vector<std::pair<const Node*, bool>> stack{{root.get(), false}};
    FlatMap<std::uint64_t, bool> seen(hint);  // (node address << 1 | under a repetition)
    while (!stack.empty()) {
      const auto [n, under_repeat] = stack.back();
      stack.pop_back();
      const std::uint64_t key = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(n)) << 1 | under_repeat;
      if (!seen.emplace(key, true).second) continue;
      switch (n->kind) {
        case NodeKind::Empty:
        case NodeKind::Chars:
          break;
        case NodeKind::Repeat:
          if (n->max == Node::kUnbounded && under_repeat) return false;
          if (n->max == Node::kUnbounded && star_kids != nullptr &&
              std::find(star_kids->begin(), star_kids->end(), n->kids[0].get()) == star_kids->end())
            star_kids->push_back(n->kids[0].get());
          for (const auto& k : n->kids) stack.emplace_back(k.get(), true);
          break;
        case NodeKind::Concat:
        case NodeKind::Alt:
          for (const auto& k : n->kids) stack.emplace_back(k.get(), under_repeat);
          break;
        default:
          return false;
      }
    }
    return true;
  }

  std::int32_t accept_state() { return intern(true, {}); }

  // The state of L(n) · L(t), or -1 when L(n) is empty.
  std::int32_t build(const Node* n, std::int32_t t) {
    if (n->kind == NodeKind::Empty) return t;
    const auto key = std::make_pair(static_cast<const void*>(n), t);
    if (const std::int32_t* known = built_.find(key)) return *known;
    if (++build_depth_ > kMaxBuildDepth) throw Bail{};
    std::int32_t r = -1;
    switch (n->kind) {
      case NodeKind::Chars:
        r = chars(n->chars, t);
        break;
      case NodeKind::Concat:
        r = t;
        for (auto k = n->kids.rbegin(); k != n->kids.rend() && r >= 0; ++k) r = build(k->get(), r);
        break;
      case NodeKind::Alt: {
        auto seqs = seq_pool_.lease();
        for (const auto& k : n->kids) seqs->push_back(Seq{k.get(), 0});
        r = build_alt(seqs->data(), seqs->data() + seqs->size(), t);
        break;
      }
      case NodeKind::Repeat: {
        if (n->max == Node::kUnbounded) {
          r = star(n, t);
          break;
        }
        // X{m,n} T = X^m (T ∪ X (T ∪ X (… T))) with n − m optional copies; each copy of X is
        // the template's states with the placeholder replaced, when X has a template.
        const Node* x = n->kids[0].get();
        const Template tpl = n->max >= 2 ? make_template(x) : Template{};
        auto in_front = [&](std::int32_t c) { return tpl.start >= 0 ? instantiate(tpl, c) : build(x, c); };
        r = t;
        for (std::uint32_t i = n->min; i < n->max; ++i) r = unite(t, in_front(r));
        for (std::uint32_t i = 0; i < n->min && r >= 0; ++i) r = in_front(r);
        break;
      }
      default:
        throw Bail{};
    }
    --build_depth_;
    built_.emplace(key, r);
    return r;
  }

  // The reachable states from `start`, renumbered breadth-first in byte order.
  FiniteAutomaton extract(std::int32_t start) const {
    FiniteAutomaton out;
    if (start < 0) return out;  // the empty language: no states
    std::vector<std::int32_t> id(acc_.size(), -1);
    std::vector<std::int32_t> order{start};
    id[static_cast<std::size_t>(start)] = 0;
    for (std::size_t q = 0; q < order.size(); ++q) {
      const auto s = static_cast<std::size_t>(order[q]);
      for (std::uint32_t e = first_[s]; e < first_[s + 1]; ++e) {
        const auto t = static_cast<std::size_t>(edges_[e].to);
        if (id[t] < 0) id[t] = static_cast<std::int32_t>(order.size()), order.push_back(edges_[e].to);
      }
    }
    out.acc.reserve(order.size());
    out.first.reserve(order.size() + 1);
    out.edges.reserve(edges_.size());
    for (std::int32_t old : order) {
      const auto s = static_cast<std::size_t>(old);
      out.acc.push_back(acc_[s]);
      for (std::uint32_t e = first_[s]; e < first_[s + 1]; ++e)
        out.edges.push_back(Edge{edges_[e].lo, edges_[e].hi, id[static_cast<std::size_t>(edges_[e].to)]});
      out.first.push_back(static_cast<std::uint32_t>(out.edges.size()));
    }
    return out;
  }

 private:
  // A suffix of a sequence: kids[off..] of a Concat, or a single other node (off 0: the node,
  // off 1: nothing left).
  struct Seq {
    const Node* n;
    std::size_t off;
    std::size_t size() const { return n->kind == NodeKind::Concat ? n->kids.size() : 1; }
    const Node* at(std::size_t i) const { return n->kind == NodeKind::Concat ? n->kids[i].get() : n; }
  };

  // The union of the sequences in front of t, left-factored: sequences that start with the
  // same node (shared subtrees: the JSON spellings of one character are one node) are built
  // as that node in front of the union of their rests (a·X ∪ a·Y = a·(X ∪ Y)), so an enum of
  // strings with a common prefix builds the prefix once and unites only where they differ.
  std::int32_t build_alt(const Seq* begin, const Seq* end, std::int32_t t) {
    if (++build_depth_ > kMaxBuildDepth) throw Bail{};
    const auto n = static_cast<std::size_t>(end - begin);
    auto parts = id_pool_.lease();
    // Group of each sequence (-1: nothing left of it), groups numbered in order of first
    // appearance. Most alternations are small (the spellings of one character, a trie level of
    // key names): a linear scan finds the group without the hash map; long ones (enums) use it.
    constexpr std::size_t kLinearGroups = 16;
    auto group = id_pool_.lease();
    auto firsts = node_pool_.lease();
    FlatMap<std::uint64_t, std::int32_t> group_of(n > kLinearGroups ? n : 0);
    for (const Seq* q = begin; q != end; ++q) {
      if (q->off == q->size()) {
        parts->push_back(t);
        group->push_back(-1);
        continue;
      }
      const Node* f = q->at(q->off);
      auto g = static_cast<std::int32_t>(firsts->size());
      if (n <= kLinearGroups) {
        for (std::size_t i = 0; i < firsts->size(); ++i)
          if ((*firsts)[i] == f) g = static_cast<std::int32_t>(i);
      } else {
        g = *group_of.emplace(reinterpret_cast<std::uintptr_t>(f), g).first;
      }
      if (g == static_cast<std::int32_t>(firsts->size())) firsts->push_back(f);
      group->push_back(g);
    }
    // The rests of each group's sequences, contiguous per group (a counting sort, in order).
    const std::size_t ng = firsts->size();
    auto start = id_pool_.lease();
    start->assign(ng + 1, 0);
    for (std::int32_t g : *group)
      if (g >= 0) ++(*start)[static_cast<std::size_t>(g) + 1];
    for (std::size_t g = 0; g < ng; ++g) (*start)[g + 1] += (*start)[g];
    auto rests = seq_pool_.lease();
    rests->resize(static_cast<std::size_t>((*start)[ng]));
    {
      auto fill = id_pool_.lease();
      fill->assign(start->begin(), start->end() - 1);
      for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t g = (*group)[i];
        if (g >= 0) (*rests)[static_cast<std::size_t>((*fill)[static_cast<std::size_t>(g)]++)] = Seq{begin[i].n, begin[i].off + 1};
      }
    }
    for (std::size_t g = 0; g < ng; ++g) {
      const Seq* rb = rests->data() + (*start)[g];
      const Seq* re = rests->data() + (*start)[g + 1];
      std::int32_t inner;
      if (re - rb == 1) {
        inner = t;
        for (std::size_t i = rb->size(); i > rb->off && inner >= 0; --i) inner = build(rb->at(i - 1), inner);
      } else {
        inner = build_alt(rb, re, t);
      }
      parts->push_back(inner >= 0 ? build((*firsts)[g], inner) : -1);
    }
    --build_depth_;
    return unite_all(*parts);
  }

  // X's automaton in front of a placeholder state P (accepting, no edges, outside the
  // register): its states other than P in increasing id, which is children first (a state is
  // registered after its successors). Valid only when no state but P accepts — X is
  // prefix-free and never matches ε, so P was never united into another state, only pointed
  // at — and then X·C is these states with P replaced by C, re-interned (which keeps the
  // result minimal: interning, not the template, decides which states are equal). start < 0:
  // no template (build X for each continuation instead).
  struct Template {
    std::int32_t start = -1;
    std::int32_t placeholder = -1;
    std::vector<std::int32_t> states;
  };

  Template make_template(const Node* x, bool shared = false) {
    Template tpl;
    std::int32_t p = shared ? star_placeholder_ : -1;
    if (p < 0) {
      p = static_cast<std::int32_t>(acc_.size());
      acc_.push_back(1);
      hash_.push_back(0);
      first_.push_back(static_cast<std::uint32_t>(edges_.size()));
      if (shared) star_placeholder_ = p;
    }
    const std::int32_t start = build(x, p);
    if (start < 0 || start == p) return tpl;
    // Visited marks: a state is seen when its mark equals this walk's stamp, so a walk needs
    // no clearing (a hash set here was a fifth of the builder's time on key complements).
    if (seen_mark_.size() < acc_.size()) seen_mark_.resize(acc_.size() + acc_.size() / 2, 0);
    if (++seen_stamp_ == 0) {  // wrapped: old marks could equal new stamps
      std::fill(seen_mark_.begin(), seen_mark_.end(), 0);
      seen_stamp_ = 1;
    }
    auto stack = id_pool_.lease();
    stack->push_back(start);
    seen_mark_[static_cast<std::size_t>(start)] = seen_stamp_;
    while (!stack->empty()) {
      const auto s = static_cast<std::size_t>(stack->back());
      stack->pop_back();
      if (acc_[s]) return tpl;  // not prefix-free, or matches ε
      tpl.states.push_back(static_cast<std::int32_t>(s));
      for (std::uint32_t e = first_[s]; e < first_[s + 1]; ++e) {
        const auto to = static_cast<std::size_t>(edges_[e].to);
        if (edges_[e].to != p && seen_mark_[to] != seen_stamp_) {
          seen_mark_[to] = seen_stamp_;
          stack->push_back(edges_[e].to);
        }
      }
    }
    std::sort(tpl.states.begin(), tpl.states.end());
    tpl.start = start;
    tpl.placeholder = p;
    return tpl;
  }

  // X·c from X's template.
  std::int32_t instantiate(const Template& tpl, std::int32_t c) {
    remap_.assign(static_cast<std::size_t>(tpl.states.back() - tpl.placeholder) + 1, -1);
    for (std::int32_t s : tpl.states) {
      scratch_.clear();
      for (std::uint32_t e = first_[static_cast<std::size_t>(s)]; e < first_[static_cast<std::size_t>(s) + 1]; ++e) {
        const Edge x = edges_[e];
        scratch_.push_back(Edge{x.lo, x.hi, x.to == tpl.placeholder ? c : remap_[static_cast<std::size_t>(x.to - tpl.placeholder)]});
      }
      remap_[static_cast<std::size_t>(s - tpl.placeholder)] = intern_in_place(false, scratch_);
    }
    return remap_[static_cast<std::size_t>(tpl.start - tpl.placeholder)];
  }

  // X{m,} T = X^m S with S = T ∪ X·S: the one cyclic part this path builds (see "Stars" in
  // finite_dfa.hpp). X's template is built in front of the shared placeholder, so kids with
  // one language have one template; S is registered as (accepting(T), X's first edges with P
  // → S, T's edges), which needs X's and T's first bytes disjoint (no union to recurse into
  // through the cycle), and X's other states copied with P → S. Only one (X, T) per tree:
  // two different stars' states could have equal languages, which hash-consing would miss.
  std::int32_t star(const Node* n, std::int32_t t) {
    const Template tpl = make_template(n->kids[0].get(), /*shared=*/true);
    if (tpl.start < 0) throw Bail{};  // X matches ε, is not prefix-free, or is empty
    std::int32_t s;
    if (star_state_ >= 0) {
      if (star_tpl_ != tpl.start || star_tail_ != t) throw Bail{};
      s = star_state_;
    } else {
      s = cycle(tpl, t);
      star_tpl_ = tpl.start, star_tail_ = t, star_state_ = s;
    }
    for (std::uint32_t i = 0; i < n->min; ++i) s = instantiate(tpl, s);
    return s;
  }

  // The state S = T ∪ X·S of star (its ids are fixed in advance: every copied state points
  // into the copy, so none can equal a state already registered, and none equal each other).
  std::int32_t cycle(const Template& tpl, std::int32_t t) {
    const auto st = static_cast<std::size_t>(tpl.start), tt = static_cast<std::size_t>(t);
    std::vector<Edge> xs(edges_.begin() + first_[st], edges_.begin() + first_[st + 1]);
    const std::vector<Edge> ts(edges_.begin() + first_[tt], edges_.begin() + first_[tt + 1]);
    for (const Edge& a : xs)
      for (const Edge& b : ts)
        if (a.lo <= b.hi && b.lo <= a.hi) throw Bail{};
    const auto base = static_cast<std::int32_t>(acc_.size());
    const auto s = static_cast<std::int32_t>(base + static_cast<std::int32_t>(tpl.states.size()) - 1);
    remap_.assign(static_cast<std::size_t>(tpl.states.back() - tpl.placeholder) + 1, -1);
    auto target = [&](std::int32_t to) {
      if (to == tpl.placeholder) return s;
      const std::int32_t r = remap_[static_cast<std::size_t>(to - tpl.placeholder)];
      if (r < 0) throw Bail{};  // an edge back to X's start (never in a finite template)
      return r;
    };
    std::int32_t next = base;
    for (std::int32_t q : tpl.states) {
      if (q == tpl.start) continue;
      scratch_.clear();
      for (std::uint32_t e = first_[static_cast<std::size_t>(q)]; e < first_[static_cast<std::size_t>(q) + 1]; ++e)
        scratch_.push_back(Edge{edges_[e].lo, edges_[e].hi, target(edges_[e].to)});
      if (intern_in_place(false, scratch_) != next) throw Bail{};
      remap_[static_cast<std::size_t>(q - tpl.placeholder)] = next++;
    }
    for (Edge& e : xs) e.to = target(e.to);
    const std::int32_t got = intern(acc_[tt] != 0, merge_edges(std::move(xs), ts));
    if (got != s) throw Bail{};
    return s;
  }

  // The bytes of one character of `cs`, then t.
  std::int32_t chars(const CharSet& cs, std::int32_t t) {
    if (cs.empty()) return -1;
    std::vector<Utf8Seq>& seqs = utf8_;  // (chars never recurses into itself)
    seqs.clear();
    for (const auto& r : cs.ranges()) utf8_sequences(r.lo, r.hi, seqs);
    // Sequences come in code point order, so their first-byte ranges are sorted: when no two
    // share a first byte (a class of ASCII ranges, such as "none of these first letters"),
    // they are the state's edges as they are.
    bool overlap = false;
    for (std::size_t i = 1; i < seqs.size() && !overlap; ++i) overlap = seqs[i].lo[0] <= seqs[i - 1].hi[0];
    auto top = edge_pool_.lease();
    if (!overlap) {
      for (const Utf8Seq& q : seqs) {
        std::int32_t s = t;
        for (int j = q.len - 1; j >= 1; --j) s = intern_one(q.lo[j], q.hi[j], s);
        top->push_back(Edge{q.lo[0], q.hi[0], s});
      }
      return intern_in_place(false, *top);
    }
    // Otherwise merging the first bytes below is quadratic in their number: a class of many
    // ranges (Unicode `\d`, `\w`) repeated 200 times cost more than the pipeline in Debug
    // builds. Those trees keep the pipeline; any character (11 sequences) stays here.
    if (seqs.size() > kMaxSequences) throw Bail{};
    auto one = edge_pool_.lease(), merged = edge_pool_.lease();
    for (const Utf8Seq& q : seqs) {
      std::int32_t s = t;
      for (int j = q.len - 1; j >= 1; --j) s = intern_one(q.lo[j], q.hi[j], s);
      one->assign(1, Edge{q.lo[0], q.hi[0], s});
      merge_edges(*top, *one, *merged);
      top->swap(*merged);
    }
    return intern_in_place(false, *top);
  }

  // The state of L(a) ∪ L(b) (-1: empty).
  std::int32_t unite(std::int32_t a, std::int32_t b) {
    if (a < 0 || a == b) return b;
    if (b < 0) return a;
    if (a > b) std::swap(a, b);
    const std::uint64_t key = static_cast<std::uint64_t>(a) << 32 | static_cast<std::uint32_t>(b);
    if (const std::int32_t* known = united_.find(key)) return *known;
    if (++unite_depth_ > kMaxUniteDepth) throw Bail{};
    const auto sa = static_cast<std::size_t>(a), sb = static_cast<std::size_t>(b);
    // Copies: the recursion below adds states, which may move edges_.
    auto ea = edge_pool_.lease(), eb = edge_pool_.lease(), out = edge_pool_.lease();
    ea->assign(edges_.begin() + first_[sa], edges_.begin() + first_[sa + 1]);
    eb->assign(edges_.begin() + first_[sb], edges_.begin() + first_[sb + 1]);
    const bool acc = acc_[sa] || acc_[sb];
    merge_edges(*ea, *eb, *out);
    const std::int32_t r = intern_in_place(acc, *out);
    --unite_depth_;
    united_.emplace(key, r);
    return r;
  }

  // The state of the union of all `ids` (-1s ignored; -1 when none is left) in one product:
  // an alternation of n literals with a common prefix walks that prefix once, not n − 1 times.
  std::int32_t unite_all(std::vector<std::int32_t>& ids) {
    ids.erase(std::remove(ids.begin(), ids.end(), -1), ids.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.empty()) return -1;
    if (ids.size() == 1) return ids[0];
    if (ids.size() == 2) return unite(ids[0], ids[1]);
    std::string key(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(std::int32_t));
    auto it = united_all_.find(key);
    if (it != united_all_.end()) return it->second;
    if (++unite_depth_ > kMaxUniteDepth) throw Bail{};
    bool acc = false;
    auto all = edge_pool_.lease();
    auto cuts = id_pool_.lease();  // interval starts: every edge's lo and hi + 1
    for (std::int32_t id : ids) {
      const auto sid = static_cast<std::size_t>(id);
      acc = acc || acc_[sid] != 0;
      for (std::uint32_t e = first_[sid]; e < first_[sid + 1]; ++e) {
        all->push_back(edges_[e]);
        cuts->push_back(edges_[e].lo);
        cuts->push_back(edges_[e].hi + 1);
      }
    }
    std::sort(cuts->begin(), cuts->end());
    cuts->erase(std::unique(cuts->begin(), cuts->end()), cuts->end());
    auto out = edge_pool_.lease();
    auto targets = id_pool_.lease();
    for (std::size_t c = 0; c + 1 < cuts->size(); ++c) {
      const int lo = (*cuts)[c], hi = (*cuts)[c + 1] - 1;
      targets->clear();
      for (const Edge& e : *all)
        if (e.lo <= lo && hi <= e.hi) targets->push_back(e.to);
      if (targets->empty()) continue;
      const std::int32_t to = unite_all(*targets);
      out->push_back(Edge{static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi), to});
    }
    const std::int32_t r = intern_in_place(acc, *out);
    --unite_depth_;
    united_all_.emplace(std::move(key), r);
    return r;
  }

  // The union of two canonical edge lists: where both have an edge on a byte, the target is
  // the union of theirs.
  std::vector<Edge> merge_edges(const std::vector<Edge>& a, const std::vector<Edge>& b) {
    std::vector<Edge> out;
    merge_edges(a, b, out);
    return out;
  }
  // The same into `out` (cleared first; neither a nor b).
  void merge_edges(const std::vector<Edge>& a, const std::vector<Edge>& b, std::vector<Edge>& out) {
    out.clear();
    if (a.empty() || b.empty()) {
      out = a.empty() ? b : a;
      return;
    }
    std::size_t i = 0, j = 0;
    int p = 0;  // the next byte not yet placed
    while (p <= 255) {
      while (i < a.size() && a[i].hi < p) ++i;
      while (j < b.size() && b[j].hi < p) ++j;
      if (i == a.size() && j == b.size()) break;
      const int alo = i < a.size() ? std::max<int>(a[i].lo, p) : 256;
      const int blo = j < b.size() ? std::max<int>(b[j].lo, p) : 256;
      const int lo = std::min(alo, blo);
      int hi;
      std::int32_t to;
      if (alo == lo && blo == lo) {
        hi = std::min(a[i].hi, b[j].hi);
        to = unite(a[i].to, b[j].to);
      } else if (alo == lo) {
        hi = std::min<int>(a[i].hi, blo - 1);
        to = a[i].to;
      } else {
        hi = std::min<int>(b[j].hi, alo - 1);
        to = b[j].to;
      }
      if (!out.empty() && out.back().to == to && out.back().hi + 1 == lo)
        out.back().hi = static_cast<std::uint8_t>(hi);
      else
        out.push_back(Edge{static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi), to});
      p = hi + 1;
    }
  }

  static std::uint64_t hash_of(bool acc, const Edge* b, const Edge* e) {
    std::uint64_t h = acc ? 0x9E3779B97F4A7C15ull : 0x632BE59BD9B4E019ull;
    for (const Edge* x = b; x != e; ++x) {
      h ^= static_cast<std::uint64_t>(x->lo) | static_cast<std::uint64_t>(x->hi) << 8 |
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(x->to)) << 16;
      h *= 0xFF51AFD7ED558CCDull;
      h ^= h >> 29;
    }
    return h != 0 ? h : 1;  // 0 marks a template's placeholder, which is never registered
  }

  // The id of the state (acc, edges); `edges` sorted and disjoint (adjacent ranges with one
  // target are merged here).
  std::int32_t intern(bool acc, std::vector<Edge> edges) { return intern_in_place(acc, edges); }

  // intern of a state with one edge and no accepting flag (a continuation byte of a UTF-8
  // sequence), through a reused buffer: one allocation fewer per state built.
  std::int32_t intern_one(std::uint8_t lo, std::uint8_t hi, std::int32_t to) {
    one_.assign(1, Edge{lo, hi, to});
    return intern_in_place(false, one_);
  }

  // intern for a caller's buffer (merged in place, copied into the register when new).
  std::int32_t intern_in_place(bool acc, std::vector<Edge>& edges) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < edges.size(); ++i) {
      if (k > 0 && edges[k - 1].to == edges[i].to && edges[k - 1].hi + 1 == edges[i].lo)
        edges[k - 1].hi = edges[i].hi;
      else
        edges[k++] = edges[i];
    }
    edges.resize(k);
    const Edge* b = edges.data();
    const Edge* e = b + edges.size();
    const std::uint64_t h = hash_of(acc, b, e);
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>(h) & mask;
    for (; slots_[i] >= 0; i = (i + 1) & mask) {
      const auto id = static_cast<std::size_t>(slots_[i]);
      if (hash_[id] != h || (acc_[id] != 0) != acc || first_[id + 1] - first_[id] != edges.size()) continue;
      bool same = true;
      for (std::size_t x = 0; x < edges.size() && same; ++x) {
        const Edge& o = edges_[first_[id] + x];
        same = o.lo == edges[x].lo && o.hi == edges[x].hi && o.to == edges[x].to;
      }
      if (same) return slots_[i];
    }
    if (acc_.size() >= cap_) throw Bail{};
    if ((acc_.size() & 255) == 255) budget_.check("building a finite automaton");
    const auto id = static_cast<std::int32_t>(acc_.size());
    acc_.push_back(acc ? 1 : 0);
    hash_.push_back(h);
    edges_.insert(edges_.end(), edges.begin(), edges.end());
    first_.push_back(static_cast<std::uint32_t>(edges_.size()));
    slots_[i] = id;
    if (2 * acc_.size() > slots_.size()) grow();
    return id;
  }

  void grow() {
    slots_.assign(slots_.size() * 2, -1);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t id = 0; id < hash_.size(); ++id) {
      if (hash_[id] == 0) continue;  // a placeholder
      std::size_t i = static_cast<std::size_t>(hash_[id]) & mask;
      while (slots_[i] >= 0) i = (i + 1) & mask;
      slots_[i] = static_cast<std::int32_t>(id);
    }
  }

  const std::size_t cap_;
  const Budget& budget_;
  std::uint32_t build_depth_ = 0, unite_depth_ = 0;
  // star: the placeholder its templates share, and the one (X's template, T) → S built.
  std::int32_t star_placeholder_ = -1, star_tpl_ = -1, star_tail_ = -1, star_state_ = -1;
  std::vector<std::uint8_t> acc_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::uint32_t> first_{0};
  std::vector<Edge> edges_;
  std::vector<std::int32_t> slots_;  // open addressing over state ids
  std::vector<Edge> scratch_;                          // instantiate's edge buffer
  std::vector<Edge> one_;                              // intern_one's edge buffer
  std::vector<Utf8Seq> utf8_;                          // chars' byte sequences
  std::vector<std::int32_t> remap_;  // instantiate: template state - placeholder -> copy
  std::vector<std::uint32_t> seen_mark_;  // make_template: per state, the stamp of the walk that saw it
  std::uint32_t seen_stamp_ = 0;
  // Scratch vectors of the recursive steps (build_alt, unite, unite_all), reused.
  VecPool<Seq> seq_pool_;
  VecPool<std::int32_t> id_pool_;
  VecPool<const Node*> node_pool_;
  VecPool<Edge> edge_pool_;
  FlatMap<std::pair<const void*, std::int32_t>, std::int32_t, PairHash> built_;
  FlatMap<std::uint64_t, std::int32_t> united_;  // (smaller id << 32 | larger) -> union
  std::unordered_map<std::string, std::int32_t> united_all_;  // sorted ids (bytes) -> union
};

}  // namespace

bool finite_shape(const NodePtr& regex, std::vector<const Node*>* star_kids) {
  return regex && FiniteBuilder::eligible(regex, 1024, star_kids);  // (asked of big alternations)
}

std::optional<FiniteAutomaton> build_finite_automaton(const NodePtr& regex, const Limits& limits,
                                                      const Budget& budget) {
  if (!regex) return std::nullopt;
  const std::uint64_t estimate = estimate_nfa_size(regex);
  if (estimate > limits.max_nfa_states) return std::nullopt;
  const auto hint = static_cast<std::size_t>(std::min<std::uint64_t>(estimate, 4096));
  if (!FiniteBuilder::eligible(regex, hint)) return std::nullopt;
  try {
    FiniteBuilder b(4 * static_cast<std::size_t>(limits.max_dfa_states) + 1024, budget, hint);
    const std::int32_t start = b.build(regex.get(), b.accept_state());
    return b.extract(start);
  } catch (const Bail&) {
    return std::nullopt;
  }
}

}  // namespace corral
