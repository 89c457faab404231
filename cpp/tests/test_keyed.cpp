// test_keyed.cpp — keyed member groups (keyed.hpp): any order, each key at most once, required
// keys before the close; masks agree with the parser in both directions on random walks;
// shortest completions add missing required keys; the artifact round trip keeps the groups.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "compile.hpp"
#include "keyed.hpp"
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

// Dependencies (`^{...}`) and count bounds (`%keyed{min,max}`): every object over the keys a, b,
// c (declared) and xa, xb, xc (undeclared), in every order, each at most once, against a
// direct statement of the rule; then masks against the parser on random walks, with a valid
// shortest completion at every step, for the grammar and its artifact.
namespace {

const char* kDeps = R"G(root ::= "{" body "}" | "{}"
body ::= %keyed(","; "a:" [0-9], ^{0,2} "b:" [0-9], "c:" [0-9], ^{1} "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
// d needs b, b needs a and c: {d} alone needs all four.
bool deps_ok(const std::vector<std::string>& keys) {
  auto has = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  if (has("b") && !(has("a") && has("c"))) return false;
  if (has("d") && !has("b")) return false;
  return true;
}

const char* kRequiredDeps = R"G(root ::= "{" body "}"
body ::= %keyed(","; "a:" [0-9], !^{2} "b:" [0-9], "c:" [0-9], "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool required_deps_ok(const std::vector<std::string>& keys) {
  auto has = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  return has("b") && has("c");
}

const char* kCounted = R"G(root ::= "{" body "}"
body ::= %keyed{2,3}(","; "a:" [0-9], !"b:" [0-9], "c:" [0-9], "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool counted_ok(const std::vector<std::string>& keys) {
  return std::find(keys.begin(), keys.end(), "b") != keys.end() && keys.size() >= 2 && keys.size() <= 3;
}

// Dependencies with a minimum (no maximum): members that reach min bring their dependencies.
const char* kDepsMin = R"G(root ::= "{" body "}"
body ::= %keyed{3,}(","; "a:" [0-9], ^{0,2} "b:" [0-9], "c:" [0-9], ^{1} "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool deps_min_ok(const std::vector<std::string>& keys) { return deps_ok(keys) && keys.size() >= 3; }

const char* kCountedMin = R"G(root ::= "{" body "}"
body ::= %keyed{3,}(","; "a:" [0-9], "b:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool counted_min_ok(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (k == "c" || k == "d") return false;  // not members of this group
  return keys.size() >= 3;
}

const char* kCountedNoExtra = R"G(root ::= "{" body "}" | "{}"
body ::= %keyed{1,2}(","; "a:" [0-9], "b:" [0-9], "c:" [0-9]))G";
bool counted_no_extra_ok(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (k[0] == 'x' || k == "d") return false;  // not members of this group
  return keys.size() <= 2;
}

// Dependencies beside a maximum (keyed.hpp: `closure`), with undeclared members that pad up to
// min: d needs all four declared keys, so under a maximum of 3 it can never start.
const char* kDepsMax = R"G(root ::= "{" body "}" | "{}"
body ::= %keyed{1,3}(","; "a:" [0-9], ^{0,2} "b:" [0-9], "c:" [0-9], ^{1} "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool deps_max_ok(const std::vector<std::string>& keys) { return deps_ok(keys) && keys.size() <= 3; }

const char* kDepsExact = R"G(root ::= "{" body "}"
body ::= %keyed{3,3}(","; "a:" [0-9], ^{0,2} "b:" [0-9], "c:" [0-9], ^{1} "d:" [0-9]; "x" [a-z] ":" [0-9]))G";
bool deps_exact_ok(const std::vector<std::string>& keys) { return deps_ok(keys) && keys.size() == 3; }

// No undeclared members (the `fits` table): a and b need each other, c needs d. Exactly three
// members: only {a, b, d} — c's closure {c, d} has two and any closed superset four, so c may
// never start, although a greedy "smallest closure first" would reach {c, d} and get stuck.
const char* kDepsFits = R"G(root ::= "{" body "}"
body ::= %keyed{3,3}(","; ^{1} "a:" [0-9], ^{0} "b:" [0-9], ^{3} "c:" [0-9], "d:" [0-9]))G";
bool deps_fits_ok(const std::vector<std::string>& keys) {
  auto has = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  return keys.size() == 3 && has("a") && has("b") && has("d");
}

std::string object_text(const std::vector<std::string>& keys) {
  std::string s = "{";
  for (std::size_t i = 0; i < keys.size(); ++i) s += (i ? "," : "") + keys[i] + ":1";
  return s + "}";
}

// Every subset of the six keys in every order (1957 objects), accepted iff `ok` says so (and,
// for the empty object, iff the grammar has the "{}" alternative, told by `empty`).
void check_language(const char* grammar, bool (*ok)(const std::vector<std::string>&), bool empty) {
  auto g = compile_grammar(grammar, "root", keyed_vocab(), Limits{});
  const std::vector<std::string> all = {"a", "b", "c", "d", "xa", "xb"};
  std::size_t n_ok = 0, n_bad = 0;
  for (unsigned mask = 0; mask < (1u << all.size()); ++mask) {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (mask >> i & 1) keys.push_back(all[i]);
    std::sort(keys.begin(), keys.end());
    do {
      const bool want = keys.empty() ? empty : ok(keys);
      const bool got = accepts(g, object_text(keys));
      if (got != want) {
        std::fprintf(stderr, "  %s: got %d, want %d\n", object_text(keys).c_str(), got, want);
        ++n_bad;
      }
      n_ok += want;
    } while (std::next_permutation(keys.begin(), keys.end()));
  }
  EXPECT_EQ(n_bad, 0u);
  EXPECT(n_ok > 0);
}

// Seeded random walks of the grammar and of its artifact side by side: at every step both
// masks are equal and equal the parser token by token, and the shortest completion is a
// sentence. With `prefer_from`, a pick below that token id is redrawn up to three times (to
// favour a vocabulary's multi-byte tokens).
void check_walks(const char* grammar, const std::shared_ptr<const Vocabulary>& vocab = keyed_vocab(), unsigned seeds = 70,
                 int steps = 40, std::int32_t prefer_from = 0) {
  auto g = compile_grammar(grammar, "root", vocab, Limits{});
  auto loaded = load_artifact(to_artifact(*g), vocab);
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(seed);
    Matcher m(g), l(loaded);
    for (int step = 0; step < steps && !m.is_terminated(); ++step) {
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::allowed(l));
      EXPECT(al == corral_test::accepted_one_by_one(m));
      Matcher done = m;
      EXPECT(done.accept_bytes(done.shortest_completion()) && done.is_accepting());
      if (al.empty()) break;
      std::int32_t t = al[rng() % al.size()];
      for (int tries = 0; tries < 3 && t < prefer_from; ++tries) t = al[rng() % al.size()];
      EXPECT(m.accept_token(t));
      EXPECT(l.accept_token(t));
    }
  }
}

}  // namespace

TEST(keyed_dependencies_language) {
  check_language(kDeps, deps_ok, true);
  check_language(kRequiredDeps, required_deps_ok, false);
  check_language(kDepsMin, deps_min_ok, false);
  auto g = compile_grammar(kDeps, "root", keyed_vocab(), Limits{});
  // The close is refused while a dependency is missing, and the missing key is still allowed.
  Matcher m(g);
  EXPECT(m.accept_bytes("{b:1,a:2"));
  Matcher close = m, more = m;
  EXPECT(!close.accept_bytes("}"));
  EXPECT(more.accept_bytes(",c:3}") && more.is_accepting());
  EXPECT(accepts(g, "{d:1,b:2,c:3,a:4}"));
}

TEST(keyed_count_bounds_language) {
  check_language(kCounted, counted_ok, false);
  check_language(kCountedMin, counted_min_ok, false);
  check_language(kCountedNoExtra, counted_no_extra_ok, true);
  auto g = compile_grammar(kCounted, "root", keyed_vocab(), Limits{});
  // At most 3 members with b required: after two undeclared ones only b may follow, so a
  // third undeclared key cannot even start.
  Matcher m(g);
  EXPECT(m.accept_bytes("{xa:1,xb:2,"));
  Matcher x = m, b = m;
  EXPECT(!x.accept_bytes("x"));
  EXPECT(b.accept_bytes("b:3}") && b.is_accepting());
  // Undeclared members are counted as written (a repeated undeclared key counts twice).
  EXPECT(accepts(compile_grammar(kCountedMin, "root", keyed_vocab(), Limits{}), "{xa:1,xa:2,xa:3}"));
}

TEST(keyed_dependencies_beside_a_maximum_language) {
  check_language(kDepsMax, deps_max_ok, true);
  check_language(kDepsExact, deps_exact_ok, false);
  check_language(kDepsFits, deps_fits_ok, false);
  // No key is started that no completion could fit: d (four members under a maximum of 3),
  // and c where only {a, b, d} fits; b after an undeclared member and c (b brings a: 4).
  auto g = compile_grammar(kDepsMax, "root", keyed_vocab(), Limits{});
  Matcher m(g);
  EXPECT(m.accept_bytes("{"));
  Matcher d = m;
  EXPECT(!d.accept_bytes("d"));
  EXPECT(m.accept_bytes("xa:1,c:2,"));
  Matcher b = m, a = m;
  EXPECT(!b.accept_bytes("b"));
  EXPECT(a.accept_bytes("a:3}") && a.is_accepting());
  auto fits = compile_grammar(kDepsFits, "root", keyed_vocab(), Limits{});
  Matcher f(fits);
  EXPECT(f.accept_bytes("{"));
  Matcher c = f;
  EXPECT(!c.accept_bytes("c"));
  EXPECT(f.accept_bytes("d:1,"));
  Matcher done = f;
  EXPECT(done.accept_bytes(done.shortest_completion()) && done.is_accepting());
}

TEST(keyed_dependency_and_count_masks_match_parser) {
  for (const char* grammar :
       {kDeps, kRequiredDeps, kDepsMin, kCounted, kCountedMin, kCountedNoExtra, kDepsMax, kDepsExact, kDepsFits})
    check_walks(grammar);
}

TEST(keyed_dependency_and_count_syntax_errors) {
  auto compile = [](const std::string& body) {
    return compile_grammar("root ::= \"{\" k \"}\"\nk ::= " + body, "root", keyed_vocab(), Limits{});
  };
  EXPECT_THROWS(compile("%keyed(\",\"; \"a\", ^{2} \"b\")"), CompileError);      // no member 2
  EXPECT_THROWS(compile("%keyed(\",\"; \"a\", ^ \"b\")"), CompileError);         // no list
  EXPECT_THROWS(compile("%keyed(\",\"; \"a\", ^{0 \"b\")"), CompileError);       // unclosed list
  compile("%keyed{1,2}(\",\"; \"a\", ^{0} \"b\", \"c\")");  // deps beside a maximum
  // Every key needs all three, but at most two may be present: nothing fits.
  EXPECT_THROWS(compile("%keyed{2,2}(\",\"; ^{1} \"a\", ^{2} \"b\", ^{0} \"c\")"), CompileError);
  {  // 17 keys, dependencies, a maximum and a binding minimum without undeclared members: refused
    std::string many = "%keyed{2,3}(\",\"; ^{1} \"k0\"";
    for (int i = 1; i < 17; ++i) many += ", \"k" + std::to_string(i) + "\"";
    EXPECT_THROWS(compile(many + ")"), CompileError);
    compile(many + "; \"x\" [a-z])");  // undeclared members pad up to min: no table needed
  }
  EXPECT_THROWS(compile("%keyed{3,}(\",\"; \"a\", \"b\")"), CompileError);       // unsatisfiable
  EXPECT_THROWS(compile("%keyed{3,2}(\",\"; \"a\", \"b\"; \"x\")"), CompileError);
  EXPECT_THROWS(compile("%keyed{1,1}(\",\"; !\"a\", !\"b\"; \"x\")"), CompileError);  // 2 required, max 1
  compile("%keyed{3,}(\",\"; \"a\", \"b\"; \"x\" [a-z])");  // undeclared members can reach 3
}

// The counter a counted group keeps above its key bits: read back, counted apart from the keys,
// and canonical (a counter back at 0 is the set without it, so equal states share an id).
TEST(keyed_sets_counter) {
  KeySets ks;
  const std::uint32_t a = ks.with(0, 3);
  const std::uint32_t b = ks.with_counter(a, 5, 7);
  EXPECT_EQ(ks.counter(b, 5), 7u);
  EXPECT_EQ(ks.count_below(b, 5), 1u);
  EXPECT(ks.has(b, 3) && !ks.has(b, 4));
  EXPECT_EQ(ks.with_counter(b, 5, 0), a);
  EXPECT_EQ(ks.with_counter(a, 5, 7), b);
  const std::uint32_t far = ks.with_counter(ks.with(0, 70), 100, 0xFFFFFFFFu);  // spans words
  EXPECT_EQ(ks.counter(far, 100), 0xFFFFFFFFu);
  EXPECT_EQ(ks.count_below(far, 100), 1u);
  EXPECT_EQ(ks.count_below(far, 64), 0u);
}

// Remembered undeclared keys (`%key(...)`, keyed.hpp): no two undeclared members of one object
// share a key, so a minimum counts distinct keys. Keys here are quoted lowercase words; the
// declared members use uppercase keys, so no undeclared key is a declared one.
namespace {

std::shared_ptr<const Vocabulary> key_vocab() {
  std::vector<std::string> toks;
  for (int b = 32; b < 127; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\"x\"", "\"x", "x\"", ",\"x\"", ",\"", "\":", "1,\"x\"", "\"x\":1", "xy", "\"y\":", "}", "0],\"x\"",
                        "0,\"x\"", "],\"y\""})
    toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

const char* kKeys = R"G(root ::= "{" body "}"
body ::= %keyed{3,}(","; "\"A\":" [0-9], "\"B\":" [0-9]; %key("\"" [a-z]+ "\"") ":" [0-9]))G";
// Two classes of undeclared keys (each its own %key), and a maximum.
const char* kKeyClasses = R"G(root ::= "{" body "}"
body ::= %keyed{2,4}(","; "\"A\":" [0-9]; %key("\"" [a-x] [a-z]* "\"") ":" [0-9] | %key("\"" [yz] [a-z]* "\"") ":" "t"))G";

// Values that are nonterminals of their own: a token may close one (the group's items are then
// not in the current set), write the separator and a whole repeated key (`0],"x"`).
const char* kKeysNested = R"G(root ::= "{" body "}"
body ::= %keyed{3,}(","; "\"A\":" v, "\"B\":" [0-9]; %key("\"" [a-z]+ "\"") ":" v)
v ::= "0" | "[" v "]")G";

// A `$`-anchored key (Python's `$` allows one final newline): after `"x\n` only the closing quote
// may follow, so with "x\n" held that prefix is a dead end, refused like a %distinct item's.
const char* kKeysAnchored = R"G(root ::= "{" body "}"
body ::= %keyed{3,}(","; "\"A\":" [0-9]; %key("\"" /[a-z]+\n?/j "\"") ":" [0-9]))G";

// (`classes`: keys from y on take the value t, as kKeyClasses says)
std::string key_object(const std::vector<std::string>& keys, bool classes = false) {
  std::string s = "{";
  for (std::size_t i = 0; i < keys.size(); ++i)
    s += (i ? ",\"" : "\"") + keys[i] + "\":" + (classes && keys[i][0] >= 'y' ? "t" : "1");
  return s + "}";
}

}  // namespace

TEST(keyed_remembered_keys_language) {
  auto g = compile_grammar(kKeys, "root", key_vocab(), Limits{});
  auto classes = compile_grammar(kKeyClasses, "root", key_vocab(), Limits{});
  const std::vector<std::string> pool = {"A", "B", "x", "y", "xy", "x"};
  std::size_t n_ok = 0, n_dup = 0;
  // Every sequence of up to four keys from the pool (a key may repeat), against the rule.
  std::vector<std::size_t> pick;
  for (std::size_t len = 0; len <= 4; ++len) {
    std::size_t total = 1;
    for (std::size_t i = 0; i < len; ++i) total *= pool.size();
    for (std::size_t code = 0; code < total; ++code) {
      std::vector<std::string> keys;
      for (std::size_t c = code, i = 0; i < len; ++i, c /= pool.size()) keys.push_back(pool[c % pool.size()]);
      std::vector<std::string> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
      const bool want = distinct && keys.size() >= 3;
      EXPECT_EQ(accepts(g, key_object(keys)), want);
      bool no_b = std::find(keys.begin(), keys.end(), "B") == keys.end();
      EXPECT_EQ(accepts(classes, key_object(keys, true)), distinct && no_b && keys.size() >= 2 && keys.size() <= 4);
      n_ok += want;
      n_dup += !distinct;
    }
  }
  EXPECT(n_ok > 20 && n_dup > 100);
  // The closing quote of a repeated key is refused where it is written, and a longer key is not.
  Matcher m(g);
  EXPECT(m.accept_bytes("{\"x\":1,\"A\":2,\"x"));
  Matcher close = m, longer = m;
  EXPECT(!close.accept_bytes("\""));
  EXPECT(longer.accept_bytes("y\":3}") && longer.is_accepting());
  // A completion writes other keys than those held.
  Matcher part(g);
  EXPECT(part.accept_bytes("{\"a\":1"));
  const std::string rest = part.shortest_completion();
  EXPECT(part.accept_bytes(rest) && part.is_accepting());
}

TEST(keyed_remembered_keys_masks_match_parser) {
  {
    auto g = compile_grammar(kKeysNested, "root", key_vocab(), Limits{});
    std::int32_t dup = -1;
    for (std::int32_t t = 0; t < static_cast<std::int32_t>(g->vocab().size()); ++t)
      if (g->vocab().bytes(t) == "0],\"x\"") dup = t;
    for (const char* prefix : {"{\"x\":0,\"A\":[", "{\"x\":[0],\"A\":[[", "{\"x\":", "{\"y\":0,\"x\":[", "{\"A\":[0],\"x\":0,\"B\":1,\"z\":["}) {
      Matcher m(g);
      EXPECT(m.accept_bytes(prefix));
      const std::vector<std::int32_t> al = corral_test::allowed(m);
      EXPECT(al == corral_test::accepted_one_by_one(m));
      const bool held = std::string(prefix).find("\"x\"") != std::string::npos;
      EXPECT(std::find(al.begin(), al.end(), dup) == al.end() || !held);
    }
  }
  {
    auto g = compile_grammar(kKeysAnchored, "root", key_vocab(), Limits{});
    for (const char* prefix : {"{\"A\":1,\"x\\n\":2,\"x", "{\"A\":1,\"x\\n\":2,\"x\\", "{\"x\\n\":2,\"x", "{\"x\":1,\"", "{"}) {
      Matcher m(g);
      EXPECT(m.accept_bytes(prefix));
      EXPECT(corral_test::allowed(m) == corral_test::accepted_one_by_one(m));
    }
    Matcher m(g);  // the escape's `n` is refused: it could only close a held key
    EXPECT(m.accept_bytes("{\"A\":1,\"x\\n\":2,\"x\\"));
    Matcher n = m, t = m;
    EXPECT(!n.accept_bytes("n"));
    EXPECT(t.accept_bytes("u0061\":3}") && t.is_accepting());  // "xa"
  }
  // Preferring the multi-byte tokens (ids from 95: keys written in one piece, repeated ones
  // among them).
  for (const char* grammar : {kKeys, kKeyClasses, kKeysNested, kKeysAnchored}) check_walks(grammar, key_vocab(), 30, 30, 95);
}

TEST(keyed_remembered_keys_errors) {
  auto compile = [](const std::string& text) { return compile_grammar(text, "root", key_vocab(), Limits{}); };
  // Outside the undeclared member of a %keyed group.
  EXPECT_THROWS(compile("root ::= %key(\"a\")"), CompileError);
  EXPECT_THROWS(compile("root ::= %keyed(\",\"; %key(\"\\\"A\\\"\") \":1\")"), CompileError);
  // A key language with finitely many continuations after some prefix: a repeated key there
  // could leave nothing to write, so the mask could not stay exact.
  EXPECT_THROWS(compile("root ::= \"{\" b \"}\"\nb ::= %keyed{2,}(\",\"; \"\\\"A\\\":1\"; %key(\"\\\"\" [a-z] \"\\\"\") \":1\")"),
                CompileError);
  // An undeclared member without its key marked, beside one with it.
  EXPECT_THROWS(compile("root ::= \"{\" b \"}\"\nb ::= %keyed{2,}(\",\"; \"\\\"A\\\":1\"; %key(\"\\\"\" [a-z]+ \"\\\"\") \":1\" | \"\\\"\" [0-9]+ \"\\\":1\")"),
                CompileError);
  compile("root ::= \"{\" b \"}\"\nb ::= %keyed{2,}(\",\"; \"\\\"A\\\":1\"; %key(\"\\\"\" [a-z]+ \"\\\"\") \":1\")");
}
