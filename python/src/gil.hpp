// gil.hpp — the GIL released around the core's work and taken again, safe
// when the interpreter is exiting.
//
// CPython 3.10–3.13 end a thread that waits for the GIL once the interpreter
// is finalizing (a daemon thread, when the main thread exits) by calling
// pthread_exit() from inside that wait (take_gil() -> PyThread_exit_thread()).
// glibc's pthread_exit() unwinds the thread's stack (a "forced unwind"), and
// a C++ frame of this module on the way turns that into an abort, so that
// the process ends with status 134 ("terminating due to uncaught foreign
// exception") instead of the program's own:
//   - pybind11's gil_scoped_release takes the GIL in its destructor, which
//     is noexcept: the unwind leaving it calls std::terminate();
//   - pybind11's dispatcher, built against libc++ (the release wheels),
//     catches the unwind with catch (...) and does not rethrow it.
// So the module takes the GIL only through the two classes below, and the
// wait for it runs inside a catch (...) that never lets the unwind go on: a
// thread ended there stays there until the process ends — what CPython 3.14
// itself does to such threads (PyThread_hang_thread()).  It holds no GIL, so
// the main thread's exit goes on and ends with the program's status.  (A
// lock of the core it holds at that point, such as a Catalog's during a
// refresh, is only ever waited for by other threads, never by the exit.)
//
// pybind11's classes are not used at all: the module's threads then have
// one record of the thread state each released (t_released below), which
// WithGil takes again, as pybind11's own pair would.
//
// A thread can still be running the core without the GIL when the main
// thread's exit goes past Python: exit() then destroys the C++ statics (the
// module's, libstdc++'s, simdjson's implementation singletons) under it
// ("pure virtual method called", seen once in four exits with two daemon
// threads querying).  So the threads inside a NoGil are counted, and
// drain_at_exit(), which the module registers with Py_AtExit (it runs at
// the end of Py_FinalizeEx, before exit()), waits for them to leave: no
// thread can enter one then (it would need the GIL), and each that leaves
// stays in restore().  The wait is bounded, in case a thread waits on one
// that stays (a core lock held there): past it, the exit goes on as before.
#pragma once

#include <Python.h>
#include <time.h>    // nanosleep
#include <unistd.h>  // pause

#include <atomic>

namespace epload::python {

namespace gil_detail {

/// The thread state this thread released last (NoGil), or nullptr.
inline thread_local PyThreadState* t_released = nullptr;

/// Threads running inside a NoGil, outside any WithGil of it.
inline std::atomic<int> g_without_gil{0};

/// Waits for the end of the process: where a thread that CPython ends
/// while it waits for the GIL stays.
[[noreturn]] inline void stay() {
  for (;;) ::pause();
}

/// PyEval_RestoreThread(state), or never returns when the interpreter ends
/// this thread there.
inline void restore(PyThreadState* state) {
  try {
    PyEval_RestoreThread(state);
  } catch (...) {  // the forced unwind of pthread_exit(): finalizing
    stay();
  }
}

inline PyGILState_STATE ensure() {
  try {
    return PyGILState_Ensure();
  } catch (...) {  // as in restore()
    stay();
  }
}

}  // namespace gil_detail

/// The GIL released for this scope (the caller holds it).
class NoGil {
 public:
  NoGil() : m_outer(gil_detail::t_released), m_state(PyEval_SaveThread()) {
    gil_detail::t_released = m_state;
    gil_detail::g_without_gil.fetch_add(1, std::memory_order_acq_rel);
  }
  ~NoGil() {
    gil_detail::t_released = m_outer;
    gil_detail::g_without_gil.fetch_sub(1, std::memory_order_acq_rel);
    gil_detail::restore(m_state);
  }
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;

 private:
  PyThreadState* m_outer;
  PyThreadState* m_state;
};

/// The GIL held for this scope, by a thread that does not hold it: the
/// thread state this thread released (inside a NoGil), else the thread's
/// own (PyGILState_Ensure(), which makes one for a thread Python never saw).
class WithGil {
 public:
  WithGil() : m_state(gil_detail::t_released) {
    if (m_state != nullptr) {
      gil_detail::t_released = nullptr;
      gil_detail::g_without_gil.fetch_sub(1, std::memory_order_acq_rel);
      gil_detail::restore(m_state);
    } else {
      m_gilstate = gil_detail::ensure();
    }
  }
  ~WithGil() {
    if (m_state != nullptr) {
      gil_detail::t_released = PyEval_SaveThread();
      gil_detail::g_without_gil.fetch_add(1, std::memory_order_acq_rel);
    } else {
      PyGILState_Release(m_gilstate);
    }
  }
  WithGil(const WithGil&) = delete;
  WithGil& operator=(const WithGil&) = delete;

 private:
  PyThreadState* m_state;
  PyGILState_STATE m_gilstate{};
};

/// For Py_AtExit: waits (up to 2 s) until no thread runs inside a NoGil.
inline void drain_at_exit() {
  const struct timespec nap{0, 1000 * 1000};
  for (int i = 0; i < 2000 && gil_detail::g_without_gil.load(std::memory_order_acquire) > 0; ++i) {
    ::nanosleep(&nap, nullptr);
  }
}

}  // namespace epload::python
