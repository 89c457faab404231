// automaton_memo.cpp — the process-wide automaton memo (see automaton_memo.hpp).
#include "automaton_memo.hpp"

#include <atomic>
#include <cstring>
#include <string_view>
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

// The hash-consing table of StructuralKeys: (kind, payload, children's ids) -> id. Keys live
// end to end in one arena and slots hold (hash, id, where the key is), so interning a node
// allocates nothing but the table's occasional growth (a std::unordered_map<std::string, id>
// made two allocations per node and was a tenth of the lowering). Linear probing; nothing is
// erased (the table is only emptied whole); the capacity is a power of two, more than twice
// the entry count.
class InternTable {
 public:
  // The id of `key` (hashed to `hash`), or 0 when absent.
  std::uint64_t find(std::string_view key, std::uint64_t hash) const {
    if (slots_.empty()) return 0;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id == 0) return 0;
      if (s.hash == hash && s.len == key.size() && arena_.compare(s.off, s.len, key) == 0) return s.id;
    }
  }
  // Adds `key` (absent) with `id` (not 0).
  void add(std::string_view key, std::uint64_t hash, std::uint64_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash & mask;
    while (slots_[i].id != 0) i = (i + 1) & mask;
    slots_[i] = Slot{hash, id, arena_.size(), key.size()};
    arena_.append(key);
    ++size_;
  }
  std::size_t size() const { return size_; }
  std::size_t arena_bytes() const { return arena_.size(); }
  void clear() {
    std::vector<Slot>().swap(slots_);
    std::string().swap(arena_);
    size_ = 0;
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint64_t id = 0;  // 0: empty
    std::size_t off = 0, len = 0;
  };
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 1024 : slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id == 0) continue;
      std::size_t i = s.hash & mask;
      while (slots_[i].id != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t size_ = 0;
};

// A 64-bit hash of a key's bytes (8 at a time: keys are mostly ids and code point pairs).
std::uint64_t key_hash(std::string_view k) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ k.size();
  std::size_t i = 0;
  for (; i + 8 <= k.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, k.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, k.data() + i, k.size() - i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

constexpr std::size_t kMaxInternedBytes = std::size_t{64} << 20;

struct Memo {
  std::mutex mu;
  InternTable interned;
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
  // The key is written at the end of a per-thread buffer; the children's calls write theirs
  // after it and cut the buffer back before returning, so this node's key stays contiguous.
  thread_local std::string buf;
  const std::size_t start = buf.size();
  buf.push_back(static_cast<char>('0' + static_cast<int>(n.kind)));
  auto put32 = [](std::uint32_t v) { buf.append(reinterpret_cast<const char*>(&v), sizeof v); };
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
    buf.append(reinterpret_cast<const char*>(&sub), sizeof sub);
  }
  const std::string_view k(buf.data() + start, buf.size() - start);
  const std::uint64_t hash = key_hash(k);
  std::uint64_t id;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    id = m.interned.find(k, hash);
    if (id == 0) {
      if (m.interned.size() >= kMaxInternedNodes || m.interned.arena_bytes() + k.size() > kMaxInternedBytes)
        m.clear_all();
      // Never 0 (the "not cached" mark): index + 1.
      id = m.generation.load(std::memory_order_relaxed) << 40 | (m.interned.size() + 1);
      m.interned.add(k, hash, id);
    }
  }
  buf.resize(start);
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
