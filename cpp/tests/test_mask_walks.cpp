// test_mask_walks.cpp — the mask walk's fast paths (product states for frontiers of several
// elements, product_walk.hpp; entries derived from a nearby walked frontier, delta_walk.cpp)
// give exactly the reference walk's masks (mask_share_min_states at its maximum), and the
// parser agrees with every bit (both directions), at every step of seeded random walks over
// keys whose frontiers hold several broad string automata at once.
#include <string>
#include <vector>

#include "compile.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> key_vocab() {
  std::vector<std::string> toks;
  for (int b = 1; b < 128; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\":", "\":1", "\": 1", ",\"", "{\"", "\"ab", "ab", "cd", "abc", "cdx", "\"cd", "x\":",
                        "ab\":", "cd\": {", "}}", "1}", "1,", "\xc3\xa9", "\xc3", "\xa9", "zz", "zzzz\":", "a b"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n + 2);
}

}  // namespace

TEST(fast_mask_walks_equal_reference_walks) {
  // The interior skip (interior_summary.hpp) would take these frontiers instead of the delta
  // walk: off here, so the delta walk is what is compared (test_interior_summary.cpp has it on).
  CompiledGrammar::set_interior_skip(false);
  auto vocab = key_vocab();
  // Three key automata with different continuations, so each is its own terminal: a frontier
  // inside a key holds two or three of them (every one broad: [^"] takes most first bytes).
  const std::string g = R"G(root ::= "{" item ("," item)* "}"
item ::= "\"" [^"]* "\"" ":" " "? val | "\"ab" [^"]* "\"" ":" " "? "1" | "\"cd" [^"]* "\"" ": " root
val ::= "1" | root)G";
  Limits fast_limits, ref_limits;
  ref_limits.mask_share_min_states = 0xFFFFFFFFu;
  auto fast = compile_grammar(g, "root", vocab, fast_limits);
  auto ref = compile_grammar(g, "root", vocab, ref_limits);
  EXPECT(corral_test::walks_agree(fast, ref, 11, 40, 40));
  CompiledGrammar::set_interior_skip(true);
  EXPECT(fast->product_walks() > 0);
  EXPECT(fast->delta_entries() > 0);
  EXPECT_EQ(fast->interior_walks(), 0u);
  EXPECT_EQ(ref->product_walks(), 0u);
  EXPECT_EQ(ref->delta_entries(), 0u);
}

TEST(set_token_bits_equals_the_token_loop) {
  // Nodes with no token, one token and several (ids with the same bytes), in a trie whose last
  // node in preorder is a leaf and one that is empty: set_token_bits sets exactly the bits the
  // plain loop over tokens_begin..tokens_end sets, node by node.
  std::vector<std::string> bytes{"a", "ab", "abc", "abd", "b", "ab", "abc", "abc", "zq", "\xff", "x"};
  std::vector<std::pair<std::string_view, std::int32_t>> entries;
  for (std::size_t i = 0; i < bytes.size(); ++i) entries.emplace_back(bytes[i], static_cast<std::int32_t>(i * 7 + 3));
  for (const auto& trie : {TokenTrie::build(entries), TokenTrie::build({})}) {
    std::size_t multi = 0;
    for (std::uint32_t n = 0; n < trie.num_nodes(); ++n) {
      std::vector<std::uint32_t> a(4, 0), b(4, 0);
      trie.set_token_bits(n, a.data());
      for (const std::int32_t* t = trie.tokens_begin(n); t != trie.tokens_end(n); ++t) b[static_cast<std::size_t>(*t) >> 5] |= 1u << (*t & 31);
      EXPECT(a == b);
      multi += trie.tokens_end(n) - trie.tokens_begin(n) > 1 ? 1 : 0;
    }
    EXPECT(trie.num_nodes() == 1 || multi == 2);  // "ab" twice, "abc" three times
  }
}
