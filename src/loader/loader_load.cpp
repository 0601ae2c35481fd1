// loader_load.cpp — loading one backend: the check of its library, dlopen
// and init (or the Python loader), and publishing what it registered; the
// only file that includes <dlfcn.h>.  (When to load, and waiting for a load
// another thread runs: loader.cpp.)
//
// Libraries are opened RTLD_NOW | RTLD_LOCAL (missing symbols fail at load,
// not at some later call; backends do not see each other's symbols) and
// never closed: their functions were handed out.  A device becomes visible
// (its table pointer stored with release order) only after its backend's
// init returned success.  A failure is sticky until the library file
// changes; then it is retried under a new spelling of its path, since glibc
// would return the old mapping for the old name.
#include <dlfcn.h>  // dlopen, dlsym, dlerror
#include <fcntl.h>  // AT_FDCWD

#include <algorithm>  // all_of
#include <cstring>    // memcpy
#include <exception>  // init boundary

#include "crash_log.hpp"
#include "elf.hpp"
#include "epload/backend.h"
#include "epload/profile.hpp"
#include "loader_impl.hpp"
#include "stamp.hpp"
#include "test_slowdown.hpp"
#include "torch_rules.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::InitContext;
using detail::k_no_slot;
using detail::Slot;

namespace {

using profile::now_ns;

// A spelling of `library` that no object loaded in this process has.  The
// file changed since this process may have loaded it (a retry, or an
// upgrade seen by a second Loader); glibc matches loaded objects by name
// first and would hand back the old mapping, so the path is spelled
// differently ("dir/./lib.so") until the spelling is not loaded yet.
std::string unloaded_spelling(std::string_view library) {
  std::string path(library);
  const std::size_t slash = path.rfind('/');
  const std::size_t at = slash == std::string::npos ? 0 : slash + 1;
  for (int k = 0; k < 64; ++k) {
    void* loaded = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (loaded == nullptr) break;
    ::dlclose(loaded);  // only drops the reference RTLD_NOLOAD just took
    path.insert(at, "./");
  }
  return path;
}

// What failed when dlopen of `file` said `why`.  glibc: "<path>: <dep>:
// cannot open shared object file: ..." for a missing dependency, "<path>:
// cannot open shared object file" for the library itself, "invalid ELF
// header" / "file too short" for junk.
std::string dlopen_failure(const char* file, const std::string& why) {
  const std::string prefix = std::string(file) + ": ";
  const std::string rest = why.starts_with(prefix) ? why.substr(prefix.size()) : why;
  const std::size_t cannot = rest.find(": cannot open shared object file");
  if (cannot != std::string::npos && cannot > 0) {
    return "a library it depends on is missing: " + rest.substr(0, cannot) + " (dlopen: " + why +
           "; install it or fix the library search path)";
  }
  if (rest.starts_with("cannot open shared object file")) return "library missing (dlopen: " + why + ")";
  if (rest.find("invalid ELF header") != std::string::npos || rest.find("file too short") != std::string::npos) {
    return "corrupt library, not a loadable ELF file (dlopen: " + why + ")";
  }
  return "dlopen failed: " + why;
}

}  // namespace

// Checks the library before loading it: one stat; read again only if it
// changed.  False (with the slot's error set) when it is gone or unreadable.
// `k` is what load() read under its lock; a change updates it (the ABI tag
// load_native checks) along with the slot.
bool Loader::State::refresh_knowledge(Slot& s, detail::LoadKnowledge& k) {
  if (k.verified) return true;
  const detail::CString cpath = library_of(s);  // identity: never changes
  const std::string_view path = cpath.view();
  const std::int64_t t = detail::coarse_now_ns();
  FileStamp now = detail::stamp_at(AT_FDCWD, cpath.c_str());
  if (!now.exists()) {
    s.out->failed_stamp = now;
    fail(s, (s.kind == BackendKind::native ? "library missing: " : "module file missing: ") +
                std::string(path) + " no longer exists (reinstall " + std::string(s.ep->dist->name) + ")");
    return false;
  }
  if (now == k.stamp) {
    std::lock_guard<std::mutex> lock(registry);
    s.verified = true;
    s.stamped_at = t;
    return true;
  }
  std::vector<std::string> declared_names;
  bool has_section = false;
  std::uint32_t abi = 0;
  if (s.kind == BackendKind::native) {
    auto declared = detail::read_declared_devices(std::string(path), &now);
    if (!declared) {
      std::lock_guard<std::mutex> lock(registry);
      s.unreadable = true;
      s.out->failed_stamp = now;
      fail(s, declared.error().code == Errc::not_found ? "library missing: " + declared.error().message
                                                        : declared.error().message);
      return false;
    }
    has_section = declared->has_section;
    abi = declared->abi;
    declared_names = std::move(declared->devices);
  }
  std::lock_guard<std::mutex> lock(registry);
  s.unreadable = false;
  s.out->changed = true;
  s.out->failed_stamp = now;  // a failure from here on is sticky to this version
  s.stamp = now;
  s.stamped_at = t;
  s.verified = true;
  s.abi = has_section ? static_cast<std::int32_t>(abi) : -1;
  k.abi = s.abi;
  s.learned = false;
  std::vector<std::string_view> views;
  for (const std::string& d : declared_names) views.push_back(arena.copy(d));
  set_devices(s, views, {});
  s.out->conflicts.clear();
  claim_known_devices(s);
  store_dirty = true;
  return true;
}

// The registry mutex is taken twice on the way (plus once per device the
// init registers): at the start, to create the outcome and read what is
// known, and at the end, to publish and append to the load order.  The check
// in between takes it once more, only when it ran (the library was not yet
// verified in this process), to record what it found.
detail::LoadEnd Loader::State::load(Slot& s) {
  const std::int64_t t0 = now_ns();
  profile::Span span(profile::Phase::load, s.ep->name);
  profile::test_slowdown(profile::SlowPoint::load);  // test builds only
  detail::LoadKnowledge k;
  {
    std::lock_guard<std::mutex> lock(registry);
    detail::SlotOutcome& o = s.outcome();  // created here, under the lock status readers take
    ++o.attempts;
    o.failed_stamp = s.stamp;  // a failure is sticky until the file changes
    k.verified = s.verified;
    k.stamp = s.stamp;
    k.abi = s.abi;
  }
  InitContext ctx;
  ctx.impl = this;
  ctx.slot = s.index;
  ctx.thread = std::this_thread::get_id();
  bool ok = refresh_knowledge(s, k);
  std::string crashed;
  if (ok) {
    std::lock_guard<std::mutex> lock(registry);
    if (crash_skipped(s)) crashed.assign(last_failures.at(s.index));
  }
  if (ok && s.foreign && options.mode != LoadMode::eager) {
    fail(s, detail::native_in_torch_group(s.ep->name));
    ok = false;
  } else if (ok && !crashed.empty()) {
    s.out->crash_skip = true;
    fail(s, crashed);
    ok = false;
  } else if (ok) {
    // A fatal signal in this thread before the init returns is recorded
    // as its crash (crash_log.hpp); nothing else is.
    const detail::InitMark mark(crash_log_safe(), s.ep->name, s.ep->value, s.stamp);
    ok = s.kind == BackendKind::native && !s.foreign ? load_native(s, ctx, k.abi) : load_python(s, ctx);
  }
  if (ctx.deferred || ctx.interrupted) {
    // Not now, or interrupted (a KeyboardInterrupt is no failure of the
    // backend): as if it had never been tried; nothing is recorded.
    {
      std::lock_guard<std::mutex> lock(registry);
      s.out.reset();
    }
    s.state.store(BackendState::unloaded, std::memory_order_release);
    return ctx.interrupted ? detail::LoadEnd::interrupted : detail::LoadEnd::deferred;
  }
  bool save = false;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (ok) publish(s, ctx);
    remember_outcome(s, ok);
    s.out->load_ns = now_ns() - t0;
    s.out->load_seq = static_cast<int>(order.size());
    order.push_back(s.index);
    save = store_dirty;
  }
  s.state.store(ok ? BackendState::ready : BackendState::failed, std::memory_order_release);
  // start() saves once at its end instead of once per backend.
  if (save && batch.load(std::memory_order_acquire) == 0) save_store();
  return detail::LoadEnd::done;
}

bool Loader::State::load_native(Slot& s, InitContext& ctx, std::int32_t abi) {
  if (abi >= 0 && abi != EPLOAD_ABI_VERSION) {
    fail(s, "ABI version mismatch: the library declares backend ABI " + std::to_string(abi) +
                ", this host speaks ABI " + std::to_string(EPLOAD_ABI_VERSION) +
                " (rebuild the backend against this epload/backend.h)");
    return false;
  }
  const detail::CString library = library_of(s);
  // Stays empty (no allocation) unless the file may be loaded already.
  const std::string path = s.out->attempts > 1 || s.out->changed ? unloaded_spelling(library.view()) : std::string();
  const char* const file = path.empty() ? library.c_str() : path.c_str();
  void* handle;
  {
    profile::Span span(profile::Phase::dlopen, s.ep->name);
    const std::int64_t t1 = now_ns();
    handle = ::dlopen(file, RTLD_NOW | RTLD_LOCAL);
    s.out->dlopen_ns = now_ns() - t1;
  }
  if (handle == nullptr) {
    const char* e = ::dlerror();
    fail(s, dlopen_failure(file, e ? e : "unknown dlopen error"));
    return false;
  }
  s.out->handle = handle;  // never closed: its functions may be handed out
  ::dlerror();
  const detail::CString symbol(s.symbol);
  void* sym = ::dlsym(handle, symbol.c_str());
  if (sym == nullptr) {
    const char* e = ::dlerror();
    fail(s, "init symbol '" + std::string(s.symbol) + "' missing: the library does not export it (dlsym: " +
                (e ? std::string(e) : std::string("null symbol")) + ")");
    return false;
  }
  auto init = reinterpret_cast<EploadBackendInit>(sym);
  EploadHost host = detail::make_host(&ctx);
  int rc = EPLOAD_ERR;
  std::string thrown;
  {
    profile::Span span(profile::Phase::init, s.ep->name);
    const std::int64_t t2 = now_ns();
    try {
      rc = init(&host);
    } catch (const std::exception& ex) {
      thrown = std::string("init threw a C++ exception: ") + ex.what();
    } catch (...) {
      thrown = "init threw a C++ exception of unknown type";
    }
    s.out->init_ns = now_ns() - t2;
  }
  // An init that failed after a lookup of its was interrupted is interrupted
  // too; one that succeeded anyway is loaded.
  if (ctx.interrupted && (!thrown.empty() || rc != EPLOAD_OK)) return false;
  ctx.interrupted = false;
  if (!thrown.empty()) {
    fail(s, thrown);
    return false;
  }
  if (rc == EPLOAD_ERR_ABI) {
    fail(s, "ABI version mismatch: init rejected this host's backend ABI " +
                std::to_string(EPLOAD_ABI_VERSION) + (ctx.message.empty() ? "" : " (" + ctx.message + ")") +
                " (rebuild the backend against this epload/backend.h)");
    return false;
  }
  if (rc != EPLOAD_OK) {
    std::string why = ctx.message.empty() ? std::string("no message") : ctx.message;
    if (!ctx.last_lookup_error.empty()) why += "; its last failed lookup: " + ctx.last_lookup_error;
    fail(s, "init failed (returned " + std::to_string(rc) + "): " + why);
    return false;
  }
  return true;
}

namespace {
// How many Python backend loads the calling thread is inside (one calls
// another through an import): see in_python_load().
thread_local int t_python_loads = 0;
}  // namespace

bool in_python_load() { return t_python_loads > 0; }

bool Loader::State::load_python(Slot& s, InitContext& ctx) {
  PythonBackend b;
  b.index = s.index;
  b.name = s.ep->name;
  b.value = s.ep->value;
  b.attr = s.symbol;
  if (auto parts = split_value(s.ep->value)) b.module = parts->module;
  b.dist = s.ep->dist->name;
  const std::int64_t t = now_ns();
  Result<PythonLoaded> r = Error{Errc::backend, "not run"};
  ++t_python_loads;
  try {
    r = python.load(b);
  } catch (const std::exception& ex) {
    r = Error{Errc::backend, std::string("the Python loader threw: ") + ex.what()};
  } catch (...) {
    r = Error{Errc::backend, "the Python loader threw an exception of unknown type"};
  }
  --t_python_loads;
  s.out->dlopen_ns = now_ns() - t;
  if (!r) {
    ctx.deferred = r.error().code == Errc::unsupported;
    ctx.interrupted = r.error().code == Errc::interrupted;
    fail(s, r.error().message);
    return false;
  }
  ctx.devices_unknown = !r.value().known;
  // Registered as a native init would, with a table no one dereferences.
  static char k_python_device;
  for (const PythonDevice& d : r.value().devices) {
    const bool kind_ok = d.kind.size() < sizeof(detail::Registered::kind) &&
                         std::all_of(d.kind.begin(), d.kind.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                         });
    if (!kind_ok || detail::host_register(&ctx, d.name.c_str(), &k_python_device) != EPLOAD_OK) continue;
    ctx.for_each_registered([&](detail::Registered& reg) {
      if (reg.view() == d.name) std::memcpy(reg.kind, d.kind.c_str(), d.kind.size() + 1);
    });
  }
  return true;
}

// Called with the registry mutex held (by load(), which appends to the load
// order under the same lock).
void Loader::State::publish(Slot& s, InitContext& ctx) {
  // 'd' (ELF section), 'm' (epload.devices) or 0: how `n` is declared.
  auto declared_tag = [&](std::string_view n) {
    char found = 0;
    detail::for_each_device_entry(s.devices, [&](std::string_view d, char tag, std::string_view) {
      if (!found && tag != 'l' && d == n) found = tag;
    });
    return found;
  };
  auto declared_here = [&](std::string_view n) { return declared_tag(n) != 0; };
  bool all_declared = true;
  ctx.for_each_registered([&](detail::Registered& reg) {
    const std::string_view name = reg.view();
    DeviceEntry* e = table->find(name);
    if (e == nullptr) e = table->insert(arena.copy(name));
    const bool is_declared = declared_here(name);
    all_declared = all_declared && is_declared;
    if (e->table.load(std::memory_order_relaxed) != nullptr) {
      s.out->conflicts.push_back("device '" + std::string(name) + "' was already provided by backend '" +
                                 std::string(slots[e->owner].ep->name) + "'; this backend's is ignored");
      return;
    }
    if (e->owner != k_no_slot && e->owner != s.index) {
      Slot& o = slots[e->owner];
      const bool owner_may_provide = detail::pending(o);
      if (o.index < s.index && owner_may_provide) {
        s.out->conflicts.push_back("device '" + std::string(name) + "' is also provided by backend '" +
                                   std::string(o.ep->name) + "', which comes first in index order and wins");
        return;
      }
      if (owner_may_provide) {
        o.outcome().conflicts.push_back("device '" + std::string(name) + "' is also provided by backend '" +
                                        std::string(s.ep->name) + "', which was loaded first and got it");
      }
    }
    const char tag = declared_tag(name);
    e->source = detail::source_of(tag);
    e->owner = s.index;
    e->table.store(reg.table, std::memory_order_release);
  });
  if (ctx.devices_unknown) return;  // registered, not learned: its devices stay unknown
  for (const std::string& name : ctx.refused) all_declared = all_declared && declared_here(name);
  // The common case, a declared backend registering just what it declared,
  // teaches the store nothing and allocates nothing here.
  bool had_learned = false;
  detail::for_each_device(s.devices, [&](std::string_view, bool is_declared) {
    had_learned = had_learned || !is_declared;
  });
  if (all_declared && !had_learned && s.abi >= 0) {
    s.learned = true;
    return;
  }
  std::vector<std::string_view> declared;
  std::vector<detail::LearnedDevice> before, learned;
  detail::for_each_device_entry(s.devices, [&](std::string_view d, char tag, std::string_view kind) {
    if (tag == 'd') declared.push_back(d);
    if (tag == 'l') before.emplace_back(d, kind);
  });
  // Names live as long as the table: inserted above, or (a refused name) by
  // the backend that owns it; kinds are copied into the arena.
  // A declared device is learned only for a kind beyond a plain
  // registration ("attr": a host attribute), e.g. "privateuse1".
  auto learn = [&](std::string_view name, std::string_view kind) {
    const std::string_view stored = table->find(name)->name;
    if (declared_here(stored) && (kind.empty() || kind == "attr")) return;
    for (const auto& l : learned) {
      if (l.first == stored) return;
    }
    learned.emplace_back(stored, kind.empty() ? std::string_view() : arena.copy(kind));
  };
  ctx.for_each_registered([&](detail::Registered& reg) { learn(reg.view(), reg.kind); });
  for (const std::string& name : ctx.refused) learn(name, {});
  if (learned != before || (!s.learned && s.abi < 0)) {
    store_dirty = true;
    set_devices(s, declared, learned);
  }
  s.learned = true;
}

}  // namespace epload
