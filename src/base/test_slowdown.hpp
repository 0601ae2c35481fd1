// test_slowdown.hpp — EPLOAD_TEST_SLOWDOWN, a switch for tests only.
//
// It exists so that tests can show that the CI gate (scripts/bench_gate)
// catches a real regression.  It is compiled in only with the CMake option
// EPLOAD_TEST_HOOKS (scripts/setup.sh's development build turns it on);
// any other build, the installed and packaged ones included, has empty
// inline calls here and never reads the variable.
#pragma once

#include <cstdint>

namespace epload::profile {

/// Places where EPLOAD_TEST_SLOWDOWN can inject a busy-wait.
enum class SlowPoint : std::uint8_t {
  validate,  ///< each still_valid() call (cache validation)
  scan,      ///< each cold scan
  load,      ///< each backend load
};

#ifdef EPLOAD_TEST_HOOKS
/// EPLOAD_TEST_SLOWDOWN=point:us[,point:us...] (points: validate, scan,
/// load), read once, makes each pass through `point` spin for `us`
/// microseconds of CPU time (the gate compares CPU-time ratios).
void test_slowdown(SlowPoint point);
#else
inline void test_slowdown(SlowPoint) {}
#endif

}  // namespace epload::profile
