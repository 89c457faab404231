// test_count_summary.cpp — short parts derived from the counted-string summary
// (count_summary.hpp): the relation is proven only where it holds, with the right bounds, and
// masks assembled from derived parts equal the plain whole-trie walk and accept_token at every
// step of random walks (both directions), on a vocabulary whose tokens count characters in
// every way J distinguishes (ASCII, multi-byte UTF-8, escapes, partial characters, closing
// quotes followed by structure, junk).
#include <random>
#include <string>
#include <vector>

#include "compile.hpp"
#include "count_summary.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> counting_vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  const std::string alpha = "abcxyz\"";
  for (char x : alpha)
    for (char y : alpha) {
      toks.push_back(std::string{x, y});
      for (char z : alpha) toks.push_back(std::string{x, y, z});
    }
  for (const char* t : {"\", \"", "\"]", "\",", "ab\"", "abc\",", "aaaa\"]", "\\n", "\\u00e9", "\\u00", "\\",
                        "\xc3\xa9", "\xc3\xa9\xc3\xa9", "\xc3", "\xa9", "a\xc3\xa9", "\xe6\xbc\xa2", "\xe6\xbc",
                        "\xf0\x9f\x98\x80", "\\\"", "\\\\", "a\\nb", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "abcdefg", "aaaaaaa\"", "zzzzzz\", \""})
    toks.push_back(t);
  // Longer than the share depth (8): walked per state, beside the derived short part.
  for (const char* t : {"abcdefghijklmnop", "aaaaaaaaaaaaaaaaaaaaaa\"", "zzzzzzzzzzzz\", \"", "qqqqqqqqqqqq\"]"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n + 2);
}

// Walks compared against the plain path; returns how many short parts were derived.
std::uint64_t check_walks(const std::shared_ptr<const Vocabulary>& vocab, const std::string& grammar, unsigned seed) {
  Limits shared_limits, plain_limits;
  shared_limits.mask_share_min_states = 1;
  plain_limits.mask_share_min_states = 0xFFFFFFFFu;
  auto fast = compile_grammar(grammar, "root", vocab, shared_limits);
  auto plain = compile_grammar(grammar, "root", vocab, plain_limits);
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 16; ++walk) {
    Matcher a(fast), b(plain);
    for (int step = 0; step < 80 && !a.is_terminated(); ++step) {
      std::vector<std::int32_t> x = corral_test::allowed(a), y = corral_test::allowed(b);
      EXPECT(x == y);
      EXPECT(!x.empty());
      std::vector<bool> in(vocab->width(), false);
      for (auto t : x) in[static_cast<std::size_t>(t)] = true;
      for (std::uint32_t t = 0; t < vocab->width(); ++t) {
        Matcher c = a;
        EXPECT_EQ(c.accept_token(static_cast<std::int32_t>(t)), static_cast<bool>(in[t]));
      }
      // Single characters mostly, so walks visit every position near the end of a count.
      std::int32_t pick = x[rng() % x.size()];
      if (rng() % 4 != 0)
        for (int tries = 0; tries < 8 && vocab->bytes(pick).size() > 1; ++tries) pick = x[rng() % x.size()];
      EXPECT(a.accept_token(pick));
      EXPECT(b.accept_token(pick));
    }
  }
  EXPECT_EQ(plain->summary_entries(), 0u);
  return fast->summary_entries();
}

std::vector<std::int32_t> positions(const Dfa& d, int n) {
  std::vector<std::int32_t> pos;
  std::int32_t s = d.next(d.start(), '"');
  for (int k = 0; k <= n; ++k) {
    pos.push_back(s);
    s = d.next(s, 'a');
  }
  return pos;
}

}  // namespace

TEST(count_summary_counts_characters) {
  auto vocab = counting_vocab();
  CountSummary sum(*vocab, 8);
  auto id = [&](const std::string& s) {
    for (std::uint32_t i = 0; i < vocab->size(); ++i)
      if (vocab->bytes(static_cast<std::int32_t>(i)) == s) return static_cast<std::int32_t>(i);
    return -1;
  };
  auto in = [&](const std::uint32_t* bits, const std::string& s) {
    const std::int32_t t = id(s);
    return (bits[static_cast<std::size_t>(t) >> 5] >> (t & 31) & 1u) != 0;
  };
  EXPECT(in(sum.len_le(1), "\\u00e9"));      // one escaped character
  EXPECT(in(sum.len_le(2), "\xc3\xa9\xc3\xa9"));  // two two-byte characters
  EXPECT(!in(sum.len_le(1), "\xc3\xa9\xc3\xa9"));
  EXPECT(in(sum.len_le(3), "a\\nb") && !in(sum.len_le(2), "a\\nb"));
  EXPECT(in(sum.len_le(1), "\xe6\xbc"));      // a started character counts
  EXPECT(!in(sum.len_le(8), "\xa9"));         // junk: a continuation byte at a boundary
  EXPECT(in(sum.closed_lt(3), "ab\"") && !in(sum.closed_lt(2), "ab\""));
  EXPECT(in(sum.len_le(2), "ab\"") && !in(sum.len_le(1), "ab\""));
  EXPECT(!in(sum.closed_lt(8), "\\\""));      // an escaped quote does not close
  EXPECT(in(sum.len_le(1), "\\ud83d\\ude00"));  // a surrogate pair is one character
  EXPECT(in(sum.len_le(1), "\\ud83d") && in(sum.len_le(1), "\\ude00"));
}

TEST(counted_relation_proven_with_bounds) {
  auto vocab = counting_vocab();
  auto g = compile_grammar(R"G(root ::= "\"" [a-z]{3,40} "\"")G", "root", vocab, Limits{});
  const Dfa& d = *g->dfas()[0];
  const std::vector<std::int32_t> pos = positions(d, 40);
  CountBounds k;
  // Two characters left, against a state that may still close and has more than 8 left.
  EXPECT(prove_counted(d, pos[38], d, pos[10], 8, 1 << 14, k));
  EXPECT_EQ(k.r, 2u);
  EXPECT_EQ(k.lo, 0u);
  // The first position: three characters are needed before the quote.
  EXPECT(prove_counted(d, pos[0], d, pos[10], 8, 1 << 14, k));
  EXPECT_EQ(k.lo, 3u);
  EXPECT_EQ(k.r, 8u);
  // Not the other way round: the anchor must allow everything the state allows.
  EXPECT(!prove_counted(d, pos[10], d, pos[0], 8, 1 << 14, k));
  EXPECT(!prove_counted(d, pos[10], d, pos[38], 8, 1 << 14, k));
  // A state inside no counted string of that shape: a bounded product gives up or refuses.
  auto h = compile_grammar(R"G(root ::= "\"" ([a-z] | "ab\"")* "\"" )G", "root", vocab, Limits{});
  const Dfa& e = *h->dfas()[0];
  EXPECT(!prove_counted(d, pos[38], e, e.next(e.start(), '"'), 8, 1 << 14, k));
}

TEST(summary_masks_equal_plain_masks_counted_string) {
  auto vocab = counting_vocab();
  EXPECT(check_walks(vocab, R"G(root ::= "[\"" [a-z]{1,30} "\", \"" [a-z"]{0,20} "\"]")G", 3) > 0);
}

TEST(summary_masks_equal_plain_masks_json_string_with_min_length) {
  // A JSON string interior (escapes, multi-byte characters) counted from 4 to 24 characters,
  // followed by structure, so closing tokens split into groups the parser checks.
  auto vocab = counting_vocab();
  const std::string g =
      R"G(root ::= "[" item ("," " "? item)* "]"
item ::= "\"" ([a-z\u00e9\u6f22] | "\\n" | "\\\"" | "\\u00" [0-9a-f] [0-9a-f] | "\\ud83d\\ude0" [0-9a-f]){4,24} "\"" | root)G";
  EXPECT(check_walks(vocab, g, 4) > 0);
}
