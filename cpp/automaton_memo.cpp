// automaton_memo.cpp — the process-wide automaton memo (see automaton_memo.hpp).
#include "automaton_memo.hpp"

#include <atomic>
#include <algorithm>
#include <mutex>

namespace corral {

std::size_t RangeDfa::memory_bytes() const {
  std::size_t b = sizeof(RangeDfa) + acc.size();
  for (const auto& o : out) b += sizeof(o) + o.size() * sizeof(o[0]);
  for (const auto& l : labels) b += sizeof(l) + l.size() * sizeof(CodepointRange);
  return b;
}

namespace {

template <class T>
struct Entry {
  std::shared_ptr<const T> value;
  BuiltUnder under;
  std::size_t bytes = 0;
};

struct Memo {
  std::mutex mu;
  // Hash-consing table of StructuralKeys: (kind, payload, children's ids) -> id.
  std::unordered_map<std::string, std::uint64_t> interned;
  // Written under `mu`; read without it by StructuralKeys to validate a node's cached id.
  std::atomic<std::uint64_t> generation{0};
  std::unordered_map<std::string, Entry<Dfa>> terminals;
  std::unordered_map<std::string, Entry<RangeDfa>> products;
  // Alternations whose terminal the lowering could not build directly, with the largest
  // limits that failed (see memo_alternation_refused).
  std::unordered_map<std::string, BuiltUnder> refused;
  std::size_t bytes = 0;
  std::uint64_t hits = 0, misses = 0;

  void make_room(std::size_t need) {
    if (bytes + need <= kAutomatonMemoBytes) return;
    terminals.clear();
    products.clear();
    refused.clear();
    bytes = 0;
  }
  // Entries are keyed by ids: forgetting the ids forgets the entries (a new generation's ids
  // never equal an old one's).
  void clear_all() {
    terminals.clear();
    products.clear();
    refused.clear();
    bytes = 0;
    interned.clear();
    generation.fetch_add(1, std::memory_order_relaxed);
  }
};

Memo& memo() {
  static Memo m;
  return m;
}

}  // namespace

std::uint64_t StructuralKeys::id_of(const Node& n) {
  Memo& m = memo();
  // A cached id is valid while its generation is current. One that went stale between this
  // check and its use only costs sharing: ids of different generations never collide.
  const std::uint64_t cached = n.structural_id.load(std::memory_order_relaxed);
  if (cached != 0 && (cached >> 40) == m.generation.load(std::memory_order_relaxed)) return cached;
  std::string k;
  k.push_back(static_cast<char>('0' + static_cast<int>(n.kind)));
  auto put32 = [&k](std::uint32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  switch (n.kind) {
    case NodeKind::Chars:
      for (const auto& r : n.chars.ranges()) {
        put32(r.lo);
        put32(r.hi);
      }
      break;
    case NodeKind::Repeat:
      put32(n.min);
      put32(n.max);
      break;
    case NodeKind::RuleRef:
      put32(static_cast<std::uint32_t>(n.rule));
      break;
    default:
      break;
  }
  for (const auto& kid : n.kids) {
    const std::uint64_t sub = id_of(*kid);
    k.append(reinterpret_cast<const char*>(&sub), sizeof sub);
  }
  std::uint64_t id;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.interned.size() >= kMaxInternedNodes) m.clear_all();
    auto [slot, fresh] = m.interned.emplace(std::move(k), 0);
    // Never 0 (the "not cached" mark): index + 1.
    if (fresh) slot->second = m.generation.load(std::memory_order_relaxed) << 40 | m.interned.size();
    id = slot->second;
  }
  n.structural_id.store(id, std::memory_order_relaxed);
  return id;
}

const std::string& StructuralKeys::of(const NodePtr& n) {
  auto it = keys_.find(n.get());
  if (it != keys_.end()) return it->second.second;
  const std::uint64_t id = id_of(*n);
  return keys_.emplace(n.get(), std::make_pair(n, std::string(reinterpret_cast<const char*>(&id), sizeof id)))
      .first->second.second;
}

namespace {

template <class T>
std::shared_ptr<const T> get(std::unordered_map<std::string, Entry<T>>& map, const std::string& key,
                             const Limits& limits) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = map.find(key);
  if (it == map.end() || !it->second.under.covered_by(limits)) {
    ++m.misses;
    return nullptr;
  }
  ++m.hits;
  return it->second.value;
}

template <class T>
void put(std::unordered_map<std::string, Entry<T>>& map, const std::string& key, const Limits& limits,
         std::shared_ptr<const T> value, std::size_t bytes) {
  Memo& m = memo();
  bytes += key.size() + 64;
  if (bytes > kAutomatonMemoBytes / 8) return;  // one huge automaton must not flush the rest
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = map.find(key);
  if (it != map.end()) {
    // Keep the entry built under the smaller limits: it is reusable under more of them.
    if (it->second.under.covered_by(limits)) return;
    m.bytes = m.bytes - it->second.bytes + bytes;
    it->second = Entry<T>{std::move(value), BuiltUnder::of(limits), bytes};
    return;
  }
  m.make_room(bytes);
  map.emplace(key, Entry<T>{std::move(value), BuiltUnder::of(limits), bytes});
  m.bytes += bytes;
}

}  // namespace

std::shared_ptr<const Dfa> memo_terminal(const std::string& key, const Limits& limits) {
  return get(memo().terminals, key, limits);
}

void memo_put_terminal(const std::string& key, const Limits& limits, const Dfa& dfa) {
  put(memo().terminals, key, limits, std::make_shared<const Dfa>(dfa), dfa.memory_bytes());
}

bool memo_alternation_refused(const std::string& key, const Limits& limits) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.refused.find(key);
  // Refused under limits at least as large: refused under these too (a build that fails under
  // a limit fails under a smaller one).
  return it != m.refused.end() && limits.max_nfa_states <= it->second.max_nfa_states &&
         limits.max_dfa_states <= it->second.max_dfa_states;
}

void memo_refuse_alternation(const std::string& key, const Limits& limits) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.refused.size() >= kMaxRefusedAlternations) m.refused.clear();
  BuiltUnder& under = m.refused[key];
  under.max_nfa_states = std::max(under.max_nfa_states, limits.max_nfa_states);
  under.max_dfa_states = std::max(under.max_dfa_states, limits.max_dfa_states);
}

std::shared_ptr<const RangeDfa> memo_product(const std::string& key, const Limits& limits) {
  return get(memo().products, key, limits);
}

void memo_put_product(const std::string& key, const Limits& limits, RangeDfa dfa) {
  const std::size_t b = dfa.memory_bytes();
  put(memo().products, key, limits, std::make_shared<const RangeDfa>(std::move(dfa)), b);
}

AutomatonMemoStats automaton_memo_stats() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  return {m.terminals.size() + m.products.size(), m.bytes, m.hits, m.misses};
}

void clear_automaton_memo() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  m.clear_all();
}

}  // namespace corral
