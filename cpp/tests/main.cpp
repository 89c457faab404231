// main.cpp — runs every registered C++ unit test; `corral_cpp_tests [substring]` filters by name.
// Tests that take more than a second of CPU time are listed with their times (the CI log then
// shows where a sanitizer run spends its time).
#include <cstring>
#include <exception>

#include "cpu_time.hpp"
#include "testing.hpp"

namespace corral_test {
std::vector<TestCase>& registry() {
  static std::vector<TestCase> r;
  return r;
}
}  // namespace corral_test

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  for (auto& t : corral_test::registry()) {
    if (argc > 1 && std::strstr(t.name, argv[1]) == nullptr) continue;
    const double t0 = corral_test::cpu_ms();
    try {
      t.fn();
      ++passed;
    } catch (const corral_test::Failure& f) {
      ++failed;
      std::cout << "FAIL " << t.name << ": " << f.what << "\n";
    } catch (const std::exception& e) {
      ++failed;
      std::cout << "FAIL " << t.name << ": unexpected exception: " << e.what() << "\n";
    }
    const double ms = corral_test::cpu_ms() - t0;
    if (ms > 1000) std::cout << "slow " << t.name << ": " << static_cast<long>(ms) << " ms CPU\n";
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
