// count_summary.cpp — the counted-string summary and the relation it rests on (see the header).
#include "count_summary.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>

namespace corral {
namespace {

bool is_hex(std::uint8_t b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// Φ of a J summary under bounds (see the header).
bool phi(std::uint32_t c, std::uint8_t j, const CountBounds& k) {
  if (j == CountSummary::kZ) return false;
  if (j == CountSummary::kX) return c >= k.lo && c <= k.r;
  return c <= k.r;
}

}  // namespace

std::uint8_t CountSummary::step(std::uint8_t j, std::uint8_t b, bool& counted) {
  counted = false;
  const bool hex = is_hex(b);
  const bool d = b == 'd' || b == 'D';
  switch (j) {
    case kH:
      if (b == '\\') return kEH;  // a low surrogate may follow: not a new character yet
      [[fallthrough]];
    case kB:
      if (b == '"') return kX;
      counted = true;
      if (b == '\\') return kE;
      if (b < 0x80) return kB;
      if (b >= 0xC2 && b <= 0xDF) return kC1;
      if (b >= 0xE0 && b <= 0xEF) return kC2;
      if (b >= 0xF0 && b <= 0xF4) return kC3;
      counted = false;
      return kZ;
    case kE:
      if (b == 'u') return kU4;
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') return kB;
      return kZ;
    case kU4: return d ? kU3D : hex ? kU3 : kZ;
    case kU3: return hex ? kU2 : kZ;
    case kU3D: return (b >= '8' && b <= '9') || (b >= 'a' && b <= 'b') || (b >= 'A' && b <= 'B') ? kU2H : hex ? kU2 : kZ;
    case kU2: return hex ? kU1 : kZ;
    case kU1: return hex ? kB : kZ;
    case kU2H: return hex ? kU1H : kZ;
    case kU1H: return hex ? kH : kZ;
    case kEH: return b == 'u' ? kU4H : kZ;
    case kU4H: return d ? kU3DH : kZ;
    case kU3DH: return (b >= 'c' && b <= 'f') || (b >= 'C' && b <= 'F') ? kU2L : kZ;
    case kU2L: return hex ? kU1L : kZ;
    case kU1L: return hex ? kB : kZ;
    case kC3: return b >= 0x80 && b <= 0xBF ? kC2 : kZ;
    case kC2: return b >= 0x80 && b <= 0xBF ? kC1 : kZ;
    case kC1: return b >= 0x80 && b <= 0xBF ? kB : kZ;
    case kX: return kX;
    default: return kZ;
  }
}

CountSummary::CountSummary(const Vocabulary& vocab, std::uint32_t depth)
    : depth_(depth), words_(vocab.mask_words()) {
  len_le_.assign(static_cast<std::size_t>(depth + 1) * words_, 0);
  closed_lt_.assign(static_cast<std::size_t>(depth + 3) * words_, 0);
  // Per token: its count (capped at depth + 1: more is never within bounds) and J's state.
  std::vector<std::uint8_t> count(vocab.size()), state(vocab.size());
  for (std::uint32_t id = 0; id < vocab.size(); ++id) {
    std::uint8_t j = kB;
    std::uint32_t c = 0;
    for (char ch : vocab.bytes(static_cast<std::int32_t>(id))) {
      bool counted;
      j = step(j, static_cast<std::uint8_t>(ch), counted);
      if (counted && c <= depth) ++c;
      if (j == kZ) break;
    }
    count[id] = static_cast<std::uint8_t>(c);
    state[id] = j;
  }
  for (std::uint32_t id = 0; id < vocab.size(); ++id) {
    const std::uint32_t bit = 1u << (id & 31), w = id >> 5;
    if (state[id] != kZ)
      for (std::uint32_t k = count[id]; k <= depth; ++k) len_le_[k * words_ + w] |= bit;
    if (state[id] == kX)
      for (std::uint32_t k = count[id] + 1u; k <= depth + 2; ++k) closed_lt_[k * words_ + w] |= bit;
  }
}

bool prove_counted(const Dfa& ds, std::int32_t s, const Dfa& dt, std::int32_t t, std::uint32_t depth,
                   std::size_t max_nodes, CountBounds& out, std::size_t* visited_out) {
  struct Report {  // how many product nodes the proof visited, however it ends
    std::size_t n = 0;
    std::size_t* out;
    ~Report() {
      if (out) *out = n;
    }
  } report{0, visited_out};
  // Representative bytes of the joint byte classes: the two automata's classes and J's
  // behaviour (its step from every state) — bytes alike in all three behave alike below.
  std::vector<std::uint8_t> reps;
  {
    std::map<std::pair<std::uint32_t, std::string>, std::uint8_t> seen;
    for (int b = 0; b < 256; ++b) {
      std::string jv;
      for (std::uint8_t j = 0; j < CountSummary::kStates; ++j) {
        bool counted;
        const std::uint8_t n = CountSummary::step(j, static_cast<std::uint8_t>(b), counted);
        jv.push_back(static_cast<char>(n * 2 + (counted ? 1 : 0)));
      }
      const std::uint32_t cls = ds.byte_class(static_cast<std::uint8_t>(b)) * 256u + dt.byte_class(static_cast<std::uint8_t>(b));
      if (seen.emplace(std::make_pair(cls, jv), static_cast<std::uint8_t>(b)).second) reps.push_back(static_cast<std::uint8_t>(b));
    }
  }
  struct Node {
    std::int32_t s, t;
    std::uint8_t j;
    std::uint32_t c;
  };
  // Visited product nodes, identified exactly by (s, t) and (c, j).
  struct PairHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint64_t>& p) const {
      return static_cast<std::size_t>((p.first * 0x9E3779B97F4A7C15ull) ^ (p.second + 0x165667B19E3779F9ull + (p.first >> 29)));
    }
  };
  std::unordered_set<std::pair<std::uint64_t, std::uint64_t>, PairHash> visited;
  auto id = [](std::int32_t a, std::int32_t b, std::uint8_t j, std::uint32_t c) {
    return std::make_pair(static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 | static_cast<std::uint32_t>(b),
                          static_cast<std::uint64_t>(c) << 8 | j);
  };
  std::vector<Node> stack{Node{s, t, CountSummary::kB, 0}};
  visited.insert(id(s, t, CountSummary::kB, 0));
  std::uint32_t max_live = 0, min_closed = depth + 2;
  struct Cut {
    std::uint32_t c;
    std::uint8_t j;
  };
  std::vector<Cut> cuts;
  while (!stack.empty()) {
    const Node n = stack.back();
    stack.pop_back();
    // Both live here: (2), and what Φ must allow.
    if (n.j == CountSummary::kZ) return false;
    const bool as = ds.accepting(n.s), at = dt.accepting(n.t);
    if (as != at) return false;
    if (as && &ds == &dt && n.s != n.t) return false;
    if (as && &ds != &dt) return false;  // states of different automata are never "the same"
    max_live = std::max(max_live, n.c);
    if (n.j == CountSummary::kX) min_closed = std::min(min_closed, n.c);
    for (std::uint8_t b : reps) {
      const std::int32_t ns = ds.next(n.s, b), nt = dt.next(n.t, b);
      if (ns < 0 && nt < 0) continue;
      if (nt < 0) return false;  // s live where t is dead: (1) fails
      bool counted;
      const std::uint8_t nj = CountSummary::step(n.j, b, counted);
      const std::uint32_t nc = n.c + (counted ? 1 : 0);
      if (nc > depth) continue;  // more than `depth` bytes: beyond the short part
      if (ns < 0) {
        cuts.push_back(Cut{nc, nj});
        continue;
      }
      if (visited.insert(id(ns, nt, nj, nc)).second) {
        report.n = visited.size();
        if (visited.size() > max_nodes) return false;
        stack.push_back(Node{ns, nt, nj, nc});
      }
    }
  }
  CountBounds k{min_closed, max_live};
  // Φ holds at every both-live node by the choice of bounds; it must fail at every cut (and
  // then below it: Φ is prefix-monotone and s stays dead).
  for (const Cut& c : cuts)
    if (phi(c.c, c.j, k)) return false;
  out = k;
  return true;
}

CountedShare::CountedShare(const Vocabulary& vocab, std::shared_ptr<const CountSummary> summary)
    : vocab_(vocab), summary_(std::move(summary)) {}

void CountedShare::add_anchor(std::int32_t terminal, std::int32_t s, std::shared_ptr<const FrontierEntry> entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (anchors_.size() <= static_cast<std::size_t>(terminal)) anchors_.resize(static_cast<std::size_t>(terminal) + 1);
  auto& v = anchors_[static_cast<std::size_t>(terminal)];
  if (v.size() >= kMaxAnchors) v.erase(v.begin());
  v.push_back(Anchor{s, std::move(entry), {}, false});
}

void CountedShare::stratify(Anchor& a) const {
  // Split each group by the J summary of its split path (the bytes before the head), read off
  // a token below each dead node.
  const TokenTrie& trie = vocab_.trie();
  for (const FrontierEntry::Group& g : a.entry->groups) {
    std::map<std::pair<std::uint32_t, std::uint8_t>, std::size_t> index;
    std::vector<std::vector<std::pair<std::string_view, std::int32_t>>> heads;
    const std::size_t first = a.strata.size();
    const TokenTrie& h = g.heads;
    for (std::uint32_t i = 1; i < h.num_nodes(); ++i) {
      for (const std::int32_t* x = h.tokens_begin(i); x != h.tokens_end(i); ++x) {
        const std::uint32_t dead = g.dead[static_cast<std::size_t>(*x)];
        std::uint32_t leaf = dead;
        while (trie.tokens_begin(leaf) == trie.tokens_end(leaf)) ++leaf;
        const std::string_view bytes = vocab_.bytes(*trie.tokens_begin(leaf));
        const std::uint32_t end = trie.depth(dead), d0 = end - h.depth(i);
        std::uint8_t j = CountSummary::kB;
        std::uint32_t c = 0;
        for (std::uint32_t p = 0; p < d0 && j != CountSummary::kZ; ++p) {
          bool counted;
          j = CountSummary::step(j, static_cast<std::uint8_t>(bytes[p]), counted);
          if (counted) ++c;
        }
        const std::uint8_t kind = j == CountSummary::kX || j == CountSummary::kZ ? j : static_cast<std::uint8_t>(CountSummary::kB);
        auto [it, fresh] = index.emplace(std::make_pair(c, kind), a.strata.size());
        if (fresh) {
          a.strata.push_back(Stratum{c, kind, FrontierEntry::Group{g.states, {}, {}}});
          heads.emplace_back();
        }
        Stratum& st = a.strata[it->second];
        heads[it->second - first].emplace_back(bytes.substr(d0, end - d0), static_cast<std::int32_t>(st.group.dead.size()));
        st.group.dead.push_back(dead);
      }
    }
    for (std::size_t k = first; k < a.strata.size(); ++k) a.strata[k].group.heads = TokenTrie::build(std::move(heads[k - first]));
  }
  a.stratified = true;
}

std::shared_ptr<const FrontierEntry> CountedShare::derive(std::int32_t terminal, const Dfa& dfa, std::int32_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (anchors_.size() <= static_cast<std::size_t>(terminal)) return nullptr;
  auto& v = anchors_[static_cast<std::size_t>(terminal)];
  const std::uint32_t depth = summary_->depth();
  for (auto a = v.rbegin(); a != v.rend(); ++a) {
    if (a->too_big) continue;
    CountBounds k;
    std::size_t visited = 0;
    if (!prove_counted(dfa, s, dfa, a->state, depth, kMaxNodes, k, &visited)) {
      a->too_big = visited > kMaxNodes;
      continue;
    }
    if (!a->stratified) stratify(*a);
    FrontierEntry out;
    const std::uint32_t words = vocab_.mask_words();
    out.allowed.resize(words);
    const std::uint32_t* base = a->entry->allowed.data();
    const std::uint32_t* le = summary_->len_le(k.r);
    const std::uint32_t* cl = summary_->closed_lt(k.lo);
    for (std::uint32_t w = 0; w < words; ++w) out.allowed[w] = base[w] & le[w] & ~cl[w];
    out.memory_bytes = sizeof(FrontierEntry) + 4 * words;
    for (const Stratum& st : a->strata) {
      if (!phi(st.count, st.kind, k)) continue;
      out.groups.push_back(st.group);
      out.memory_bytes += st.group.states.size() * 4 + st.group.dead.size() * 4 + st.group.heads.memory_bytes();
    }
    return std::make_shared<const FrontierEntry>(std::move(out));
  }
  return nullptr;
}

}  // namespace corral
