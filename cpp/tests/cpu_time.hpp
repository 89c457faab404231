// cpu_time.hpp — timing for the C++ tests' "this is refused quickly" checks. Invariants: times
// are this process's CPU time (std::clock), not wall time, so a loaded machine (CI on two shared
// cores) does not make them fail; a test that checks which limit refused an input compiles with
// patient_limits(), so the wall-clock compile budget (max_compile_ms, 10 s by default) cannot
// refuse it first on a slow sanitizer build under load.
#pragma once

#include <cstdint>
#include <ctime>

#include "limits.hpp"

namespace corral_test {

/// CPU time this process has used, in milliseconds.
inline double cpu_ms() { return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

/// The default limits with a compile budget far beyond any test's work (10 minutes).
inline corral::Limits patient_limits() {
  corral::Limits lim;
  lim.max_compile_ms = 600000;
  return lim;
}

}  // namespace corral_test
