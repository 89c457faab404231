// dfa.cpp — regular tree → minimal byte DFA.
//
// In:  a regular tree, Limits, a Budget.
// Out: a Dfa (dfa.hpp) over UTF-8 bytes: every state live, minimal, transitions stored per byte
//      equivalence class, plus shortest-completion data.
// Pipeline: Thompson NFA over code point classes (nfa.cpp) → subset construction → drop dead
//      states → Hopcroft minimisation (these three over the class alphabet, in sym_dfa.cpp) →
//      UTF-8 expansion of each state's transitions into byte-level states, hash-consed so equal
//      suffixes are one state → byte equivalence classes → reverse BFS for dist_/toward_.
// Invariant: expansion preserves minimality: two code point states differ in language, so their
//      UTF-8 images differ; an intermediate (mid-character) state is identified by its number of
//      remaining continuation bytes and its map from continuation values to targets, which the
//      hash-consing key captures exactly, and no intermediate equals a real state (its strings
//      start with a continuation byte and it never accepts ε).
// Algorithm: UTF-8 range splitting by leading byte as in RFC 3629.
// A finite set of byte strings (a slot's values) skips the pipeline: Dfa::from_strings builds
// the minimal acyclic DFA directly from the sorted strings (a trie whose equal suffixes are
// merged as they are finished) and shares only the final assembly. So does a finite tree (a
// declared key's JSON spellings, a counted string): finite_dfa.cpp builds its minimal DFA
// directly; both routes give the same minimal automaton up to state numbering.
#include "dfa.hpp"

#include <algorithm>
#include <unordered_map>

#include "errors.hpp"
#include "finite_dfa.hpp"
#include "nfa.hpp"
#include "sym_dfa.hpp"

namespace corral {

namespace {

// ---- UTF-8 expansion ----------------------------------------------------------------------

struct Edge {
  std::uint8_t lo, hi;
  std::int32_t to;
  bool operator==(const Edge& o) const { return lo == o.lo && hi == o.hi && to == o.to; }
};
struct EdgeVecHash {
  std::size_t operator()(const std::vector<Edge>& v) const {
    std::uint64_t h = 1469598103934665603ull;
    for (const Edge& e : v)
      h = (h ^ (static_cast<std::uint64_t>(e.lo) | static_cast<std::uint64_t>(e.hi) << 8 |
                static_cast<std::uint64_t>(static_cast<std::uint32_t>(e.to)) << 16)) *
          1099511628211ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
struct CpEdge {
  std::uint32_t lo, hi;
  std::int32_t to;
};

class Expander {
 public:
  Expander(std::size_t real_states, const Limits& limits)
      : real_(real_states), limits_(limits), edges_(real_states) {}

  std::vector<std::vector<Edge>>& edges() { return edges_; }

  // Byte edges of real state `s` from its code point edges (sorted, disjoint).
  void expand_state(std::size_t s, const std::vector<CpEdge>& cp) {
    std::vector<Edge> out;
    static const std::uint32_t kLo[4] = {0, 0x80, 0x800, 0x10000};
    static const std::uint32_t kHi[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    static const std::uint8_t kPrefix[4] = {0x00, 0xC0, 0xE0, 0xF0};
    std::vector<CpEdge> part;
    for (int len = 0; len < 4; ++len) {
      part.clear();
      for (const CpEdge& e : cp) {
        const std::uint32_t lo = std::max(e.lo, kLo[len]), hi = std::min(e.hi, kHi[len]);
        if (lo <= hi) part.push_back({lo, hi, e.to});
      }
      if (!part.empty()) level(part, len, kPrefix[len], out);
    }
    edges_[s] = merge(std::move(out));
  }

 private:
  static std::vector<Edge> merge(std::vector<Edge> v) {
    std::vector<Edge> out;
    for (const Edge& e : v) {
      if (!out.empty() && out.back().to == e.to && out.back().hi + 1 == e.lo)
        out.back().hi = e.hi;
      else
        out.push_back(e);
    }
    return out;
  }

  std::int32_t intern(std::vector<Edge> v) {
    v = merge(std::move(v));
    auto it = ids_.find(v);
    if (it != ids_.end()) return it->second;
    if (edges_.size() >= limits_.max_dfa_states) throw_dfa_state_limit(edges_.size() + 1, limits_);
    const auto id = static_cast<std::int32_t>(edges_.size());
    ids_.emplace(v, id);
    edges_.push_back(std::move(v));
    return id;
  }

  // State consuming `k` more continuation bytes of any value, then at `to`.
  std::int32_t full(int k, std::int32_t to) {
    for (int i = 0; i < k; ++i) to = intern({Edge{0x80, 0xBF, to}});
    return to;
  }

  // Values v in `part` (sorted, disjoint) are encoded as byte prefix|(v >> 6k) followed by k
  // continuation bytes; appends the edges for the first byte to `out`.
  void level(const std::vector<CpEdge>& part, int k, std::uint8_t prefix, std::vector<Edge>& out) {
    if (k == 0) {
      for (const CpEdge& e : part)
        out.push_back({static_cast<std::uint8_t>(prefix | e.lo), static_cast<std::uint8_t>(prefix | e.hi), e.to});
      return;
    }
    const int shift = 6 * k;
    const std::uint32_t mask = (1u << shift) - 1;
    std::vector<CpEdge> pending;
    std::uint32_t digit = 0;
    auto flush = [&]() {
      if (pending.empty()) return;
      std::vector<Edge> sub;
      level(pending, k - 1, 0x80, sub);
      const std::int32_t child = intern(std::move(sub));
      out.push_back({static_cast<std::uint8_t>(prefix | digit), static_cast<std::uint8_t>(prefix | digit), child});
      pending.clear();
    };
    for (const CpEdge& e : part) {
      const std::uint32_t dlo = e.lo >> shift, dhi = e.hi >> shift;
      if (dlo == dhi) {
        if (digit != dlo) flush();
        digit = dlo;
        pending.push_back({e.lo & mask, e.hi & mask, e.to});
        continue;
      }
      std::uint32_t full_lo = dlo, full_hi = dhi;
      if ((e.lo & mask) != 0) {
        if (digit != dlo) flush();
        digit = dlo;
        pending.push_back({e.lo & mask, mask, e.to});
        full_lo = dlo + 1;
      }
      flush();
      if ((e.hi & mask) != mask) full_hi = dhi - 1;
      if (full_lo <= full_hi)
        out.push_back({static_cast<std::uint8_t>(prefix | full_lo), static_cast<std::uint8_t>(prefix | full_hi),
                       full(k, e.to)});
      if ((e.hi & mask) != mask) {
        digit = dhi;
        pending.push_back({0, e.hi & mask, e.to});
      }
    }
    flush();
  }

  std::size_t real_;
  const Limits& limits_;
  std::vector<std::vector<Edge>> edges_;  // per byte-level state
  std::unordered_map<std::vector<Edge>, std::int32_t, EdgeVecHash> ids_;
};

}  // namespace

// ---- assembling the Dfa -------------------------------------------------------------------

// A byte-level automaton before it becomes a Dfa: edges of state s are
// all[first[s] .. first[s + 1]), sorted by byte and disjoint.
// A set of cut positions 0..256 over the bytes (assemble's runs of equal labels), with the
// next cut after a byte found by a bit scan. 256 is always a cut.
class ByteCuts {
 public:
  ByteCuts() { set(0), set(256); }
  void set(int b) { bits_[static_cast<std::size_t>(b) >> 6] |= std::uint64_t{1} << (b & 63); }
  // The smallest cut above b (0 <= b <= 255): at most 256.
  int next_after(int b) const {
    const int i = b + 1;
    std::size_t w = static_cast<std::size_t>(i) >> 6;
    std::uint64_t m = bits_[w] & (~std::uint64_t{0} << (i & 63));
    while (m == 0) m = bits_[++w];
    return static_cast<int>(w * 64) + __builtin_ctzll(m);
  }

 private:
  std::array<std::uint64_t, 5> bits_{};
};

struct EdgeTable {
  std::vector<std::uint32_t> first{0};
  std::vector<Edge> all;
  std::size_t size() const { return first.size() - 1; }
  const Edge* begin(std::size_t s) const { return all.data() + first[s]; }
  const Edge* end(std::size_t s) const { return all.data() + first[s + 1]; }
  void add_state(const Edge* b, const Edge* e) {
    all.insert(all.end(), b, e);
    first.push_back(static_cast<std::uint32_t>(all.size()));
  }
};

// Sorted single-byte edges with adjacent bytes to one target merged into ranges (canonical:
// equal byte -> target maps give equal vectors).
void merge_ranges(std::vector<Edge>& v) {
  if (v.size() < 2) return;  // most trie states: nothing to merge
  std::size_t k = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (k > 0 && v[k - 1].to == v[i].to && v[k - 1].hi + 1 == v[i].lo)
      v[k - 1].hi = v[i].hi;
    else
      v[k++] = v[i];
  }
  v.resize(k);
}

inline std::uint64_t edge_hash(bool acc, const Edge* b, const Edge* e) {
  std::uint64_t h = acc ? 0x9E3779B97F4A7C15ull : 0x632BE59BD9B4E019ull;
  for (const Edge* x = b; x != e; ++x) {
    h ^= static_cast<std::uint64_t>(x->lo) | static_cast<std::uint64_t>(x->hi) << 8 |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(x->to)) << 16;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
  }
  return h;
}

// The register of Daciuk et al.'s incremental construction: finished states of a minimal
// acyclic automaton, hash-consed by (accepting, edges), so a state equal to a registered one is
// replaced by it. States are numbered in registration order (children before parents), so the
// shortest distance to acceptance is known on registration (no search afterwards).
class StateRegister {
 public:
  StateRegister(std::size_t expected, const Limits& limits) : limits_(limits) {
    std::size_t cap = 64;
    while (cap < 2 * expected) cap *= 2;
    slots_.assign(cap, -1);
  }
  /// The id of the state (acc, edges), registering it when new.
  std::int32_t intern(bool acc, const std::vector<Edge>& edges) {
    const Edge* b = edges.data();
    const Edge* e = b + edges.size();
    const std::uint64_t h = edge_hash(acc, b, e);
    std::size_t mask = slots_.size() - 1, i = static_cast<std::size_t>(h) & mask;
    for (; slots_[i] >= 0; i = (i + 1) & mask) {
      const auto id = static_cast<std::size_t>(slots_[i]);
      if (hash_[id] == h && acc_[id] == acc && same(id, b, e)) return slots_[i];
    }
    if (table.size() >= limits_.max_dfa_states) throw_dfa_state_limit(table.size() + 1, limits_);
    const auto id = static_cast<std::int32_t>(table.size());
    table.add_state(b, e);
    acc_.push_back(acc ? 1 : 0);
    hash_.push_back(h);
    std::uint32_t best = 0xFFFFFFFFu;
    std::uint8_t toward = 0;
    for (const Edge* x = b; x != e; ++x) {  // sorted by byte: ties keep the smallest byte
      const std::uint32_t d = dist_[static_cast<std::size_t>(x->to)];
      if (d < best) best = d, toward = x->lo;
    }
    dist_.push_back(acc ? 0 : best + 1);
    toward_.push_back(acc ? 0 : toward);
    slots_[i] = id;
    if (2 * table.size() > slots_.size()) grow();
    return id;
  }
  EdgeTable table;
  std::vector<std::uint8_t>& accepting() { return acc_; }
  std::vector<std::uint32_t>& dist() { return dist_; }
  std::vector<std::uint8_t>& toward() { return toward_; }

 private:
  bool same(std::size_t id, const Edge* b, const Edge* e) const {
    if (table.end(id) - table.begin(id) != e - b) return false;
    return std::equal(b, e, table.begin(id));
  }
  void grow() {
    slots_.assign(slots_.size() * 2, -1);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t id = 0; id < hash_.size(); ++id) {
      std::size_t i = static_cast<std::size_t>(hash_[id]) & mask;
      while (slots_[i] >= 0) i = (i + 1) & mask;
      slots_[i] = static_cast<std::int32_t>(id);
    }
  }
  const Limits& limits_;
  std::vector<std::int32_t> slots_;  // open addressing over state ids
  std::vector<std::uint8_t> acc_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::uint32_t> dist_;   // per state: bytes to the nearest acceptance
  std::vector<std::uint8_t> toward_;  // per state: first byte of a shortest path
};

class DfaBuilder {
 public:
  static std::optional<Dfa> build_direct(const NodePtr& regex, const Limits& limits, const Budget& budget,
                                         std::size_t max_states) {
    CORRAL_CHECK(regex != nullptr, "null regex");
    std::optional<FiniteAutomaton> fa = build_finite_automaton(regex, limits, budget);
    if (!fa || fa->size() > max_states) return std::nullopt;
    return from_finite(*fa, limits);
  }
  static Dfa build(const NodePtr& regex, const Limits& limits, const Budget& budget, bool direct) {
    CORRAL_CHECK(regex != nullptr, "null regex");
    if (direct)
      if (std::optional<FiniteAutomaton> fa = build_finite_automaton(regex, limits, budget))
        return from_finite(*fa, limits);
    const Nfa nfa = build_nfa(regex, limits, budget);
    Dfa dfa;
    dfa.class_rep_ = {0};
    SymDfa min;
    if (nfa.whole) {
      // A product alone (what the converter probes): already minimal and live.
      if (nfa.whole->size() == 0) return dfa;  // empty language
      min = renumber_bfs(*nfa.whole);
    } else {
      const SymDfa live = prune_dead(determinise(nfa, nfa.start, nfa.match, limits, budget));
      if (live.size() == 0) return dfa;  // empty language
      min = minimise(live, budget);
    }

    Expander ex(min.size(), limits);
    // All class ranges in code point order, labelled with their class.
    std::vector<CpEdge> by_cp;
    for (std::uint32_t c = 0; c < min.k; ++c)
      for (const auto& r : nfa.class_ranges[c]) by_cp.push_back({r.lo, r.hi, static_cast<std::int32_t>(c)});
    std::sort(by_cp.begin(), by_cp.end(), [](const CpEdge& a, const CpEdge& b) { return a.lo < b.lo; });
    std::vector<CpEdge> cp;
    for (std::size_t s = 0; s < min.size(); ++s) {
      cp.clear();
      for (const CpEdge& r : by_cp) {
        const std::int32_t t = min.at(s, static_cast<std::uint32_t>(r.to));
        if (t < 0) continue;
        if (!cp.empty() && cp.back().to == t && cp.back().hi + 1 == r.lo)
          cp.back().hi = r.hi;
        else
          cp.push_back({r.lo, r.hi, t});
      }
      ex.expand_state(s, cp);
    }
    const auto& edges = ex.edges();
    const std::size_t n = edges.size();
    if (n > limits.max_dfa_states) throw_dfa_state_limit(n, limits);
    EdgeTable table;
    for (const auto& e : edges) table.add_state(e.data(), e.data() + e.size());
    std::vector<std::uint8_t> acc(n, 0);
    for (std::size_t s = 0; s < min.size(); ++s) acc[s] = min.acc[s];
    assemble(dfa, table, std::move(acc), min.start);
    shortest_paths(dfa, table);
    return dfa;
  }

  // Daciuk, Mihov, Watson & Watson (2000), sorted input: the trie of the strings is built along
  // the path of the last string; when the next string leaves that path, the states below the
  // branch point are final and go through the register (equal suffix languages become one
  // state). One pass, linear in the total length; the result is minimal.
  static Dfa build_strings(const std::vector<std::string_view>& sorted, const Limits& limits) {
    Dfa dfa;
    dfa.class_rep_ = {0};
    if (sorted.empty()) return dfa;
    std::size_t total = 0, longest = 0;
    for (std::string_view w : sorted) total += w.size(), longest = std::max(longest, w.size());
    StateRegister reg(std::min<std::size_t>(total + 1, limits.max_dfa_states), limits);
    struct Open {
      bool acc = false;
      std::vector<Edge> edges;  // single bytes; the last edge's target is open until frozen
    };
    std::vector<Open> path(longest + 1);
    std::size_t depth = 0;  // length of the previous string: path[0..depth] are open
    // Register path[d] for d = depth down to keep + 1, linking each to its parent's last edge.
    auto freeze = [&](std::size_t keep) {
      for (std::size_t d = depth; d > keep; --d) {
        merge_ranges(path[d].edges);
        path[d - 1].edges.back().to = reg.intern(path[d].acc, path[d].edges);
      }
    };
    std::string_view prev;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      const std::string_view w = sorted[i];
      CORRAL_CHECK(i == 0 || prev < w, "string set not sorted and unique");
      std::size_t l = 0;
      while (l < prev.size() && l < w.size() && prev[l] == w[l]) ++l;
      freeze(l);
      for (std::size_t d = l; d < w.size(); ++d) {
        const auto b = static_cast<std::uint8_t>(w[d]);
        path[d].edges.push_back(Edge{b, b, -1});
        path[d + 1].acc = false;
        path[d + 1].edges.clear();
      }
      path[w.size()].acc = true;
      depth = w.size();
      prev = w;
    }
    freeze(0);
    merge_ranges(path[0].edges);
    const std::int32_t start = reg.intern(path[0].acc, path[0].edges);
    assemble(dfa, reg.table, std::move(reg.accepting()), start);
    dfa.dist_ = std::move(reg.dist());
    dfa.toward_ = std::move(reg.toward());
    return dfa;
  }

 private:
  // The Dfa of finite_dfa.cpp's automaton (minimal, live, start 0).
  static Dfa from_finite(const FiniteAutomaton& fa, const Limits& limits) {
    Dfa dfa;
    dfa.class_rep_ = {0};
    const std::size_t n = fa.size();
    if (n == 0) return dfa;  // empty language
    if (n > limits.max_dfa_states) throw_dfa_state_limit(n, limits);
    EdgeTable table;
    table.all.reserve(fa.edges.size());
    for (const FiniteAutomaton::Edge& e : fa.edges) table.all.push_back(Edge{e.lo, e.hi, e.to});
    table.first.assign(fa.first.begin(), fa.first.end());
    assemble(dfa, table, fa.acc, 0);
    shortest_paths(dfa, table);
    return dfa;
  }

  // Byte classes and the dense transition table from a byte-level automaton whose states are
  // all live.
  static void assemble(Dfa& dfa, const EdgeTable& edges, std::vector<std::uint8_t> acc, std::int32_t start) {
    const std::size_t n = edges.size();
    // Byte classes by partition refinement, state by state: bytes covered by an edge get a
    // fresh label keyed by (old label, target); uncovered bytes keep theirs (target: dead).
    // Cost is the total width of all edges, not states x 256.
    std::array<std::uint32_t, 256> label{};
    std::uint32_t next_label = 1;
    constexpr std::uint32_t kCompactAt = 2048;  // labels are renumbered densely past this
    // Each byte of each edge makes at most one new label: a small automaton needs small tables
    // (thousands of them are assembled per compile; zeroing the full size was a visible share).
    std::size_t width = 0;
    for (const Edge& e : edges.all) width += static_cast<std::size_t>(e.hi - e.lo) + 1;
    const std::size_t table_size = std::min<std::size_t>(kCompactAt + 257, width + 2);
    std::vector<std::uint32_t> stamp(table_size, 0), to_of(table_size, 0), new_of(table_size, 0);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> overflow;  // (old<<32|to) -> new
    // Runs: every byte between two consecutive cuts has one label (every edge's lo and hi + 1
    // is a cut, and a run is only ever relabelled whole), so each edge is refined run by run
    // rather than byte by byte — a JSON string's edges span over two hundred bytes in a few
    // runs. Byte 256 is a cut, as a sentinel.
    ByteCuts cuts;
    constexpr int kWideEdge = 24;  // edges spanning more bytes go run by run
    for (std::size_t s = 0; s < n; ++s) {
      overflow.clear();
      const auto tag = static_cast<std::uint32_t>(s + 1);
      for (const Edge* e = edges.begin(s); e != edges.end(s); ++e) {
        const auto to = static_cast<std::uint32_t>(e->to);
        cuts.set(e->lo);
        cuts.set(e->hi + 1);
        const bool wide = e->hi - e->lo >= kWideEdge;
        for (int b = e->lo; b <= e->hi;) {
          // (hi + 1 is a cut: end <= hi + 1; a narrow edge goes byte by byte, which is cheaper
          // than finding its runs and keeps them whole all the same)
          const int end = wide ? cuts.next_after(b) : b + 1;
          const std::uint32_t old = label[static_cast<std::size_t>(b)];
          std::uint32_t nl;
          if (stamp[old] != tag) {
            stamp[old] = tag, to_of[old] = to, new_of[old] = nl = next_label++;
          } else if (to_of[old] == to) {
            nl = new_of[old];
          } else {
            const std::uint64_t key = static_cast<std::uint64_t>(old) << 32 | to;
            nl = 0;
            for (const auto& o : overflow)
              if (o.first == key) nl = o.second;
            if (nl == 0) overflow.emplace_back(key, nl = next_label++);
          }
          if (wide)
            std::fill(label.begin() + b, label.begin() + end, nl);
          else
            label[static_cast<std::size_t>(b)] = nl;
          b = end;
        }
      }
      if (next_label > kCompactAt) {  // at most 256 labels are alive: renumber them 0..k-1
        std::vector<std::uint32_t> dense(next_label, 0xFFFFFFFFu);
        std::uint32_t k = 0;
        for (auto& l : label) {
          if (dense[l] == 0xFFFFFFFFu) dense[l] = k++;
          l = dense[l];
        }
        next_label = k;
        std::fill(stamp.begin(), stamp.end(), 0u);
      }
    }
    // Dense class ids in order of each class's smallest byte (labels are below next_label).
    std::vector<std::uint16_t> class_of_label(next_label, 0xFFFF);
    std::size_t nc = 0;
    dfa.class_rep_.clear();
    for (int b = 0; b < 256; ++b) {
      std::uint16_t& c = class_of_label[label[static_cast<std::size_t>(b)]];
      if (c == 0xFFFF) {
        c = static_cast<std::uint16_t>(nc++);
        dfa.class_rep_.push_back(static_cast<std::uint8_t>(b));
      }
      dfa.classes_[static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(c);
    }
    dfa.num_classes_ = static_cast<std::uint32_t>(nc);
    dfa.table_.assign(n * nc, Dfa::kDead);
    for (std::size_t s = 0; s < n; ++s)
      for (const Edge* e = edges.begin(s); e != edges.end(s); ++e)
        for (int b = e->lo; b <= e->hi; b = e->hi - e->lo >= kWideEdge ? cuts.next_after(b) : b + 1)
          dfa.table_[s * nc + dfa.classes_[static_cast<std::size_t>(b)]] = e->to;  // (a class per run)
    dfa.accepting_ = std::move(acc);
    dfa.start_ = start;
  }

  // dist_ (bytes to the nearest acceptance) by BFS over reversed edges from every accepting
  // state, and toward_ (the smallest first byte of a shortest path).
  static void shortest_paths(Dfa& dfa, const EdgeTable& edges) {
    const std::size_t n = edges.size();
    std::vector<std::uint32_t> rstart(n + 1, 0), radj;
    for (const Edge& e : edges.all) ++rstart[static_cast<std::size_t>(e.to) + 1];
    for (std::size_t i = 0; i < n; ++i) rstart[i + 1] += rstart[i];
    radj.resize(rstart[n]);
    {
      std::vector<std::uint32_t> fill(rstart.begin(), rstart.end() - 1);
      for (std::size_t s = 0; s < n; ++s)
        for (const Edge* e = edges.begin(s); e != edges.end(s); ++e)
          radj[fill[static_cast<std::size_t>(e->to)]++] = static_cast<std::uint32_t>(s);
    }
    constexpr std::uint32_t kInf = 0xFFFFFFFFu;
    dfa.dist_.assign(n, kInf);
    std::vector<std::uint32_t> queue;
    for (std::size_t s = 0; s < n; ++s)
      if (dfa.accepting_[s]) dfa.dist_[s] = 0, queue.push_back(static_cast<std::uint32_t>(s));
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
      const std::uint32_t t = queue[qi];
      for (std::uint32_t j = rstart[t]; j < rstart[t + 1]; ++j) {
        const std::uint32_t p = radj[j];
        if (dfa.dist_[p] == kInf) dfa.dist_[p] = dfa.dist_[t] + 1, queue.push_back(p);
      }
    }
    dfa.toward_.assign(n, 0);
    for (std::size_t s = 0; s < n; ++s) {
      CORRAL_CHECK(dfa.dist_[s] != kInf, "DFA state cannot reach acceptance");
      if (dfa.dist_[s] == 0) continue;
      for (const Edge* e = edges.begin(s); e != edges.end(s); ++e) {  // sorted: first hit is smallest
        if (dfa.dist_[static_cast<std::size_t>(e->to)] + 1 == dfa.dist_[s]) {
          dfa.toward_[s] = e->lo;
          break;
        }
      }
    }
  }
};

Dfa Dfa::compile(const NodePtr& regex, const Limits& limits, const Budget& budget) {
  return DfaBuilder::build(regex, limits, budget, /*direct=*/true);
}

Dfa Dfa::compile_by_subsets(const NodePtr& regex, const Limits& limits, const Budget& budget) {
  return DfaBuilder::build(regex, limits, budget, /*direct=*/false);
}

std::optional<Dfa> Dfa::compile_direct(const NodePtr& regex, const Limits& limits, const Budget& budget,
                                       std::size_t max_states) {
  return DfaBuilder::build_direct(regex, limits, budget, max_states);
}

Dfa Dfa::from_strings(const std::vector<std::string_view>& sorted, const Limits& limits) {
  return DfaBuilder::build_strings(sorted, limits);
}

std::string Dfa::shortest_completion(std::int32_t state) const {
  std::string out;
  if (state < 0) return out;
  while (dist_[static_cast<std::size_t>(state)] != 0) {
    const std::uint8_t b = toward_[static_cast<std::size_t>(state)];
    out += static_cast<char>(b);
    state = next(state, b);
  }
  return out;
}

std::uint64_t Dfa::fingerprint() const {
  std::uint64_t h = 0xCBF29CE484222325ull ^ static_cast<std::uint32_t>(start_) ^ (std::uint64_t{num_classes_} << 32);
  auto mix = [&h](std::uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0x100000001B3ull;
  };
  for (std::uint8_t c : classes_) mix(c);
  for (std::uint8_t a : accepting_) mix(a);
  for (std::int32_t t : table_) mix(static_cast<std::uint32_t>(t));
  return h;
}

std::size_t Dfa::memory_bytes() const {
  return sizeof(Dfa) + class_rep_.capacity() + table_.capacity() * sizeof(std::int32_t) +
         accepting_.capacity() + dist_.capacity() * sizeof(std::uint32_t) + toward_.capacity();
}

}  // namespace corral
