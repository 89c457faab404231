// test_matcher.cpp — masks, accept, rollback, memo and batch fill through the C++ API, so the
// sanitizer build covers the mask code paths (the Python tests cover them on real vocabularies).
#include <random>
#include <string>
#include <vector>

#include "batch.hpp"
#include "compile.hpp"
#include "matcher.hpp"
#include "testing.hpp"
#include "matcher_helpers.hpp"

using namespace corral;

namespace {

// Every byte, some multi-byte tokens that cross terminal boundaries, EOS and a special token.
std::shared_ptr<const Vocabulary> test_vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\",", "\"}", "\":", "{\"", "true", "12", ", \"", "]}", "\xc3\xa9", " \"a"}) toks.push_back(t);
  toks.push_back("<eos>");
  toks.push_back("<sp>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 2, n - 1},
                                            std::vector<std::int32_t>{n - 2}, n + 3);
}

using corral_test::allowed;

}  // namespace

TEST(matcher_mask_equals_accept_on_random_walks) {
  auto vocab = test_vocab();
  auto g = compile_json(vocab, Limits{});
  std::mt19937 rng(42);
  for (int walk = 0; walk < 20; ++walk) {
    Matcher m(g);
    for (int step = 0; step < 40 && !m.is_terminated(); ++step) {
      std::vector<std::int32_t> a = allowed(m);
      EXPECT(!a.empty());
      std::vector<bool> in(vocab->width(), false);
      for (auto t : a) in[static_cast<std::size_t>(t)] = true;
      for (std::uint32_t t = 0; t < vocab->width(); ++t) {
        Matcher c = m;
        EXPECT_EQ(c.accept_token(static_cast<std::int32_t>(t)), static_cast<bool>(in[t]));
      }
      EXPECT(m.accept_token(a[rng() % a.size()]));
    }
  }
}

TEST(matcher_rollback_and_memo_agree_with_fresh_state) {
  auto vocab = test_vocab();
  auto g = compile_json(vocab, Limits{});
  const std::string doc = R"J({"a": [1, {"b": "c"}, true], "d": "\u00e9"})J";
  for (std::size_t cut = 0; cut < doc.size(); cut += 3) {
    Matcher m(g), fresh(g);
    EXPECT(m.accept_bytes(doc));
    m.rollback(1);
    EXPECT(m.accept_bytes(doc.substr(0, cut)));
    EXPECT(fresh.accept_bytes(doc.substr(0, cut)));
    EXPECT(allowed(m) == allowed(fresh));
    EXPECT_EQ(m.shortest_completion(), fresh.shortest_completion());
  }
  EXPECT(g->memo_entries() > 0);
}

TEST(matcher_forced_bytes_and_completion) {
  auto vocab = test_vocab();
  auto g = compile_grammar(R"G(root ::= "<" [a-z]+ ">" ( "x" | "yz" ) "</end>")G", "root", vocab, Limits{});
  Matcher m(g);
  EXPECT_EQ(m.forced_bytes(), std::string("<"));
  EXPECT(m.accept_bytes("<ab"));
  EXPECT_EQ(m.forced_bytes(), std::string(""));
  EXPECT(m.accept_bytes(">y"));
  EXPECT_EQ(m.forced_bytes(), std::string("z</end>"));
  std::string rest = m.shortest_completion();
  EXPECT(m.accept_bytes(rest));
  EXPECT(m.is_accepting());
}

TEST(matcher_batch_fill_matches_single_fill) {
  auto vocab = test_vocab();
  auto g = compile_json(vocab, Limits{});
  const char* prefixes[] = {"", "{\"k", "[1, ", "{\"a\": {\"b\": [", "\"\xc3", "12", "{\"x\": \"y\"}"};
  std::vector<Matcher> ms;
  for (const char* p : prefixes) {
    ms.emplace_back(g);
    EXPECT(ms.back().accept_bytes(p));
  }
  const std::uint32_t w = vocab->mask_words();
  for (std::size_t threads : {std::size_t(1), std::size_t(2), std::size_t(0), std::size_t(8)}) {
    std::vector<std::int32_t> batch(ms.size() * w, -1);
    std::vector<Matcher*> ptrs;
    std::vector<std::int32_t*> rows;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      ptrs.push_back(&ms[i]);
      rows.push_back(batch.data() + i * w);
    }
    fill_next_token_bitmasks(ptrs, rows, threads);
    for (std::size_t i = 0; i < ms.size(); ++i) {
      std::vector<std::int32_t> single(w);
      ms[i].fill_next_token_bitmask(single.data());
      EXPECT(std::equal(single.begin(), single.end(), batch.begin() + static_cast<std::ptrdiff_t>(i * w)));
    }
  }
}

TEST(matcher_named_token_and_special_tokens) {
  auto vocab = test_vocab();
  const std::int32_t sp = static_cast<std::int32_t>(vocab->size()) - 1;
  auto g = compile_grammar("root ::= \"a\" <sp> \"b\"", "root", vocab, Limits{});
  Matcher m(g);
  EXPECT(m.accept_bytes("a"));
  std::vector<std::int32_t> a = allowed(m);
  EXPECT(a.size() == 1 && a[0] == sp);
  EXPECT(m.accept_token(sp));
  EXPECT(m.accept_bytes("b"));
  EXPECT(m.is_accepting());
  auto plain = compile_regex("(?s).*", vocab, Limits{});
  Matcher p(plain);
  for (auto t : allowed(p)) EXPECT(t < static_cast<std::int32_t>(vocab->size()) && t != sp);
}

TEST(matcher_error_state_is_sticky_and_allows_only_eos) {
  auto vocab = test_vocab();
  Limits l;
  l.max_items_per_set = 64;
  auto g = compile_grammar("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | y\ny ::= x x | \"b\"", "root", vocab, l);
  Matcher m(g);
  EXPECT(!m.accept_bytes(std::string(200, 'a')));
  EXPECT(!m.error().empty());
  std::vector<std::int32_t> a = allowed(m);
  EXPECT(a.size() == 1 && a[0] == vocab->eos_ids()[0]);
}
