// parallel.hpp — run one piece of work on two threads at once.
//
// Scanning and `full` validation are thousands of independent system calls
// (reads, stats) that the kernel serves at the same speed on either core.
// Both share their items through an atomic counter, so the work function
// simply runs on two threads and whichever is faster does more.  What it
// buys is in BENCHMARKS.md ("What the speed machinery buys", "Where the time goes").
#pragma once

#include <thread>

namespace epload::detail {

/// Starts fn(arg) on `helper` when the process may run on two CPUs; false,
/// and nothing started, otherwise or when no thread can be created.  The
/// caller joins `helper`.
bool start_helper(std::thread& helper, void (*fn)(void*), void* arg);

/// Calls fn(arg) on the calling thread and, when the process may run on
/// two CPUs, at the same time on one plain helper thread; returns when both
/// calls have returned.  fn must be safe to run on two threads at once.
/// Runs fn once, on the caller, when there is no second CPU or no thread
/// can be created.  Returns true when two threads ran.
bool run_on_two_cpus(void (*fn)(void*), void* arg);

/// The same for any callable (a lambda with captures).
template <class F>
bool run_on_two_cpus(F& f) {
  return run_on_two_cpus([](void* p) { (*static_cast<F*>(p))(); }, &f);
}

}  // namespace epload::detail
