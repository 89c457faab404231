// flat_table.hpp — small open-addressing hash maps for the automaton builders' scratch tables.
//
// Why: the finite builder (finite_dfa.cpp) and the DFA assembly (dfa.cpp) build thousands of
//      small automata per compile (a declared key, an enum string); their memo tables held a
//      few dozen entries each, and std::unordered_map's one heap node per entry (allocation on
//      insert, free on destruction) was about a third of such a build.
// What: FlatMap<K, V, H> maps K (equality-comparable, hashed by H) to V in one flat array of
//      slots, linear probing, the table doubled at half load; an empty slot is marked by its own
//      flag, not by a reserved key. No erase (the builders never remove entries).
// Invariants: the capacity is 0 (nothing inserted yet) or a power of two, more than twice the
//      entry count; every key is in the probe run starting at its hash's home slot (no
//      tombstones: nothing is erased).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace corral {

/// A 64-bit mix (splitmix's finaliser): the default hash of integer keys.
struct MixHash {
  std::size_t operator()(std::uint64_t key) const {
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 29;
    return static_cast<std::size_t>(key);
  }
};

template <class K, class V, class H = MixHash>
class FlatMap {
 public:
  // `initial`: entries to make room for; 0 allocates nothing until the first insert (a table
  // a caller may not need costs nothing).
  explicit FlatMap(std::size_t initial = 16) {
    if (initial == 0) return;
    std::size_t cap = 16;
    while (cap < 2 * initial) cap *= 2;
    slots_.resize(cap);
  }

  /// The value stored under `key`, or nullptr.
  const V* find(const K& key) const {
    if (slots_.empty()) return nullptr;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = H{}(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  /// Stores `value` under `key` unless the key is present; returns (the stored value, whether
  /// it was inserted now), as std::unordered_map::emplace does.
  std::pair<V*, bool> emplace(const K& key, const V& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = H{}(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true, s.key = key, s.value = value;
        ++size_;
        return {&s.value, true};
      }
      if (s.key == key) return {&s.value, false};
    }
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    K key{};
    V value{};
    bool used = false;
  };

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old)
      if (s.used) emplace(s.key, s.value);
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

/// Scratch vectors for recursive builders: lease() hands out a cleared vector (one returned
/// earlier, its capacity kept, or a new one) and takes it back when the lease ends, so a
/// recursion that needs a buffer per level allocates only for its deepest new level. A lease
/// owns its vector while it lives: the pool growing never moves a vector in use.
template <class T>
class VecPool {
 public:
  class Lease {
   public:
    explicit Lease(VecPool& pool) : pool_(pool) {
      if (!pool.free_.empty()) {
        v_ = std::move(pool.free_.back());
        pool.free_.pop_back();
      }
    }
    ~Lease() {
      v_.clear();
      pool_.free_.push_back(std::move(v_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    std::vector<T>& operator*() { return v_; }
    std::vector<T>* operator->() { return &v_; }

   private:
    VecPool& pool_;
    std::vector<T> v_;
  };
  Lease lease() { return Lease(*this); }

 private:
  std::vector<std::vector<T>> free_;
};

}  // namespace corral
