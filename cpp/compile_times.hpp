// compile_times.hpp — where a compile's time goes, per thread, for benchmarks.
//
// Each compile stage adds its time to the calling thread's counters (cumulative: a caller reads
// them before and after a compile and takes the difference). The clock is the steady wall clock
// by default; set_stage_clock_cpu(true) (a benchmark on a loaded machine, where the wall clock
// charges a stage with the time slices other processes took) switches every thread to its own
// CPU clock, which costs a system call per read (several µs on a VM), so it is never the
// default. The counters are never read by the engine itself, cost two clock reads per stage, and
// are thread-local, so concurrent compiles on other threads do not mix in.
// Invariant: the counters are disjoint: lowering's counter excludes the automata built inside it
// (compile.cpp subtracts them), so their sum is the compile's time on the chosen clock.
#pragma once

#include <time.h>

#include <atomic>
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

/// Whether stage timers read the thread CPU clock (true) or the steady clock (false, default).
inline std::atomic<bool>& stage_clock_cpu() {
  static std::atomic<bool> cpu{false};
  return cpu;
}
inline void set_stage_clock_cpu(bool cpu) { stage_clock_cpu().store(cpu, std::memory_order_relaxed); }

/// Now on the thread CPU clock (`cpu`) or the steady clock, in nanoseconds.
inline std::uint64_t stage_clock_ns(bool cpu) {
  if (cpu) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  }
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Adds the stage-clock time from construction to destruction to one counter (a timer that
/// outlives a clock switch adds 0 rather than a difference of two clocks).
class StageTimer {
 public:
  explicit StageTimer(std::uint64_t& into)
      : into_(into), cpu_(stage_clock_cpu().load(std::memory_order_relaxed)), t0_(stage_clock_ns(cpu_)) {}
  ~StageTimer() { into_ += elapsed_ns(); }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  /// Nanoseconds since construction (for callers that subtract a nested stage).
  std::uint64_t elapsed_ns() const {
    if (stage_clock_cpu().load(std::memory_order_relaxed) != cpu_) return 0;
    const std::uint64_t now = stage_clock_ns(cpu_);
    return now > t0_ ? now - t0_ : 0;
  }

 private:
  std::uint64_t& into_;
  bool cpu_;
  std::uint64_t t0_;
};

}  // namespace corral
