// test_probe.cpp — probe_expression and check_regex: the converter's typed questions to the
// engine (states / empty / too big as values; malformed text still an error).
#include "compile.hpp"
#include "errors.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

ProbeResult probe(const std::string& rhs, std::uint32_t max_states = 1000) {
  return probe_expression(rhs, max_states, Limits{});
}

template <class E, class F>
bool throws(F&& f) {
  try {
    f();
  } catch (const E&) {
    return true;
  }
  return false;
}

}  // namespace

TEST(probe_counts_states_of_a_product) {
  ProbeResult r = probe("/[a-z]{1,5}/ & /ab.*/");
  EXPECT(r.kind == ProbeResult::Kind::States);
  // "ab" then 0..3 more letters: a minimal DFA with a start, "a", "ab", and three more positions.
  EXPECT(r.states == 6);
}

TEST(probe_reports_an_empty_language_as_a_value) {
  EXPECT(probe("/a/ - /a/").kind == ProbeResult::Kind::Empty);
  EXPECT(probe("/[0-9]+/ & /[a-z]+/").kind == ProbeResult::Kind::Empty);
}

TEST(probe_reports_a_budget_overrun_as_a_value) {
  EXPECT(probe("/[a-z]{1,300}/", 50).kind == ProbeResult::Kind::TooBig);
  EXPECT(probe("/[a-z]{1,30}/", 50).kind == ProbeResult::Kind::States);
}

TEST(probe_still_refuses_malformed_text) {
  EXPECT(throws<CompileError>([] { probe("/(ab/"); }));
  EXPECT(throws<CompileError>([] { probe("undefined_rule"); }));
}

TEST(check_regex_accepts_what_compile_regex_accepts) {
  Limits limits;
  check_regex("[a-z]+@[a-z]+\\.com", limits);
  EXPECT(throws<CompileError>([&] { check_regex("(?=a)b", limits); }));
  EXPECT(throws<CompileError>([&] { check_regex("(a)\\1", limits); }));
  EXPECT(throws<LimitExceeded>([&] { check_regex("a{0,100000}", limits); }));
}
