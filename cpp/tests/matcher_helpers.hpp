// matcher_helpers.hpp — helpers shared by the matcher and slot unit tests.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "compiled_grammar.hpp"
#include "matcher.hpp"

namespace corral_test {

/// The token ids the matcher's next-token bitmask allows, in increasing order.
inline std::vector<std::int32_t> allowed(corral::Matcher& m) {
  const corral::Vocabulary& v = m.compiled().vocab();
  std::vector<std::int32_t> row(v.mask_words());
  m.fill_next_token_bitmask(row.data());
  std::vector<std::int32_t> out;
  for (std::uint32_t t = 0; t < v.width(); ++t)
    if (static_cast<std::uint32_t>(row[t >> 5]) >> (t & 31) & 1u) out.push_back(static_cast<std::int32_t>(t));
  return out;
}

/// The token ids the parser accepts when each is tried on its own copy of `m`, in increasing
/// order: the reference a mask must equal (both directions: nothing allowed that the parser
/// refuses, nothing refused that it accepts).
inline std::vector<std::int32_t> accepted_one_by_one(const corral::Matcher& m) {
  std::vector<std::int32_t> out;
  for (std::uint32_t t = 0; t < m.compiled().vocab().size(); ++t) {
    corral::Matcher c = m;
    if (c.accept_token(static_cast<std::int32_t>(t))) out.push_back(static_cast<std::int32_t>(t));
  }
  return out;
}

/// Seeded random walks stepping a matcher of `fast` and one of `ref` with the same tokens:
/// false unless at every step both allow the same tokens, the parser accepts exactly those
/// (accepted_one_by_one), some token is allowed and both accept the one picked.
inline bool walks_agree(const std::shared_ptr<const corral::CompiledGrammar>& fast,
                        const std::shared_ptr<const corral::CompiledGrammar>& ref, unsigned seed, int walks,
                        int steps) {
  std::mt19937 rng(seed);
  for (int walk = 0; walk < walks; ++walk) {
    corral::Matcher a(fast), b(ref);
    for (int step = 0; step < steps && !a.is_terminated(); ++step) {
      const std::vector<std::int32_t> x = allowed(a);
      if (x.empty() || x != allowed(b) || x != accepted_one_by_one(a)) return false;
      const std::int32_t pick = x[rng() % x.size()];
      if (!a.accept_token(pick) || !b.accept_token(pick)) return false;
    }
  }
  return true;
}

}  // namespace corral_test
