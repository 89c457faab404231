// test_slots.cpp — slots (`${name}`, `${name:json}`): the string-set DFA, the grammar syntax,
// binding errors, and exact masks of bindings (both directions) through the C++ API, so the
// sanitizer build covers the binding paths (tests/test_slots.py covers real vocabularies).
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "compile.hpp"
#include "matcher.hpp"
#include "testing.hpp"
#include "matcher_helpers.hpp"

using namespace corral;

namespace {

// Every byte, tokens that span the slot's boundaries, EOS and a special token.
std::shared_ptr<const Vocabulary> slot_vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\"CC-104\",", "CC-10", "CC-1", "4\"", "9\"}", ": \"", "\": \"C", "C-", "CC", "\"}",
                        "\",", "ab", "abc", "\\\"", "\\\\", "\\n", "\\u00", "\xc3\xa9", "\xc3\xa9\"", "\"\""})
    toks.push_back(t);
  toks.push_back("<eos>");
  toks.push_back("<sp>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 2, n - 1},
                                            std::vector<std::int32_t>{n - 2}, n + 3);
}

using corral_test::allowed;

bool dfa_accepts(const Dfa& d, const std::string& s) {
  std::int32_t st = d.start();
  for (char c : s) {
    if (st < 0) return false;
    st = d.next(st, static_cast<std::uint8_t>(c));
  }
  return st >= 0 && d.accepting(st);
}

Dfa strings_dfa(std::vector<std::string> v, const Limits& l = Limits{}) {
  std::sort(v.begin(), v.end());
  std::vector<std::string_view> views(v.begin(), v.end());
  return Dfa::from_strings(views, l);
}

// Walk under the mask with random tokens until EOS; checks at each step that a token's bit
// equals whether accept_token takes it. Returns the bytes written.
std::string exact_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng) {
  const Vocabulary& vocab = g->vocab();
  Matcher m(g);
  std::string out;
  for (int step = 0; step < 200 && !m.is_terminated(); ++step) {
    const std::vector<std::int32_t> a = allowed(m);
    EXPECT(!a.empty());
    std::vector<bool> in(vocab.width(), false);
    for (auto t : a) in[static_cast<std::size_t>(t)] = true;
    for (std::uint32_t t = 0; t < vocab.width(); ++t) {
      Matcher c = m;
      EXPECT_EQ(c.accept_token(static_cast<std::int32_t>(t)), static_cast<bool>(in[t]));
    }
    // Prefer long tokens so boundary-spanning ones are exercised; EOS when offered, sometimes.
    std::int32_t pick = a[rng() % a.size()];
    if (vocab.is_eos(pick) && a.size() > 1 && rng() % 3 != 0) pick = a[rng() % (a.size() - 1)];
    EXPECT(m.accept_token(pick));
    if (!vocab.is_eos(pick)) out += vocab.bytes(pick);
  }
  EXPECT(m.is_terminated());
  return out;
}

}  // namespace

TEST(slots_string_set_dfa_is_exact_and_minimal) {
  const std::vector<std::string> words = {"CC-104", "CC-109", "CC-2", "CD", "x", "\xc3\xa9t\xc3\xa9"};
  Dfa d = strings_dfa(words);
  for (const auto& w : words) EXPECT(dfa_accepts(d, w));
  for (const char* w : {"", "CC", "CC-10", "CC-1040", "CC-3", "C", "xx", "\xc3\xa9"}) EXPECT(!dfa_accepts(d, w));
  // {ab, cb}: start, after a/c (shared: same suffix language), accept.
  EXPECT_EQ(strings_dfa({"ab", "cb"}).num_states(), 3u);
  // Codes with a shared structure collapse: 900 values, a handful of states.
  std::vector<std::string> codes;
  for (int i = 100; i < 1000; ++i) codes.push_back("CC-" + std::to_string(i));
  Dfa c = strings_dfa(codes);
  EXPECT(c.num_states() <= 8u);
  EXPECT(dfa_accepts(c, "CC-517") && !dfa_accepts(c, "CC-51") && !dfa_accepts(c, "CC-0517"));
  EXPECT_EQ(d.shortest_completion(d.start()), std::string("x"));
  Limits small;
  small.max_dfa_states = 5;
  EXPECT_THROWS(strings_dfa({"abcdef", "ghijkl"}, small), LimitExceeded);
}

TEST(slots_grammar_syntax) {
  auto vocab = slot_vocab();
  auto g = compile_grammar("root ::= \"a=\" ${a} \" b=\" ${b:json} (\",\" ${a})*", "root", vocab, Limits{});
  EXPECT((g->slot_names() == std::vector<std::string>{"a", "b"}));
  EXPECT(g->needs_binding());
  // One terminal per (name, spelling); the printed grammar re-parses.
  const std::string text = g->grammar().to_string();
  EXPECT(text.find("${a}") != std::string::npos && text.find("${b:json}") != std::string::npos);
  auto again = compile_grammar(text, "start", vocab, Limits{});
  EXPECT(again->slot_names() == g->slot_names());
  for (const char* bad : {"root ::= ${}", "root ::= ${a:yaml}", "root ::= $a", "root ::= ${a", "root ::= ${9a}",
                          "root ::= /x/ & ${a}", "root ::= r & /x/\nr ::= \"y\" ${a}"})
    EXPECT_THROWS(compile_grammar(bad, "root", vocab, Limits{}), CompileError);
}

TEST(slots_skeleton_cannot_match_and_bind_errors) {
  auto vocab = slot_vocab();
  auto g = compile_grammar("root ::= ${a} \"/\" ${b:json}", "root", vocab, Limits{});
  EXPECT_THROWS(Matcher m(g), SlotError);
  auto bind = [&](std::vector<SlotValues> v) { return g->bind(v); };
  EXPECT_THROWS(bind({{"a", {"x"}}}), SlotError);                                 // b missing
  EXPECT_THROWS(bind({{"a", {"x"}}, {"b", {"y"}}, {"c", {"z"}}}), SlotError);     // unknown
  EXPECT_THROWS(bind({{"a", {"x"}}, {"a", {"x"}}, {"b", {"y"}}}), SlotError);     // twice
  EXPECT_THROWS(bind({{"a", {}}, {"b", {"y"}}}), SlotError);                      // empty list
  EXPECT_THROWS(bind({{"a", {"x", "x"}}, {"b", {"y"}}}), SlotError);              // duplicate
  EXPECT_THROWS(bind({{"a", {""}}, {"b", {"y"}}}), SlotError);                    // empty raw value
  EXPECT_THROWS(bind({{"a", {"x"}}, {"b", {"\xff"}}}), SlotError);                // invalid UTF-8
  EXPECT_THROWS(bind({{"a", {"\xed\xa0\x80"}}, {"b", {"y"}}}), SlotError);        // surrogate
  auto ok = bind({{"a", {"x"}}, {"b", {""}}});  // "" is a fine JSON string
  EXPECT_THROWS(ok->bind({{"a", {"x"}}, {"b", {""}}}), SlotError);                // binding a binding
  Matcher m(ok);
  EXPECT(m.accept_bytes("x/\"\"") && m.is_accepting());
  Limits l;
  l.max_slot_values = 2;
  l.max_slot_bytes = 8;
  auto limited = compile_grammar("root ::= ${a}", "root", vocab, l);
  EXPECT_THROWS(limited->bind({{"a", {"1", "2", "3"}}}), LimitExceeded);
  EXPECT_THROWS(limited->bind({{"a", {"123456789"}}}), LimitExceeded);
  // Without slots: binding nothing is the grammar itself; naming a slot is an error.
  auto plain = compile_grammar("root ::= \"x\"", "root", vocab, Limits{});
  EXPECT(plain->bind({}) == plain);
  EXPECT_THROWS(plain->bind({{"a", {"x"}}}), SlotError);
}

TEST(slots_json_spelling_is_canonical) {
  auto vocab = slot_vocab();
  auto g = compile_grammar("root ::= ${v:json}", "root", vocab, Limits{});
  auto b = g->bind({{"v", {"a\"b", "c\\d", "e\nf\x01", "\xc3\xa9/", ""}}});
  for (const char* good : {"\"a\\\"b\"", "\"c\\\\d\"", "\"e\\nf\\u0001\"", "\"\xc3\xa9/\"", "\"\""}) {
    Matcher m(b);
    EXPECT(m.accept_bytes(good) && m.is_accepting());
  }
  for (const char* bad : {"\"a\"b\"", "\"e\\u000af\\u0001\"", "\"e\\nf\\u0001", "\"\\u00e9/\"", "\"\xc3\xa9\\/\"",
                          "\"e\\nf\\u0001\"x"}) {
    Matcher m(b);
    EXPECT(!(m.accept_bytes(bad) && m.is_accepting()));
  }
}

TEST(slots_masks_are_exact_and_outputs_are_bound_values) {
  auto vocab = slot_vocab();
  auto g = compile_grammar(
      "root ::= \"{\\\"cc\\\": \" ${cc:json} ( \", \\\"tag\\\": \" ${tag} )? \"}\"", "root", vocab, Limits{});
  const std::vector<std::string> ccs = {"CC-104", "CC-109", "CC-2", "\xc3\xa9t\xc3\xa9", "a\"b"};
  auto b = g->bind({{"cc", ccs}, {"tag", {"ab", "abc", "x"}}});
  std::set<std::string> valid;
  const std::vector<std::string> ccs_json = {"\"CC-104\"", "\"CC-109\"", "\"CC-2\"", "\"\xc3\xa9t\xc3\xa9\"", "\"a\\\"b\""};
  for (const auto& c : ccs_json) {
    valid.insert("{\"cc\": " + c + "}");
    for (const char* t : {"ab", "abc", "x"}) valid.insert("{\"cc\": " + c + ", \"tag\": " + t + "}");
  }
  std::mt19937 rng(7);
  std::set<std::string> seen;
  for (int walk = 0; walk < 40; ++walk) {
    const std::string out = exact_walk(b, rng);
    EXPECT(valid.count(out) == 1);
    seen.insert(out);
  }
  EXPECT(seen.size() > 5);
  // The token that spans the slot's end and the next separator is allowed exactly there.
  Matcher m(b);
  EXPECT(m.accept_bytes("{\"cc\": "));
  const std::int32_t span = 256;  // "\"CC-104\","
  EXPECT_EQ(vocab->bytes(span), std::string("\"CC-104\","));
  auto a = allowed(m);
  EXPECT(std::find(a.begin(), a.end(), span) != a.end());
  EXPECT(m.accept_token(span));
}

TEST(slots_bindings_share_the_skeleton_and_stay_apart) {
  auto vocab = slot_vocab();
  auto g = compile_grammar("root ::= \"[\" ${v:json} (\",\" ${v:json})* \"]\"", "root", vocab, Limits{});
  auto b1 = g->bind({{"v", {"CC-104", "CC-109"}}});
  auto b2 = g->bind({{"v", {"CC-2", "ab"}}});
  EXPECT_EQ(g->bindings_made(), 2u);
  Matcher m1(b1), m2(b2);
  EXPECT(m1.accept_bytes("[\"CC-104\",\"CC-109\"]") && m1.is_accepting());
  EXPECT(!m2.accept_bytes("[\"CC-104\""));
  EXPECT(m2.accept_bytes("[\"ab\",\"CC-2\"]") && m2.is_accepting());
  // Frontiers outside the slot were cached once, in the skeleton: a second binding walking the
  // same path adds none there.
  std::mt19937 rng(1);
  exact_walk(b1, rng);
  const std::size_t skeleton_entries = g->cache_entries();
  EXPECT(skeleton_entries > 0);
  EXPECT(b1->cache_entries() > 0);
  auto b3 = g->bind({{"v", {"CC-104", "CC-109"}}});
  Matcher m3(b3);
  allowed(m3);  // "[" is not a slot frontier
  EXPECT_EQ(g->cache_entries(), skeleton_entries);
  EXPECT_EQ(b3->cache_entries(), 0u);
}

TEST(slots_memo_agrees_with_fresh_state) {
  auto vocab = slot_vocab();
  const char* text = "root ::= \"{\" ( \"\\\"k\\\": \" ${v:json} | \"\\\"n\\\": \" [0-9]+ ) \"}\"";
  auto g = compile_grammar(text, "root", vocab, Limits{});
  Limits no_memo;
  no_memo.max_mask_memo_mb = 0;
  auto g0 = compile_grammar(text, "root", vocab, no_memo);
  const std::vector<SlotValues> values = {{"v", {"CC-104", "CC-109", "ab"}}};
  auto b = g->bind(values), b0 = g0->bind(values);
  const std::string doc = "{\"k\": \"CC-109\"}";
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t cut = 0; cut <= doc.size(); ++cut) {
      Matcher m(b), fresh(b0);
      EXPECT(m.accept_bytes(doc.substr(0, cut)));
      EXPECT(fresh.accept_bytes(doc.substr(0, cut)));
      EXPECT(allowed(m) == allowed(fresh));
      EXPECT_EQ(m.forced_bytes(), fresh.forced_bytes());
      const std::string rest = m.shortest_completion();
      EXPECT(m.accept_bytes(rest) && m.is_accepting());
    }
  }
  // The mask before the key is the same for every binding: memoised in the skeleton.
  EXPECT(g->memo_entries() + b->memo_entries() > 0);
  auto other = g->bind({{"v", {"zz"}}});
  Matcher m(other), fresh(g0->bind({{"v", {"zz"}}}));
  EXPECT(allowed(m) == allowed(fresh));
  EXPECT(m.accept_bytes("{\"k\": \"z"));
  EXPECT(fresh.accept_bytes("{\"k\": \"z"));
  EXPECT(allowed(m) == allowed(fresh));
}

TEST(slots_concurrent_bindings_share_one_skeleton) {
  // A server: one skeleton, many threads binding their own values and decoding at once.
  auto vocab = slot_vocab();
  auto g = compile_grammar("root ::= \"{\\\"cc\\\": \" ${cc:json} ( \", \\\"tag\\\": \" ${tag} )? \"}\"", "root", vocab,
                           Limits{});
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const std::string own = "V" + std::to_string(k);
      auto b = g->bind({{"cc", {own, own + "0", "shared"}}, {"tag", {"ab", own}}});
      std::mt19937 rng(static_cast<unsigned>(k));
      int good = 0;
      for (int walk = 0; walk < 30; ++walk) {
        Matcher m(b);
        std::string out;
        while (!m.is_terminated()) {
          const auto a = allowed(m);
          const std::int32_t t = a[rng() % a.size()];
          if (!m.accept_token(t)) return;
          if (!b->vocab().is_eos(t)) out += b->vocab().bytes(t);
        }
        const bool mine = out.rfind("{\"cc\": \"" + own, 0) == 0 || out.rfind("{\"cc\": \"shared\"", 0) == 0;
        const bool foreign = out.find("V") != std::string::npos && out.find(own) == std::string::npos;
        good += mine && !foreign;
      }
      ok[static_cast<std::size_t>(k)] = good;
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ok[static_cast<std::size_t>(k)], 30);
  EXPECT_EQ(g->bindings_made(), 4u);
}
