// test_unique.cpp — unique groups (`%unique{min,max}(sep; item, ...)`, unique.hpp): the interned
// key sets and their counts; the language (distinct items, count bounds, several spellings of
// one item); parse errors; masks agree with the parser in both directions on random walks,
// shortest completions are valid at every step (they never repeat an item) and the artifact
// round trip keeps the bounds.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "compile.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"
#include "unique.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> unique_vocab() {
  std::vector<std::string> toks;
  for (int b = 32; b < 127; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"1,", ",1", "10", "1.0", ",2]", "[1", "x]", ",x", "1]", "[]", ",10,"}) toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

// Items: the value 1 (two spellings), 10, 2 and x; between 2 and 3 of them.
const char* kUnique = R"G(root ::= "[" "]" | "[" items "]"
items ::= %unique{2,3}(","; "1" | "1.0", "10", "2", "x"))G";

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.is_accepting();
}

}  // namespace

TEST(unique_key_sets_intern_and_count) {
  KeySets ks;
  EXPECT_EQ(key_count(ks, 0), 0u);
  const std::uint32_t a = ks.with(0, 3), ab = ks.with(a, 70), ba = ks.with(ks.with(0, 70), 3);
  EXPECT_EQ(ab, ba);  // equal sets share an id, whatever the order they were built in
  EXPECT_EQ(key_count(ks, a), 1u);
  EXPECT_EQ(key_count(ks, ab), 2u);
  EXPECT_EQ(ks.with(ab, 70), ab);  // adding a present key is the same set
  EXPECT(ks.has(ab, 70) && ks.has(ab, 3) && !ks.has(ab, 4) && !ks.has(a, 70));
  std::uint32_t big = 0;
  for (std::uint32_t k = 0; k < 200; k += 3) big = ks.with(big, k);
  EXPECT_EQ(key_count(ks, big), 67u);
  ks.clear();
  EXPECT_EQ(ks.words.size(), 1u);
}

TEST(unique_language) {
  auto g = compile_grammar(kUnique, "root", unique_vocab(), Limits{});
  const std::vector<std::pair<std::string, bool>> cases = {
      {"[]", true},       {"[1]", false},      {"[1,2]", true},      {"[1,1.0]", false},  {"[1.0,1]", false},
      {"[1.0,10]", true}, {"[10,1,2]", true},  {"[10,1,2,x]", false}, {"[1,2,1]", false}, {"[2,10,x]", true},
      {"[x,x]", false},   {"[10,10]", false},  {"[x,1.0]", true},    {"[2]", false},
  };
  for (const auto& [s, want] : cases) {
    EXPECT_EQ(accepts(g, s), want);
  }
  EXPECT(g->grammar().to_string().find("items 2..3") != std::string::npos);
}

TEST(unique_without_bounds_and_with_only_a_minimum) {
  auto g = compile_grammar("root ::= \"[\" u \"]\"\nu ::= %unique(\",\"; \"a\", \"b\")", "root", unique_vocab(), Limits{});
  EXPECT(accepts(g, "[a,b]") && accepts(g, "[b]") && accepts(g, "[b,a]"));
  EXPECT(!accepts(g, "[a,a]") && !accepts(g, "[b,a,b]"));
  auto h = compile_grammar("root ::= \"[\" u \"]\"\nu ::= %unique{2,}(\",\"; \"a\", \"b\", \"c\")", "root", unique_vocab(), Limits{});
  EXPECT(accepts(h, "[c,a,b]") && accepts(h, "[b,c]"));
  EXPECT(!accepts(h, "[b]") && !accepts(h, "[a,b,a]"));
}

TEST(unique_parse_errors) {
  auto compile = [](const std::string& body) {
    return compile_grammar("root ::= u\nu ::= " + body, "root", unique_vocab(), Limits{});
  };
  EXPECT_THROWS(compile("%unique{0,2}(\",\"; \"a\", \"b\")"), CompileError);
  EXPECT_THROWS(compile("%unique{2,1}(\",\"; \"a\", \"b\")"), CompileError);
  EXPECT_THROWS(compile("%unique{3,}(\",\"; \"a\", \"b\")"), CompileError);  // unsatisfiable
  EXPECT_THROWS(compile("%unique{2(\",\"; \"a\", \"b\")"), CompileError);
  EXPECT_THROWS(compile("%unique(\",\"; !\"a\", \"b\")"), CompileError);  // no required members
  EXPECT_THROWS(compile("%unique(\",\"; \"a\"; \"b\")"), CompileError);   // no undeclared part
}

TEST(unique_masks_match_parser_and_completions_are_valid) {
  auto g = compile_grammar(kUnique, "root", unique_vocab(), Limits{});
  auto loaded = load_artifact(to_artifact(*g), unique_vocab());
  EXPECT(loaded->grammar().to_string() == g->grammar().to_string());
  std::size_t rejected_duplicates = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    Matcher m(g), l(loaded);
    std::string text;
    for (int step = 0; step < 20 && !m.is_terminated(); ++step) {
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::allowed(l));
      const std::vector<std::int32_t> accepted = corral_test::accepted_one_by_one(m);
      EXPECT(al == accepted);  // both directions
      const Vocabulary& v = g->vocab();
      for (std::uint32_t t = 0; t < v.size(); ++t) {
        const auto id = static_cast<std::int32_t>(t);
        rejected_duplicates += v.bytes(id) == ",1" && !std::binary_search(accepted.begin(), accepted.end(), id);
      }
      Matcher done = m;
      const std::string rest = done.shortest_completion();
      EXPECT(done.accept_bytes(rest) && done.is_accepting());
      EXPECT(accepts(g, text + rest));
      if (al.empty()) break;
      const std::int32_t t = al[rng() % al.size()];
      EXPECT(m.accept_token(t));
      EXPECT(l.accept_token(t));
      if (t != v.eos_ids()[0]) text += v.bytes(t);
    }
  }
  EXPECT(rejected_duplicates > 0);  // the walks did reach states where `,1` repeats an item
}
