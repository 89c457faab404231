// test_snapshot.cpp — matcher snapshots (snapshot.hpp) through the C++ API: a matcher restored
// from a snapshot, on the same grammar object, a fresh compile of the same text or a loaded
// artifact, continues with masks, forced bytes, completions and acceptance identical to the
// original's at every later step of seeded random walks, and rolls back as far; mismatched
// snapshots are refused with their reasons; truncation at every length and bit flips never
// crash or yield a matcher, which the sanitizer build checks. tests/test_snapshots.py covers
// real vocabularies and other processes.
#include <random>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "compile.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "snapshot.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

// Single bytes, multi-byte tokens crossing terminal boundaries, EOS and a named special token.
std::shared_ptr<const Vocabulary> snap_vocab(const std::string& extra = "") {
  std::vector<std::string> toks;
  for (int b = 32; b < 127; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"\"a", "\":", "\",", "{\"", "}", "ab", "abc", "12", "true", "null", "\xc3\xa9", "<x>"})
    toks.push_back(t);
  if (!extra.empty()) toks.push_back(extra);
  toks.push_back("<eos>");
  toks.push_back("<|tool|>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 2, n - 1},
                                            std::vector<std::int32_t>{n - 2}, n + 5);
}

const char* kGrammars[] = {
    R"G(root ::= "{" ws ( pair ( ws "," ws pair )* )? ws "}"
pair ::= "\"" [a-z]{1,6} "\"" ws ":" ws value
value ::= [0-9]+ | "true" | "null" | root
ws ::= " "?)G",
    R"G(root ::= item+ <|tool|> item
item ::= "ab" | "abc" [xyz]* | "(" root ")")G",
    R"G(root ::= "id=" ${id} ";" ${name:json})G",
};

std::shared_ptr<const CompiledGrammar> compiled(int k, std::shared_ptr<const Vocabulary> v, const Limits& l = Limits{}) {
  return compile_grammar(kGrammars[k], "root", std::move(v), l);
}

std::shared_ptr<const CompiledGrammar> bound(std::shared_ptr<const CompiledGrammar> g, const std::string& extra = "") {
  std::vector<std::string> ids{"ab", "abc", "12"};
  if (!extra.empty()) ids.push_back(extra);
  return g->bind({SlotValues{"id", ids}, SlotValues{"name", {"x\"y", "\xc3\xa9"}}});
}

std::string completion(Matcher& m) {
  try {
    return m.shortest_completion();
  } catch (const LimitExceeded& e) {
    return std::string("error: ") + e.what();
  }
}

void same_now(Matcher& a, Matcher& b) {
  EXPECT(corral_test::allowed(a) == corral_test::allowed(b));
  EXPECT_EQ(a.is_accepting(), b.is_accepting());
  EXPECT_EQ(a.is_terminated(), b.is_terminated());
  EXPECT_EQ(a.num_steps(), b.num_steps());
  EXPECT(a.forced_bytes() == b.forced_bytes());
  EXPECT(completion(a) == completion(b));
}

// Walk `a` for a seeded random number of steps, snapshot it, restore on `b` and continue both
// with the same choices, comparing everything at every step; then roll both back by the same
// random amounts (past the snapshot point too) and compare again.
void snapshot_walk(const std::shared_ptr<const CompiledGrammar>& a, const std::shared_ptr<const CompiledGrammar>& b,
                   unsigned seed, int steps) {
  std::mt19937 rng(seed);
  Matcher ma(a);
  const int before = static_cast<int>(rng() % static_cast<unsigned>(steps));
  for (int i = 0; i < before; ++i) {
    const auto al = corral_test::allowed(ma);
    if (al.empty() || ma.is_terminated()) break;
    EXPECT(ma.accept_token(al[rng() % al.size()]));
  }
  if (rng() % 3 == 0 && !ma.is_terminated()) EXPECT(ma.accept_bytes(""));  // an empty step is a step too
  Matcher mb = restore_matcher(b, matcher_snapshot(ma));
  EXPECT(matcher_snapshot(mb) == matcher_snapshot(ma));  // canonical: the restored one writes the same bytes
  for (int i = 0; i < steps; ++i) {
    same_now(ma, mb);
    const auto al = corral_test::allowed(ma);
    if (al.empty() || ma.is_terminated()) break;
    const std::int32_t t = al[rng() % al.size()];
    EXPECT(ma.accept_token(t));
    EXPECT(mb.accept_token(t));
  }
  for (int r = 0; r < 3 && ma.num_steps() > 0; ++r) {
    const std::size_t n = 1 + rng() % ma.num_steps();
    ma.rollback(n);
    mb.rollback(n);
    same_now(ma, mb);
  }
}

std::string reason_of(const std::shared_ptr<const CompiledGrammar>& g, const std::string& bytes) {
  try {
    restore_matcher(g, bytes);
  } catch (const ArtifactError& e) {
    return e.reason();
  }
  return "restored";
}

// A snapshot taken after a walk of `steps` tokens (seeded), ending in EOS when it can.
std::string walked_snapshot(const std::shared_ptr<const CompiledGrammar>& g, unsigned seed, int steps) {
  std::mt19937 rng(seed);
  Matcher m(g);
  for (int i = 0; i < steps; ++i) {
    const auto al = corral_test::allowed(m);
    if (al.empty() || m.is_terminated()) break;
    EXPECT(m.accept_token(al[rng() % al.size()]));
  }
  return matcher_snapshot(m);
}

// Restores or refuses with an ArtifactError; a matcher that restores must be in a state the
// grammar reaches: its shortest completion completes it.
bool restore_or_refuse(const std::shared_ptr<const CompiledGrammar>& g, const std::string& bytes) {
  try {
    Matcher m = restore_matcher(g, bytes);
    std::string rest;
    try {
      rest = m.is_terminated() ? "" : m.shortest_completion();
    } catch (const LimitExceeded&) {
      return true;  // the completion needs a named token, not bytes
    }
    if (!m.is_terminated()) {
      EXPECT(m.accept_bytes(rest));
      EXPECT(m.is_accepting());
    }
    return true;
  } catch (const ArtifactError&) {
  }
  return false;
}

}  // namespace

TEST(snapshot_restores_identically_on_same_fresh_and_loaded_grammars) {
  auto v = snap_vocab();
  for (int k = 0; k < 2; ++k) {
    auto g = compiled(k, v);
    auto fresh = compiled(k, v);
    auto loaded = load_artifact(to_artifact(*g), v);
    for (unsigned seed = 1; seed <= 12; ++seed) {
      snapshot_walk(g, g, seed, 40);
      snapshot_walk(g, fresh, seed, 40);
      snapshot_walk(g, loaded, seed, 40);
      snapshot_walk(loaded, fresh, seed, 40);
    }
  }
  auto r = compile_regex("[a-c]{2,5}(12|true)?", v, Limits{});
  auto rl = load_artifact(to_artifact(*r), v);
  for (unsigned seed = 1; seed <= 10; ++seed) snapshot_walk(r, rl, seed, 12);
  auto j = compile_json(v, Limits{});
  auto jf = compile_json(v, Limits{});
  for (unsigned seed = 1; seed <= 10; ++seed) snapshot_walk(j, jf, seed, 40);
}

TEST(snapshot_of_a_binding_restores_on_the_same_values) {
  auto v = snap_vocab();
  auto g = compiled(2, v);
  auto h = load_artifact(to_artifact(*g), v);
  for (unsigned seed = 1; seed <= 16; ++seed) {
    snapshot_walk(bound(g), bound(g), seed, 30);
    snapshot_walk(bound(g), bound(h), seed, 30);
  }
}

TEST(snapshot_keeps_terminated_and_named_token_steps) {
  auto v = snap_vocab();
  const std::int32_t eos = static_cast<std::int32_t>(v->size()) - 2, tool = eos + 1;
  auto g = compiled(1, v);
  Matcher m(g);
  EXPECT(m.accept_bytes("ab"));
  EXPECT(m.accept_token(tool));
  EXPECT(m.accept_bytes("abc"));
  EXPECT(m.accept_token(eos));
  Matcher r = restore_matcher(compiled(1, v), matcher_snapshot(m));
  EXPECT(r.is_terminated());
  EXPECT_EQ(r.num_steps(), std::size_t{4});
  r.rollback(1);
  m.rollback(1);
  same_now(m, r);
  r.rollback(2);
  m.rollback(2);
  same_now(m, r);
  EXPECT(r.accept_token(tool));
}

TEST(snapshot_refusals_have_reasons) {
  auto v = snap_vocab();
  auto g = compiled(0, v);
  const std::string good = walked_snapshot(g, 3, 12);
  EXPECT_EQ(reason_of(g, good), std::string("restored"));
  EXPECT_EQ(reason_of(g, ""), std::string("bad_magic"));
  EXPECT_EQ(reason_of(g, to_artifact(*g)), std::string("bad_magic"));  // an artifact is not a snapshot
  EXPECT_EQ(reason_of(compiled(0, snap_vocab("zz")), good), std::string("wrong_vocabulary"));
  EXPECT_EQ(reason_of(compiled(1, v), good), std::string("wrong_grammar"));
  std::string ver = good;
  ver[8] = 2;
  EXPECT_EQ(reason_of(g, ver), std::string("unsupported_version"));
  std::string eng = good;
  eng[72 + 5] ^= 0x01;  // a character of the engine version string (after its length byte)
  EXPECT_EQ(reason_of(g, eng), std::string("corrupt"));  // checksum first
  snapshot_reseal(eng);
  EXPECT_EQ(reason_of(g, eng), std::string("engine_version"));
  EXPECT_EQ(reason_of(g, good + "x"), std::string("corrupt"));
  // Limits are not part of the identity: a grammar loaded with other limits restores it, and
  // one whose parser limit the replay exceeds refuses with `limit`.
  Limits tight;
  tight.max_items_per_set = 3;
  EXPECT_EQ(reason_of(load_artifact(to_artifact(*g), v), good), std::string("restored"));
  EXPECT_EQ(reason_of(load_artifact(to_artifact(*g), v, &tight), good), std::string("limit"));
  // A matcher in its error state has nothing to snapshot.
  Matcher broken(compile_grammar(kGrammars[0], "root", v, tight));
  for (int i = 0; i < 8 && broken.error().empty(); ++i) broken.accept_bytes("{");
  EXPECT(!broken.error().empty());
  try {
    matcher_snapshot(broken);
    EXPECT(false);
  } catch (const ArtifactError& e) {
    EXPECT_EQ(e.reason(), std::string("matcher_error"));
  }
}

TEST(snapshot_refuses_another_binding) {
  auto v = snap_vocab();
  auto g = compiled(2, v);
  const std::string snap = walked_snapshot(bound(g), 5, 6);
  EXPECT_EQ(reason_of(bound(g), snap), std::string("restored"));
  EXPECT_EQ(reason_of(bound(g, "zz"), snap), std::string("wrong_binding"));
  EXPECT_EQ(reason_of(g, snap), std::string("wrong_binding"));  // the skeleton itself
  // An unbound grammar's snapshot on a binding of a grammar with the same identity cannot
  // arise (a skeleton has no matcher), but a grammar without slots binds to itself.
  auto plain = compiled(0, v);
  EXPECT(plain->bind({}) == plain);
}

TEST(snapshot_edited_steps_are_replayed_not_trusted) {
  auto v = snap_vocab();
  auto g = compiled(0, v);
  Matcher m(g);
  EXPECT(m.accept_bytes("{\"ab\":"));
  const std::string good = matcher_snapshot(m);
  // The step's bytes sit at the end, before the 17-byte state: change "{\"ab\":" to
  // "{\"ab\"}" (not a prefix of the grammar): the replay refuses it even with a good checksum.
  std::string bad = good;
  const std::size_t colon = bad.size() - 17 - 1;
  EXPECT_EQ(bad[colon], ':');
  bad[colon] = '}';
  snapshot_reseal(bad);
  EXPECT_EQ(reason_of(g, bad), std::string("corrupt"));
  // A valid but different step ("ab" -> "ac") reaches the same DFA state and restores: the
  // state is still one the grammar reaches.
  std::string other = good;
  other[colon - 2] = 'c';
  snapshot_reseal(other);
  EXPECT(restore_or_refuse(g, other));
  // The recorded state must match the replayed one.
  std::string flags = good;
  flags.back() ^= 1;
  snapshot_reseal(flags);
  EXPECT_EQ(reason_of(g, flags), std::string("corrupt"));
}

TEST(snapshot_truncation_at_every_length) {
  auto v = snap_vocab();
  auto g = compiled(1, v);
  const std::string good = walked_snapshot(g, 9, 30);
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::string cut = good.substr(0, n);
    EXPECT(!restore_or_refuse(g, cut));
    // With a header claiming exactly that length and a valid checksum, the strict body reader
    // must refuse it by itself.
    if (n >= 72) {
      for (int i = 0; i < 8; ++i) cut[16 + i] = static_cast<char>((static_cast<std::uint64_t>(n) >> (8 * i)) & 0xFF);
      snapshot_reseal(cut);
      EXPECT(!restore_or_refuse(g, cut));
    }
  }
}

TEST(snapshot_bit_flips_never_crash) {
  auto v = snap_vocab();
  std::mt19937 rng(11);
  int restored = 0;
  for (int k = 0; k < 3; ++k) {
    auto g = k == 2 ? bound(compiled(2, v)) : compiled(k, v);
    for (unsigned seed = 1; seed <= 4; ++seed) {
      const std::string good = walked_snapshot(g, seed, 25);
      for (int i = 0; i < 150; ++i) {
        std::string bad = good;
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
        if (bad == good) continue;
        restored += restore_or_refuse(g, bad);  // the checksum refuses every unsealed flip
        snapshot_reseal(bad);
        restore_or_refuse(g, bad);  // sealed: refused, or a state the grammar reaches
        std::string odd = good;
        odd[72 + rng() % (odd.size() - 72)] = static_cast<char>(rng() % 256);
        snapshot_reseal(odd);
        restore_or_refuse(g, odd);
      }
    }
  }
  EXPECT_EQ(restored, 0);
}
