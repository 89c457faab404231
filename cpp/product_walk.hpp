// product_walk.hpp — the mask walk's product states for a frontier of several elements.
//
// Invariant: state id p stands for one tuple of per-element DFA states (-1 where an element is
// dead), the tuple of all -1 is never interned (next() returns -1 for it), and next(p, b) is the
// id of the tuple that stepping every element of p's tuple by byte b gives — the same tuples,
// node for node, as stepping each element separately, so an entry walked this way is bit for
// bit the plain walk's. acc[p] says whether some element of p that something can follow is
// accepting (where the walk splits a group).
// Why: a frontier inside a value is often several broad string automata at once (anyOf
// branches, a declared key beside "none of the declared keys", 24-49 key automata after `{"`),
// and stepping each of them at each of the trie's few hundred thousand nodes made those walks
// m times a single element's (5-27 ms). The distinct tuples are few (they follow the token
// prefixes' bytes, and most elements die within a byte or two), so the table is filled once
// per (tuple, byte class) and every later node is one lookup.
// Bounds: at most kMaxProductCells table cells (then next() answers kOverflow and the caller
// walks element by element instead); the table's rows are the elements' joint byte classes wide.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dfa.hpp"

namespace corral {

/// compute_entry's template tag for the product walk (an impossible element count).
constexpr std::size_t kProductWalk = ~std::size_t{0};

struct ProductWalk {
  static constexpr std::int32_t kUnknown = -2;
  static constexpr std::int32_t kOverflow = -3;
  static constexpr std::size_t kMaxProductCells = std::size_t{1} << 22;  // 16 MB of table

  std::vector<std::uint8_t> acc;  // per product state

  /// Start: the elements' automata, whether each is followable, and their root states (the
  /// root tuple becomes state 0).
  void init(const std::vector<const Dfa*>& dfas, const std::vector<std::uint8_t>& followable,
            const std::int32_t* root_states) {
    dfas_ = &dfas;
    follow_ = &followable;
    m_ = dfas.size();
    // Joint byte classes: bytes every element's automaton maps to the same class, refined one
    // element at a time (ids of (joint class so far, this element's class) pairs).
    std::vector<std::int32_t> remap;
    std::size_t nj = 1;
    for (std::size_t e = 0; e < m_; ++e) {
      const std::size_t nc = dfas[e]->num_classes();
      remap.assign(nj * nc, -1);
      std::int32_t nn = 0;
      for (int b = 0; b < 256; ++b) {
        std::int32_t& r = remap[jclass_[b] * nc + dfas[e]->byte_class(static_cast<std::uint8_t>(b))];
        if (r < 0) r = nn++;
        jclass_[b] = static_cast<std::uint8_t>(r);
      }
      nj = static_cast<std::size_t>(nn);
    }
    width_ = nj;
    intern(std::vector<std::int32_t>(root_states, root_states + m_));
  }

  /// Product state after byte b from state p (-1: every element dead; kOverflow: table full).
  std::int32_t next(std::int32_t p, std::uint8_t b) {
    const std::size_t cell = static_cast<std::size_t>(p) * width_ + jclass_[b];
    const std::int32_t known = table_[cell];
    if (known != kUnknown) return known;
    std::vector<std::int32_t> t(m_);
    bool live = false;
    const std::int32_t* from = &tuples_[static_cast<std::size_t>(p) * m_];
    for (std::size_t e = 0; e < m_; ++e) {
      t[e] = from[e] < 0 ? -1 : (*dfas_)[e]->next(from[e], b);
      live = live || t[e] >= 0;
    }
    const std::int32_t q = live ? intern(t) : -1;
    if (q == kOverflow) return q;
    table_[cell] = q;  // after intern: it may have grown table_
    return q;
  }

  /// The tuple of product state p.
  std::vector<std::int32_t> tuple(std::int32_t p) const {
    const auto* t = &tuples_[static_cast<std::size_t>(p) * m_];
    return std::vector<std::int32_t>(t, t + m_);
  }

 private:
  template <class T>
  struct VecHash {
    std::size_t operator()(const std::vector<T>& v) const {
      std::uint64_t h = 0xCBF29CE484222325ull;
      for (T x : v) h = (h ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(x))) * 0x100000001B3ull;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };

  std::int32_t intern(const std::vector<std::int32_t>& t) {
    auto it = index_.find(t);
    if (it != index_.end()) return it->second;
    if (table_.size() + width_ > kMaxProductCells) return kOverflow;
    const auto id = static_cast<std::int32_t>(acc.size());
    bool a = false;
    for (std::size_t e = 0; e < m_; ++e)
      a = a || (t[e] >= 0 && (*follow_)[e] && (*dfas_)[e]->accepting(t[e]));
    acc.push_back(a ? 1 : 0);
    tuples_.insert(tuples_.end(), t.begin(), t.end());
    table_.resize(table_.size() + width_, kUnknown);
    index_.emplace(t, id);
    return id;
  }

  const std::vector<const Dfa*>* dfas_ = nullptr;
  const std::vector<std::uint8_t>* follow_ = nullptr;
  std::size_t m_ = 0, width_ = 0;
  std::uint8_t jclass_[256] = {};
  std::vector<std::int32_t> tuples_;  // m_ per product state
  std::vector<std::int32_t> table_;   // width_ per product state
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, VecHash<std::int32_t>> index_;
};

}  // namespace corral
