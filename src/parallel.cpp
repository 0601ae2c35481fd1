// parallel.cpp — run_on_two_cpus (see parallel.hpp for why it pins).
#include "parallel.hpp"

#include <pthread.h>
#include <sched.h>

namespace epload::detail {

namespace {

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

bool PinnedHelper::start(void (*fn)(void*), void* arg) {
  if (m_started) return false;
  const int cpu = other_cpu();
  if (cpu < 0) return false;
  m_fn = fn;
  m_arg = arg;
  auto trampoline = [](void* p) -> void* {
    const PinnedHelper* self = static_cast<const PinnedHelper*>(p);
    self->m_fn(self->m_arg);
    return nullptr;
  };
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    // Without the affinity the thread would still run, only later: ignore
    // a failure to set it.
    (void)::pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    m_started = ::pthread_create(&m_thread, &attr, trampoline, this) == 0;
    ::pthread_attr_destroy(&attr);
  }
  // A CPU set the kernel refuses (a cpuset changed under us): unpinned.
  if (!m_started) m_started = ::pthread_create(&m_thread, nullptr, trampoline, this) == 0;
  return m_started;
}

void PinnedHelper::join() {
  if (!m_started) return;
  ::pthread_join(m_thread, nullptr);
  m_started = false;
}

bool run_on_two_cpus(void (*fn)(void*), void* arg) {
  PinnedHelper helper;
  const bool two = helper.start(fn, arg);
  fn(arg);
  helper.join();
  return two;
}

}  // namespace epload::detail
