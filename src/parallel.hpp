// parallel.hpp — run one piece of work on two CPUs at once.
//
// Scanning and `full` validation are thousands of independent system calls
// (reads, stats) that the kernel serves at the same speed on either core.
// Both share their items through an atomic counter, so the work function
// simply runs on two threads and whichever is faster does more.
//
// Why not std::thread: a new thread starts on its creator's CPU, and the
// scheduler moves it to the idle one only later — measured here, 1.6 to
// 3.7 ms after creation for a thread that would run ~5 ms, so the split
// often gained nothing.  The helper is created with its affinity already set
// to another allowed CPU, so it starts there within ~0.1 ms.  It stays there;
// if that CPU is busy, the calling thread takes the remaining items.
#pragma once

#include <pthread.h>

#include <atomic>

namespace epload::detail {

/// One turn of a spin-wait: tells the CPU this thread is waiting (x86
/// `pause`), nothing elsewhere.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// One helper thread, created already placed on another CPU than the
/// caller's (see above), for work the caller joins later.
class PinnedHelper {
 public:
  PinnedHelper() = default;
  PinnedHelper(const PinnedHelper&) = delete;
  PinnedHelper& operator=(const PinnedHelper&) = delete;
  ~PinnedHelper() { join(); }

  /// Starts fn(arg) on a helper thread placed on another CPU this process
  /// may use, and returns at once.  Returns false, and starts nothing, when
  /// there is no other CPU or no thread can be created (or one is running).
  bool start(void (*fn)(void*), void* arg);
  /// The same for any callable, which must outlive the helper.
  template <class F>
  bool start(F& f) {
    return start([](void* p) { (*static_cast<F*>(p))(); }, &f);
  }
  /// Waits until the helper's function has returned; nothing if none was
  /// started.  The thread itself may still be ending (detached) when this
  /// returns, but it touches nothing of this object or of its work any more.
  void join();
  bool started() const { return m_started; }

 private:
  void (*m_fn)(void*) = nullptr;
  void* m_arg = nullptr;
  pthread_t m_thread{};
  bool m_started = false;
  std::atomic<bool> m_returned{false};  ///< fn has returned (set by the helper, last)
};

/// Calls fn(arg) on the calling thread and, when the process may run on
/// another CPU, at the same time on one helper thread placed on that CPU;
/// returns when both calls have returned.  fn must be safe to run on two
/// threads at once.  Runs fn once, on the caller, when there is no second
/// CPU or no thread can be created.  Returns true when two threads ran.
bool run_on_two_cpus(void (*fn)(void*), void* arg);

/// The same for any callable (a lambda with captures).
template <class F>
bool run_on_two_cpus(F& f) {
  return run_on_two_cpus([](void* p) { (*static_cast<F*>(p))(); }, &f);
}

}  // namespace epload::detail
