// test_json_string.cpp — json_string_content: regexes over decoded JSON strings matched in their
// encoded form (raw, short escapes, \uXXXX in either case, surrogate pairs), and the `/re/j` flag;
// the canonical mode (json.dumps(s, ensure_ascii=False) only) and the `/re/c` flag.
#include <cstdio>
#include <string>
#include <vector>

#include "dfa.hpp"
#include "dfa_helpers.hpp"
#include "earley.hpp"
#include "errors.hpp"
#include "grammar.hpp"
#include "json_string.hpp"
#include "regex_parser.hpp"
#include "testing.hpp"
#include "utf8.hpp"

using namespace corral;
using corral_test::full_match;

namespace {

Dfa compile_json(const std::string& pattern, JsonEscapes escapes = JsonEscapes::Any) {
  Limits lim;
  Budget b(lim.max_compile_ms);
  return Dfa::compile(json_string_content(parse_regex(pattern, lim), lim, escapes), lim, b);
}

Dfa compile_tree(const NodePtr& n) {
  Limits lim;
  Budget b(lim.max_compile_ms);
  return Dfa::compile(n, lim, b);
}

std::string u_escape(std::uint32_t unit, bool upper) {
  char buf[8];
  std::snprintf(buf, sizeof buf, upper ? "\\u%04X" : "\\u%04x", static_cast<unsigned>(unit));
  return buf;
}

std::string pair_escape(std::uint32_t cp, bool upper_hi, bool upper_lo) {
  const std::uint32_t v = cp - 0x10000;
  return u_escape(0xD800 + (v >> 10), upper_hi) + u_escape(0xDC00 + (v & 0x3FF), upper_lo);
}

std::string utf8(std::uint32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

bool must_escape(std::uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

// Every spelling of every BMP code point and sampled astral ones is accepted exactly when the
// decoded regex (one character of `cs`) contains it.
void check_exact_one_char(const CharSet& cs, const Dfa& d) {
  for (std::uint32_t cp = 0; cp <= 0xFFFF; ++cp) {
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    const bool in = !surrogate && cs.contains(cp);
    EXPECT_EQ(full_match(d, u_escape(cp, false)), in);
    EXPECT_EQ(full_match(d, u_escape(cp, true)), in);
    if (!surrogate) EXPECT_EQ(full_match(d, utf8(cp)), in && !must_escape(cp));
  }
  std::vector<std::uint32_t> astral;
  for (std::uint32_t cp = 0x10000; cp <= 0x10FFFF; cp += 251) astral.push_back(cp);
  for (const auto& r : cs.ranges())
    for (std::uint32_t cp : {r.lo - 1, r.lo, r.hi, r.hi + 1})
      if (cp >= 0x10000 && cp <= 0x10FFFF) astral.push_back(cp);
  astral.push_back(0x10FFFF);
  for (std::uint32_t cp : astral) {
    const bool in = cs.contains(cp);
    EXPECT_EQ(full_match(d, pair_escape(cp, false, true)), in);
    EXPECT_EQ(full_match(d, pair_escape(cp, true, false)), in);
    EXPECT_EQ(full_match(d, utf8(cp)), in);
  }
}

}  // namespace

TEST(json_string_table_of_spellings) {
  struct Case {
    const char* pattern;
    std::vector<std::string> accept;
    std::vector<std::string> reject;
  };
  const std::vector<Case> cases = {
      {"[a-z]+", {"abc", "\\u0061bc", "\\u006A", "\\u006a\\u007A"}, {"", "A", "\\u0041", "\\u007b", "\\a", "\\u61"}},
      {"\\d{3}", {"123", "\\u0031\\u00322", "\\u0663\\u0664\\u0665", "\\uFF10\\uff11\\uFf12"}, {"12", "1234", "12a"}},
      {"a\"b", {"a\\\"b", "a\\u0022b"}, {"a\"b", "ab"}},
      {"a\\\\b", {"a\\\\b", "a\\u005cb", "a\\u005Cb"}, {"a\\b", "a\\\\\\\\b"}},
      {"a/b", {"a/b", "a\\/b", "a\\u002fb"}, {"a\\\\b"}},
      {"\\n\\t\\r\\x08\\x0c", {"\\n\\t\\r\\b\\f", "\\u000a\\u0009\\u000D\\u0008\\u000C"}, {"\n\t\r\b\f", "\\N\\t\\r\\b\\f"}},
      {"\\x00\\x1f\\x7f", {"\\u0000\\u001f\\u007f", "\\u0000\\u001F\x7f"}, {std::string("\0\x1f\x7f", 3), "\\0\\u001f\\u007f"}},
      {".", {"x", "\\\"", "\\/", "\xc3\xa9", "\\u00e9", "\\t", "\\uD83D\\uDE00", "\xf0\x9f\x98\x80"},
       {"\\n", "\\u000a", "\n", "\\ud83d", "\\ude00", "\\ude00\\ud83d", "\\uD83D\\u0041", "\\x41", "\\U00000041"}},
      {"(?s).", {"\\n", "\\u000A", "\\uDBFF\\uDFFF", "\\uD800\\uDC00"}, {"\n", "\\uDC00\\uD800", "\\uD800\\uD800"}},
      {"[😀-🙏]", {"😀", "🙏", "\\ud83d\\ude00", "\\uD83D\\uDE4F", "\\uD83d\\uDe2A"},
       {"\\ud83d\\ude50", "\\ud83d\\uddff", "\\ud83c\\ude00", "🙐", "\\u1f600"}},
      {"[^\"]*", {"", "abc", "\\\\", "\\/", "\\n\\u00e9", "\\ud83d\\ude00"}, {"\"", "\\\"", "\\u0022", "\\u0022a", "\\"}},
      {"[é-ü]{2}", {"éü", "\\u00e9\\u00FC", "\\u00f0\xc3\xa9"}, {"\\u00e8\\u00e9", "\\u00fd\\u00e9", "\xc3\xa8\xc3\xa9"}},
      {"[\\u0100-\\u2fff\\ue000-\\uffff]", {"\\u0100", "\\u2FFF", "\\uE000", "\\uffff", "\\u1234"},
       {"\\u00ff", "\\u3000", "\\ud7ff", "\\udfff", "\\ud800"}},
      {"x(ab|c)*y", {"xy", "xaby", "x\\u0061\\u0062cy", "xc\\u0063y"}, {"xay", "x\\u0061y"}},
      {"", {""}, {"a", "\\u0000"}},
      {"[\\U00010000-\\U0010ffff]", {"\\ud800\\udc00", "\\udbff\\udfff", "\U0010FFFF"}, {"\\uffff", "\\ud7ff\\udc00", "\\ud800\\ue000"}},
  };
  for (const auto& c : cases) {
    Dfa d = compile_json(c.pattern);
    for (const auto& s : c.accept) {
      if (!full_match(d, s)) std::fprintf(stderr, "  /%s/j should accept '%s'\n", c.pattern, s.c_str());
      EXPECT(full_match(d, s));
    }
    for (const auto& s : c.reject) {
      if (full_match(d, s)) std::fprintf(stderr, "  /%s/j should reject '%s'\n", c.pattern, s.c_str());
      EXPECT(!full_match(d, s));
    }
  }
}

TEST(json_string_exact_for_classes) {
  const char* patterns[] = {"[a-z]", "\\d", ".", "[^\"]", "\\w", "[^a-z\\d]", "[\\u00e9-\\u4e00]",
                            "[😀-🙏]", "[\\U00010000-\\U0001ffff\\U0010fff0]", "(?s).", "[\\x00-\\x20\\\\/\"]"};
  Limits lim;
  for (const char* p : patterns) {
    NodePtr decoded = parse_regex(p, lim);
    EXPECT(decoded->kind == NodeKind::Chars);
    check_exact_one_char(decoded->chars, compile_json(p));
  }
}

TEST(json_string_any_char_counts_code_points) {
  NodePtr any = json_string_any_char();
  EXPECT(any == json_string_any_char());  // shared
  Dfa one = compile_tree(any);
  check_exact_one_char(CharSet::any(), one);
  EXPECT(full_match(one, "\\\""));
  EXPECT(full_match(one, "\\\\"));
  EXPECT(!full_match(one, "\\"));
  EXPECT(!full_match(one, "\""));
  Dfa two_three = compile_tree(make_repeat(any, 2, 3));
  EXPECT(full_match(two_three, "\\uD83D\\uDE00\\n"));  // a surrogate pair is one character
  EXPECT(!full_match(two_three, "\\uD83D\\uDE00"));
  EXPECT(full_match(two_three, "ab\xf0\x9f\x98\x80"));
  EXPECT(!full_match(two_three, "abcd"));
  EXPECT(json_string_chars(CharSet()).get() != nullptr);
  EXPECT(compile_tree(json_string_chars(CharSet())).empty_language());
}

TEST(json_string_results_stay_small) {
  Limits lim;
  // One character of `.`: raw | \ (short | u (BMP hex | one surrogate-pair branch)).
  EXPECT(estimate_nfa_size(json_string_content(parse_regex(".", lim), lim)) < 40);
  EXPECT(estimate_nfa_size(json_string_content(parse_regex("[a-z]", lim), lim)) < 20);
  EXPECT(estimate_nfa_size(json_string_content(parse_regex(".{0,100}", lim), lim)) < 5000);
  EXPECT(compile_json(".{0,100}").num_states() < 3000);  // ~23 per counted character
  // Equal classes share one subtree.
  NodePtr t = json_string_content(parse_regex("\\d\\d", lim), lim);
  EXPECT(t->kind == NodeKind::Concat && t->kids.size() == 2 && t->kids[0] == t->kids[1]);
}

TEST(json_string_grammar_flag) {
  Limits limits;
  Budget budget(limits.max_compile_ms);
  Grammar g = lower_grammar(parse_grammar_text("root ::= \"\\\"\" /[a-z\\/]+/j \"\\\"\"", "root", limits),
                            limits, budget);
  auto accepts = [&](const std::string& s) {
    const auto dfas = g.own_dfas();
    EarleyParser p(g, dfas.data(), 100000);
    for (char c : s)
      if (!p.push_byte(static_cast<std::uint8_t>(c))) return false;
    return p.accepting();
  };
  EXPECT(accepts("\"a\\/b\""));
  EXPECT(accepts("\"a/\\u0062\""));
  EXPECT(!accepts("\"a\\\"\""));
  EXPECT(!accepts("\"\""));
  // Without the flag the regex is over raw text, as before.
  Grammar raw = lower_grammar(parse_grammar_text("root ::= /a\\/b/ x\nx ::= \"c\"", "root", limits), limits, budget);
  (void)raw;
  try {
    parse_grammar_text("root ::= /ab/x", "root", limits);
    EXPECT(false);
  } catch (const CompileError& e) {
    EXPECT(std::string(e.what()).find("unknown regex flag") != std::string::npos);
    EXPECT_EQ(e.column(), 14);
  }
  EXPECT_THROWS(parse_grammar_text("root ::= /ab/jj", "root", limits), CompileError);
  EXPECT_THROWS(parse_grammar_text("root ::= /ab/i", "root", limits), CompileError);
  parse_grammar_text("root ::= /ab/j\n", "root", limits);
  parse_grammar_text("root ::= (/ab/j)", "root", limits);
  parse_grammar_text("root ::= /ab/j|/c/", "root", limits);
}

// ---- canonical spelling (JsonEscapes::Canonical, `/re/c`) -------------------------------------

namespace {

// json.dumps(chr(cp), ensure_ascii=False)[1:-1]: the one spelling the canonical mode accepts.
std::string canonical(std::uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case 0x08: return "\\b";
    case 0x0C: return "\\f";
    case 0x0A: return "\\n";
    case 0x0D: return "\\r";
    case 0x09: return "\\t";
    default: return cp < 0x20 ? u_escape(cp, false) : utf8(cp);
  }
}

// Every JSON spelling of `cp` (raw where allowed, short escapes, \u in both cases, pairs).
std::vector<std::string> all_spellings(std::uint32_t cp) {
  std::vector<std::string> out;
  if (!must_escape(cp)) out.push_back(utf8(cp));
  static const std::vector<std::pair<std::uint32_t, const char*>> kShort = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'/', "\\/"}, {8, "\\b"},
      {12, "\\f"},    {10, "\\n"},    {13, "\\r"},   {9, "\\t"}};
  for (const auto& [c, esc] : kShort)
    if (c == cp) out.push_back(esc);
  if (cp <= 0xFFFF) {
    out.push_back(u_escape(cp, false));
    out.push_back(u_escape(cp, true));
  } else {
    for (bool hi : {false, true})
      for (bool lo : {false, true}) out.push_back(pair_escape(cp, hi, lo));
  }
  return out;
}

// One character of `cs`, canonically: for every BMP and sampled astral code point, exactly the
// canonical spelling of a member is accepted, and no other spelling of anything.
void check_canonical_one_char(const CharSet& cs, const Dfa& d) {
  std::vector<std::uint32_t> cps;
  for (std::uint32_t cp = 0; cp <= 0xFFFF; ++cp)
    if (cp < 0xD800 || cp > 0xDFFF) cps.push_back(cp);
  for (std::uint32_t cp = 0x10000; cp <= 0x10FFFF; cp += 997) cps.push_back(cp);
  for (const auto& r : cs.ranges())
    for (std::uint32_t cp : {r.lo - 1, r.lo, r.hi, r.hi + 1})
      if (cp >= 0x10000 && cp <= 0x10FFFF) cps.push_back(cp);
  for (std::uint32_t cp : cps) {
    const std::string canon = canonical(cp);
    for (const std::string& s : all_spellings(cp)) {
      const bool expected = s == canon && cs.contains(cp);
      if (full_match(d, s) != expected)
        std::fprintf(stderr, "  U+%04X spelled '%s': expected %d\n", static_cast<unsigned>(cp), s.c_str(),
                     expected);
      EXPECT_EQ(full_match(d, s), expected);
    }
  }
  for (std::uint32_t unit : {0xD800u, 0xDBFFu, 0xDC00u, 0xDFFFu})  // lone surrogates
    EXPECT(!full_match(d, u_escape(unit, false)));
}

}  // namespace

TEST(json_string_canonical_table) {
  struct Case {
    const char* pattern;
    std::vector<std::string> accept;
    std::vector<std::string> reject;
  };
  const std::vector<Case> cases = {
      {"[a-z]+", {"abc", "a"}, {"", "\\u0061bc", "\\u006A", "A"}},
      {"arguments", {"arguments"}, {"a\\u0072g\\u0075ments", "argument"}},
      {"a\"b", {"a\\\"b"}, {"a\\u0022b", "a\"b"}},
      {"a\\\\b", {"a\\\\b"}, {"a\\u005cb", "a\\u005Cb", "a\\b"}},
      {"a/b", {"a/b"}, {"a\\/b", "a\\u002fb"}},
      {"\\n\\t\\r\\x08\\x0c",
       {"\\n\\t\\r\\b\\f"},
       {"\\u000a\\t\\r\\b\\f", "\\n\\u0009\\r\\b\\f", "\n\t\r\b\f"}},
      {"\\x00\\x1f\\x0b\\x7f", {"\\u0000\\u001f\\u000b\x7f"},
       {"\\u0000\\u001F\\u000b\x7f", "\\u0000\\u001f\\u000B\x7f", "\\u0000\\u001f\\u000b\\u007f",
        std::string("\0\x1f\x0b\x7f", 4)}},
      {".", {"x", "\\\"", "/", "\xc3\xa9", "\\t", "\xf0\x9f\x98\x80", "\x7f"},
       {"\\/", "\\u00e9", "\\n", "\\uD83D\\uDE00", "\\ud83d\\ude00", "\\u0078"}},
      {"(?s).", {"\\n", "\\u0000", "\xf4\x8f\xbf\xbf"}, {"\\u000a", "\\u000A", "\\udbff\\udfff", "\n"}},
      {"[^\"]*", {"", "abc", "\\\\", "/", "\\n\xc3\xa9"}, {"\\\"", "\\u0022", "\\/"}},
      {"", {""}, {"a", "\\u0000"}},
  };
  for (const auto& c : cases) {
    Dfa d = compile_json(c.pattern, JsonEscapes::Canonical);
    for (const auto& s : c.accept) {
      if (!full_match(d, s)) std::fprintf(stderr, "  /%s/c should accept '%s'\n", c.pattern, s.c_str());
      EXPECT(full_match(d, s));
    }
    for (const auto& s : c.reject) {
      if (full_match(d, s)) std::fprintf(stderr, "  /%s/c should reject '%s'\n", c.pattern, s.c_str());
      EXPECT(!full_match(d, s));
    }
  }
}

TEST(json_string_canonical_exact_for_classes) {
  const char* patterns[] = {"[a-z]", ".", "[^\"]", "\\w", "[\\u00e9-\\u4e00]", "[😀-🙏]", "(?s).",
                            "[\\x00-\\x20\\\\/\"]", "[\\x00-\\x1f]", "[\\x01\\x07\\x0b\\x1e]"};
  Limits lim;
  for (const char* p : patterns) {
    NodePtr decoded = parse_regex(p, lim);
    EXPECT(decoded->kind == NodeKind::Chars);
    check_canonical_one_char(decoded->chars, compile_json(p, JsonEscapes::Canonical));
  }
}

TEST(json_string_canonical_any_char) {
  NodePtr any = json_string_any_char(JsonEscapes::Canonical);
  EXPECT(any == json_string_any_char(JsonEscapes::Canonical));  // shared
  EXPECT(any != json_string_any_char(JsonEscapes::Any));
  EXPECT(json_string_any_char() == json_string_any_char(JsonEscapes::Any));
  check_canonical_one_char(CharSet::any(), compile_tree(any));
  Dfa two_three = compile_tree(make_repeat(any, 2, 3));
  EXPECT(full_match(two_three, "\xf0\x9f\x98\x80\\n"));  // one astral character + one escape
  EXPECT(!full_match(two_three, "\\uD83D\\uDE00\\n"));
  EXPECT(!full_match(two_three, "\xf0\x9f\x98\x80"));
  EXPECT(full_match(two_three, "\\u001f\\\\"));
  EXPECT(compile_tree(json_string_chars(CharSet(), JsonEscapes::Canonical)).empty_language());
  // Smaller than the any-spelling tree: no upper-case digits, no surrogate pairs.
  EXPECT(estimate_nfa_size(any) < estimate_nfa_size(json_string_any_char()));
  EXPECT(estimate_nfa_size(any) < 20);
}

TEST(json_string_canonical_grammar_flag) {
  Limits limits;
  Budget budget(limits.max_compile_ms);
  auto build = [&](const std::string& text) {
    return lower_grammar(parse_grammar_text(text, "root", limits), limits, budget);
  };
  auto accepts = [](const Grammar& g, const std::string& s) {
    const auto dfas = g.own_dfas();
    EarleyParser p(g, dfas.data(), 100000);
    for (char c : s)
      if (!p.push_byte(static_cast<std::uint8_t>(c))) return false;
    return p.accepting();
  };
  Grammar g = build("root ::= \"\\\"\" /[a-z\\/\"]+/c \"\\\"\"");
  EXPECT(accepts(g, "\"a/b\""));
  EXPECT(accepts(g, "\"a\\\"\""));
  EXPECT(!accepts(g, "\"a\\/b\""));
  EXPECT(!accepts(g, "\"a/\\u0062\""));
  EXPECT(!accepts(g, "\"\""));
  // The algebra composes as with `/…/j`, and `j`/`c` operands may be mixed: canonical ∩ any
  // spelling is canonical.
  Grammar inter = build("root ::= /[a-z]+/c & /.{0,3}/j");
  EXPECT(accepts(inter, "abc"));
  EXPECT(!accepts(inter, "abcd"));
  EXPECT(!accepts(inter, "\\u0061"));
  Grammar diff = build("root ::= /[a-z]{1,5}/c - /null|true/c");
  EXPECT(accepts(diff, "nul"));
  EXPECT(accepts(diff, "nulls"));
  EXPECT(!accepts(diff, "null"));
  EXPECT(!accepts(diff, "\\u006eull"));
  Grammar diff2 = build("root ::= /(?s).*/c - /a.*/j");
  EXPECT(accepts(diff2, "b\\n"));
  EXPECT(!accepts(diff2, "a"));
  EXPECT(!accepts(diff2, "\\u0062"));
  for (const char* bad : {"root ::= /ab/cc", "root ::= /ab/jc", "root ::= /ab/cj", "root ::= /ab/ci"}) {
    try {
      parse_grammar_text(bad, "root", limits);
      std::fprintf(stderr, "  should fail: %s\n", bad);
      EXPECT(false);
    } catch (const CompileError& e) {
      EXPECT_EQ(e.column(), 15);
    }
  }
  try {
    parse_grammar_text("root ::= /ab/jc", "root", limits);
  } catch (const CompileError& e) {
    EXPECT(std::string(e.what()).find("exclude each other") != std::string::npos);
  }
  parse_grammar_text("root ::= /ab/c\n", "root", limits);
  parse_grammar_text("root ::= (/ab/c)|/c/j", "root", limits);
}
