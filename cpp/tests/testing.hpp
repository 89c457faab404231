// testing.hpp — a minimal test registry for the engine's C++ unit tests (no dependencies, so the
// sanitizer build needs nothing beyond the compiler). The runner prints "N passed, N failed".
#pragma once

#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace corral_test {

struct TestCase {
  const char* name;
  std::function<void()> fn;
};
std::vector<TestCase>& registry();
struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};
struct Failure {
  std::string what;
};

}  // namespace corral_test

#define CORRAL_TEST_CAT2(a, b) a##b
#define CORRAL_TEST_CAT(a, b) CORRAL_TEST_CAT2(a, b)
#define TEST(name)                                                                        \
  static void name();                                                                     \
  static ::corral_test::Register CORRAL_TEST_CAT(reg_, name)(#name, name);                \
  static void name()

#define EXPECT(cond)                                                                      \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::ostringstream os_;                                                             \
      os_ << __FILE__ << ":" << __LINE__ << ": expected " #cond;                          \
      throw ::corral_test::Failure{os_.str()};                                            \
    }                                                                                     \
  } while (0)

#define EXPECT_EQ(a, b)                                                                   \
  do {                                                                                    \
    auto va_ = (a);                                                                       \
    auto vb_ = (b);                                                                       \
    if (!(va_ == vb_)) {                                                                  \
      std::ostringstream os_;                                                             \
      os_ << __FILE__ << ":" << __LINE__ << ": expected " #a " == " #b " (" << va_        \
          << " vs " << vb_ << ")";                                                        \
      throw ::corral_test::Failure{os_.str()};                                            \
    }                                                                                     \
  } while (0)

#define EXPECT_THROWS(stmt, ExcType)                                                      \
  do {                                                                                    \
    bool thrown_ = false;                                                                 \
    try {                                                                                 \
      stmt;                                                                               \
    } catch (const ExcType&) {                                                            \
      thrown_ = true;                                                                     \
    }                                                                                     \
    if (!thrown_) {                                                                       \
      std::ostringstream os_;                                                             \
      os_ << __FILE__ << ":" << __LINE__ << ": expected " #stmt " to throw " #ExcType;    \
      throw ::corral_test::Failure{os_.str()};                                            \
    }                                                                                     \
  } while (0)
