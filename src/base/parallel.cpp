// parallel.cpp — run_on_two_cpus (see parallel.hpp).
#include "parallel.hpp"

#include <sched.h>  // sched_getaffinity

#include <system_error>

namespace epload::detail {

bool start_helper(std::thread& helper, void (*fn)(void*), void* arg) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return false;
  try {
    helper = std::thread(fn, arg);
  } catch (const std::system_error&) {
    return false;  // no thread to be had: the caller does all of the work
  }
  return true;
}

bool run_on_two_cpus(void (*fn)(void*), void* arg) {
  std::thread helper;
  const bool two = start_helper(helper, fn, arg);
  fn(arg);
  if (two) helper.join();
  return two;
}

}  // namespace epload::detail
