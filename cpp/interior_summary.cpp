// interior_summary.cpp — see interior_summary.hpp.
#include "interior_summary.hpp"


namespace corral {

namespace {
// J's states: the boundary, after a backslash, and inside a UTF-8 character (how many
// continuation bytes are left, with the narrower second-byte ranges of E0, ED, F0 and F4).
enum : std::int32_t { kB = 0, kEsc, kC1, kC2, kC3, kE0, kED, kF0, kF4 };
bool cont(std::uint8_t b, std::uint8_t lo, std::uint8_t hi) { return b >= lo && b <= hi; }
}  // namespace

std::int32_t InteriorSummary::j_next(std::int32_t j, std::uint8_t b) {
  switch (j) {
    case kB:
      if (b == '"' || b < 0x20 || b == 0x7F) return -1;
      if (b == '\\') return kEsc;
      if (b < 0x80) return kB;
      if (b >= 0xC2 && b <= 0xDF) return kC1;
      if (b == 0xE0) return kE0;
      if (b == 0xED) return kED;
      if (b >= 0xE1 && b <= 0xEF) return kC2;
      if (b == 0xF0) return kF0;
      if (b >= 0xF1 && b <= 0xF3) return kC3;
      if (b == 0xF4) return kF4;
      return -1;
    case kEsc:
      switch (b) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': return kB;
        default: return -1;  // \u (and anything else) is walked
      }
    case kC1: return cont(b, 0x80, 0xBF) ? kB : -1;
    case kC2: return cont(b, 0x80, 0xBF) ? kC1 : -1;
    case kC3: return cont(b, 0x80, 0xBF) ? kC2 : -1;
    case kE0: return cont(b, 0xA0, 0xBF) ? kC1 : -1;
    case kED: return cont(b, 0x80, 0x9F) ? kC1 : -1;
    case kF0: return cont(b, 0x90, 0xBF) ? kC2 : -1;
    case kF4: return cont(b, 0x80, 0x8F) ? kC2 : -1;
    default: return -1;
  }
}

InteriorSummary::InteriorSummary(const Vocabulary& vocab) {
  clean_bits_.assign(vocab.mask_words(), 0);
  const TokenTrie& trie = vocab.trie();
  const std::uint32_t n = trie.num_nodes();
  // unclean[k]: tokens that are not clean at trie nodes before k (preorder), so a subtree
  // [i, subtree_end(i)) is clean when the count does not change across it.
  std::vector<std::uint32_t> unclean(static_cast<std::size_t>(n) + 1, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t bad = 0;
    for (const std::int32_t* t = trie.tokens_begin(i); t != trie.tokens_end(i); ++t) {
      std::int32_t j = kBoundary;
      for (unsigned char c : vocab.bytes(*t)) {
        j = j_next(j, c);
        if (j < 0) break;
      }
      if (j < 0) {
        ++bad;
      } else {
        clean_bits_[static_cast<std::size_t>(*t) >> 5] |= 1u << (*t & 31);
        ++clean_tokens_;
      }
    }
    unclean[i + 1] = unclean[i] + bad;
  }
  clean_subtree_.assign(n, 0);
  for (std::uint32_t i = 1; i < n; ++i) clean_subtree_[i] = unclean[trie.subtree_end(i)] == unclean[i];
}

bool interior_universal(const Dfa& dfa, std::int32_t state, std::size_t max_pairs,
                        std::vector<std::int32_t>* boundary_states, std::int32_t start_j) {
  if (state < 0 || start_j < 0) return false;
  // Pairs (J state, automaton state), searched breadth first; `seen` is dense (J has 9 states).
  constexpr std::size_t kJStates = 9;
  const std::size_t n = dfa.num_states();
  std::vector<std::uint8_t> seen(kJStates * n, 0);
  std::vector<std::pair<std::int32_t, std::int32_t>> todo{{start_j, state}};
  seen[static_cast<std::size_t>(start_j) * n + static_cast<std::size_t>(state)] = 1;
  for (std::size_t next = 0; next < todo.size(); ++next) {
    const auto [j, s] = todo[next];
    for (unsigned b = 0; b < 256; ++b) {
      const std::int32_t nj = InteriorSummary::j_next(j, static_cast<std::uint8_t>(b));
      if (nj < 0) continue;
      const std::int32_t ns = dfa.next(s, static_cast<std::uint8_t>(b));
      if (ns < 0) return false;  // a byte string J reads that kills the automaton
      std::uint8_t& mark = seen[static_cast<std::size_t>(nj) * n + static_cast<std::size_t>(ns)];
      if (!mark) {
        mark = 1;
        if (todo.size() >= max_pairs) return false;
        todo.emplace_back(nj, ns);
      }
    }
  }
  if (boundary_states) {
    // Every pair searched is universal too (what it reaches was searched): its states at a
    // boundary are answers for later queries.
    for (const auto& [j, s] : todo)
      if (j == InteriorSummary::kBoundary) boundary_states->push_back(s);
  }
  return true;
}

}  // namespace corral
