// test_distinct.cpp — distinct groups (`%distinct{min,max}(sep; item)`, distinct.hpp): value
// hashes compare JSON values (strings unescaped, numbers by exact value); the value sets; the
// language (no two equal items, count bounds, duplicates inside one token); masks equal the
// parser's verdict per token in both directions on random walks, including tokens that close two
// items; shortest completions are valid (never a repeat) and the artifact keeps the construct.
#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "artifact.hpp"
#include "compile.hpp"
#include "distinct.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> distinct_vocab() {
  std::vector<std::string> toks;
  for (const char* t : {"[", "]", ",", "\"", "a", "b", "\\", "u", "0", "6", "1", "a\"", "b\"", "\",\"", "\"a\"",
                        "\"a\",\"a\"", "a\",\"a\"", "\"]", "[\"", "ab", "\\u0061", "\"\"", "\",", "a\"]"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

// Every printable ASCII byte, and a few longer tokens: no state is a dead end for want of a token.
std::shared_ptr<const Vocabulary> bounded_vocab() {
  std::vector<std::string> toks;
  for (char c = 0x20; c < 0x7F; ++c) toks.emplace_back(1, c);
  for (const char* t : {"a\"", "b\"", "\",\"", "\"a\"", "\"a\",\"a\"", "a\",\"a\"", "\"]", "[\"", "ab", "\\u0061", "\",", "a\"]",
                        "\"a", "\"ab", ",\"a", "\\u006", "u0062"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

// Strings over a, b and \u escapes (infinitely many values from every open prefix), 2 to 4.
const char* kDistinct = R"G(root ::= "[" items "]"
items ::= %distinct{2,4}(","; str)
str ::= /"([ab]|\\u00[0-9a-f][0-9a-f])*"/)G";

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.is_accepting();
}


// 40 seeded random walks of `steps` tokens (preferring those `keep` accepts): at every step the
// mask equals the parser token by token, is never empty, and the shortest completion is a
// sentence of the grammar (no dead end, no repeated value).
template <class Keep>
void walks_without_dead_ends(const std::shared_ptr<const CompiledGrammar>& g, int steps, Keep keep) {
  const Vocabulary& v = g->vocab();
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Matcher m(g);
    for (int step = 0; step < steps && !m.is_terminated(); ++step) {
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::accepted_one_by_one(m));
      EXPECT(!al.empty());
      Matcher done = m;
      const std::string rest = done.shortest_completion();
      EXPECT(done.accept_bytes(rest) && done.is_accepting());
      if (al.empty()) break;
      std::vector<std::int32_t> pick;
      for (std::int32_t t : al)
        if (keep(v.bytes(t))) pick.push_back(t);
      if (pick.empty()) pick = al;
      EXPECT(m.accept_token(pick[rng() % pick.size()]));
    }
  }
}

}  // namespace

TEST(distinct_value_hashes_compare_json_values) {
  EXPECT(value_hash("\"a\"") == value_hash("\"\\u0061\""));
  EXPECT(value_hash("\"\\ud83d\\ude00\"") == value_hash("\"\xF0\x9F\x98\x80\""));
  EXPECT(value_hash("\"\\n\"") == value_hash("\"\\u000A\""));
  EXPECT(!(value_hash("\"\\n\"") == value_hash("\"\\\\n\"")));
  EXPECT(!(value_hash("\"a\"") == value_hash("\"b\"")));
  EXPECT(!(value_hash("\"1\"") == value_hash("1")));
  EXPECT(value_hash("1") == value_hash("1.0") && value_hash("1") == value_hash("10e-1") && value_hash("1") == value_hash("1E0"));
  EXPECT(value_hash("0.5") == value_hash("5e-1") && value_hash("100") == value_hash("1e2"));
  EXPECT(value_hash("0") == value_hash("-0") && value_hash("0") == value_hash("0.000e7"));
  EXPECT(!(value_hash("1") == value_hash("-1")) && !(value_hash("12") == value_hash("1.2")));
  EXPECT(value_hash("true") == value_hash("true") && !(value_hash("true") == value_hash("false")));
  EXPECT(value_hash("\"a\"").known() && !ValueHash{}.known());
}

TEST(distinct_value_sets) {
  ValueSets vs;
  const ValueHash a = value_hash("\"a\""), b = value_hash("\"b\"");
  const std::uint32_t sa = vs.with(0, a), sab = vs.with(sa, b), su = vs.with(sab, ValueHash{});
  EXPECT(vs.has(sab, a) && vs.has(sab, b) && !vs.has(sa, b) && !vs.has(0, a));
  EXPECT_EQ(vs.count(su), 3u);
  EXPECT(!vs.has(su, ValueHash{}));  // unknown values are counted, never matched
  EXPECT_EQ(vs.with(sa, b), sab);      // a twin of a recent set is that set
  EXPECT(vs.signature(sab) == vs.signature(vs.with(vs.with(0, b), value_hash("\"c\""))));
  vs.truncate(2);
  EXPECT_EQ(vs.size(), 2u);
}

TEST(distinct_value_sets_index_large_sets) {
  // From 32 values a set answers from an index built once; truncating past it forgets it.
  ValueSets vs;
  std::vector<std::uint32_t> chain{0};
  for (int i = 0; i < 100; ++i) chain.push_back(vs.with(chain.back(), value_hash("\"v" + std::to_string(i) + "\"")));
  const std::uint32_t top = chain.back();
  for (int i = 0; i < 100; ++i) EXPECT(vs.has(top, value_hash("\"v" + std::to_string(i) + "\"")));
  EXPECT(!vs.has(top, value_hash("\"v100\"")) && !vs.has(top, value_hash("\"w0\"")));
  EXPECT(vs.has(chain[40], value_hash("\"v39\"")) && !vs.has(chain[40], value_hash("\"v40\"")));
  EXPECT(vs.has(top, value_hash("\"v99\"")));  // back to the first set: rebuilt
  // Drop the sets past 50 values and grow another branch at the same ids.
  vs.truncate(chain[50] + 1);
  std::uint32_t other = chain[50];
  for (int i = 0; i < 30; ++i) other = vs.with(other, value_hash("\"x" + std::to_string(i) + "\""));
  EXPECT(vs.has(other, value_hash("\"x29\"")) && vs.has(other, value_hash("\"v49\"")));
  EXPECT(!vs.has(other, value_hash("\"v50\"")) && !vs.has(other, value_hash("\"v99\"")));
  ValueSets copy = vs;  // a matcher copy carries the index along
  EXPECT(copy.has(other, value_hash("\"x0\"")) && !copy.has(other, value_hash("\"v60\"")));
}

TEST(distinct_open_ended_probe) {
  const Limits l{};
  EXPECT_EQ(probe_open_ended("/[a-z]+/j", 6000, l), 1);
  EXPECT_EQ(probe_open_ended("/x[0-9]{2}(y+)?/j", 6000, l), 1);
  EXPECT_EQ(probe_open_ended("/(?s:.)*/j", 6000, l), 1);
  EXPECT_EQ(probe_open_ended("/[ab]/j", 6000, l), 0);
  EXPECT_EQ(probe_open_ended("/ab|a+/j", 6000, l), 0);
  EXPECT_EQ(probe_open_ended("/[a-z]+\\n?/j", 6000, l), 0);
  EXPECT_EQ(probe_open_ended("/[a-z]+/j & /(?s:.){0,10}/j", 6000, l), 0);
  EXPECT_EQ(probe_open_ended("/a/j - /a/j", 6000, l), 0);  // empty
  EXPECT_EQ(probe_open_ended("/(?s:.){300}(?s:.)*/j", 3, l), -1);
  // A hostname (format: labels of up to 63 characters, any number of them): the lowering splits
  // the starred label group into terminals of their own, but the language is what is asked.
  const char* host = "/[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*/j";
  EXPECT_EQ(probe_open_ended(host, 6000, l), 1);
  EXPECT_EQ(probe_open_ended("/[A-Za-z0-9]{1,63}/j", 6000, l), 0);  // bounded: finite
  // sinks_ok: a quoted key, whose closing quote reads nothing more.
  EXPECT_EQ(probe_open_ended("\"\\\"\" /[a-z]+/j \"\\\"\"", 6000, l), 0);
  EXPECT_EQ(probe_open_ended("\"\\\"\" /[a-z]+/j \"\\\"\"", 6000, l, true), 1);
  EXPECT_EQ(probe_open_ended("\"\\\"\" /[a-z]+\\n?/j \"\\\"\"", 6000, l, true), 0);  // "x\n then only "
}

TEST(distinct_language) {
  auto g = compile_grammar(kDistinct, "root", distinct_vocab(), Limits{});
  const std::vector<std::pair<std::string, bool>> cases = {
      {"[\"a\",\"b\"]", true},          {"[\"a\",\"a\"]", false},       {"[\"a\",\"\\u0061\"]", false},
      {"[\"\",\"a\",\"\"]", false},     {"[\"ab\",\"a\",\"ba\"]", true}, {"[\"a\"]", false},
      {"[\"a\",\"b\",\"ab\",\"ba\"]", true}, {"[\"a\",\"b\",\"ab\",\"ba\",\"\"]", false},
      {"[\"\\u0062\",\"b\"]", false},   {"[\"\\u0062\",\"a\"]", true},
  };
  for (const auto& [text, want] : cases) {
    if (accepts(g, text) != want) std::fprintf(stderr, "  case %s\n", text.c_str());
    EXPECT(accepts(g, text) == want);
  }
  Matcher m(g);
  EXPECT(m.accept_bytes("[\"a\","));
  EXPECT(!Matcher(m).accept_bytes("\"a\""));  // refused where it closes, also inside one step
  EXPECT(Matcher(m).accept_bytes("\"a"));     // "a..." can still become another value
  EXPECT(!Matcher(g).accept_bytes("[\"a\",\"a\""));
  EXPECT_THROWS(compile_grammar("root ::= %distinct{3,2}(\",\"; \"a\")", "root", distinct_vocab(), Limits{}), CompileError);
}

TEST(distinct_masks_match_parser_and_completions_are_valid) {
  auto g = compile_grammar(kDistinct, "root", distinct_vocab(), Limits{});
  auto loaded = load_artifact(to_artifact(*g), distinct_vocab());
  EXPECT(loaded->grammar().to_string() == g->grammar().to_string());
  const Vocabulary& v = g->vocab();
  std::size_t refused_closes = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    Matcher m(g), l(loaded);
    std::string text;
    for (int step = 0; step < 24 && !m.is_terminated(); ++step) {
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::allowed(l));
      const std::vector<std::int32_t> accepted = corral_test::accepted_one_by_one(m);
      EXPECT(al == accepted);  // both directions
      for (std::uint32_t t = 0; t < v.size(); ++t) {
        const auto id = static_cast<std::int32_t>(t);
        const std::string& b = v.bytes(id);
        const bool closes = b == "a\"" || b == "\"a\"" || b == "a\",\"a\"" || b == "\"a\",\"a\"";
        refused_closes += closes && !std::binary_search(accepted.begin(), accepted.end(), id);
      }
      Matcher done = m;
      const std::string rest = done.shortest_completion();
      EXPECT(done.accept_bytes(rest) && done.is_accepting());
      EXPECT(accepts(g, text + rest));
      if (al.empty()) break;
      // Prefer short items, so that duplicates are often one token away.
      std::vector<std::int32_t> pick;
      for (std::int32_t t : al)
        if (v.bytes(t).size() <= 2 && v.bytes(t) != "ab") pick.push_back(t);
      if (pick.empty()) pick = al;
      const std::int32_t t = pick[rng() % pick.size()];
      EXPECT(m.accept_token(t));
      EXPECT(l.accept_token(t));
      if (t != v.eos_ids()[0]) text += v.bytes(t);
    }
  }
  EXPECT(refused_closes > 0);  // the walks did reach states where a close repeats an item
}

// item_values.hpp: the values of a quoted JSON string automaton, counted per state.
TEST(distinct_item_values_are_counted) {
  const Limits l{};
  EXPECT_EQ(probe_item_values("\"\\\"\" /[ab]/j \"\\\"\"", 6000, l), 2);
  EXPECT_EQ(probe_item_values("\"\\\"\" /[ab]/c \"\\\"\"", 6000, l), 2);  // one spelling each: the same count
  EXPECT_EQ(probe_item_values("\"\\\"\" /[ab]{1,2}/j \"\\\"\"", 6000, l), 6);
  EXPECT_EQ(probe_item_values("\"\\\"\" /[\\x00-\\x1f\"\\\\]/j \"\\\"\"", 6000, l), 34);  // escapes only
  EXPECT_EQ(probe_item_values("\"\\\"\" /\xF0\x9F\x98\x80|\xC3\xA9|\\//j \"\\\"\"", 6000, l), 3);  // pairs, \u00e9, \/
  EXPECT_EQ(probe_item_values("\"\\\"\" /[a-z]+/j \"\\\"\"", 6000, l), 4097);  // infinitely many: capped
  EXPECT_EQ(probe_item_values("\"\\\"\" /[0-9]{4}/j \"\\\"\"", 6000, l), 4097);  // 10,000: capped
  EXPECT_EQ(probe_item_values("\"\\\"\" /(?s:.){0,2}/j \"\\\"\"", 6000, l), 4097);
  EXPECT_EQ(probe_item_values("/[ab]/j", 6000, l), -1);            // no quotes
  EXPECT_EQ(probe_item_values("/\"[ab]\"|x/", 6000, l), -1);         // not a JSON string
  EXPECT_EQ(probe_item_values("\"\\\"\" /a/j \"\\\"\" \"x\"", 6000, l), -1);  // goes on after the quote
  // A group that needs more items than its item has values has no sentence.
  EXPECT_THROWS(compile_grammar("root ::= %distinct{3,4}(\",\"; s)\ns ::= \"\\\"\" /[ab]/j \"\\\"\"", "root",
                                distinct_vocab(), Limits{}),
                CompileError);
  EXPECT(compile_grammar("root ::= %distinct{2,4}(\",\"; s)\ns ::= \"\\\"\" /[ab]/j \"\\\"\"", "root",
                         distinct_vocab(), Limits{}) != nullptr);
}

// A distinct group over strings with finitely many values: dead prefixes are refused, an
// exhausted group closes, masks equal the parser and completions find the values left.
TEST(distinct_bounded_items_have_no_dead_ends) {
  const char* grammar = R"G(root ::= "[" items "]"
items ::= %distinct{1,5}(","; str)
str ::= "\"" /[ab]|ab/j "\"")G";
  auto g = compile_grammar(grammar, "root", bounded_vocab(), Limits{});
  EXPECT(accepts(g, "[\"a\",\"b\",\"ab\"]") && accepts(g, "[\"\\u0061\",\"a\\u0062\"]"));
  EXPECT(!accepts(g, "[\"a\",\"\\u0061\"]"));
  EXPECT(!Matcher(g).accept_bytes("[\"a\",\"b\",\"ab\","));     // every value written (max 5)
  EXPECT(!Matcher(g).accept_bytes("[\"ab\",\"a\",\"a"));       // "a" and "ab" held: a dead prefix
  EXPECT(!Matcher(g).accept_bytes("[\"ab\",\"a\",\"\\u0061"));  // the same, escaped
  EXPECT(Matcher(g).accept_bytes("[\"ab\",\"a\",\"\\u006"));  // \u0061 or \u0062: "b" is left
  EXPECT(Matcher(g).accept_bytes("[\"ab\",\"a\",\"\\u0062"));
  EXPECT(Matcher(g).accept_bytes("[\"ab\",\"\\u006"));
  walks_without_dead_ends(g, 30, [](std::string_view b) { return b.size() <= 2; });
}

// Numeric items (item_values.hpp): canonical integers are counted as strings are; others are not.
TEST(distinct_numeric_item_values_are_counted) {
  const Limits l;
  EXPECT_EQ(probe_item_values("/(?:0|[1-9][0-9]?|-[1-9])/", 6000, l), 109);
  EXPECT_EQ(probe_item_values("/-?1[0-9]?/", 6000, l), 22);
  EXPECT_EQ(probe_item_values("/(?:0|-?[1-9][0-9]*)/", 6000, l), 4097);  // infinitely many: capped
  EXPECT_EQ(probe_item_values("/0[0-9]/", 6000, l), -1);    // leading zeros: two spellings of 1
  EXPECT_EQ(probe_item_values("/-?0/", 6000, l), 1);        // -0 is 0 (counted as a decimal)
  EXPECT_EQ(probe_item_values("/1(?:\\.0)?/", 6000, l), 1);   // 1.0 is 1 (counted as a decimal)
  EXPECT_EQ(probe_item_values("/-/", 6000, l), -1);         // not a number
  // Plain decimals: one value (pinned) or infinitely many.
  EXPECT_EQ(probe_item_values("/-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?/", 6000, l), 4097);
  EXPECT_EQ(probe_item_values("/5(?:\\.0+)?/", 6000, l), 1);
  EXPECT_EQ(probe_item_values("/-?0(?:\\.0+)?/", 6000, l), 1);    // 0 and -0 are one value
  EXPECT_EQ(probe_item_values("/(?:[0-4](?:\\.[0-9]+)?|5(?:\\.0+)?)/", 6000, l), 4097);
  EXPECT_EQ(probe_item_values("/1(?:\\.[0-9]+)?e5/", 6000, l), -1);  // exponents: not plain
}

namespace {
std::shared_ptr<const Vocabulary> numeric_vocab() {
  std::vector<std::string> toks;
  for (const char* t : {"[", "]", ",", "-", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ",1", ",-", "1,", "10",
                        "-1", "19", "1]", ", 1", " ", ".", ".0", "5.", ",5", ".5", "0,"})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}
}  // namespace

// A distinct group of integers with finitely many values after some prefixes ("1" may only
// become 1 or 10..19): a prefix whose every value is held is refused, also when the token that
// enters it closes the item before; a value that is held but may go on is not.
TEST(distinct_numeric_items_have_no_dead_ends) {
  const char* grammar = R"G(root ::= "[" items "]"
items ::= %distinct{1,30}(","; n)
n ::= /(?:-?1[0-9]?|[2-4])/)G";
  auto g = compile_grammar(grammar, "root", numeric_vocab(), Limits{});
  EXPECT(accepts(g, "[1,10,-1]") && !accepts(g, "[1,1]") && !accepts(g, "[-10,2,-10]"));
  const std::string teens = "[10,11,12,13,14,15,16,17,18,19";
  EXPECT(!Matcher(g).accept_bytes(teens + ",1,1"));   // 1 and 10..19 held: "1" is dead
  EXPECT(Matcher(g).accept_bytes(teens + ",1]"));
  EXPECT(Matcher(g).accept_bytes(teens + ",-1"));
  EXPECT(Matcher(g).accept_bytes("[1,1"));             // 1 held, "1" may become 10..19
  EXPECT(!Matcher(g).accept_bytes("[1,1,"));
  EXPECT(!Matcher(g).accept_bytes("[1,1]"));
  {
    Matcher m(g);
    EXPECT(m.accept_bytes(teens + ",1"));
    const std::vector<std::int32_t> al = corral_test::allowed(m);
    EXPECT(al == corral_test::accepted_one_by_one(m));  // ",1" (one token) is refused
  }
  {
    Matcher m(g);
    EXPECT(m.accept_bytes(teens));                      // 1 still free: "1" may close as 1
    EXPECT(corral_test::allowed(m) == corral_test::accepted_one_by_one(m));
    EXPECT(m.accept_bytes(",1"));
    Matcher a = m, b = m;
    EXPECT(!a.accept_bytes("0") && b.accept_bytes(","));
  }
  // Every value written: the array can only close.
  EXPECT(!Matcher(g).accept_bytes("[-1,-10,-11,-12,-13,-14,-15,-16,-17,-18,-19,1,10,11,12,13,14,15,16,17,18,19,2,3,4,"));
  walks_without_dead_ends(g, 60, [](std::string_view b) { return b != "]" && b != "1]"; });
}

// The correction (a scan of the vocabulary) is built once per grammar, by its first matcher,
// and shared by the others; a grammar without a distinct group has none.
TEST(distinct_correction_is_built_once_per_grammar) {
  auto g = compile_grammar("root ::= \"[\" items \"]\"\nitems ::= %distinct{1,4}(\",\"; /[ab]/)", "root", distinct_vocab(), Limits{});
  Matcher a(g), b(g);
  EXPECT(g->distinct_correction() != nullptr);
  EXPECT(g->distinct_correction().get() == g->distinct_correction().get());
  EXPECT(a.accept_bytes("[a,") && !a.accept_bytes("a") && b.accept_bytes("[a]"));
  auto plain = compile_grammar("root ::= \"[\" /[ab]/ \"]\"", "root", distinct_vocab(), Limits{});
  EXPECT(plain->distinct_correction() == nullptr);
}

// A distinct group of plain decimals, compared as exact decimals (5 = 5.0 = 5.00): a prefix
// pinned to one held value ("5" under maximum 5, "-" under minimum 0) is refused; completions
// repaired past a held value end (a `0` would keep the value: "1.0", "1.00", ...).
TEST(distinct_decimal_items_have_no_dead_ends) {
  const char* grammar = R"G(root ::= "[" items "]"
items ::= %distinct{1,12}(","; n)
n ::= /-?0(?:\.0+)?|(?:0|[1-4])\.[0-9]+|[1-4]|5(?:\.0+)?/)G";
  auto g = compile_grammar(grammar, "root", numeric_vocab(), Limits{});
  EXPECT(accepts(g, "[5,0.5,1.25]") && !accepts(g, "[5,5.0]") && !accepts(g, "[1.5,1.50]") && !accepts(g, "[0,-0.0]"));
  EXPECT(!Matcher(g).accept_bytes("[5,5"));     // only 5 again
  EXPECT(!Matcher(g).accept_bytes("[0,-"));     // only -0, which is 0
  EXPECT(Matcher(g).accept_bytes("[0,0."));     // 0.5, ...
  EXPECT(!Matcher(g).accept_bytes("[1.5,1.50,"));
  {
    Matcher m(g);
    EXPECT(m.accept_bytes("[1,1.5,1"));
    const std::string rest = m.shortest_completion();
    EXPECT(m.accept_bytes(rest) && m.is_accepting());
  }
  walks_without_dead_ends(g, 60, [](std::string_view b) { return b != "]" && b != "1]"; });
}

// An item the lowering splits into several terminals (a hostname: the starred label group is a
// terminal of its own) whose every prefix still has infinitely many values: exact, the
// correction finding the held values without the one-terminal shortcut (open_values).
TEST(distinct_split_open_ended_items) {
  const char* grammar = R"G(root ::= "[" items "]"
items ::= %distinct{2,4}(","; "\"" /[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?)*/j "\""))G";
  auto g = compile_grammar(grammar, "root", bounded_vocab(), Limits{});
  const std::int32_t item = g->grammar().keyed[0].value_nt;
  std::size_t longest = 0;
  for (std::int32_t p : g->grammar().by_lhs[static_cast<std::size_t>(item)])
    longest = std::max<std::size_t>(longest, g->grammar().rhs_len(static_cast<std::uint32_t>(p)));
  EXPECT(longest > 1);  // (split: else this test would not be about split items)
  EXPECT(accepts(g, "[\"a.b\",\"ab\"]"));
  EXPECT(!accepts(g, "[\"a.b\",\"a.b\"]"));
  EXPECT(!accepts(g, "[\"a.b\",\"a\\u002eb\"]"));  // the same value, the dot escaped
  walks_without_dead_ends(g, 40, [](std::string_view b) { return b.size() > 1 || b == "\"" || b == "," || b == "a" || b == "."; });
}
