// regex_check.cpp — line-oriented driver for scripts/crosscheck_regex.py (not part of the library).
//
// In (stdin), one command per line, arguments hex-encoded UTF-8:
//   P <hex>   compile a pattern  -> "OK <states>" | "ERR <kind> <offset> <column> <message>"
//   S <hex>   run the current DFA byte by byte -> "1" (full match) | "0"
//   R         print_regex of the current tree  -> "R <hex>"
//   C         shortest completion from start   -> "C <hex> <distance>"
// Build: g++ -std=c++17 -O2 -Icpp cpp/regex_ast.cpp cpp/regex_parser.cpp cpp/dfa.cpp cpp/nfa.cpp
//        cpp/utf8.cpp scripts/regex_check.cpp -o /tmp/regex_check
#include <iostream>
#include <string>

#include "dfa.hpp"
#include "errors.hpp"
#include "regex_parser.hpp"

static std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}
static std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += d[c >> 4], out += d[c & 15];
  return out;
}

int main() {
  std::ios::sync_with_stdio(false);
  corral::Limits limits;
  corral::Dfa dfa;
  corral::NodePtr tree;
  bool ok = false;
  std::string line;
  while (std::getline(std::cin, line)) {
    const char cmd = line.empty() ? '?' : line[0];
    const std::string arg = line.size() > 2 ? line.substr(2) : std::string();
    if (cmd == 'P') {
      ok = false;
      try {
        tree = corral::parse_regex(unhex(arg), limits);
        corral::Budget budget(limits.max_compile_ms);
        dfa = corral::Dfa::compile(tree, limits, budget);
        ok = true;
        std::cout << "OK " << dfa.num_states() << "\n";
      } catch (const corral::CompileError& e) {
        std::cout << "ERR CompileError " << e.offset() << " " << e.column() << " " << e.bare_message() << "\n";
      } catch (const corral::LimitExceeded& e) {
        std::cout << "ERR LimitExceeded 0 0 " << e.what() << "\n";
      } catch (const std::exception& e) {
        std::cout << "ERR Other 0 0 " << e.what() << "\n";
      }
    } else if (cmd == 'S') {
      const std::string s = unhex(arg);
      std::int32_t st = ok ? dfa.start() : corral::Dfa::kDead;
      for (unsigned char c : s) {
        if (st == corral::Dfa::kDead) break;
        st = dfa.next(st, c);
      }
      std::cout << (st != corral::Dfa::kDead && dfa.accepting(st) ? "1" : "0") << "\n";
    } else if (cmd == 'R') {
      std::cout << "R " << (ok ? hex(corral::print_regex(tree)) : std::string()) << "\n";
    } else if (cmd == 'C') {
      if (!ok || dfa.empty_language()) {
        std::cout << "C  -1\n";
      } else {
        std::cout << "C " << hex(dfa.shortest_completion(dfa.start())) << " "
                  << dfa.distance_to_accept(dfa.start()) << "\n";
      }
    } else {
      std::cout << "?\n";
    }
    std::cout.flush();
  }
}
