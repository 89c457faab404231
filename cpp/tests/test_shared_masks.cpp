// test_shared_masks.cpp — masks assembled from shared entries (≈_D classes of DFA states,
// compiled_grammar.hpp; the cross-grammar pool, mask_pool.hpp) equal the plain whole-trie walk, and both equal "accept_token works",
// at every step of random walks; the vocabulary has tokens longer than its share depth so the
// long part is exercised, and tokens that cross terminal ends so shared groups are.
#include <random>
#include <string>
#include <vector>

#include "compile.hpp"
#include "matcher.hpp"
#include "mask_pool.hpp"
#include "matcher_helpers.hpp"
#include "state_equiv.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> long_token_vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  const std::string alpha = "abcdefghijklmnopqrstuvwxyz\"";
  for (char x : alpha)
    for (char y : alpha) {
      toks.push_back(std::string{x, y});
      if (x == 'x') for (char z : alpha) toks.push_back(std::string{x, y, z});
    }
  for (const char* t : {"\", \"", "\"]", "\",", "ab\"", "12", "345", "\xc3\xa9", "\xc3"})
    toks.push_back(t);
  // Longer than the share depth (8): inside a counted string, and crossing its end.
  for (const char* t : {"abcdefghijklmnop", "aaaaaaaaaaaaaaaaaaaaaa\"", "zzzzzzzzzzzz\", \"", "qqqqqqqqqqqq\"]"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n + 2);
}

void check_walks(const std::shared_ptr<const Vocabulary>& vocab, const std::string& grammar, unsigned seed) {
  Limits shared_limits, plain_limits;
  shared_limits.mask_share_min_states = 1;
  plain_limits.mask_share_min_states = 0xFFFFFFFFu;
  auto fast = compile_grammar(grammar, "root", vocab, shared_limits);
  auto plain = compile_grammar(grammar, "root", vocab, plain_limits);
  // A second compile finds the first one's entries in the vocabulary's pool (mask_pool.hpp).
  auto pooled = compile_grammar(grammar, "root", vocab, Limits{});
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 12; ++walk) {
    Matcher a(fast), b(plain), c2(pooled);
    for (int step = 0; step < 60 && !a.is_terminated(); ++step) {
      std::vector<std::int32_t> x = corral_test::allowed(a), y = corral_test::allowed(b);
      EXPECT(x == y);
      EXPECT(corral_test::allowed(c2) == y);
      EXPECT(!x.empty());
      std::vector<bool> in(vocab->width(), false);
      for (auto t : x) in[static_cast<std::size_t>(t)] = true;
      for (std::uint32_t t = 0; t < vocab->width(); ++t) {
        Matcher c = a;
        EXPECT_EQ(c.accept_token(static_cast<std::int32_t>(t)), static_cast<bool>(in[t]));
      }
      // Prefer long tokens now and then, so walks reach the ends of counted strings.
      std::int32_t pick = x[rng() % x.size()];
      if (rng() % 3 == 0)
        for (auto t : x)
          if (vocab->bytes(t).size() > vocab->bytes(pick).size()) pick = t;
      EXPECT(a.accept_token(pick));
      EXPECT(b.accept_token(pick));
      EXPECT(c2.accept_token(pick));
    }
  }
  // Sharing happened: fewer walked classes than keyed entries; the plain grammar shares none.
  EXPECT(fast->shared_entries() > 0);
  EXPECT(fast->shared_entries() < fast->cache_entries());
  EXPECT_EQ(plain->shared_entries(), 0u);
}

}  // namespace

TEST(share_depth_from_vocabulary_summary) {
  auto vocab = long_token_vocab();
  EXPECT_EQ(vocab->share_depth(), 8u);  // the long part (tokens of 9+ bytes) is exercised below
  EXPECT(vocab->trie().max_depth() > vocab->share_depth());
  EXPECT_EQ(vocab->trie().max_token_depth(0), vocab->trie().max_depth());
}

TEST(bounded_equivalence_merges_counted_positions) {
  auto vocab = long_token_vocab();
  auto g = compile_grammar(R"G(root ::= "\"" [a-z]{1,40} "\"")G", "root", vocab, Limits{});
  const Dfa& d = *g->dfas()[0];
  BoundedEquivalence eq(d, 4);
  // Positions 1..36 of the string (at least 4 characters left) are one class; the last ones
  // and the accepting state are their own.
  std::int32_t s = d.next(d.start(), '"');
  std::vector<std::int32_t> pos;
  for (int k = 0; k <= 40; ++k) {
    pos.push_back(s);
    s = d.next(s, 'a');
  }
  EXPECT(eq.representative(pos[1]) == eq.representative(pos[30]));
  EXPECT(eq.representative(pos[36]) == eq.representative(pos[30]));
  EXPECT(eq.representative(pos[37]) != eq.representative(pos[30]));
  EXPECT(eq.representative(pos[0]) != eq.representative(pos[1]));  // minLength 1: `"` dead there
  const std::int32_t acc = d.next(pos[5], '"');
  EXPECT(d.accepting(acc));
  EXPECT_EQ(eq.representative(acc), acc);
}

TEST(shared_masks_equal_plain_masks_counted_terminal) {
  check_walks(long_token_vocab(), R"G(root ::= "[\"" [a-z]{1,40} "\", \"" [a-z"]{0,30} "\"]")G", 1);
}

TEST(shared_masks_equal_plain_masks_with_parser_groups) {
  // The string is a terminal of its own (the list recurses), so tokens crossing its end split
  // into groups checked by the parser: shared groups must give the same masks.
  check_walks(long_token_vocab(),
              R"G(root ::= "[" item ("," " "? item)* "]"
item ::= "\"" [a-z]{2,30} "\"" | root)G", 2);
}

TEST(mask_pool_past_its_budget_evicts_a_few_entries_not_all) {
  // Entries claiming a quarter of the budget each: past four, each new entry evicts one other,
  // so the pool stays full and the newest entry is always found (emptying the whole pool at the
  // budget stalled one mask for tens of milliseconds on a 262k vocabulary).
  MaskPool pool;
  const std::size_t quarter = MaskPool::kMaxBytes / 4;
  for (std::uint64_t i = 0; i < 12; ++i) {
    auto e = std::make_shared<FrontierEntry>();
    e->memory_bytes = quarter;
    pool.put({i, 7}, e);
    EXPECT(pool.get({i, 7}) != nullptr);
    EXPECT_EQ(pool.entries(), static_cast<std::size_t>(std::min<std::uint64_t>(i + 1, 4)));
  }
  // One entry over the whole budget is not kept, and evicts nothing.
  auto huge = std::make_shared<FrontierEntry>();
  huge->memory_bytes = MaskPool::kMaxBytes + 1;
  pool.put({99, 7}, huge);
  EXPECT(pool.get({99, 7}) == nullptr);
  EXPECT_EQ(pool.entries(), std::size_t{4});
}
