// loader_fork.cpp — a fork()ed child never waits on its parent's threads.
//
// The child of fork() has one thread, the one that forked.  Any other thread
// of the parent may have been inside a Loader at that moment: holding the
// registry or wait mutex for a moment, or running a backend's load (the slot
// `loading`, its owner that thread).  In the child that owner does not exist:
// a lookup would wait for its end for ever.  So the child handler makes every
// live Loader's locks anew and fails each load another thread had under way,
// naming the backend and why; the failure is sticky for the child's life (its
// half-run init, a half-imported module or a half-initialised library, cannot
// be run again safely: CPython's own import lock of that module is held by the
// thread that is gone).  The forking thread's own loads stay as they are: it
// goes on with them in the child.
#include <pthread.h>  // pthread_atfork

#include <new>  // placement new: the locks made anew in a child
#include <vector>

#include "loader_impl.hpp"

namespace epload {

namespace {

/// The live States; its lock is made anew in a child too.
std::mutex g_states_mutex;
std::vector<Loader::State*>* g_states = nullptr;  // never destroyed: a child may fork at exit

void in_child() {
  new (&g_states_mutex) std::mutex();  // the old one may be locked: not destroyed
  if (g_states == nullptr) return;
  for (Loader::State* s : *g_states) s->after_fork_in_child();
}

}  // namespace

Loader::State::State() {
  static const int registered = ::pthread_atfork(nullptr, nullptr, in_child);
  (void)registered;
  std::lock_guard lock(g_states_mutex);
  if (g_states == nullptr) g_states = new std::vector<Loader::State*>();
  g_states->push_back(this);
}

Loader::State::~State() {
  std::lock_guard lock(g_states_mutex);
  std::erase(*g_states, this);
}

void Loader::State::after_fork_in_child() {
  // The old locks are left as they are (one may be locked by a thread that
  // is not here), never destroyed.
  new (&registry) std::mutex();
  new (&wait_mutex) std::mutex();
  new (&wait_cv) std::condition_variable();
  new (&store_write) std::mutex();
  // Threads that waited are not here; their start() neither.
  new (&waiting) decltype(waiting)();
  batch.store(0, std::memory_order_relaxed);
  const std::thread::id me = std::this_thread::get_id();
  for (std::uint32_t i = 0; i < count; ++i) {
    detail::Slot& s = slots[i];
    if (s.state.load(std::memory_order_relaxed) != BackendState::loading) continue;
    if (s.loader_thread.load(std::memory_order_relaxed) == me) continue;
    fail(s, "was being loaded by another thread of the parent process when this process was forked, "
            "and cannot finish loading here (that thread does not exist in the child); load it before "
            "fork() or use the spawn start method");
    s.outcome().forked = true;
    s.loader_thread.store(std::thread::id{}, std::memory_order_relaxed);
    s.state.store(BackendState::failed, std::memory_order_release);
  }
}

}  // namespace epload
