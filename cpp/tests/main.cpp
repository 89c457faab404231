// main.cpp — runs every registered C++ unit test; `corral_cpp_tests [substring]` filters by name.
#include <cstring>
#include <exception>

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
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
