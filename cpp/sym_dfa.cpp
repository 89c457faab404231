// sym_dfa.cpp — determinise, prune, minimise and combine DFAs over class alphabets (see
// sym_dfa.hpp).
//
// Algorithms: Rabin–Scott subset construction; Hopcroft (1971) partition refinement with the
//      "smaller half" worklist rule; the classic product construction (Rabin–Scott 1959) over
//      reachable pairs only, completing the subtrahend of a difference with a dead state.
#include "sym_dfa.hpp"

#include <algorithm>
#include <unordered_map>

#include "errors.hpp"

namespace corral {

namespace {

struct VecHash {
  std::size_t operator()(const std::vector<std::int32_t>& v) const {
    std::uint64_t h = 1469598103934665603ull;
    for (std::int32_t x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 1099511628211ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

}  // namespace

[[noreturn]] void throw_dfa_state_limit(std::size_t n, const Limits& limits) {
  throw LimitExceeded("max_dfa_states", n, limits.max_dfa_states,
                      "regex needs too many DFA states");
}

// ---- subset construction ------------------------------------------------------------------

SymDfa determinise(const Nfa& nfa, std::int32_t start, std::int32_t match, const Limits& limits,
                   const Budget& budget) {
  SymDfa d;
  d.k = nfa.num_classes();
  const std::size_t nn = nfa.states.size();
  std::vector<std::uint32_t> stamp(nn, 0);
  std::uint32_t cur = 0;
  std::vector<std::int32_t> stack;
  auto closure = [&](const std::vector<std::int32_t>& seeds) {
    ++cur;
    std::vector<std::int32_t> out;
    stack.assign(seeds.begin(), seeds.end());
    while (!stack.empty()) {
      const std::int32_t s = stack.back();
      stack.pop_back();
      if (stamp[static_cast<std::size_t>(s)] == cur) continue;
      stamp[static_cast<std::size_t>(s)] = cur;
      const NfaState& st = nfa.states[static_cast<std::size_t>(s)];
      if (st.kind == NfaState::Eps) {
        for (auto it = st.eps.rbegin(); it != st.eps.rend(); ++it) stack.push_back(*it);
      } else {
        out.push_back(s);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, VecHash> ids;
  std::vector<std::vector<std::int32_t>> sets;
  auto intern = [&](std::vector<std::int32_t> key) {
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    if (sets.size() >= limits.max_dfa_states) throw_dfa_state_limit(sets.size() + 1, limits);
    const auto id = static_cast<std::int32_t>(sets.size());
    bool acc = std::binary_search(key.begin(), key.end(), match);
    d.acc.push_back(acc ? 1 : 0);
    d.trans.resize(d.trans.size() + d.k, -1);
    ids.emplace(key, id);
    sets.push_back(std::move(key));
    return id;
  };
  d.start = intern(closure({start}));
  std::vector<std::vector<std::int32_t>> bucket(d.k);
  std::vector<std::uint32_t> touched;
  std::vector<std::pair<std::vector<std::int32_t>, std::int32_t>> local;  // seeds -> target
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if ((i & 255) == 255) budget.check("determinising a regex");
    touched.clear();
    for (std::int32_t s : sets[i]) {
      const NfaState& st = nfa.states[static_cast<std::size_t>(s)];
      if (st.kind != NfaState::Char) continue;
      for (std::uint32_t c : nfa.set_classes[static_cast<std::size_t>(st.set)]) {
        if (bucket[c].empty()) touched.push_back(c);
        bucket[c].push_back(st.next);
      }
    }
    std::sort(touched.begin(), touched.end());
    local.clear();
    for (std::uint32_t c : touched) {
      auto& seeds = bucket[c];
      std::sort(seeds.begin(), seeds.end());
      seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
      std::int32_t target = -1;
      for (const auto& l : local)
        if (l.first == seeds) {
          target = l.second;
          break;
        }
      if (target < 0) {
        target = intern(closure(seeds));
        local.emplace_back(seeds, target);
      }
      d.trans[i * d.k + c] = target;
      seeds.clear();
    }
  }
  return d;
}

SymDfa renumber_bfs(const SymDfa& d) {
  SymDfa out;
  out.k = d.k;
  if (d.start < 0) return out;
  std::vector<std::int32_t> id(d.size(), -1), order{d.start};
  id[static_cast<std::size_t>(d.start)] = 0;
  for (std::size_t qi = 0; qi < order.size(); ++qi)
    for (std::uint32_t c = 0; c < d.k; ++c) {
      const std::int32_t t = d.at(static_cast<std::size_t>(order[qi]), c);
      if (t >= 0 && id[static_cast<std::size_t>(t)] < 0) {
        id[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(order.size());
        order.push_back(t);
      }
    }
  out.acc.resize(order.size());
  out.trans.assign(order.size() * d.k, -1);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto s = static_cast<std::size_t>(order[i]);
    out.acc[i] = d.acc[s];
    for (std::uint32_t c = 0; c < d.k; ++c) {
      const std::int32_t t = d.at(s, c);
      out.trans[i * d.k + c] = t < 0 ? -1 : id[static_cast<std::size_t>(t)];
    }
  }
  out.start = 0;
  return out;
}

// ---- dead states --------------------------------------------------------------------------

SymDfa prune_dead(const SymDfa& d) {
  const std::size_t n = d.size();
  std::vector<std::vector<std::int32_t>> rev(n);
  for (std::size_t s = 0; s < n; ++s)
    for (std::uint32_t c = 0; c < d.k; ++c) {
      const std::int32_t t = d.at(s, c);
      if (t >= 0) rev[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(s));
    }
  std::vector<std::uint8_t> live(n, 0);
  std::vector<std::int32_t> queue;
  for (std::size_t s = 0; s < n; ++s)
    if (d.acc[s]) live[s] = 1, queue.push_back(static_cast<std::int32_t>(s));
  for (std::size_t qi = 0; qi < queue.size(); ++qi)
    for (std::int32_t p : rev[static_cast<std::size_t>(queue[qi])])
      if (!live[static_cast<std::size_t>(p)]) live[static_cast<std::size_t>(p)] = 1, queue.push_back(p);
  SymDfa out;
  out.k = d.k;
  if (d.start < 0 || !live[static_cast<std::size_t>(d.start)]) return out;  // empty language
  std::vector<std::int32_t> id(n, -1);
  std::int32_t m = 0;
  for (std::size_t s = 0; s < n; ++s)
    if (live[s]) id[s] = m++;
  out.acc.resize(static_cast<std::size_t>(m));
  out.trans.assign(static_cast<std::size_t>(m) * d.k, -1);
  for (std::size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    const auto ns = static_cast<std::size_t>(id[s]);
    out.acc[ns] = d.acc[s];
    for (std::uint32_t c = 0; c < d.k; ++c) {
      const std::int32_t t = d.at(s, c);
      out.trans[ns * d.k + c] = t >= 0 ? id[static_cast<std::size_t>(t)] : -1;
    }
  }
  out.start = id[static_cast<std::size_t>(d.start)];
  return out;
}

// ---- Hopcroft minimisation ----------------------------------------------------------------

SymDfa minimise(const SymDfa& d, const Budget& budget) {
  const std::size_t n = d.size() + 1;  // + sink, so the automaton is complete
  const std::size_t sink = n - 1;
  const std::uint32_t k = d.k;
  auto delta = [&](std::size_t s, std::uint32_t c) -> std::size_t {
    if (s == sink) return sink;
    const std::int32_t t = d.at(s, c);
    return t < 0 ? sink : static_cast<std::size_t>(t);
  };
  // Inverse transitions, CSR per symbol: inv_start[c*(n+1) + t] .. next.
  std::vector<std::uint32_t> inv_start(static_cast<std::size_t>(k) * (n + 1) + 1, 0);
  std::vector<std::uint32_t> inv(static_cast<std::size_t>(k) * n);
  for (std::uint32_t c = 0; c < k; ++c) {
    std::uint32_t* cnt = &inv_start[static_cast<std::size_t>(c) * (n + 1)];
    for (std::size_t s = 0; s < n; ++s) ++cnt[delta(s, c) + 1];
    for (std::size_t t = 0; t < n; ++t) cnt[t + 1] += cnt[t];
    std::vector<std::uint32_t> fill(cnt, cnt + n);
    for (std::size_t s = 0; s < n; ++s)
      inv[static_cast<std::size_t>(c) * n + fill[delta(s, c)]++] = static_cast<std::uint32_t>(s);
  }
  // Partition: elems grouped by block; block b occupies [first[b], last[b]).
  std::vector<std::uint32_t> elems(n), loc(n), blk(n), first, last, marked;
  {
    std::uint32_t p = 0;
    for (int pass = 0; pass < 2; ++pass) {
      const std::uint32_t begin = p;
      for (std::size_t s = 0; s < n; ++s) {
        const bool acc = s != sink && d.acc[s];
        if (acc == (pass == 0)) {
          elems[p] = static_cast<std::uint32_t>(s);
          loc[s] = p++;
        }
      }
      if (p > begin) {
        const auto b = static_cast<std::uint32_t>(first.size());
        for (std::uint32_t i = begin; i < p; ++i) blk[elems[i]] = b;
        first.push_back(begin);
        last.push_back(p);
        marked.push_back(0);
      }
    }
  }
  std::vector<std::uint8_t> in_w;  // block * k
  std::vector<std::pair<std::uint32_t, std::uint32_t>> work;
  in_w.assign(first.size() * k, 0);
  auto push = [&](std::uint32_t b, std::uint32_t c) {
    if (!in_w[static_cast<std::size_t>(b) * k + c]) {
      in_w[static_cast<std::size_t>(b) * k + c] = 1;
      work.emplace_back(b, c);
    }
  };
  {
    // Start with the smaller of the two initial blocks for every symbol.
    std::uint32_t b = 0;
    if (first.size() == 2 && last[1] - first[1] < last[0] - first[0]) b = 1;
    for (std::uint32_t c = 0; c < k; ++c) push(b, c);
  }
  std::vector<std::uint32_t> preds, touched;
  std::size_t iter = 0;
  while (!work.empty()) {
    if ((++iter & 255) == 0) budget.check("minimising a regex DFA");
    const auto [b, c] = work.back();
    work.pop_back();
    in_w[static_cast<std::size_t>(b) * k + c] = 0;
    preds.clear();
    const std::uint32_t* cs = &inv_start[static_cast<std::size_t>(c) * (n + 1)];
    for (std::uint32_t i = first[b]; i < last[b]; ++i) {
      const std::uint32_t t = elems[i];
      for (std::uint32_t j = cs[t]; j < cs[t + 1]; ++j) preds.push_back(inv[static_cast<std::size_t>(c) * n + j]);
    }
    touched.clear();
    for (std::uint32_t s : preds) {
      const std::uint32_t x = blk[s];
      const std::uint32_t boundary = first[x] + marked[x];
      if (loc[s] < boundary) continue;  // already marked
      if (marked[x] == 0) touched.push_back(x);
      // swap s into the marked prefix of its block
      const std::uint32_t other = elems[boundary];
      std::swap(elems[loc[s]], elems[boundary]);
      loc[other] = loc[s];
      loc[s] = boundary;
      ++marked[x];
    }
    for (std::uint32_t x : touched) {
      const std::uint32_t m = marked[x];
      marked[x] = 0;
      const std::uint32_t size = last[x] - first[x];
      if (m == size) continue;
      // New block y takes the smaller part; x keeps the rest.
      const auto y = static_cast<std::uint32_t>(first.size());
      if (m <= size - m) {
        first.push_back(first[x]);
        last.push_back(first[x] + m);
        first[x] += m;
      } else {
        first.push_back(first[x] + m);
        last.push_back(last[x]);
        last[x] = first[x] + m;
      }
      marked.push_back(0);
      for (std::uint32_t i = first[y]; i < last[y]; ++i) blk[elems[i]] = y;
      in_w.resize(first.size() * k, 0);
      // Hopcroft: if (x, a) is pending, (y, a) must be too; otherwise adding the smaller
      // half suffices — and y is the smaller half by construction. Either way: push (y, a).
      for (std::uint32_t a = 0; a < k; ++a) push(y, a);
    }
  }
  // Number blocks in BFS order from the start; the sink's block becomes dead.
  const std::uint32_t sink_block = blk[sink];
  std::vector<std::int32_t> id(first.size(), -1);
  std::vector<std::uint32_t> order;
  SymDfa out;
  out.k = k;
  const std::uint32_t sb = blk[static_cast<std::size_t>(d.start)];
  id[sb] = 0;
  order.push_back(sb);
  for (std::size_t qi = 0; qi < order.size(); ++qi) {
    const std::uint32_t rep = elems[first[order[qi]]];
    for (std::uint32_t c = 0; c < k; ++c) {
      const std::uint32_t tb = blk[delta(rep, c)];
      if (tb != sink_block && id[tb] < 0) {
        id[tb] = static_cast<std::int32_t>(order.size());
        order.push_back(tb);
      }
    }
  }
  out.acc.resize(order.size());
  out.trans.assign(order.size() * k, -1);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::uint32_t rep = elems[first[order[i]]];
    CORRAL_CHECK(rep != sink, "live state merged with the dead state");
    out.acc[i] = d.acc[rep];
    for (std::uint32_t c = 0; c < k; ++c) {
      const std::uint32_t tb = blk[delta(rep, c)];
      out.trans[i * k + c] = tb == sink_block ? -1 : id[tb];
    }
  }
  out.start = 0;
  return out;
}

// ---- product ------------------------------------------------------------------------------

SymDfa product(const SymDfa& a, const SymDfa& b, ProductOp op, const Limits& limits,
               const Budget& budget) {
  CORRAL_CHECK(a.k == b.k || a.size() == 0 || b.size() == 0, "product of DFAs over different alphabets");
  SymDfa out;
  out.k = a.k;
  const bool diff = op == ProductOp::Difference;
  if (a.start < 0 || (!diff && b.start < 0)) return out;  // empty language
  // A pair (x, y) is keyed as x << 32 | (y + 1): y == -1 is the completing dead state of `b`.
  auto key = [](std::int32_t x, std::int32_t y) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)) << 32 | static_cast<std::uint32_t>(y + 1);
  };
  std::unordered_map<std::uint64_t, std::int32_t> ids;
  std::vector<std::pair<std::int32_t, std::int32_t>> pairs;
  auto intern = [&](std::int32_t x, std::int32_t y) {
    auto it = ids.find(key(x, y));
    if (it != ids.end()) return it->second;
    if (pairs.size() >= limits.max_dfa_states) throw_dfa_state_limit(pairs.size() + 1, limits);
    const auto id = static_cast<std::int32_t>(pairs.size());
    const bool in_b = y >= 0 && b.acc[static_cast<std::size_t>(y)];
    const bool in_a = a.acc[static_cast<std::size_t>(x)] != 0;
    out.acc.push_back((diff ? in_a && !in_b : in_a && in_b) ? 1 : 0);
    out.trans.resize(out.trans.size() + out.k, -1);
    ids.emplace(key(x, y), id);
    pairs.emplace_back(x, y);
    return id;
  };
  out.start = intern(a.start, b.start);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if ((i & 255) == 255) budget.check("combining automata for `&` / `-`");
    const auto [x, y] = pairs[i];
    for (std::uint32_t c = 0; c < out.k; ++c) {
      const std::int32_t nx = a.at(static_cast<std::size_t>(x), c);
      const std::int32_t ny = y < 0 ? -1 : b.at(static_cast<std::size_t>(y), c);
      if (nx < 0 || (!diff && ny < 0)) continue;
      const std::int32_t t = intern(nx, ny);  // may grow out.trans: index it afterwards
      out.trans[i * out.k + c] = t;
    }
  }
  return out;
}

}  // namespace corral
