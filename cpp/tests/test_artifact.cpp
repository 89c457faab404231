// test_artifact.cpp — compiled-grammar artifacts (artifact.hpp) through the C++ API: round trips
// give identical masks at every step of seeded random walks, slots bind on a loaded skeleton,
// and every refusal (bad magic, versions, vocabulary, truncation at every length, bit flips with
// and without a valid checksum) is an ArtifactError or LimitExceeded — never a crash, which the
// sanitizer build checks. tests/test_artifact_engine.py covers real vocabularies.
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

// Single bytes, multi-byte tokens crossing terminal boundaries, EOS and a named special token.
std::shared_ptr<const Vocabulary> art_vocab(const std::string& extra = "") {
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

// The shortest completion, or the error that says there is none made of bytes.
std::string completion(Matcher& m) {
  try {
    return m.shortest_completion();
  } catch (const LimitExceeded& e) {
    return std::string("error: ") + e.what();
  }
}

// Masks of two matchers agree at every step of a seeded random walk (the walk follows a);
// a's moves are checked to be accepted by b too.
void same_walks(const std::shared_ptr<const CompiledGrammar>& a, const std::shared_ptr<const CompiledGrammar>& b,
                unsigned seed, int steps) {
  std::mt19937 rng(seed);
  Matcher ma(a), mb(b);
  for (int i = 0; i < steps; ++i) {
    const std::vector<std::int32_t> al = corral_test::allowed(ma), bl = corral_test::allowed(mb);
    EXPECT(al == bl);
    EXPECT_EQ(ma.is_accepting(), mb.is_accepting());
    EXPECT(completion(ma) == completion(mb));
    EXPECT(ma.forced_bytes() == mb.forced_bytes());
    if (al.empty() || ma.is_terminated()) break;
    const std::int32_t t = al[rng() % al.size()];
    EXPECT(ma.accept_token(t));
    EXPECT(mb.accept_token(t));
  }
}

std::shared_ptr<const CompiledGrammar> compiled(int k, std::shared_ptr<const Vocabulary> v) {
  return compile_grammar(kGrammars[k], "root", std::move(v), Limits{});
}

// Loads or refuses with a corral error; a grammar that loads is also stepped (it must not
// crash either). Returns true if it loaded.
bool load_or_refuse(const std::string& bytes, const std::shared_ptr<const Vocabulary>& v) {
  try {
    auto g = load_artifact(bytes, v);
    if (g->needs_binding()) g = g->bind({SlotValues{"id", {"a"}}, SlotValues{"name", {"b"}}});
    Matcher m(g);
    for (int i = 0; i < 4; ++i) {
      const auto al = corral_test::allowed(m);
      if (al.empty() || m.is_terminated()) break;
      m.accept_token(al[0]);
    }
    return true;
  } catch (const ArtifactError&) {
  } catch (const LimitExceeded&) {
  } catch (const SlotError&) {  // a mutated slot name no longer matches the binding
  }
  return false;
}

}  // namespace

TEST(artifact_round_trip_masks_identical) {
  auto v = art_vocab();
  for (int k = 0; k < 2; ++k) {
    auto g = compiled(k, v);
    const std::string bytes = to_artifact(*g);
    auto h = load_artifact(bytes, v);
    EXPECT(h->grammar().to_string() == g->grammar().to_string());
    EXPECT(to_artifact(*h) == bytes);  // the format is canonical: a loaded grammar writes the same bytes
    for (unsigned seed = 1; seed <= 20; ++seed) same_walks(g, h, seed, 40);
  }
  auto r = compile_regex("[a-c]{2,5}(12|true)?", v, Limits{});
  auto rl = load_artifact(to_artifact(*r), v);
  for (unsigned seed = 1; seed <= 10; ++seed) same_walks(r, rl, seed, 12);
}

TEST(artifact_slots_bind_on_loaded_skeleton) {
  auto v = art_vocab();
  auto g = compiled(2, v);
  auto h = load_artifact(to_artifact(*g), v);
  EXPECT(h->needs_binding());
  EXPECT(h->slot_names() == g->slot_names());
  const std::vector<SlotValues> values{SlotValues{"id", {"ab", "abc", "12"}}, SlotValues{"name", {"x\"y", "é"}}};
  auto bg = g->bind(values), bh = h->bind(values);
  for (unsigned seed = 1; seed <= 20; ++seed) same_walks(bg, bh, seed, 30);
  EXPECT_THROWS(to_artifact(*bh), SlotError);  // a binding is per request
}

TEST(artifact_refusals_have_reasons) {
  auto v = art_vocab();
  const std::string good = to_artifact(*compiled(0, v));
  auto reason_of = [&](const std::string& bytes, const std::shared_ptr<const Vocabulary>& voc) {
    try {
      load_artifact(bytes, voc);
    } catch (const ArtifactError& e) {
      return e.reason();
    }
    return std::string("loaded");
  };
  EXPECT_EQ(reason_of(good, v), std::string("loaded"));
  EXPECT_EQ(reason_of("", v), std::string("bad_magic"));
  EXPECT_EQ(reason_of("{\"type\": \"object\"}", v), std::string("bad_magic"));
  EXPECT_EQ(reason_of(good, art_vocab("zz")), std::string("wrong_vocabulary"));
  std::string ver = good;
  ver[8] = static_cast<char>(kArtifactFormatVersion + 1);  // a version this engine does not read
  EXPECT_EQ(reason_of(ver, v), std::string("unsupported_version"));
  std::string eng = good;
  eng[41 + 7] ^= 0x01;  // a character of the engine version string (after its length byte)
  EXPECT_EQ(reason_of(eng, v), std::string("corrupt"));  // checksum first
  artifact_reseal(eng);
  EXPECT_EQ(reason_of(eng, v), std::string("engine_version"));
  EXPECT_EQ(reason_of(good + "x", v), std::string("corrupt"));
  // A limit given at load time applies to the automata.
  Limits tiny;
  tiny.max_dfa_states = 2;
  EXPECT_THROWS(load_artifact(good, v, &tiny), LimitExceeded);
}

TEST(artifact_truncation_at_every_length) {
  auto v = art_vocab();
  const std::string good = to_artifact(*compiled(1, v));
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::string cut = good.substr(0, n);
    EXPECT(!load_or_refuse(cut, v));
    // Truncated with a header claiming exactly that length and a valid checksum: the strict
    // body parser must refuse it by itself.
    if (n >= 40) {
      for (int i = 0; i < 8; ++i) cut[16 + i] = static_cast<char>((static_cast<std::uint64_t>(n) >> (8 * i)) & 0xFF);
      artifact_reseal(cut);
      EXPECT(!load_or_refuse(cut, v));
    }
  }
}

TEST(artifact_bit_flips_never_crash) {
  auto v = art_vocab();
  std::mt19937 rng(7);
  int loaded = 0, resealed_loaded = 0;
  for (int k = 0; k < 3; ++k) {
    const std::string good = to_artifact(*compiled(k, v));
    for (int i = 0; i < 600; ++i) {
      std::string bad = good;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
      // Without resealing the checksum refuses every flip in the checksummed range.
      loaded += load_or_refuse(bad, v);
      artifact_reseal(bad);
      resealed_loaded += load_or_refuse(bad, v);
      // Random field values: overwrite a byte of the body with anything.
      std::string odd = good;
      odd[40 + rng() % (odd.size() - 40)] = static_cast<char>(rng() % 256);
      artifact_reseal(odd);
      load_or_refuse(odd, v);
    }
  }
  EXPECT_EQ(loaded, 0);
  (void)resealed_loaded;  // some resealed mutations are valid grammars (a changed name, a flag)
}

TEST(artifact_refuses_costly_table_rebuilds) {
  // Grammar::finalize may need one pass over all productions per nonterminal: the loader bounds
  // (nonterminals x symbols) by max_productions. 200 rules of 243 symbols each (r0 keeps them
  // apart, so nothing merges): about 202 x 49,000 = 9.9e6 > 410 x 20,000.
  auto v = art_vocab();
  std::string text = "root ::= r0\nr0 ::= \"x\" | \"(\" r1 \")\"\n";
  const int n = 200;
  for (int i = 1; i <= n; ++i) {
    text += "r" + std::to_string(i) + " ::= \"ab\" | " + (i < n ? "r" + std::to_string(i + 1) : std::string("\"y\""));
    for (int k = 0; k < 120; ++k) text += " r0 \",\"";
    text += "\n";
  }
  Limits patient;  // a sanitizer build on a busy machine compiles slowly; the load is the test
  patient.max_compile_ms = 600000;
  const std::string bytes = to_artifact(*compile_grammar(text, "root", v, patient));
  EXPECT(load_artifact(bytes, v) != nullptr);
  Limits small;
  small.max_productions = 410;  // the ~403 productions themselves pass
  EXPECT_THROWS(load_artifact(bytes, v, &small), LimitExceeded);
}

TEST(artifact_crc32_is_zlibs) {
  EXPECT_EQ(artifact_crc32("123456789"), 0xCBF43926u);  // the CRC-32/IEEE check value
  EXPECT_EQ(artifact_crc32(""), 0u);
  // Every length of the 8-byte loop and its tail agrees with the bitwise CRC.
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  for (std::size_t n = 0; n < data.size(); n += 7) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
      c ^= static_cast<unsigned char>(data[i]);
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    EXPECT_EQ(artifact_crc32(std::string_view(data).substr(0, n)), c ^ 0xFFFFFFFFu);
  }
}
