// test_keyed.cpp — keyed member groups (keyed.hpp): any order, each key at most once, required
// keys before the close; masks agree with the parser in both directions on random walks;
// shortest completions add missing required keys; the artifact round trip keeps the groups.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "compile.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> keyed_vocab() {
  std::vector<std::string> toks;
  for (int b = 32; b < 127; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"a:", "b:1", ",b", ",a:", "1,", "}", "{b", ",c:{", "xq", "1}"}) toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

const char* kKeyed = R"G(root ::= "{" body "}" | "{}"
body ::= %keyed(","; "a:" [0-9], !"b:" [0-9], "c:" root; "x" [a-z] ":" [0-9]))G";

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.is_accepting();
}

}  // namespace

TEST(keyed_language) {
  auto g = compile_grammar(kKeyed, "root", keyed_vocab(), Limits{});
  const std::vector<std::pair<std::string, bool>> cases = {
      {"{b:1}", true},           {"{a:1,b:2}", true},       {"{b:2,a:1}", true},      {"{a:1}", false},
      {"{a:1,a:2,b:1}", false},  {"{xq:1,b:2,xq:3}", true}, {"{c:{b:1},b:1}", true},  {"{c:{a:1},b:1}", false},
      {"{}", true},              {"{b:1,b:1}", false},      {"{b:1,c:{b:2},c:{b:3}}", false},
      {"{xa:1,c:{xb:2,b:1},a:3,b:4}", true},
  };
  for (const auto& [s, want] : cases) {
    EXPECT_EQ(accepts(g, s), want);
  }
}

TEST(keyed_masks_match_parser_and_completions_are_valid) {
  auto g = compile_grammar(kKeyed, "root", keyed_vocab(), Limits{});
  auto loaded = load_artifact(to_artifact(*g), keyed_vocab());
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Matcher m(g), l(loaded);
    for (int step = 0; step < 25 && !m.is_terminated(); ++step) {  // a finished walk only allows EOS
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::allowed(l));
      // Both directions: a token is in the mask iff the parser accepts it.
      EXPECT(al == corral_test::accepted_one_by_one(m));
      Matcher done = m;
      EXPECT(done.accept_bytes(done.shortest_completion()) && done.is_accepting());
      if (al.empty()) break;
      const std::int32_t t = al[rng() % al.size()];
      EXPECT(m.accept_token(t));
      EXPECT(l.accept_token(t));
    }
  }
}
