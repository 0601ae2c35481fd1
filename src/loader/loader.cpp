// loader.cpp — lazy, once-only loading of backends: lookups, the order in
// which they load backends, and waiting for a load another thread runs.
// (Loading one backend: loader_load.cpp; creation: loader_setup.cpp;
// messages, the store and status: loader_status.cpp.)
//
// Each backend slot is a state machine unloaded -> loading -> ready | failed.
// The state is an atomic, read without a lock on every fast path.  Leaving
// `unloaded` happens under the loader's wait mutex, and the thread that does
// it runs dlopen + init with no lock held while other threads wanting that
// backend sleep on the wait condition variable.  So there is one init per
// backend however many threads race, and a backend whose init looks up
// another backend's device simply loads that one the same way.  A thread
// that would wait for a slot it is loading itself (a self-lookup from init,
// or A -> B -> A in one thread), or a cycle of threads waiting on each
// other's slots (checked on the small wait graph before sleeping), gets an
// error instead of a deadlock.
//
// A device becomes visible (its table pointer stored with release order)
// only after its backend's init returned success; from then on a lookup is
// a hash, a probe and an acquire load (device_table.hpp): no allocation, no
// system call, no lock.  A failure is sticky — later lookups get the same
// error without touching the library — until the library file changes.
#include <fcntl.h>  // AT_FDCWD

#include <algorithm>  // find_if

#include "elf.hpp"  // device_name_problem
#include "epload/profile.hpp"
#include "loader_impl.hpp"
#include "stamp.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::pending;
using detail::provided;
using detail::k_no_slot;
using detail::Slot;

namespace {

bool loadable(const Slot& s, const PythonFront& python) {
  return s.alias_of == k_no_slot && s.enabled &&
         (s.kind == BackendKind::native || (s.kind == BackendKind::python && python.load));
}

}  // namespace

// ---------------------------------------------------------------------------
// Lookup.

Result<void*> Loader::State::lookup_slow(std::string_view name) {
  if (options.mode == LoadMode::off) {
    return Error{Errc::not_found, "device '" + std::string(name) +
                                      "' is not loaded: backend autoload is off "
                                      "(mode off, or TORCH_DEVICE_BACKEND_AUTOLOAD is set and not '1')"};
  }
  if (std::string why = detail::device_name_problem(name); !why.empty()) return Error{Errc::invalid_argument, why};
  std::uint32_t owner = k_no_slot;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (const DeviceEntry* e = table->find(name)) owner = e->owner;
  }
  if (owner == k_no_slot && in_python_load()) {
    // From inside a Python backend's import (a host's hasattr probe): no
    // other backend runs in the middle of this one.
    return Error{Errc::unsupported, "device '" + std::string(name) +
                                        "' is not known while a Python backend is being loaded in this "
                                        "thread: not there yet"};
  }
  std::string note;
  if (owner != k_no_slot) {
    auto r = load_claimants(name, owner, note);
    if (!r || r.value() != nullptr) return r;
  }
  if (auto r = load_unknown(name); !r || r.value() != nullptr) return r;
  if (auto r = load_changed(name); !r || r.value() != nullptr) return r;
  // Another thread may have finished loading the provider after this one
  // passed it (it was no longer pending): the table is the final word.
  if (void* t = provided(*table, name)) return t;
  Error e = not_found(name);
  e.message += note;
  return e;
}

Result<void*> Loader::State::load_claimants(std::string_view name, std::uint32_t owner, std::string& note) {
  auto r = ensure_loaded(owner, name);
  if (void* t = provided(*table, name)) return t;
  if (r) {
    // Loaded, yet it did not register the name (a wrong declaration, or a
    // stale store): look for it like an unknown name.
    note = "\n" + describe(primary(owner)) + "declares device '" + std::string(name) +
           "' but did not register it when loaded (its declaration is wrong)";
    return nullptr;
  }
  if (primary(owner).state.load(std::memory_order_acquire) != BackendState::failed) {
    return r.error();  // not a failed load: a self-lookup, a cycle, a Python backend here
  }
  // It failed, and a failed backend claims nothing (as in eager loading,
  // where the next one in index order gets the name): the later backends
  // that also declare or learned the name come next, in index order; then
  // those whose devices are unknown (load_unknown).  If none provides it,
  // not_found() names this failure.
  for (std::uint32_t i = primary(owner).index + 1; i < count; ++i) {
    Slot& s = slots[i];
    if (!loadable(s, python) || !pending(s)) continue;
    bool claims = false;
    {
      std::lock_guard<std::mutex> lock(registry);
      detail::for_each_device(s.devices, [&](std::string_view d, bool) { claims = claims || d == name; });
    }
    if (!claims) continue;
    // A failure is kept in the slot and reported by not_found.
    if (auto r = ensure_loaded(i, name); !r && r.error().code == Errc::interrupted) return r.error();
    if (void* t = provided(*table, name)) return t;
  }
  return nullptr;
}

Result<void*> Loader::State::load_unknown(std::string_view name) {
  // Load the backends whose devices are not known yet, in index order, one
  // at a time, until one provides it.  One being loaded by another thread
  // counts too: wait for it, it may provide the name.  The candidates are
  // picked under one lock (a miss, e.g. a host's hasattr probe, must not
  // take it once per backend).
  std::vector<std::uint32_t> candidates;
  {
    std::lock_guard<std::mutex> lock(registry);
    for (std::uint32_t i = 0; i < count; ++i) {
      const Slot& s = slots[i];
      if (!loadable(s, python) || !pending(s)) continue;
      // Known devices of a backend that another thread is loading right
      // now may not be in the table yet: wait for it too.
      if (s.devices_known() && s.state.load(std::memory_order_acquire) != BackendState::loading) continue;
      candidates.push_back(i);
    }
  }
  for (const std::uint32_t i : candidates) {
    if (!pending(slots[i])) continue;
    // A failure is kept in the slot and reported by not_found.
    if (auto r = ensure_loaded(i, name); !r && r.error().code == Errc::interrupted) return r.error();
    if (void* t = provided(*table, name)) return t;
  }
  return nullptr;
}

Result<void*> Loader::State::load_changed(std::string_view name) {
  // Last resort: what the store said may be stale.  Check the libraries not
  // checked in this process, all at once (on two CPUs when there are many);
  // the changed ones are loaded, in index order, to see what they provide.
  std::vector<std::uint32_t> unchecked;
  std::vector<FileStamp> was;
  {
    std::lock_guard<std::mutex> lock(registry);
    for (std::uint32_t i = 0; i < count; ++i) {
      const Slot& s = slots[i];
      if (!loadable(s, python) || !pending(s) || s.verified || !s.devices_known()) continue;
      unchecked.push_back(i);
      was.push_back(s.stamp);
    }
  }
  const std::vector<FileStamp> now = stamp_libraries(unchecked);
  {
    std::lock_guard<std::mutex> lock(registry);
    for (std::size_t k = 0; k < unchecked.size(); ++k) {
      Slot& s = slots[unchecked[k]];
      if (now[k] == was[k] && s.stamp == was[k]) s.verified = true;  // unless a load changed it meanwhile
    }
  }
  for (std::size_t k = 0; k < unchecked.size(); ++k) {
    if (now[k] == was[k] || !pending(slots[unchecked[k]])) continue;
    if (auto r = ensure_loaded(unchecked[k], name); !r && r.error().code == Errc::interrupted) return r.error();
    if (void* t = provided(*table, name)) return t;
  }
  return nullptr;
}

Result<void> Loader::State::ensure_loaded(std::uint32_t i, std::string_view device) {
  Slot& s = primary(i);
  BackendState st = s.state.load(std::memory_order_acquire);
  if (st == BackendState::ready) return {};
  if (st == BackendState::disabled) return Error{Errc::backend, s.out->error};
  if (s.kind == BackendKind::python && !python.load) {
    // Neither missing nor failed: this host cannot load it (Errc::unsupported).
    const std::string what = device.empty() ? std::string("its devices") : "device '" + std::string(device) + "'";
    return Error{Errc::unsupported,
                 describe(s) + "a Python backend provides " + what +
                     ": it loads in Python, on the first use of the device (under the torch hook, "
                     "EPLOAD_AUTOLOAD_HOSTS=torch, at the first x.to(\"<device>\") or torch.<device>; in a "
                     "host of your own, after epload.autoload(group, host=...)); this host, like `epload "
                     "load`, loads native (C ABI) backends only"};
  }
  const std::thread::id me = std::this_thread::get_id();
  std::unique_lock<std::mutex> lock(wait_mutex);
  for (;;) {
    st = s.state.load(std::memory_order_acquire);
    if (st == BackendState::ready) return {};
    if (st == BackendState::disabled) return Error{Errc::backend, s.out->error};
    if (st == BackendState::failed) {
      // Sticky until the backend's file changes.  Stat without the lock.
      if (s.library.empty() || s.out->forked) return Error{Errc::backend, s.out->error};
      const FileStamp failed_at = s.out->failed_stamp;
      lock.unlock();
      const FileStamp now = detail::stamp_at(AT_FDCWD, library_of(s).c_str());
      lock.lock();
      if (s.state.load(std::memory_order_acquire) != BackendState::failed) continue;
      if (now == failed_at) return Error{Errc::backend, s.out->error};
      {
        std::lock_guard<std::mutex> reg(registry);
        s.verified = false;  // re-read what it declares before trusting it
      }
      s.state.store(BackendState::unloaded, std::memory_order_release);
      continue;
    }
    if (st == BackendState::unloaded) break;
    // Loading: by this very thread (a lookup from inside its own init) or by
    // a thread that (transitively) waits for this one: fail, do not hang.
    if (s.loader_thread.load(std::memory_order_acquire) == me) {
      return Error{Errc::backend, describe(s) + "device '" + std::string(device) +
                                      "' was looked up while this backend was initialising in the "
                                      "same thread (a self-lookup or a cycle of backends)"};
    }
    std::thread::id t = s.loader_thread.load(std::memory_order_acquire);
    for (std::size_t hops = 0; hops <= waiting.size(); ++hops) {
      auto it = std::find_if(waiting.begin(), waiting.end(), [&](const auto& w) { return w.first == t; });
      if (it == waiting.end()) break;
      t = slots[it->second].loader_thread.load(std::memory_order_acquire);
      if (t == me) {
        return Error{Errc::backend, describe(s) + "device '" + std::string(device) +
                                        "' was looked up in a cycle of backends whose inits wait "
                                        "for each other"};
      }
    }
    waiting.emplace_back(me, s.index);
    wait_cv.wait(lock);
    for (auto it = waiting.begin(); it != waiting.end(); ++it) {
      if (it->first == me) {
        waiting.erase(it);
        break;
      }
    }
  }
  s.loader_thread.store(me, std::memory_order_release);
  s.state.store(BackendState::loading, std::memory_order_release);
  lock.unlock();

  // No lock held: dlopen and init may take long and may look up other devices.
  const detail::LoadEnd end = load(s);

  lock.lock();
  s.loader_thread.store(std::thread::id{}, std::memory_order_release);
  lock.unlock();
  // An interrupted load left the slot unloaded: a thread that waited for it
  // wakes and loads the backend itself (the interruption was this thread's).
  wait_cv.notify_all();
  if (end == detail::LoadEnd::interrupted) {
    return Error{Errc::interrupted, describe(s) + "its load was interrupted (nothing failed: it loads again "
                                                  "at its next use)"};
  }
  const BackendState now = s.state.load(std::memory_order_acquire);
  if (now == BackendState::failed) return Error{Errc::backend, s.out->error};
  if (now == BackendState::unloaded) {
    return Error{Errc::unsupported, describe(s) + "its module is still being imported: try again later"};
  }
  return {};
}

// ---------------------------------------------------------------------------
// Loader: the public entry points that load.

void Loader::start() {
  if (m->started.exchange(true)) return;
  const LoadMode mode = m->options.mode;
  if (mode == LoadMode::off) return;
  profile::Span span(profile::Phase::total, "loader start");
  m->batch.fetch_add(1, std::memory_order_acq_rel);
  bool interrupted = false;
  for (std::uint32_t i = 0; i < m->count; ++i) {
    Slot& s = m->slots[i];
    if (!loadable(s, m->python)) continue;
    bool hook, unknown, crashed;
    {
      std::lock_guard<std::mutex> lock(m->registry);
      hook = s.hook();
      unknown = !s.devices_known();
      crashed = m->crash_skipped(s);
    }
    // A native library among Python callables, or one that crashed an
    // earlier process, is reported at start (lazy: it fails unloaded).
    if (mode == LoadMode::eager || hook || (unknown && m->python.start_unknown) || s.foreign || crashed) {
      auto r = m->ensure_loaded(i, "");
      if (!r && r.error().code == Errc::interrupted) {
        interrupted = true;  // the interruption propagates: no other backend runs
        break;
      }
      if (!r && r.error().code == Errc::backend && mode == LoadMode::eager && m->python.stop_at_failure) break;
    }
  }
  m->batch.fetch_sub(1, std::memory_order_acq_rel);
  m->save_store();  // a no-op unless something new was learned
  if (interrupted) m->started.store(false);  // a later call goes on where this one stopped
}

Result<void> Loader::load(std::size_t index) {
  if (index >= m->count) return Error{Errc::invalid_argument, "Loader::load: no backend " + std::to_string(index)};
  if (m->options.mode == LoadMode::off) {
    return Error{Errc::not_found, m->describe(m->slots[index]) + "not loaded: backend autoload is off"};
  }
  return m->ensure_loaded(static_cast<std::uint32_t>(index), "");
}

Result<void> Loader::verify(std::size_t index) {
  if (index >= m->count) return Error{Errc::invalid_argument, "Loader::verify: no backend " + std::to_string(index)};
  const auto i = static_cast<std::uint32_t>(index);
  FileStamp was;
  {
    std::lock_guard<std::mutex> lock(m->registry);
    const Slot& s = m->slots[i];
    if (s.verified || !s.devices_known() || s.state.load(std::memory_order_acquire) != BackendState::unloaded) {
      return {};
    }
    was = s.stamp;
  }
  const FileStamp now = m->stamp_libraries(std::span<const std::uint32_t>(&i, 1))[0];
  {
    std::lock_guard<std::mutex> lock(m->registry);
    Slot& s = m->slots[i];
    if (now == was && s.stamp == was) s.verified = true;
  }
  return now == was ? Result<void>{} : load(index);
}

Result<void*> Loader::lookup(std::string_view device) {
  if (void* t = detail::provided(*m->table, device)) return t;
  return m->lookup_slow(device);
}

void* Loader::find(std::string_view device) const noexcept { return detail::provided(*m->table, device); }

}  // namespace epload
