// test_slowdown.cpp — EPLOAD_TEST_SLOWDOWN (see test_slowdown.hpp).  Empty
// unless the build has EPLOAD_TEST_HOOKS.
#include "test_slowdown.hpp"

#ifdef EPLOAD_TEST_HOOKS

#include <time.h>  // clock_gettime

#include <array>
#include <cstdio>   // fprintf
#include <cstdlib>  // getenv, strtoll
#include <string>
#include <string_view>

namespace epload::profile {

namespace {

constexpr int k_points = 3;
constexpr const char* k_names[k_points] = {"validate", "scan", "load"};

/// Microseconds per point, from the environment (a bad item is ignored,
/// with a message: the test that set it will fail to see its slowdown).
std::array<std::int64_t, k_points> parse(const char* spec) {
  std::array<std::int64_t, k_points> us{};
  std::string_view s = spec != nullptr ? spec : "";
  while (!s.empty()) {
    const std::size_t comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    const std::size_t colon = item.find(':');
    bool ok = false;
    if (colon != std::string_view::npos) {
      const std::string number(item.substr(colon + 1));
      char* end = nullptr;
      const long long n = std::strtoll(number.c_str(), &end, 10);
      for (int k = 0; k < k_points; ++k) {
        if (item.substr(0, colon) == k_names[k] && end != number.c_str() && *end == '\0' && n >= 0) {
          us[k] = n;
          ok = true;
        }
      }
    }
    if (!ok) {
      std::fprintf(stderr,
                   "epload: EPLOAD_TEST_SLOWDOWN: ignoring '%.*s' (expected POINT:MICROSECONDS, "
                   "POINT one of validate, scan, load)\n",
                   static_cast<int>(item.size()), item.data());
    }
  }
  return us;
}

std::int64_t cpu_now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void test_slowdown(SlowPoint point) {
  static const std::array<std::int64_t, k_points> us = parse(std::getenv("EPLOAD_TEST_SLOWDOWN"));
  const std::int64_t wait = us[static_cast<int>(point)];
  if (wait <= 0) return;
  // CPU time, not wall time: a sleep would not show in the gate's ratios.
  const std::int64_t until = cpu_now_ns() + wait * 1000;
  while (cpu_now_ns() < until) {
  }
}

}  // namespace epload::profile

#endif  // EPLOAD_TEST_HOOKS
