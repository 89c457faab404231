// dfa_helpers.hpp — small helpers shared by the regex and DFA unit tests.
#pragma once

#include <string>

#include "dfa.hpp"

namespace corral_test {

/// Does the DFA accept exactly the byte string s?
inline bool full_match(const corral::Dfa& d, const std::string& s) {
  std::int32_t st = d.start();
  for (unsigned char c : s) {
    if (st == corral::Dfa::kDead) return false;
    st = d.next(st, c);
  }
  return st != corral::Dfa::kDead && d.accepting(st);
}

}  // namespace corral_test
