// test_interior_summary.cpp — the string-interior summary (interior_summary.hpp): J reads the
// inside of a JSON string and nothing else, a clean subtree holds only clean tokens, a state is
// interior-universal exactly when no byte string J reads kills its automaton, and walks that
// skip the clean subtrees give the reference walk's masks, which the parser confirms bit by bit.
#include <string>
#include <vector>

#include "compile.hpp"
#include "interior_summary.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

bool j_reads(const std::string& s) {
  std::int32_t j = InteriorSummary::kBoundary;
  for (unsigned char c : s) {
    j = InteriorSummary::j_next(j, c);
    if (j < 0) return false;
  }
  return true;
}

std::shared_ptr<const Vocabulary> mixed_vocab() {
  std::vector<std::string> toks;
  for (int b = 1; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\":", "\": 1", ",\"", "{\"", "ab", "abc", "abcd", "ab\"", "ab\\n", "ab\\u00e9", "\xc3\xa9",
                        "\xc3\xa9x", "\xe2\x82\xac", "\xe2\x82", "\xed\xa0\x80", "\xf0\x9f\x98\x80", "x\ty", "a\"b"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n + 2);
}

}  // namespace

TEST(interior_automaton_reads_string_insides_only) {
  for (const char* ok : {"abc", "a b", "\\n", "\\\"", "\\", "\xc3\xa9", "\xc3", "\xe2\x82", "\xf0\x9f\x98\x80", "~"})
    EXPECT(j_reads(ok));
  // A quote, a raw control, DEL, \u (walked, never clean), a lone continuation byte, a
  // surrogate, an overlong or out-of-range lead byte.
  for (const char* bad : {"a\"", "x\ty", "\x7f", "\\u00e9", "\\x", "\xa9", "\xed\xa0\x80", "\xc0\x80", "\xf5\x80"})
    EXPECT(!j_reads(bad));
}

TEST(clean_subtrees_hold_only_clean_tokens) {
  auto vocab = mixed_vocab();
  InteriorSummary summary(*vocab);
  const TokenTrie& trie = vocab->trie();
  std::size_t clean = 0;
  for (std::uint32_t i = 0; i < trie.num_nodes(); ++i)
    for (const std::int32_t* t = trie.tokens_begin(i); t != trie.tokens_end(i); ++t) {
      const bool c = j_reads(vocab->bytes(*t));
      clean += c;
      EXPECT_EQ(((summary.clean_bits()[static_cast<std::size_t>(*t) >> 5] >> (*t & 31)) & 1u) != 0, c);
    }
  EXPECT_EQ(summary.clean_tokens(), clean);
  for (std::uint32_t i = 1; i < trie.num_nodes(); ++i) {
    bool all = true;
    for (std::uint32_t k = i; k < trie.subtree_end(i); ++k)
      for (const std::int32_t* t = trie.tokens_begin(k); t != trie.tokens_end(k); ++t) all = all && j_reads(vocab->bytes(*t));
    EXPECT_EQ(summary.clean_subtree(i), all);
  }
}

TEST(interior_universal_states) {
  auto vocab = mixed_vocab();
  Limits limits;
  // Inside a free string: universal. Inside a string of [a-z] only, or a fixed key: not.
  auto free_string = compile_regex(R"R("([^"\\]|\\.)*")R", vocab, limits);
  auto letters = compile_regex(R"R("[a-z]*")R", vocab, limits);
  auto after_quote = [](const Dfa& d) { return d.next(d.start(), '"'); };
  const Dfa& f = free_string->grammar().terminals[0].dfa;
  const Dfa& l = letters->grammar().terminals[0].dfa;
  std::vector<std::int32_t> also;
  EXPECT(interior_universal(f, after_quote(f), 1 << 13, &also));
  EXPECT(!also.empty());
  EXPECT(!interior_universal(l, after_quote(l), 1 << 13));
  EXPECT(!interior_universal(f, f.start(), 1 << 13));  // before the quote: `a` kills it
  EXPECT(!interior_universal(f, after_quote(f), 1));  // over the pair budget: no
}

TEST(jointly_interior_universal_unions) {
  // The branches of "none of the declared keys" after the opening quote, one automaton per
  // first character: `a...`, anything but `a`, and the empty key. No branch alone keeps every
  // string inside alive; the union does. Two branches that leave a first letter out do not.
  auto vocab = mixed_vocab();
  Limits limits;
  auto dfa_of = [&](const char* rx) { return compile_regex(rx, vocab, limits); };
  auto a_branch = dfa_of(R"R("a([^"\\]|\\.)*")R");
  auto other = dfa_of(R"R("([^a"\\]|\\.)([^"\\]|\\.)*")R");
  auto empty = dfa_of(R"R("")R");
  auto b_branch = dfa_of(R"R("b([^"\\]|\\.)*")R");
  auto after_quote = [](const Dfa& d) { return d.next(d.start(), '"'); };
  const Dfa& a = a_branch->grammar().terminals[0].dfa;
  const Dfa& o = other->grammar().terminals[0].dfa;
  const Dfa& e = empty->grammar().terminals[0].dfa;
  const Dfa& b = b_branch->grammar().terminals[0].dfa;
  for (const Dfa* d : {&a, &o, &e}) EXPECT(!interior_universal(*d, after_quote(*d), 1 << 13));
  std::size_t singles = 0;  // tuples answered by one element's own search
  auto joint = [&](std::vector<const Dfa*> dfas, std::size_t budget) {
    std::vector<std::int32_t> states;
    for (const Dfa* d : dfas) states.push_back(after_quote(*d));
    return jointly_interior_universal(dfas, states, budget, [&](std::size_t el, std::int32_t j, std::int32_t st) {
      ++singles;
      return interior_universal(*dfas[el], st, 1 << 13, nullptr, j);
    });
  };
  EXPECT(joint({&a, &o, &e}, 1 << 12));
  EXPECT(singles > 0);  // after the first byte one branch is left: answered on its own
  EXPECT(joint({&a, &o}, 1 << 12));  // the empty key adds nothing inside the string
  EXPECT(!joint({&a, &b, &e}, 1 << 12));  // `c` kills every branch
  EXPECT(!joint({&e}, 1 << 12));
  // Overlapping elements (`a...` and any string) keep tuples of two alive: searched, bounded.
  auto any_string = dfa_of(R"R("([^"\\]|\\.)*")R");
  const Dfa& f = any_string->grammar().terminals[0].dfa;
  EXPECT(joint({&a, &f}, 1 << 12));
  EXPECT(!joint({&a, &f}, 1));  // over the tuple budget: no
  // Started inside a character (after a UTF-8 lead byte) or an escape: the continuation keeps
  // the branch that read the lead byte alive.
  const std::int32_t after_lead = o.next(after_quote(o), 0xC3);
  EXPECT(after_lead >= 0);
  EXPECT(interior_universal(o, after_lead, 1 << 13, nullptr, InteriorSummary::j_next(InteriorSummary::kBoundary, 0xC3)));
}

TEST(interior_skip_walks_equal_reference_walks) {
  auto vocab = mixed_vocab();
  // Keys beside "any other key" (a JSON string's inside after the quote: universal). A bare
  // [^"]* would not be: J reads \" as inside a string, where [^"]* ends at the quote.
  const std::string g = R"G(root ::= "{" item ("," item)* "}"
item ::= "\"" chars "\"" ":" " "? val | "\"ab" chars "\"" ":" " "? "1" | "\"abc\": " root
chars ::= ([^"\\] | "\\" ["\\/bfnrt])*
val ::= "1" | root)G";
  Limits fast_limits, ref_limits;
  ref_limits.mask_share_min_states = 0xFFFFFFFFu;
  auto fast = compile_grammar(g, "root", vocab, fast_limits);
  auto ref = compile_grammar(g, "root", vocab, ref_limits);
  EXPECT(corral_test::walks_agree(fast, ref, 5, 40, 30));
  EXPECT(fast->interior_walks() > 0);
  EXPECT_EQ(ref->interior_walks(), 0u);
}
