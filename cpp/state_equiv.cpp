// state_equiv.cpp — see state_equiv.hpp for the relation and why it is safe for mask entries.
#include "state_equiv.hpp"

namespace corral {

BoundedEquivalence::BoundedEquivalence(const Dfa& dfa, std::uint32_t depth)
    : dfa_(dfa), depth_(depth), ids_(depth + 1), intern_(depth + 1) {}

std::size_t BoundedEquivalence::VecHash::operator()(const std::vector<std::int32_t>& v) const {
  std::uint64_t h = 0xCBF29CE484222325ull ^ v.size();
  for (std::int32_t x : v) {
    h ^= static_cast<std::uint32_t>(x);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return static_cast<std::size_t>(h);
}

std::int32_t BoundedEquivalence::class_of(std::int32_t s, std::uint32_t level) {
  std::vector<std::int32_t>& ids = ids_[level];
  if (ids.empty()) {
    ids.assign(dfa_.num_states(), -1);
    memory_ += ids.size() * sizeof(std::int32_t);
  }
  const auto si = static_cast<std::size_t>(s);
  if (ids[si] >= 0) return ids[si];
  // The tuple identifying s's class at this level: an accepting state is its own class; any
  // other state is its successors' classes one level down (level 0: one class for them all).
  std::vector<std::int32_t> tuple;
  if (dfa_.accepting(s)) {
    tuple = {-2, s};
  } else if (level > 0) {
    const std::uint32_t nc = dfa_.num_classes();
    tuple.resize(nc);
    for (std::uint32_t c = 0; c < nc; ++c) {
      const std::int32_t t = dfa_.next_by_class(s, c);
      tuple[c] = t < 0 ? -1 : class_of(t, level - 1);  // recursion depth <= D + 1
    }
  }
  auto& table = intern_[level];
  auto it = table.find(tuple);
  std::int32_t id;
  if (it != table.end()) {
    id = it->second;
  } else {
    id = static_cast<std::int32_t>(table.size());
    memory_ += tuple.size() * sizeof(std::int32_t) + 64;
    table.emplace(std::move(tuple), id);
  }
  ids_[level][si] = id;
  return id;
}

std::int32_t BoundedEquivalence::representative(std::int32_t s) {
  const std::int32_t c = class_of(s, depth_);
  return rep_.emplace(c, s).first->second;
}

}  // namespace corral
