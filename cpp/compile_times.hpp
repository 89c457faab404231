// compile_times.hpp — where a compile's time goes, per thread, for benchmarks.
//
// Each compile stage adds its wall time to the calling thread's counters (cumulative: a caller
// reads them before and after a compile and takes the difference). The counters are never read
// by the engine itself, cost two clock reads per stage, and are thread-local, so concurrent
// compiles on other threads do not mix in.
// Invariant: the counters are disjoint: lowering's counter excludes the automata built inside it
// (compile.cpp subtracts them), so their sum is the compile's wall time.
#pragma once

#include <chrono>
#include <cstdint>

namespace corral {

struct CompileTimes {
  std::uint64_t parse_ns = 0;     // grammar/regex text → AST
  std::uint64_t lower_ns = 0;     // AST → productions and terminals (automata excluded)
  std::uint64_t automata_ns = 0;  // terminal NFA → DFA → minimal byte DFA
  std::uint64_t bind_ns = 0;      // token terminals, grammar tables, the compiled grammar
  std::uint64_t walk_ns = 0;      // mask-cache entries computed (trie walks), at any time
  std::uint64_t compiles = 0;     // compile_* calls finished
};

/// The calling thread's counters.
CompileTimes& compile_times();

/// Adds the time from construction to destruction to one counter.
class StageTimer {
 public:
  explicit StageTimer(std::uint64_t& into) : into_(into), t0_(std::chrono::steady_clock::now()) {}
  ~StageTimer() {
    into_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  /// Nanoseconds since construction (for callers that subtract a nested stage).
  std::uint64_t elapsed_ns() const {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  std::uint64_t& into_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace corral
