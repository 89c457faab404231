// test_regex.cpp — the regex frontend: CharSet algebra, parse errors and their positions,
// limits, print_regex round trips, estimate_nfa_size.
#include <string>

#include "dfa.hpp"
#include "errors.hpp"
#include "regex_ast.hpp"
#include "regex_parser.hpp"
#include "cpu_time.hpp"
#include "dfa_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

NodePtr parse(const std::string& p) { return parse_regex(p, Limits{}); }

// Offset and column of the CompileError `p` raises (-1 if it raises nothing / something else).
std::pair<long, int> error_at(const std::string& p) {
  try {
    parse(p);
  } catch (const CompileError& e) {
    EXPECT_EQ(e.line(), 1);
    return {static_cast<long>(e.offset()), e.column()};
  } catch (...) {
    return {-2, -2};
  }
  return {-1, -1};
}

using corral_test::full_match;

Dfa compile(const NodePtr& n) {
  Limits lim;
  Budget b(lim.max_compile_ms);
  return Dfa::compile(n, lim, b);
}

}  // namespace

TEST(charset_normalises_and_negates) {
  CharSet cs;
  cs.add('d', 'f');
  cs.add('a', 'b');
  cs.add('c', 'c');  // joins both neighbours
  EXPECT_EQ(cs.ranges().size(), std::size_t{1});
  EXPECT_EQ(cs.ranges()[0].lo, std::uint32_t{'a'});
  EXPECT_EQ(cs.ranges()[0].hi, std::uint32_t{'f'});
  cs.add('x', 'z');
  cs.add('e', 'y');
  EXPECT_EQ(cs.ranges().size(), std::size_t{1});
  EXPECT(cs.contains('q') && !cs.contains('{') && !cs.contains('`'));
  // Surrogates never enter a set.
  CharSet s = CharSet::range(0xD000, 0xE000);
  EXPECT_EQ(s.ranges().size(), std::size_t{2});
  EXPECT(!s.contains(0xD800) && !s.contains(0xDFFF) && s.contains(0xD7FF) && s.contains(0xE000));
  EXPECT(CharSet::any().negated().empty());
  EXPECT(CharSet().negated() == CharSet::any());
  EXPECT(!CharSet::any().contains(0xDABC));
  EXPECT(CharSet::any().contains(0x10FFFF));
  CharSet n = CharSet::single('a').negated();
  EXPECT(!n.contains('a') && n.contains('b') && n.contains(0) && n.contains(0x10FFFF));
  EXPECT(n.negated() == CharSet::single('a'));
  CharSet u = CharSet::range('a', 'c');
  u.add(CharSet::range('b', 'k'));
  u.add(CharSet::range('m', 'm'));
  EXPECT_EQ(u.ranges().size(), std::size_t{2});
  EXPECT(CharSet::range(5, 3).empty());
}

TEST(node_helpers_simplify) {
  auto a = make_chars(CharSet::single('a'));
  auto c = make_concat({make_empty(), a, make_concat({a, a}), make_empty()});
  EXPECT(c->kind == NodeKind::Concat);
  EXPECT_EQ(c->kids.size(), std::size_t{3});
  EXPECT(make_concat({make_empty()})->kind == NodeKind::Empty);
  EXPECT(make_concat({a}) == a);
  auto alt = make_alt({a, make_alt({a, a})});
  EXPECT_EQ(alt->kids.size(), std::size_t{3});
  EXPECT(make_repeat(a, 1, 1) == a);
  EXPECT(make_literal(U"héllo")->kids.size() == 5);
  EXPECT(is_regular(alt));
  EXPECT(!is_regular(make_concat({a, make_rule_ref(3)})));
  EXPECT_EQ(print_regex(make_concat({a, make_rule_ref(3)})), std::string("a<rule 3>"));
}

TEST(parse_errors_name_the_offset) {
  struct Case {
    const char* pattern;
    long offset;
    int column;
  };
  const Case cases[] = {
      {"a\\1", 1, 2},                 // backreference
      {"(a)\\1", 3, 4},               //
      {"(?P<x>a)(?P=x)", 8, 9},       // named backreference
      {"ab(?=c)", 2, 3},              // lookahead
      {"a(?!c)", 1, 2},               //
      {"(?<=a)b", 0, 1},              // lookbehind
      {"(?<!a)b", 0, 1},              //
      {"(a)?(?(1)b|c)", 4, 5},        // conditional
      {"x(?>a)", 1, 2},               // atomic group
      {"a*+", 1, 2},                  // possessive
      {"a++", 1, 2},                  //
      {"a?+", 1, 2},                  //
      {"a{1,2}+", 1, 2},              //
      {"\\bw", 0, 1},                 // word boundary
      {"a\\B", 1, 2},                 //
      {"(a", 0, 1},                   // unbalanced
      {"a)", 1, 2},                   //
      {"((a)", 0, 1},                 //
      {"[z-a]", 1, 2},                // bad range
      {"[\\d-z]", 1, 2},              //
      {"*a", 0, 1},                   // nothing to repeat
      {"a|*", 2, 3},                  //
      {"^*", 1, 2},                   //
      {"a**", 2, 3},                  // multiple repeat
      {"a{3,2}", 1, 2},               // min > max
      {"\\q", 0, 1},                  // bad escape
      {"\xc3\xa9\\q", 2, 2},          // offset in bytes, column in code points
      {"\\x4", 0, 1},                 // incomplete escape
      {"\\U00110000", 0, 1},          // beyond Unicode
      {"[a", 0, 1},                   // unterminated class
      {"a^", 1, 2},                   // anchor not at the start
      {"a$b", 1, 2},                  // anchor not at the end
      {"(^a)", 1, 2},                 //
      {"(a$)", 2, 3},                 //
      {"\\ud800", 0, 1},              // surrogate
      {"[\\udfff]", 1, 2},            //
      {"a\xff", 1, 2},                // invalid UTF-8
      {"\xed\xa0\x80", 0, 1},         // UTF-8-encoded surrogate
      {"\xc0\x80", 0, 1},             // overlong
      {"(?P<1>a)", 4, 5},             // bad group name
      {"(?P<a>x)(?P<a>y)", 12, 13},   // duplicate group name
      {"a(?i)", 1, 2},                // global flags not at the start
      {"(?z)", 0, 1},                 // unknown extension
      {"(?L)a", 0, 1},                // LOCALE
      {"\\N{DIGIT ONE}", 0, 1},       // \N refused
      {"\\400", 0, 1},                // octal out of range
      {"(?#x", 0, 1},                 // unterminated comment
      {"a{4294967295}", 1, 2},        // Python: repetition number too large
  };
  for (const auto& c : cases) {
    const auto got = error_at(c.pattern);
    if (got.first != c.offset || got.second != c.column) {
      std::ostringstream os;
      os << "pattern " << c.pattern << ": got offset " << got.first << " column " << got.second
         << ", want " << c.offset << "/" << c.column;
      throw corral_test::Failure{os.str()};
    }
  }
}

TEST(accepted_syntax_parses) {
  const char* ok[] = {"", "a{", "a{}", "a{1", "a{,}", "a{x}", "{", "x{2}{", "(?x) a b # c\n d",
                      "(?i)abc", "(?i:a)b(?-i:c)", "(?s).", "(?a)\\w", "(?u)\\w", "(?m)^a$",
                      "(?#c)a", "a(?#c)*", "(?P<name>a)", "(?:)", "(|a)", "a||b", "a*?", "a{2,3}?",
                      "^a|^b$", "\\Aa\\Z", "a$$", "[]a]", "[^]a]", "[a-]", "[-a]", "[\\b]",
                      "\\0\\01\\012\\101", "[\\1]", "(?i)(?s)(?x)a", "(?ai)k", "\\-\\.\\é"};
  for (const char* p : ok) {
    try {
      parse(p);
    } catch (const std::exception& e) {
      throw corral_test::Failure{std::string("pattern ") + p + " failed: " + e.what()};
    }
  }
}

TEST(nesting_limit_is_enforced_quickly) {
  const double t0 = corral_test::cpu_ms();  // CPU time: a loaded machine does not fail it
  EXPECT_THROWS(parse(std::string(100000, '(')), LimitExceeded);
  EXPECT_THROWS(parse(std::string(100000, '(') + "a" + std::string(100000, ')')), LimitExceeded);
  const double ms = corral_test::cpu_ms() - t0;
  EXPECT(ms < 500);
  try {
    parse(std::string(300, '(') + std::string(300, ')'));
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nesting"));
  }
  // Exactly at the limit is fine.
  Limits lim;
  EXPECT(parse_regex(std::string(lim.max_nesting, '(') + std::string(lim.max_nesting, ')'), lim) != nullptr);
}

TEST(counted_repetition_is_refused_before_expansion) {
  const double t0 = corral_test::cpu_ms();  // CPU time: a loaded machine does not fail it
  const char* big[] = {"a{0,100000}", "(?:a{1000}){1000}", "(?:(?:a{100}){100}){100}",
                       "a{4294967294}", "(?:ab|cd){30000}", "[a-z]{60000}"};
  for (const char* p : big) {
    try {
      parse(p);
      throw corral_test::Failure{std::string("no LimitExceeded for ") + p};
    } catch (const LimitExceeded& e) {
      EXPECT_EQ(e.limit(), std::string("max_nfa_states"));
    }
  }
  const double ms = corral_test::cpu_ms() - t0;
  EXPECT(ms < 200);
  EXPECT(parse("a{1000}") != nullptr);  // fits
}

TEST(estimate_nfa_size_bounds_and_saturates) {
  auto a = make_chars(CharSet::single('a'));
  EXPECT_EQ(estimate_nfa_size(a), std::uint64_t{2});
  EXPECT(estimate_nfa_size(make_repeat(a, 0, 100000)) >= 100000);
  auto huge = make_repeat(make_repeat(make_repeat(a, 4000000000u, 4000000000u), 4000000000u, 4000000000u),
                          4000000000u, 4000000000u);
  const std::uint64_t e = estimate_nfa_size(huge);
  EXPECT(e >= (std::uint64_t{1} << 60));  // saturated, no overflow
}

TEST(print_regex_round_trips) {
  const char* pats[] = {
      "abc", "a|b|", "(?:ab)*c", "a{2,5}b{3}c{4,}d+e?", "[a-z0-9_]+", "[^a-z]", "\\d+\\.\\d*",
      "\\w+@\\w+", "\\s\\S\\D\\W", ".", "(?s).", "[\\w.+-]+", "[^\\w]", "\\.\\^\\$\\*\\+\\?\\{\\}\\[\\]\\|\\(\\)\\\\",
      "[\\]\\[\\^\\-]", "\\n\\t\\x00\\x7f\\u00a0\\u2028", "é日😀", "[é-ü😀-😃]", "(?i)ks", "(?x) a # b\n c",
      "[^\\x00-\\U0010FFFF]", "[\\s\\S]", "x{0}y", "(?:)", "((a*)*)*", "(a|)+", "a{,3}", "\\#\\ ",
      "\"([^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*\"",
  };
  for (const char* p : pats) {
    const NodePtr t1 = parse(p);
    const std::string s1 = print_regex(t1);
    NodePtr t2;
    try {
      t2 = parse(s1);
    } catch (const std::exception& e) {
      throw corral_test::Failure{std::string("print of ") + p + " = " + s1 + " does not re-parse: " + e.what()};
    }
    const std::string s2 = print_regex(t2);
    if (s1 != s2) throw corral_test::Failure{std::string("print not canonical for ") + p + ": " + s1 + " vs " + s2};
    const Dfa d1 = compile(t1), d2 = compile(t2);
    EXPECT_EQ(d1.num_states(), d2.num_states());
    // Minimal DFAs of equal languages are isomorphic: walk both in lock step.
    if (d1.empty_language()) {
      EXPECT(d2.empty_language());
      continue;
    }
    std::vector<std::int32_t> map(d1.num_states(), -1);
    std::vector<std::int32_t> todo{d1.start()};
    map[static_cast<std::size_t>(d1.start())] = d2.start();
    while (!todo.empty()) {
      const std::int32_t s = todo.back();
      todo.pop_back();
      const std::int32_t t = map[static_cast<std::size_t>(s)];
      EXPECT_EQ(d1.accepting(s), d2.accepting(t));
      for (int b = 0; b < 256; ++b) {
        const std::int32_t s2 = d1.next(s, static_cast<std::uint8_t>(b));
        const std::int32_t t2 = d2.next(t, static_cast<std::uint8_t>(b));
        EXPECT_EQ(s2 == Dfa::kDead, t2 == Dfa::kDead);
        if (s2 == Dfa::kDead) continue;
        auto& m = map[static_cast<std::size_t>(s2)];
        if (m < 0) {
          m = t2;
          todo.push_back(s2);
        } else {
          EXPECT_EQ(m, t2);
        }
      }
    }
  }
  EXPECT_EQ(print_regex(parse("\\d")), std::string("\\d"));
  EXPECT_EQ(print_regex(parse("[^\\d]")), std::string("\\D"));
  EXPECT_EQ(print_regex(parse("(?s).")), std::string("[\\s\\S]"));
  EXPECT_EQ(print_regex(parse("a|b")), std::string("a|b"));
  EXPECT_EQ(print_regex(parse("(ab)+")), std::string("(?:ab)+"));
  EXPECT_EQ(print_regex(parse("[^\\x00-\\U0010FFFF]")), std::string("[^\\x00-\\U0010ffff]"));
}

TEST(case_insensitive_matches_python) {
  // Expected results taken from Python 3.11 re.fullmatch.
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case cases[] = {
      {"(?i)abc", "AbC", true},
      {"(?i)k", "\xe2\x84\xaa", true},        // KELVIN SIGN
      {"(?i)s", "\xc5\xbf", true},            // LONG S
      {"(?i)\xc3\x9f", "\xe1\xba\x9e", true},   // ß ~ ẞ
      {"(?i)\xcf\x83", "\xcf\x82", true},       // σ ~ ς
      {"(?i)\xcf\x83", "\xce\xa3", true},       // σ ~ Σ
      {"(?i)i", "\xc4\xb1", true},              // i ~ ı (re's extra equivalence)
      {"(?i)i", "\xc4\xb0", true},              // İ lowercases to i
      {"(?i)[^k]", "K", false},
      {"(?i)[^k]", "\xe2\x84\xaa", false},
      {"(?ai)k", "\xe2\x84\xaa", false},        // ASCII mode folds ASCII only
      {"(?ai)k", "K", true},
      {"(?i:a)b", "AB", false},
      {"(?i:a)b", "Ab", true},
      {"(?i)a(?-i:b)", "Ab", true},
      {"(?i)a(?-i:b)", "AB", false},
      {"(?i)\\w", "\xe2\x84\xaa", true},
      {"(?i)[a-c]+", "AbC", true},
  };
  for (const auto& c : cases) {
    const Dfa d = compile(parse(c.pattern));
    if (full_match(d, c.text) != c.match)
      throw corral_test::Failure{std::string("(?i) case ") + c.pattern + " on " + c.text};
  }
}

TEST(regex_nesting_ceiling_holds_whatever_max_nesting_says) {
  Limits lim;
  lim.max_nesting = 100000;
  try {
    parse_regex(std::string(kMaxNestingCeiling + 1, '(') + std::string(kMaxNestingCeiling + 1, ')'), lim);
    EXPECT(false);
  } catch (const LimitExceeded& e) {
    EXPECT_EQ(e.limit(), std::string("max_nesting"));
  }
  EXPECT(parse_regex(std::string(kMaxNestingCeiling, '(') + std::string(kMaxNestingCeiling, ')'), lim) != nullptr);
}
