// test_concurrency.cpp — one compiled grammar shared by many threads: every thread's masks equal
// a single-threaded reference on a separately compiled grammar, while the lazy caches (DFA
// states, mask entries, shared classes, the vocabulary's cross-grammar pool) fill concurrently.
// Built into every test binary; under ThreadSanitizer (-DCORRAL_TSAN=ON, a CI job) it is the
// race detector's workload. Invariants checked: masks are a pure function of (grammar, prefix);
// copying a matcher shares nothing mutable; fill_next_token_bitmasks on a pool of workers writes
// each row as the matcher's own fill would.
#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "batch.hpp"
#include "compile.hpp"
#include "matcher.hpp"
#include "matcher_helpers.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

std::shared_ptr<const Vocabulary> vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  const std::string alpha = "abcdefgxyz\"{}[]:, 0123456789";
  for (char x : alpha)
    for (char y : alpha) toks.push_back(std::string{x, y});
  for (const char* t : {"{\"", "\":", "\",", "\"}", "\"name\"", "\"tags\"", "true", "false", "null"}) toks.push_back(t);
  toks.push_back("<eos>");
  const auto n = static_cast<std::int32_t>(toks.size());
  return std::make_shared<const Vocabulary>(toks, std::vector<std::int32_t>{n - 1}, std::vector<std::int32_t>{n - 1}, n);
}

const char* kGrammar = R"G(root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"tags\"" ws ":" ws list ws "," ws "\"n\"" ws ":" ws num ws "}"
str ::= "\"" [a-z0-9 ]{1,24} "\""
list ::= "[" ws (value (ws "," ws value)*)? ws "]"
value ::= str | num | "true" | "false" | "null" | list
num ::= "-"? [0-9]{1,6}
ws ::= [ ]{0,2})G";

// One seeded walk: the allowed set at every step, and the token taken.
struct Walk {
  std::vector<std::vector<std::int32_t>> allowed;
  std::vector<std::int32_t> taken;
};

Walk walk(const std::shared_ptr<const CompiledGrammar>& g, unsigned seed, int steps) {
  Walk w;
  Matcher m(g);
  std::mt19937 rng(seed);
  for (int i = 0; i < steps && !m.is_terminated(); ++i) {
    w.allowed.push_back(corral_test::allowed(m));
    const auto& a = w.allowed.back();
    if (a.empty()) break;
    const std::int32_t t = a[rng() % a.size()];
    w.taken.push_back(t);
    if (!m.accept_token(t)) break;
  }
  return w;
}

// Runs fn(i) for i in [0, n) on `threads` threads; rethrows the first failure on the caller.
template <class F>
void parallel(int n, int threads, F fn) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        try {
          fn(i);
        } catch (const corral_test::Failure& f) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(f.what);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(e.what());
        }
      }
    });
  for (auto& th : pool) th.join();
  if (!failures.empty()) throw corral_test::Failure{failures.front()};
}

constexpr int kWalks = 24;
constexpr int kSteps = 80;

}  // namespace

TEST(concurrent_walks_on_one_grammar_equal_a_serial_reference) {
  auto v = vocab();
  auto reference = compile_grammar(kGrammar, "root", v, Limits{});
  std::vector<Walk> expected;
  for (int i = 0; i < kWalks; ++i) expected.push_back(walk(reference, 100 + i, kSteps));
  // A second vocabulary object: its pool and the grammar's caches start empty and fill from
  // four threads at once.
  auto shared = compile_grammar(kGrammar, "root", vocab(), Limits{});
  parallel(kWalks, 4, [&](int i) {
    Walk got = walk(shared, 100 + i, kSteps);
    EXPECT(got.allowed == expected[static_cast<std::size_t>(i)].allowed);
    EXPECT(got.taken == expected[static_cast<std::size_t>(i)].taken);
  });
}

TEST(concurrent_compiles_share_the_vocabulary_pool_safely) {
  // Each thread compiles its own grammar on one vocabulary (the cross-grammar mask pool is
  // shared) and walks it; all equal the reference.
  auto v = vocab();
  auto reference = compile_grammar(kGrammar, "root", vocab(), Limits{});
  std::vector<Walk> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(walk(reference, 7 * i, kSteps));
  parallel(8, 4, [&](int i) {
    auto g = compile_grammar(kGrammar, "root", v, Limits{});
    Walk got = walk(g, 7 * static_cast<unsigned>(i), kSteps);
    EXPECT(got.allowed == expected[static_cast<std::size_t>(i)].allowed);
  });
}

TEST(copies_advanced_on_other_threads_stay_independent) {
  auto v = vocab();
  auto g = compile_grammar(kGrammar, "root", v, Limits{});
  Matcher base(g);
  for (const char* s : {"{", " ", "\"name\"", ":", "\"ab"}) EXPECT(base.accept_bytes(s));
  const auto before = corral_test::allowed(base);
  parallel(8, 4, [&](int i) {
    Matcher c = base;  // a copy made on this thread, advanced here only
    std::mt19937 rng(static_cast<unsigned>(i));
    for (int k = 0; k < 30 && !c.is_terminated(); ++k) {
      auto a = corral_test::allowed(c);
      if (a.empty()) break;
      EXPECT(c.accept_token(a[rng() % a.size()]));
    }
  });
  EXPECT(corral_test::allowed(base) == before);
}

TEST(batch_fill_on_the_worker_pool_equals_per_matcher_fills) {
  auto v = vocab();
  auto reference = compile_grammar(kGrammar, "root", v, Limits{});
  auto g = compile_grammar(kGrammar, "root", vocab(), Limits{});
  const int rows = 16;
  std::vector<Walk> expected;
  for (int i = 0; i < rows; ++i) expected.push_back(walk(reference, 500 + i, kSteps));
  std::vector<std::unique_ptr<Matcher>> ms;
  for (int i = 0; i < rows; ++i) ms.push_back(std::make_unique<Matcher>(g));
  const std::size_t words = v->mask_words();
  std::vector<std::int32_t> buf(words * rows);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Matcher*> live;
    std::vector<std::int32_t*> out;
    std::vector<int> which;
    for (int i = 0; i < rows; ++i)
      if (static_cast<std::size_t>(step) < expected[static_cast<std::size_t>(i)].taken.size()) {
        live.push_back(ms[static_cast<std::size_t>(i)].get());
        out.push_back(buf.data() + words * static_cast<std::size_t>(i));
        which.push_back(i);
      }
    if (live.empty()) break;
    fill_next_token_bitmasks(live, out, 4);
    for (std::size_t k = 0; k < live.size(); ++k) {
      const auto& w = expected[static_cast<std::size_t>(which[k])];
      std::vector<std::int32_t> got;
      const std::int32_t* row = out[k];
      for (std::uint32_t t = 0; t < v->width(); ++t)
        if (static_cast<std::uint32_t>(row[t >> 5]) >> (t & 31) & 1u) got.push_back(static_cast<std::int32_t>(t));
      EXPECT(got == w.allowed[static_cast<std::size_t>(step)]);
      EXPECT(live[k]->accept_token(w.taken[static_cast<std::size_t>(step)]));
    }
  }
}
