// parallel.cpp — run_on_two_cpus (see parallel.hpp for why it pins).
#include "parallel.hpp"

#include <pthread.h>
#include <sched.h>

#include <cstdint>

#include "epload/profile.hpp"  // now_ns

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
  m_returned.store(false, std::memory_order_relaxed);
  auto trampoline = [](void* p) -> void* {
    PinnedHelper* self = static_cast<PinnedHelper*>(p);
    self->m_fn(self->m_arg);
    // The last touch of the helper object: once join() sees it, the object
    // (and whatever fn used) may be gone while this thread ends.
    self->m_returned.store(true, std::memory_order_release);
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
  m_started = false;
  // The helper's share usually ends within a chunk of the caller's, so a
  // short spin (0.1 ms at most) sees fn return; the thread is then left to
  // end on its own.  pthread_join would also wait for its teardown (its
  // stack given back, its exit, and the wake-up of this thread from
  // another CPU: ~50 us here, on the path of every `full` check).  A
  // helper still busy past the spin is joined as before.
  constexpr std::int64_t k_spin_ns = 100'000;
  const std::int64_t until = profile::now_ns() + k_spin_ns;
  for (unsigned i = 1; !m_returned.load(std::memory_order_acquire); ++i) {
    cpu_relax();
    if (i % 64 == 0 && profile::now_ns() > until) break;
  }
  if (m_returned.load(std::memory_order_acquire)) {
    ::pthread_detach(m_thread);
  } else {
    ::pthread_join(m_thread, nullptr);
  }
}

bool run_on_two_cpus(void (*fn)(void*), void* arg) {
  PinnedHelper helper;
  const bool two = helper.start(fn, arg);
  fn(arg);
  helper.join();
  return two;
}

}  // namespace epload::detail
