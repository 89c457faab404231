// test_dfa.cpp — the byte DFA: matching tables (UTF-8, classes, Unicode \d, nullable and empty
// languages), minimality, dead states, limits, shortest completions, compile speed.
#include <cstdio>
#include <string>
#include <vector>

#include "dfa.hpp"
#include "errors.hpp"
#include "regex_parser.hpp"
#include "cpu_time.hpp"
#include "dfa_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

// Patient by default: the tests check which limit refuses a pattern (max_compile_ms has its own
// test, dfa_compile_budget), and a sanitizer build under load may pass 10 s of wall time.
Dfa compile_pattern(const std::string& p, const Limits& lim = corral_test::patient_limits()) {
  Budget b(lim.max_compile_ms);
  return Dfa::compile(parse_regex(p, lim), lim, b);
}

using corral_test::full_match;

// Independent check of minimality: Moore refinement over all 256 bytes must not split further.
std::size_t moore_blocks(const Dfa& d) {
  const std::size_t n = d.num_states();
  std::vector<std::uint32_t> block(n);
  for (std::size_t s = 0; s < n; ++s) block[s] = d.accepting(static_cast<std::int32_t>(s)) ? 1 : 0;
  std::size_t count = 0;
  for (;;) {
    std::vector<std::pair<std::vector<std::int64_t>, std::size_t>> sigs;
    for (std::size_t s = 0; s < n; ++s) {
      std::vector<std::int64_t> sig{block[s]};
      for (int b = 0; b < 256; ++b) {
        const std::int32_t t = d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b));
        sig.push_back(t < 0 ? -1 : static_cast<std::int64_t>(block[static_cast<std::size_t>(t)]));
      }
      sigs.emplace_back(std::move(sig), s);
    }
    std::sort(sigs.begin(), sigs.end());
    std::vector<std::uint32_t> nb(n);
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0 && sigs[i].first != sigs[i - 1].first) ++k;
      nb[sigs[i].second] = static_cast<std::uint32_t>(k);
    }
    const std::size_t nk = n == 0 ? 0 : k + 1;
    block = nb;
    if (nk == count) return nk;
    count = nk;
  }
}

void check_structure(const Dfa& d, const std::string& what) {
  // Classes: every byte in a class behaves the same in every state.
  for (std::uint32_t s = 0; s < d.num_states(); ++s) {
    for (int b = 0; b < 256; ++b) {
      const auto cls = d.byte_class(static_cast<std::uint8_t>(b));
      if (d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b)) !=
          d.next(static_cast<std::int32_t>(s), d.class_representative(cls)))
        throw corral_test::Failure{"byte class not uniform in " + what};
    }
    // Liveness + shortest completion.
    const std::string c = d.shortest_completion(static_cast<std::int32_t>(s));
    if (c.size() != d.distance_to_accept(static_cast<std::int32_t>(s)))
      throw corral_test::Failure{"completion length != distance in " + what};
    std::int32_t st = static_cast<std::int32_t>(s);
    for (unsigned char ch : c) st = d.next(st, ch);
    if (st == Dfa::kDead || !d.accepting(st)) throw corral_test::Failure{"completion not accepted in " + what};
  }
  if (moore_blocks(d) != d.num_states()) throw corral_test::Failure{"DFA not minimal: " + what};
}

}  // namespace

TEST(dfa_match_table) {
  struct Case {
    const char* pattern;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"", "ab", "abcd", "abd", "ABC"}},
      {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
      {"(ab)*c", {"c", "abc", "ababc"}, {"", "ab", "abac", "aabc"}},
      {"a{3}", {"aaa"}, {"aa", "aaaa"}},
      {"a{2,4}", {"aa", "aaa", "aaaa"}, {"a", "aaaaa"}},
      {"a{2,}", {"aa", "aaaaaaaaaa"}, {"", "a"}},
      {"a{,2}", {"", "a", "aa"}, {"aaa"}},
      {"x{0}", {""}, {"x"}},
      {"(?:ab){1,3}c", {"abc", "abababc"}, {"c", "ababababc"}},
      {"[a-c]+", {"abcabc", "c"}, {"", "abd"}},
      {"[^abc]", {"d", "\n", "\xc3\xa9", "\xf0\x9f\x98\x80"}, {"a", "", "dd"}},
      {"[^\"]*", {"", "hello", "h\xc3\xa9llo \xe6\x97\xa5"}, {"\"", "a\"b"}},
      {".", {"a", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\r"}, {"\n", "", "ab", "\xc3", "\x80"}},
      {"(?s).", {"\n", "a"}, {""}},
      {".*", {"", "abc", "a b c"}, {"a\nb"}},
      {"\\d+", {"0123", "\xd9\xa3\xd9\xa4", "\xdb\xb3", "\xef\xbc\x95", "\xf0\x9d\x9f\x8e"},  // Arabic-Indic, ext., fullwidth, math
       {"", "a", "\xc2\xb2", "\xe2\x85\xa0"}},                                               // superscript two, roman numeral: not decimal
      {"(?a)\\d", {"7"}, {"\xd9\xa3"}},
      {"\\w+", {"abc_123", "\xc3\xa9t\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xc2\xb2"}, {"a-b", " ", ""}},
      {"\\W", {"-", " ", "\xe2\x80\x94"}, {"a", "_", "\xc3\xa9"}},
      {"\\s", {" ", "\t", "\n", "\x0b", "\x0c", "\r", "\xc2\x85", "\xc2\xa0", "\xe3\x80\x80", "\x1c"}, {"a", "\xe2\x80\x8b"}},
      {"\\S+", {"abc"}, {"a b"}},
      {"[\\d\\s]", {"5", " "}, {"a"}},
      {"\xc3\xa9+", {"\xc3\xa9\xc3\xa9"}, {"e", "\xc3"}},
      {"[\xc3\xa9-\xc3\xbc]", {"\xc3\xa9", "\xc3\xbc", "\xc3\xb0"}, {"\xc3\xa8", "\xc3\xbd"}},
      {"\\U0001F600|\\u00e9", {"\xf0\x9f\x98\x80", "\xc3\xa9"}, {"\xf0\x9f\x98\x81"}},
      {"[\\U00010000-\\U0010ffff]", {"\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}, {"\xef\xbf\xbf", "\xf4\x90\x80\x80"}},
      {"[^\\x00-\\x7f]", {"\xc2\x80", "\xef\xbf\xbf", "\xf0\x9f\x98\x80"}, {"a", "\x7f", "\xed\xa0\x80", "\xc0\x80"}},
      {"^abc$", {"abc"}, {"abc\n"}},
      {"^a|b$", {"a", "b"}, {"ab"}},
      {"a{", {"a{"}, {"a"}},
      {"a{,}", {"", "aaa"}, {"b"}},
      {"\\x41\\101\\0", {std::string("AA\0", 3)}, {"AA"}},
      {"(?x) a b # comment\n c", {"abc"}, {"a b c"}},
      {"(a|aa)*", {"", "a", "aaaaaaa"}, {"b"}},
      {"((a*)*)*", {"", "aaaa"}, {"b"}},
      {"(a*|b)*c", {"c", "abababc", "bbbc"}, {"ab"}},
      {"[^\\x00-\\U0010FFFF]", {}, {"", "a"}},
      {"\"([^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*\"",
       {"\"\"", "\"a\\n\\u00e9\xc3\xa9\"", "\"\\\"\""}, {"\"", "\"\\x\"", "\"\n\"", "\"\\u12\""}},
  };
  for (const auto& c : cases) {
    const Dfa d = compile_pattern(c.pattern);
    for (const auto& s : c.yes)
      if (!full_match(d, s)) throw corral_test::Failure{std::string(c.pattern) + " should match " + s};
    for (const auto& s : c.no)
      if (full_match(d, s)) throw corral_test::Failure{std::string(c.pattern) + " should not match " + s};
    check_structure(d, c.pattern);
  }
}

TEST(dfa_nullable_and_empty_language) {
  const Dfa e = compile_pattern("[^\\x00-\\U0010FFFF]");
  EXPECT(e.empty_language());
  EXPECT_EQ(e.num_states(), 0u);
  EXPECT_EQ(e.start(), Dfa::kDead);
  EXPECT(!e.matches_empty());
  const Dfa e2 = compile_pattern("a[^\\s\\S]b|c[^\\x00-\\U0010FFFF]");
  EXPECT(e2.empty_language());
  const Dfa n = compile_pattern("a*");
  EXPECT(n.matches_empty());
  EXPECT_EQ(n.distance_to_accept(n.start()), 0u);
  EXPECT_EQ(n.shortest_completion(n.start()), std::string());
  const Dfa eps = compile_pattern("");
  EXPECT(eps.matches_empty());
  EXPECT_EQ(eps.num_states(), 1u);
  EXPECT_EQ(eps.next(eps.start(), 'a'), Dfa::kDead);
}

TEST(dfa_is_minimal_and_dead_free) {
  EXPECT_EQ(compile_pattern("(a|b)*").num_states(), 1u);
  EXPECT_EQ(compile_pattern("abc|abd").num_states(), compile_pattern("ab[cd]").num_states());
  EXPECT_EQ(compile_pattern("abc|abd").num_states(), 4u);
  EXPECT_EQ(compile_pattern("(a|aa)*").num_states(), 1u);
  EXPECT_EQ(compile_pattern("((a*)*)*").num_states(), 1u);
  EXPECT_EQ(compile_pattern("a|ab|abc").num_states(), compile_pattern("a(b(c)?)?").num_states());
  // `.` and [^"] stay small: start + accept + the mid-character states.
  EXPECT(compile_pattern(".").num_states() <= 9u);
  EXPECT(compile_pattern("[^\"]*").num_states() <= 8u);
  // Dead branches disappear: every state can still reach acceptance.
  const Dfa d = compile_pattern("a(b[^\\s\\S]|c)");
  EXPECT_EQ(d.num_states(), 3u);
  EXPECT_EQ(d.next(d.next(d.start(), 'a'), 'b'), Dfa::kDead);
  const char* pats[] = {"\\w+@\\w+\\.\\w+", "(a|b)*a(a|b){3}", "[\\d\\s]+x", "\\D\\W\\S", "(?i)straße"};
  for (const char* p : pats) check_structure(compile_pattern(p), p);
}

TEST(dfa_byte_classes) {
  const Dfa d = compile_pattern("[a-c]x");
  // Classes: {a,b,c}, {x}, and everything else (possibly split but never finer than needed).
  EXPECT(d.byte_class('a') == d.byte_class('c'));
  EXPECT(d.byte_class('a') != d.byte_class('x'));
  EXPECT(d.byte_class('d') == d.byte_class(0xFF));
  EXPECT_EQ(d.num_classes(), 3u);
  EXPECT_EQ(d.class_representative(d.byte_class('b')), 'a');
  EXPECT(d.memory_bytes() > 0);
}

TEST(dfa_byte_classes_are_the_coarsest_partition) {
  // Two bytes share a class exactly when every state sends them to the same state. Patterns
  // with wide edges split by narrow ones (the assembly refines wide edges run by run, narrow
  // ones byte by byte) and multi-byte UTF-8 ranges.
  const std::vector<std::string> patterns = {
      "[^\"\\\\]*\"",
      "[\\x00-\\x7f]{0,3}x|[a-z]+[0-9]|[^a-m]{2}",
      "(?:[^a]|a[^b])*",
      "[\\u0100-\\uffff]+|[\\u00e0-\\u00ff]{2}z",
      "(?:[ -~]|\\\\[nrt\"])*\"|[0-9A-Fa-f]{4}",
      "[b-y]+|c[^d]|[a-z0-9_]{1,5}[A-Z]",
  };
  for (const std::string& p : patterns) {
    const Dfa d = compile_pattern(p);
    check_structure(d, p);
    for (int a = 0; a < 256; ++a)
      for (int b = a + 1; b < 256; ++b) {
        bool same = true;
        for (std::uint32_t s = 0; s < d.num_states() && same; ++s)
          same = d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(a)) ==
                 d.next(static_cast<std::int32_t>(s), static_cast<std::uint8_t>(b));
        if (same != (d.byte_class(static_cast<std::uint8_t>(a)) == d.byte_class(static_cast<std::uint8_t>(b))))
          throw corral_test::Failure{"byte classes of " + p + " are not the coarsest partition at bytes " +
                                     std::to_string(a) + ", " + std::to_string(b)};
      }
  }
}

TEST(dfa_state_limits) {
  // 2^13 states fit under the default max_dfa_states (20000) ...
  const Dfa d = compile_pattern("(a|b)*a(a|b){12}");
  EXPECT_EQ(d.num_states(), 8192u);
  check_structure(compile_pattern("(a|b)*a(a|b){5}"), "(a|b)*a(a|b){5}");
  // ... 2^15 do not.
  const double t0 = corral_test::cpu_ms();
  try {
    compile_pattern("(a|b)*a(a|b){14}");
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_dfa_states"));
  }
  Limits small = corral_test::patient_limits();
  small.max_dfa_states = 10;
  EXPECT_THROWS(compile_pattern("abcdefghijklmnop", small), LimitExceeded);
  small.max_dfa_states = 3;
  EXPECT_THROWS(compile_pattern("\xc3\xa9\xc3\xa9", small), LimitExceeded);  // limit applies to byte states
  Limits nfa = corral_test::patient_limits();
  nfa.max_nfa_states = 20;
  try {
    compile_pattern("abcdefghijklmnopqrstuvwxyz", nfa);
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nfa_states"));
  }
  // CPU time, so a loaded machine does not fail it; generous: sanitizer builds are slow.
  EXPECT(corral_test::cpu_ms() - t0 < 3000);
}

TEST(dfa_compile_budget) {
  Limits lim;
  Budget expired(0);
  // The deadline is already past; a long determinisation notices it.
  try {
    Dfa::compile(parse_regex("(a|b)*a(a|b){12}", lim), lim, expired);
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_compile_ms"));
  }
}

TEST(dfa_rejects_rule_refs) {
  Limits lim;
  Budget b(lim.max_compile_ms);
  EXPECT_THROWS(Dfa::compile(make_concat({make_chars(CharSet::single('a')), make_rule_ref(0)}), lim, b),
                InternalError);
}

TEST(dfa_shortest_completion) {
  const Dfa d = compile_pattern("abc(d|ef)*g|xy");
  EXPECT_EQ(d.distance_to_accept(d.start()), 2u);
  EXPECT_EQ(d.shortest_completion(d.start()), std::string("xy"));
  const std::int32_t s = d.next(d.start(), 'a');
  EXPECT_EQ(d.shortest_completion(s), std::string("bcg"));
  const Dfa u = compile_pattern("[\xc3\xa9\xe6\x97\xa5]");
  EXPECT_EQ(u.shortest_completion(u.start()), std::string("\xc3\xa9"));
  EXPECT_EQ(u.distance_to_accept(u.start()), 2u);
}

TEST(dfa_compile_speed_realistic) {
  std::string codes;
  for (int i = 0; i < 200; ++i) {
    if (i) codes += '|';
    codes += std::string(1, static_cast<char>('A' + i % 26)) + static_cast<char>('A' + (i / 26) % 26) + "X-\\d{5}";
  }
  const std::vector<std::string> pats = {
      "[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}",
      "[\\w.+-]+@[\\w-]+\\.[\\w.-]+",
      "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})",
      "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
      "\\+?1?[ -]?\\(?\\d{3}\\)?[ -]?\\d{3}-\\d{4}",
      codes,
      "\"([^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*\"",
      "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?",
  };
  for (const auto& p : pats) {
    const double t0 = corral_test::cpu_ms();
    const Dfa d = compile_pattern(p);
    const double ms = corral_test::cpu_ms() - t0;
    EXPECT(d.num_states() > 0);
    // CPU time (a loaded machine does not fail it); sanity only: scripts/bench_regex.cpp
    // measures Release timings.
    EXPECT(ms < 200);
  }
}
