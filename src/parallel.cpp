// parallel.cpp — run_on_two_cpus (see parallel.hpp for why it pins).
#include "parallel.hpp"

#include <pthread.h>
#include <sched.h>

namespace epload::detail {

namespace {

struct Job {
  void (*fn)(void*);
  void* arg;
};

void* trampoline(void* p) {
  const Job* job = static_cast<const Job*>(p);
  job->fn(job->arg);
  return nullptr;
}

/// Another CPU this process may run on than the calling thread's, or -1.
int other_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  if (CPU_COUNT(&allowed) < 2) return -1;
  const int here = ::sched_getcpu();
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (c != here && CPU_ISSET(c, &allowed)) return c;
  }
  return -1;
}

}  // namespace

bool run_on_two_cpus(void (*fn)(void*), void* arg) {
  const int cpu = other_cpu();
  pthread_t helper;
  bool started = false;
  Job job{fn, arg};
  if (cpu >= 0) {
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      // Without the affinity the thread would still run, only later: ignore
      // a failure to set it.
      (void)::pthread_attr_setaffinity_np(&attr, sizeof one, &one);
      started = ::pthread_create(&helper, &attr, trampoline, &job) == 0;
      ::pthread_attr_destroy(&attr);
    }
    // A CPU set the kernel refuses (a cpuset changed under us): unpinned.
    if (!started) started = ::pthread_create(&helper, nullptr, trampoline, &job) == 0;
  }
  fn(arg);
  if (started) ::pthread_join(helper, nullptr);
  return started;
}

}  // namespace epload::detail
