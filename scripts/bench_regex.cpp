// bench_regex.cpp — compile-time benchmark for realistic regexes (parse + DFA), Release build.
// Build: g++ -std=c++17 -O2 -DNDEBUG -Icpp cpp/regex_ast.cpp cpp/regex_parser.cpp cpp/dfa.cpp
//        cpp/nfa.cpp cpp/utf8.cpp scripts/bench_regex.cpp -o /tmp/bench_regex && /tmp/bench_regex
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dfa.hpp"
#include "regex_parser.hpp"

int main() {
  std::string codes;
  for (int i = 0; i < 200; ++i) {
    if (i) codes += '|';
    codes += std::string(1, static_cast<char>('A' + i % 26)) + static_cast<char>('A' + (i / 26) % 26) + "D-\\d{5}";
  }
  std::string literal_codes;
  for (int i = 0; i < 200; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "PRD-%05d", i * 37);
    if (i) literal_codes += '|';
    literal_codes += buf;
  }
  const std::vector<std::pair<const char*, std::string>> pats = {
      {"email (ASCII)", "[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}"},
      {"email (Unicode \\w)", "[\\w.+-]+@[\\w-]+\\.[\\w.-]+"},
      {"ISO-8601 date-time", "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})"},
      {"ISO-8601 (ASCII digits)", "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"},
      {"UUID", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"US phone", "\\+?1?[ -]?\\(?\\d{3}\\)?[ -]?\\d{3}-\\d{4}"},
      {"200-way XXD-\\d{5}", codes},
      {"200-way PRD-nnnnn literals", literal_codes},
      {"JSON string", "\"([^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*\""},
      {"JSON number", "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?"},
      {"(a|b)*a(a|b){12}", "(a|b)*a(a|b){12}"},
  };
  corral::Limits lim;
  std::printf("%-28s %8s %8s %10s\n", "regex", "states", "classes", "median us");
  for (const auto& [name, p] : pats) {
    std::vector<double> t;
    std::uint32_t states = 0, classes = 0;
    const int reps = std::string(name).find("(a|b)") == 0 ? 5 : 200;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      corral::Budget b(lim.max_compile_ms);
      corral::Dfa d = corral::Dfa::compile(corral::parse_regex(p, lim), lim, b);
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      states = d.num_states();
      classes = d.num_classes();
    }
    std::sort(t.begin(), t.end());
    std::printf("%-28s %8u %8u %10.1f\n", name, states, classes, t[t.size() / 2]);
  }
}
