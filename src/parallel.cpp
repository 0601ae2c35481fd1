// parallel.cpp — run_on_two_cpus (see parallel.hpp).
#include "parallel.hpp"

#include <sched.h>  // sched_getaffinity

#include <system_error>
#include <thread>

namespace epload::detail {

bool run_on_two_cpus(void (*fn)(void*), void* arg) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool two_cpus = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2;
  std::thread helper;
  if (two_cpus) {
    try {
      helper = std::thread(fn, arg);
    } catch (const std::system_error&) {
      // No thread to be had: the caller does all of the work.
    }
  }
  fn(arg);
  if (!helper.joinable()) return false;
  helper.join();
  return true;
}

}  // namespace epload::detail
