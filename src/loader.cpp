// loader.cpp — lazy, once-only loading of backends; the only file that
// includes <dlfcn.h>.
//
// Creating a Loader turns the entry points of the autoload group into
// backend slots and fills a device table (device_table.hpp) with the device
// names known without loading anything: declared in the library's
// epload_devices section (read with pread by elf.cpp) or learned by an
// earlier process (learned.cpp).  A warm start reads one store file and
// makes no system call per backend: the store is trusted until a backend is
// about to be loaded, which is when its library is stat'ed and, if changed,
// re-read.  That keeps start-up at a tiny fraction of loading every backend.
//
// Each slot is a state machine unloaded -> loading -> ready | failed.  The
// state is an atomic read without a lock on the fast path; the transition
// out of `unloaded` happens under the slot's own mutex, and the thread that
// wins it runs dlopen + init with no lock held, while other threads wait on
// the slot's condition variable.  So one init per backend however many
// threads race, and a backend whose init looks up another backend's device
// simply loads that one in the same way.  A thread waiting on a slot it is
// itself loading (a self-lookup during init, or A -> B -> A in one thread),
// or a cycle of threads waiting on each other's slots (checked on a small
// wait graph before sleeping), gets an error instead of a deadlock.
//
// A device becomes visible (its table pointer stored with release order)
// only after its backend's init returned success; a lookup then is a hash,
// a probe and an acquire load.  Libraries are opened RTLD_NOW | RTLD_LOCAL
// (missing symbols fail at load, not at a random later call; backends do not
// see each other's symbols) and never closed: their functions were handed
// out.  A failure is sticky: later lookups get the same error without
// touching the library again, until its file changes (then it is retried
// under a new path spelling, since glibc would return the old mapping for
// the same name).
#include "epload/loader.hpp"

#include <dlfcn.h>     // dlopen, dlsym, dlerror
#include <sys/stat.h>  // stat
#include <time.h>      // clock_gettime

#include <algorithm>           // sort
#include <atomic>              // slot state
#include <condition_variable>  // waiting for a slot
#include <cstdlib>             // getenv
#include <exception>           // init boundary
#include <mutex>               // slot and registry locks
#include <thread>              // this_thread::get_id
#include <unordered_map>       // store lookup fallback

#include "arena.hpp"
#include "device_table.hpp"
#include "elf.hpp"
#include "epload/backend.h"
#include "epload/cache.hpp"
#include "learned.hpp"
#include "resolve.hpp"
#include "stamp.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::k_no_slot;

const char* to_string(LoadMode mode) {
  switch (mode) {
    case LoadMode::lazy: return "lazy";
    case LoadMode::eager: return "eager";
    case LoadMode::off: return "off";
  }
  return "?";
}

std::optional<LoadMode> parse_load_mode(std::string_view text) {
  if (text == "lazy") return LoadMode::lazy;
  if (text == "eager") return LoadMode::eager;
  if (text == "off") return LoadMode::off;
  return std::nullopt;
}

const char* to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::native: return "native";
    case BackendKind::python: return "python";
    case BackendKind::unresolved: return "unresolved";
  }
  return "?";
}

const char* to_string(BackendState state) {
  switch (state) {
    case BackendState::unloaded: return "unloaded";
    case BackendState::loading: return "loading";
    case BackendState::ready: return "ready";
    case BackendState::failed: return "failed";
    case BackendState::disabled: return "disabled";
  }
  return "?";
}

namespace {

std::vector<std::string> split_list(const char* text) {
  std::vector<std::string> out;
  std::string_view s = text;
  while (!s.empty()) {
    std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// PEP 503 normalization: lower case, runs of "-_." become "-".
std::string normalize_name(std::string_view s) {
  std::string out;
  bool sep = false;
  for (char c : s) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out.push_back('-');
    sep = false;
    out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

std::int64_t now_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

Result<void> apply_environment(LoaderOptions& options) {
  if (const char* m = std::getenv("EPLOAD_LOAD_MODE"); m != nullptr && *m != '\0') {
    auto mode = parse_load_mode(m);
    if (!mode) {
      return Error{Errc::invalid_argument, std::string("EPLOAD_LOAD_MODE='") + m +
                                               "' is not one of lazy, eager, off"};
    }
    options.mode = *mode;
  }
  // PyTorch's switch: unset or exactly "1" enables autoloading.
  if (const char* a = std::getenv("TORCH_DEVICE_BACKEND_AUTOLOAD"); a != nullptr && std::string_view(a) != "1") {
    options.mode = LoadMode::off;
  }
  if (const char* e = std::getenv("EPLOAD_ENABLE"); e != nullptr) options.enable = split_list(e);
  if (const char* d = std::getenv("EPLOAD_DISABLE"); d != nullptr) {
    for (std::string& name : split_list(d)) options.disable.push_back(std::move(name));
  }
  return {};
}

// ---------------------------------------------------------------------------

namespace {

struct Slot {
  // Identity: fixed once create() returns.
  const EntryPoint* ep = nullptr;
  std::uint32_t index = 0;
  BackendKind kind = BackendKind::unresolved;
  std::string_view library;  // arena or store buffer
  std::string_view symbol;
  std::string_view module;
  std::uint32_t alias_of = k_no_slot;
  bool enabled = true;
  std::string disabled_by;  // "EPLOAD_DISABLE" / "EPLOAD_ENABLE"

  // Knowledge: guarded by the registry mutex once create() returns.
  FileStamp stamp;
  std::int64_t stamped_at = 0;  // coarse clock before the stamp was taken; 0: from the store
  bool verified = false;        // stamp checked against the file in this process
  std::int64_t abi = -1;        // declared ABI tag, -1: no section
  bool learned = false;         // `learned_devices` complete for this stamp
  std::vector<std::string_view> declared;
  std::vector<std::string_view> learned_devices;
  std::vector<std::string> conflicts;

  bool devices_known() const { return abi >= 0 || learned; }
  bool hook() const { return devices_known() && declared.empty() && learned_devices.empty(); }

  // Life cycle.
  std::atomic<BackendState> state{BackendState::unloaded};
  std::atomic<std::thread::id> loader_thread{};
  std::mutex mu;
  std::condition_variable cv;
  // Written by the loading thread before `state` is released; read after
  // an acquire load of `state` or under `mu`.
  std::string error;
  FileStamp failed_stamp;
  int attempts = 0;
  bool changed = false;  // the file changed since create() or since the store saw it
  void* handle = nullptr;
  std::int64_t dlopen_ns = 0, init_ns = 0, load_ns = 0;
  int load_seq = -1;
};

// The ctx of one init call.
struct InitContext {
  Loader::Impl* impl = nullptr;
  std::uint32_t slot = 0;
  std::thread::id thread;
  std::vector<std::pair<std::string, void*>> registered;
  std::string message;           // set_error
  std::string last_lookup_error; // host->lookup failures, for the report
};

}  // namespace

struct Loader::Impl {
  std::shared_ptr<const Index> index;
  LoaderOptions options;
  detail::LearnedFile store;  // views in slots point into it
  std::string store_path;
  std::string store_note;
  std::unique_ptr<Slot[]> slots;
  std::uint32_t count = 0;
  std::unique_ptr<detail::DeviceTable> table;

  // The registry mutex: device claims, slot knowledge, the arena, the load
  // order.  Never held across dlopen or init.
  mutable std::mutex registry;
  detail::Arena arena;
  std::vector<std::uint32_t> order;
  bool store_dirty = false;
  std::mutex store_write;  // one writer of the store file at a time

  // Threads waiting on a slot (for cycle detection).
  std::mutex wait_mutex;
  std::vector<std::pair<std::thread::id, std::uint32_t>> waiting;

  std::atomic<bool> started{false};

  // ---- setup -------------------------------------------------------------
  void setup();
  void apply_resolved(Slot& s, detail::Resolved&& r);
  void claim_known_devices(Slot& s);
  bool is_disabled(const EntryPoint& ep, std::string* by) const;

  // ---- loading -----------------------------------------------------------
  Result<void*> lookup_slow(std::string_view name);
  Result<void> ensure_loaded(std::uint32_t i, std::string_view device);
  void load(Slot& s);
  bool load_native(Slot& s, InitContext& ctx);
  bool load_python(Slot& s, InitContext& ctx);
  bool refresh_knowledge(Slot& s);
  void publish(Slot& s, InitContext& ctx);
  void fail(Slot& s, const std::string& cause);
  std::string describe(const Slot& s) const;
  Error not_found(std::string_view name);
  void save_store();
  Slot& primary(std::uint32_t i) {
    return slots[slots[i].alias_of == k_no_slot ? i : slots[i].alias_of];
  }
};

// ---------------------------------------------------------------------------
// Host table functions (C ABI; ctx is an InitContext).

namespace {

int host_register(void* ctx, const char* name, void* device_table);
void host_set_error(void* ctx, const char* message);
int host_lookup(void* ctx, const char* device, void** device_table);

EploadHost make_host(InitContext* ctx) {
  EploadHost h;
  h.abi_version = EPLOAD_ABI_VERSION;
  h.size = static_cast<std::uint32_t>(sizeof(EploadHost));
  h.ctx = ctx;
  h.register_device = host_register;
  h.set_error = host_set_error;
  h.lookup = host_lookup;
  return h;
}

}  // namespace

// ---------------------------------------------------------------------------
// Setup.

bool Loader::Impl::is_disabled(const EntryPoint& ep, std::string* by) const {
  auto matches = [&](const std::string& want) {
    return want == ep.name || normalize_name(want) == normalize_name(ep.dist->name);
  };
  for (const std::string& d : options.disable) {
    if (matches(d)) {
      *by = "EPLOAD_DISABLE";
      return true;
    }
  }
  if (!options.enable.empty()) {
    for (const std::string& e : options.enable) {
      if (matches(e)) return false;
    }
    *by = "EPLOAD_ENABLE";
    return true;
  }
  return false;
}

void Loader::Impl::apply_resolved(Slot& s, detail::Resolved&& r) {
  s.kind = r.kind;
  s.library = arena.copy(r.file);
  s.symbol = arena.copy(r.symbol);
  s.module = arena.copy(r.module);
  s.stamp = r.stamp;
  s.verified = true;
  s.abi = -1;
  s.learned = false;
  s.declared.clear();
  s.learned_devices.clear();
  if (r.kind == BackendKind::unresolved) {
    s.state.store(BackendState::failed, std::memory_order_relaxed);
    fail(s, r.error);
    return;
  }
  if (!r.elf_error.empty()) {
    s.state.store(BackendState::failed, std::memory_order_relaxed);
    s.failed_stamp = r.stamp;
    fail(s, r.elf_error);
    return;
  }
  if (r.declared.has_section) {
    s.abi = r.declared.abi;
    for (const std::string& d : r.declared.devices) s.declared.push_back(arena.copy(d));
  }
  store_dirty = true;
}

void Loader::Impl::claim_known_devices(Slot& s) {
  auto claim = [&](std::string_view name, DeviceSource source) {
    if (!detail::valid_device_name(name)) return;
    DeviceEntry* e = table->insert(name);
    if (e->owner == k_no_slot) {
      e->owner = s.index;
      e->source = source;
    } else if (e->owner != s.index) {
      s.conflicts.push_back("device '" + std::string(name) + "' is also provided by backend '" +
                            std::string(slots[e->owner].ep->name) +
                            "', which comes first in index order and wins");
    }
  };
  for (std::string_view d : s.declared) claim(d, DeviceSource::declared);
  for (std::string_view d : s.learned_devices) claim(d, DeviceSource::learned);
}

void Loader::Impl::setup() {
  std::span<const EntryPoint> eps = index->group(options.group);
  count = static_cast<std::uint32_t>(eps.size());
  slots.reset(new Slot[count]);

  if (options.use_store) {
    CacheOptions co;
    co.cache_dir = options.cache_dir;
    const std::string dir = resolve_cache_dir(co);
    if (!dir.empty()) {
      store_path = detail::learned_file_path(dir, options.group, index->search_paths());
      store = detail::LearnedFile::read(store_path, &store_note);
    } else {
      store_note = "no cache directory (set EPLOAD_CACHE_DIR): devices are not remembered";
    }
  }
  std::span<const detail::LearnedRecord> records = store.records();
  std::unordered_map<std::string, std::size_t> by_key;  // only if the store is out of order
  auto key_of = [](std::string_view dir, std::string_view name, std::string_view value) {
    std::string k;
    k.reserve(dir.size() + name.size() + value.size() + 2);
    k.append(dir).push_back('\n');
    k.append(name).push_back('\n');
    k.append(value);
    return k;
  };
  auto record_for = [&](std::uint32_t i, const EntryPoint& ep) -> const detail::LearnedRecord* {
    // The store is written in index order, so position i is almost always it.
    if (i < records.size()) {
      const auto& r = records[i];
      if (r.name == ep.name && r.value == ep.value && r.metadata_dir == ep.dist->metadata_dir) return &r;
    }
    if (records.empty()) return nullptr;
    if (by_key.empty()) {
      for (std::size_t k = 0; k < records.size(); ++k) {
        by_key.emplace(key_of(records[k].metadata_dir, records[k].name, records[k].value), k);
      }
    }
    auto it = by_key.find(key_of(ep.dist->metadata_dir, ep.name, ep.value));
    return it == by_key.end() ? nullptr : &records[it->second];
  };

  detail::ResolveOptions ro;
  ro.ext_suffixes = options.ext_suffixes;
  std::size_t expected_devices = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    Slot& s = slots[i];
    const EntryPoint& ep = eps[i];
    s.ep = &ep;
    s.index = i;
    if (is_disabled(ep, &s.disabled_by)) s.enabled = false;
    const detail::LearnedRecord* r = record_for(i, ep);
    bool known = false;
    if (r != nullptr) {
      s.kind = r->kind == 'p' ? BackendKind::python : BackendKind::native;
      s.library = r->library;
      s.stamp = r->stamp;
      s.abi = r->abi;
      s.learned = r->learned;
      detail::for_each_device(r->devices, [&](std::string_view name, bool declared) {
        (declared ? s.declared : s.learned_devices).push_back(name);
      });
      if (auto parts = split_value(ep.value)) {
        s.symbol = parts->attr;  // views into the Index
        s.module = parts->module;
        known = true;
      }
      if (known && options.check_libraries) {
        const std::int64_t t = detail::coarse_now_ns();
        const FileStamp now = detail::stamp_at(AT_FDCWD, std::string(s.library).c_str());
        if (now == s.stamp) {
          s.verified = true;
          s.stamped_at = t;
        } else {
          known = false;  // changed: resolve and read it again
        }
      }
    }
    if (!known) {
      const std::int64_t t = detail::coarse_now_ns();
      apply_resolved(s, detail::resolve_backend(ep, index->search_paths()[ep.dist->search_path], ro));
      s.stamped_at = t;
    }
    if (!s.enabled) {
      s.state.store(BackendState::disabled, std::memory_order_relaxed);
      s.error = describe(s) + "disabled by " + s.disabled_by + " (remove it from there to use it)";
    } else if (s.state.load(std::memory_order_relaxed) == BackendState::unloaded &&
               s.kind == BackendKind::native && s.abi >= 0 && s.abi != EPLOAD_ABI_VERSION) {
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      s.failed_stamp = s.stamp;
      fail(s, "ABI version mismatch: the library declares backend ABI " + std::to_string(s.abi) +
                  ", this host speaks ABI " + std::to_string(EPLOAD_ABI_VERSION) +
                  " (rebuild the backend against this epload/backend.h)");
    }
    expected_devices += s.devices_known() ? s.declared.size() + s.learned_devices.size() : 4;
  }

  // One file reached by two paths (or listed twice) is one backend: the
  // later slot becomes an alias of the first.  Sorting beats a hash map of
  // 1,000 nodes here.
  struct Id {
    std::uint64_t dev, ino;
    std::string_view symbol;
    std::uint32_t slot;
  };
  std::vector<Id> ids;
  ids.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const Slot& s = slots[i];
    if (s.kind == BackendKind::native && s.stamp.exists()) ids.push_back({s.stamp.dev, s.stamp.ino, s.symbol, i});
  }
  std::sort(ids.begin(), ids.end(), [](const Id& a, const Id& b) {
    if (a.dev != b.dev) return a.dev < b.dev;
    if (a.ino != b.ino) return a.ino < b.ino;
    if (a.symbol != b.symbol) return a.symbol < b.symbol;
    return a.slot < b.slot;
  });
  for (std::size_t k = 1; k < ids.size(); ++k) {
    const Id& a = ids[k - 1];
    const Id& b = ids[k];
    if (a.dev == b.dev && a.ino == b.ino && a.symbol == b.symbol) {
      const std::uint32_t first = slots[a.slot].alias_of == k_no_slot ? a.slot : slots[a.slot].alias_of;
      slots[b.slot].alias_of = first;
    }
  }

  table = std::make_unique<detail::DeviceTable>(expected_devices);
  for (std::uint32_t i = 0; i < count; ++i) {
    Slot& s = slots[i];
    if (s.alias_of != k_no_slot || !s.enabled) continue;
    if (s.state.load(std::memory_order_relaxed) == BackendState::failed) continue;
    claim_known_devices(s);
  }
  if (store_dirty) save_store();
}

// ---------------------------------------------------------------------------
// Messages.

std::string Loader::Impl::describe(const Slot& s) const {
  std::string out = "backend '" + std::string(s.ep->name) + "' (distribution " +
                    std::string(s.ep->dist->name);
  if (!s.library.empty()) {
    out += s.kind == BackendKind::python ? ", module " : ", library ";
    out.append(s.library);
  }
  out += "): ";
  return out;
}

void Loader::Impl::fail(Slot& s, const std::string& cause) {
  s.error = describe(s) + cause + ". Disable it with EPLOAD_DISABLE=" + std::string(s.ep->name);
}

Error Loader::Impl::not_found(std::string_view name) {
  std::string msg = "no backend provides device '" + std::string(name) + "'";
  std::lock_guard<std::mutex> lock(registry);
  // A disabled or failed backend that declares it is the likeliest
  // explanation (neither claims its devices, so that a later backend may).
  for (std::uint32_t i = 0; i < count; ++i) {
    const Slot& s = slots[i];
    if (s.alias_of != k_no_slot) continue;
    const BackendState st = s.state.load(std::memory_order_acquire);
    if (st != BackendState::disabled && st != BackendState::failed) continue;
    for (std::string_view d : s.declared) {
      if (d == name) return Error{Errc::not_found, msg + ": " + s.error};
    }
    for (std::string_view d : s.learned_devices) {
      if (d == name) return Error{Errc::not_found, msg + ": " + s.error};
    }
  }
  std::vector<std::string_view> known;
  for (const DeviceEntry& e : table->entries()) known.push_back(e.name);
  msg += "; known devices: ";
  if (known.empty()) msg += "none";
  const std::size_t shown = std::min<std::size_t>(known.size(), 30);
  for (std::size_t k = 0; k < shown; ++k) {
    if (k) msg += ", ";
    msg.append(known[k]);
  }
  if (known.size() > shown) msg += ", ... (" + std::to_string(known.size() - shown) + " more)";
  std::size_t failed = 0, python = 0;
  std::string failures;
  for (std::uint32_t i = 0; i < count; ++i) {
    const Slot& s = slots[i];
    if (s.alias_of != k_no_slot) continue;
    if (s.state.load(std::memory_order_acquire) == BackendState::failed) {
      if (failed++ < 10) failures += "\n  " + s.error;
    } else if (s.kind == BackendKind::python && !options.python_loader && !s.devices_known()) {
      ++python;
    }
  }
  if (failed) {
    msg += "\nfailed backends (" + std::to_string(failed) + "):" + failures;
    if (failed > 10) msg += "\n  ... (" + std::to_string(failed - 10) + " more)";
  }
  if (python) {
    msg += "\n" + std::to_string(python) +
           " Python backend(s) with unknown devices were not searched (the Python layer loads them)";
  }
  return Error{Errc::not_found, msg};
}

// ---------------------------------------------------------------------------
// Lookup.

Result<void*> Loader::Impl::lookup_slow(std::string_view name) {
  if (options.mode == LoadMode::off) {
    return Error{Errc::not_found, "device '" + std::string(name) +
                                      "' is not loaded: backend autoload is off "
                                      "(mode off, or TORCH_DEVICE_BACKEND_AUTOLOAD is set and not '1')"};
  }
  if (!detail::valid_device_name(name)) {
    std::string shown(name.substr(0, 80));
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return Error{Errc::invalid_argument, "'" + shown +
                                             "' is not a device name (1-63 characters of A-Z a-z 0-9 _ . : -)"};
  }
  std::uint32_t owner = k_no_slot;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (const DeviceEntry* e = table->find(name)) owner = e->owner;
  }
  std::string note;
  if (owner != k_no_slot) {
    auto r = ensure_loaded(owner, name);
    if (const DeviceEntry* e = table->find(name)) {
      if (void* t = e->table.load(std::memory_order_acquire)) return t;
    }
    if (!r) return r.error();
    // Loaded, yet it did not register the name (a wrong declaration, or a
    // stale store): look for it like an unknown name.
    note = "\n" + describe(primary(owner)) + "declares device '" + std::string(name) +
           "' but did not register it when loaded (its declaration is wrong)";
  }

  // Unknown: load the backends whose devices are not known yet, in index
  // order, one at a time, until one provides it.
  auto provided = [&]() -> void* {
    const DeviceEntry* e = table->find(name);
    return e ? e->table.load(std::memory_order_acquire) : nullptr;
  };
  auto loadable = [&](const Slot& s) {
    return s.alias_of == k_no_slot && s.enabled &&
           (s.kind == BackendKind::native || (s.kind == BackendKind::python && options.python_loader));
  };
  auto pending = [](const Slot& s) {
    // Loading by another thread counts: wait for it, it may provide the name.
    const BackendState st = s.state.load(std::memory_order_acquire);
    return st == BackendState::unloaded || st == BackendState::loading;
  };
  for (std::uint32_t i = 0; i < count; ++i) {
    Slot& s = slots[i];
    if (!loadable(s) || !pending(s)) continue;
    bool known;
    {
      std::lock_guard<std::mutex> lock(registry);
      known = s.devices_known();
    }
    if (known) continue;
    (void)ensure_loaded(i, name);  // a failure is recorded in the slot and reported below
    if (void* t = provided()) return t;
  }
  // Last resort: what the store said may be stale.  Check the libraries not
  // checked in this process; a changed one no longer counts as known.
  for (std::uint32_t i = 0; i < count; ++i) {
    Slot& s = slots[i];
    if (!loadable(s) || s.state.load(std::memory_order_acquire) != BackendState::unloaded) continue;
    bool check;
    std::string path;
    {
      std::lock_guard<std::mutex> lock(registry);
      check = !s.verified && s.devices_known();
      path.assign(s.library);
    }
    if (!check) continue;
    const FileStamp now = detail::stamp_at(AT_FDCWD, path.c_str());
    bool changed;
    {
      std::lock_guard<std::mutex> lock(registry);
      changed = now != s.stamp;
      if (!changed) s.verified = true;
    }
    if (!changed) continue;
    (void)ensure_loaded(i, name);
    if (void* t = provided()) return t;
  }
  Error e = not_found(name);
  e.message += note;
  return e;
}

Result<void> Loader::Impl::ensure_loaded(std::uint32_t i, std::string_view device) {
  Slot& s = primary(i);
  BackendState st = s.state.load(std::memory_order_acquire);
  if (st == BackendState::ready) return {};
  if (st == BackendState::disabled) return Error{Errc::backend, s.error};
  if (s.kind == BackendKind::python && !options.python_loader) {
    return Error{Errc::backend, describe(s) + "a Python backend provides device '" +
                                    std::string(device) + "'; the Python layer loads it (import epload)"};
  }
  const std::thread::id me = std::this_thread::get_id();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    st = s.state.load(std::memory_order_acquire);
    if (st == BackendState::ready) return {};
    if (st == BackendState::disabled) return Error{Errc::backend, s.error};
    if (st == BackendState::failed) {
      // Sticky until the backend's file changes.
      if (s.library.empty()) return Error{Errc::backend, s.error};
      const FileStamp now = detail::stamp_at(AT_FDCWD, std::string(s.library).c_str());
      if (now == s.failed_stamp) return Error{Errc::backend, s.error};
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
    {
      std::lock_guard<std::mutex> wl(wait_mutex);
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
    }
    s.cv.wait(lock);
    {
      std::lock_guard<std::mutex> wl(wait_mutex);
      for (auto it = waiting.begin(); it != waiting.end(); ++it) {
        if (it->first == me) {
          waiting.erase(it);
          break;
        }
      }
    }
  }
  s.loader_thread.store(me, std::memory_order_release);
  s.state.store(BackendState::loading, std::memory_order_release);
  lock.unlock();

  load(s);  // no lock held: dlopen and init may take long and may look up other devices

  lock.lock();
  s.loader_thread.store(std::thread::id{}, std::memory_order_release);
  lock.unlock();
  s.cv.notify_all();
  if (s.state.load(std::memory_order_acquire) == BackendState::failed) return Error{Errc::backend, s.error};
  return {};
}

// Re-reads what a changed library declares.  False (with the slot failed)
// when it is gone or unreadable.
bool Loader::Impl::refresh_knowledge(Slot& s) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (s.verified) return true;
    path.assign(s.library);
  }
  // One stat; the file is read again only when it changed.
  const std::int64_t t = detail::coarse_now_ns();
  FileStamp now = detail::stamp_at(AT_FDCWD, path.c_str());
  if (!now.exists()) {
    s.failed_stamp = now;
    fail(s, (s.kind == BackendKind::native ? "library missing: " : "module file missing: ") + path +
                " no longer exists (reinstall " + std::string(s.ep->dist->name) + ")");
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(registry);
    if (now == s.stamp) {
      s.verified = true;
      s.stamped_at = t;
      return true;
    }
  }
  if (s.kind == BackendKind::native) {
    auto declared = detail::read_declared_devices(path, &now);
    if (!declared) {
      s.failed_stamp = now;
      fail(s, declared.error().code == Errc::not_found ? "library missing: " + declared.error().message
                                                        : declared.error().message);
      return false;
    }
    std::lock_guard<std::mutex> lock(registry);
    s.changed = true;
    s.stamp = now;
    s.abi = declared->has_section ? static_cast<std::int64_t>(declared->abi) : -1;
    s.declared.clear();
    for (const std::string& d : declared->devices) s.declared.push_back(arena.copy(d));
    s.learned = false;
    s.learned_devices.clear();
    s.conflicts.clear();
    claim_known_devices(s);
    store_dirty = true;
    s.verified = true;
    s.stamped_at = t;
    return true;
  }
  std::lock_guard<std::mutex> lock(registry);
  s.stamp = now;
  s.learned = false;
  s.learned_devices.clear();
  store_dirty = true;
  s.verified = true;
  s.stamped_at = t;
  return true;
}

void Loader::Impl::load(Slot& s) {
  const std::int64_t t0 = now_ns();
  InitContext ctx;
  ctx.impl = this;
  ctx.slot = s.index;
  ctx.thread = std::this_thread::get_id();
  ++s.attempts;
  bool ok = refresh_knowledge(s);
  if (ok) ok = s.kind == BackendKind::native ? load_native(s, ctx) : load_python(s, ctx);
  if (ok) publish(s, ctx);
  s.load_ns = now_ns() - t0;
  bool save = false;
  {
    std::lock_guard<std::mutex> lock(registry);
    s.load_seq = static_cast<int>(order.size());
    order.push_back(s.index);
    save = store_dirty;
  }
  s.state.store(ok ? BackendState::ready : BackendState::failed, std::memory_order_release);
  if (save) save_store();
}

bool Loader::Impl::load_native(Slot& s, InitContext& ctx) {
  std::int64_t abi;
  {
    std::lock_guard<std::mutex> lock(registry);
    abi = s.abi;
    s.failed_stamp = s.stamp;
  }
  if (abi >= 0 && abi != EPLOAD_ABI_VERSION) {
    fail(s, "ABI version mismatch: the library declares backend ABI " + std::to_string(abi) +
                ", this host speaks ABI " + std::to_string(EPLOAD_ABI_VERSION) +
                " (rebuild the backend against this epload/backend.h)");
    return false;
  }
  std::string path(s.library);
  if (s.attempts > 1 || s.changed) {
    // The file changed since this process may have loaded it (a retry, or
    // an upgrade seen by a second Loader).  glibc matches loaded objects by
    // name first and would hand back the old mapping, so spell the path
    // differently ("dir/./lib.so") until the spelling is not loaded yet.
    const std::size_t at = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
    for (int k = 0; k < 64; ++k) {
      void* loaded = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
      if (loaded == nullptr) break;
      ::dlclose(loaded);  // only drops the reference RTLD_NOLOAD just took
      path.insert(at, "./");
    }
  }
  const std::int64_t t1 = now_ns();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  s.dlopen_ns = now_ns() - t1;
  if (handle == nullptr) {
    const char* e = ::dlerror();
    std::string why = e ? e : "unknown dlopen error";
    // glibc: "<path>: <dep>: cannot open shared object file: ..." for a
    // missing dependency, "<path>: cannot open shared object file" for the
    // library itself, "invalid ELF header" / "file too short" for junk.
    std::string rest = why.starts_with(path + ": ") ? why.substr(path.size() + 2) : why;
    const std::size_t cannot = rest.find(": cannot open shared object file");
    if (cannot != std::string::npos && cannot > 0) {
      fail(s, "a library it depends on is missing: " + rest.substr(0, cannot) + " (dlopen: " + why +
                  "; install it or fix the library search path)");
    } else if (rest.starts_with("cannot open shared object file")) {
      fail(s, "library missing (dlopen: " + why + ")");
    } else if (rest.find("invalid ELF header") != std::string::npos ||
               rest.find("file too short") != std::string::npos) {
      fail(s, "corrupt library, not a loadable ELF file (dlopen: " + why + ")");
    } else {
      fail(s, "dlopen failed: " + why);
    }
    return false;
  }
  s.handle = handle;  // never closed: its functions may be handed out
  ::dlerror();
  const std::string symbol(s.symbol);
  void* sym = ::dlsym(handle, symbol.c_str());
  if (sym == nullptr) {
    const char* e = ::dlerror();
    fail(s, "init symbol '" + symbol + "' missing: the library does not export it (dlsym: " +
                (e ? std::string(e) : std::string("null symbol")) + ")");
    return false;
  }
  auto init = reinterpret_cast<EploadBackendInit>(sym);
  EploadHost host = make_host(&ctx);
  int rc = EPLOAD_ERR;
  std::string thrown;
  const std::int64_t t2 = now_ns();
  try {
    rc = init(&host);
  } catch (const std::exception& ex) {
    thrown = std::string("init threw a C++ exception: ") + ex.what();
  } catch (...) {
    thrown = "init threw a C++ exception of unknown type";
  }
  s.init_ns = now_ns() - t2;
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

bool Loader::Impl::load_python(Slot& s, InitContext& ctx) {
  PythonBackend b;
  b.name = s.ep->name;
  b.value = s.ep->value;
  b.module = s.module;
  b.attr = s.symbol;
  b.dist = s.ep->dist->name;
  {
    std::lock_guard<std::mutex> lock(registry);
    s.failed_stamp = s.stamp;
  }
  EploadHost host = make_host(&ctx);
  const std::int64_t t = now_ns();
  Result<void> r = Error{Errc::backend, "not run"};
  try {
    r = options.python_loader(b, &host);
  } catch (const std::exception& ex) {
    r = Error{Errc::backend, std::string("the Python loader threw: ") + ex.what()};
  } catch (...) {
    r = Error{Errc::backend, "the Python loader threw an exception of unknown type"};
  }
  s.dlopen_ns = now_ns() - t;
  if (!r) {
    fail(s, r.error().message);
    return false;
  }
  return true;
}

void Loader::Impl::publish(Slot& s, InitContext& ctx) {
  std::lock_guard<std::mutex> lock(registry);
  std::vector<std::string_view> names;
  for (auto& [name, table_ptr] : ctx.registered) {
    DeviceEntry* e = table->find(name);
    std::string_view stored = e ? e->name : arena.copy(name);
    names.push_back(stored);
    if (e == nullptr) e = table->insert(stored);
    if (e->table.load(std::memory_order_relaxed) != nullptr) {
      s.conflicts.push_back("device '" + name + "' was already provided by backend '" +
                            std::string(slots[e->owner].ep->name) + "'; this backend's is ignored");
      continue;
    }
    if (e->owner != k_no_slot && e->owner != s.index) {
      Slot& o = slots[e->owner];
      const BackendState os = o.state.load(std::memory_order_acquire);
      const bool owner_may_provide = os == BackendState::unloaded || os == BackendState::loading;
      if (o.index < s.index && owner_may_provide) {
        s.conflicts.push_back("device '" + name + "' is also provided by backend '" +
                              std::string(o.ep->name) + "', which comes first in index order and wins");
        continue;
      }
      if (owner_may_provide) {
        o.conflicts.push_back("device '" + name + "' is also provided by backend '" +
                              std::string(s.ep->name) + "', which was loaded first and got it");
      }
      e->source = DeviceSource::learned;
    } else if (e->owner == k_no_slot) {
      e->source = DeviceSource::learned;
    }
    bool declared = false;
    for (std::string_view d : s.declared) declared = declared || d == stored;
    if (declared) e->source = DeviceSource::declared;
    e->owner = s.index;
    e->table.store(table_ptr, std::memory_order_release);
  }
  // What it registered, minus what it declared, is learned.
  std::vector<std::string_view> learned;
  for (std::string_view n : names) {
    bool declared = false;
    for (std::string_view d : s.declared) declared = declared || d == n;
    bool dup = false;
    for (std::string_view l : learned) dup = dup || l == n;
    if (!declared && !dup) learned.push_back(n);
  }
  if (!s.learned || learned != s.learned_devices) store_dirty = true;
  s.learned = true;
  s.learned_devices = std::move(learned);
}

void Loader::Impl::save_store() {
  if (store_path.empty()) return;
  std::lock_guard<std::mutex> writer(store_write);
  std::vector<detail::LearnedRecord> records;
  std::vector<std::string> device_fields;
  std::vector<std::string> libraries;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (!store_dirty) return;
    store_dirty = false;
    records.reserve(count);
    device_fields.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      const Slot& s = slots[i];
      if (s.kind == BackendKind::unresolved || s.library.empty() || !s.stamp.exists()) continue;
      if (s.library[0] != '/') continue;  // relative search path: not stable across processes
      // A stamp taken in the same clock tick as a change may hide it.
      if (s.stamped_at != 0 && detail::is_racy(s.stamp, s.stamped_at)) continue;
      detail::LearnedRecord r;
      r.metadata_dir = s.ep->dist->metadata_dir;
      r.name = s.ep->name;
      r.value = s.ep->value;
      r.kind = s.kind == BackendKind::python ? 'p' : 'n';
      r.library = s.library;
      r.stamp = s.stamp;
      r.abi = s.abi;
      r.learned = s.learned;
      std::string field;
      for (std::string_view d : s.declared) field.append(field.empty() ? "d:" : " d:").append(d);
      for (std::string_view d : s.learned_devices) field.append(field.empty() ? "l:" : " l:").append(d);
      device_fields.push_back(std::move(field));
      records.push_back(r);
    }
    for (std::size_t k = 0; k < records.size(); ++k) records[k].devices = device_fields[k];
  }
  auto r = detail::write_learned(store_path, records);
  if (!r) {
    std::lock_guard<std::mutex> lock(registry);
    store_note = r.error().message;
  }
}

// ---------------------------------------------------------------------------
// Host table functions.

namespace {

int host_register(void* ctx, const char* name, void* device_table) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || name == nullptr || device_table == nullptr) return EPLOAD_ERR_INVALID;
  if (std::this_thread::get_id() != c->thread) return EPLOAD_ERR_INVALID;
  const std::string_view n = name;
  if (!detail::valid_device_name(n)) {
    if (c->message.empty()) c->message = "registered an invalid device name";
    return EPLOAD_ERR_INVALID;
  }
  Loader::Impl& impl = *c->impl;
  {
    // Refuse early what an earlier backend owns, so the backend can react.
    std::lock_guard<std::mutex> lock(impl.registry);
    if (const DeviceEntry* e = impl.table->find(n); e != nullptr && e->owner != k_no_slot &&
                                                    e->owner != c->slot) {
      const Slot& o = impl.slots[e->owner];
      const BackendState os = o.state.load(std::memory_order_acquire);
      if (e->table.load(std::memory_order_relaxed) != nullptr ||
          (o.index < c->slot && (os == BackendState::unloaded || os == BackendState::loading))) {
        impl.slots[c->slot].conflicts.push_back(
            "device '" + std::string(n) + "' is also provided by backend '" + std::string(o.ep->name) +
            "', which comes first in index order and wins");
        return EPLOAD_ERR_CONFLICT;
      }
    }
  }
  for (auto& [existing, table_ptr] : c->registered) {
    if (existing == n) {
      table_ptr = device_table;
      return EPLOAD_OK;
    }
  }
  c->registered.emplace_back(n, device_table);
  return EPLOAD_OK;
}

void host_set_error(void* ctx, const char* message) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || std::this_thread::get_id() != c->thread) return;
  c->message = message ? message : "";
}

int host_lookup(void* ctx, const char* device, void** device_table) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || device == nullptr) return EPLOAD_ERR_INVALID;
  if (std::this_thread::get_id() != c->thread) return EPLOAD_ERR_INVALID;
  Loader::Impl& impl = *c->impl;
  const std::string_view n = device;
  if (const DeviceEntry* e = impl.table->find(n)) {
    if (void* t = e->table.load(std::memory_order_acquire)) {
      if (device_table) *device_table = t;
      return EPLOAD_OK;
    }
  }
  auto r = impl.lookup_slow(n);
  if (!r) {
    c->last_lookup_error = r.error().message;
    return r.error().code == Errc::backend ? EPLOAD_ERR_FAILED : EPLOAD_ERR_INVALID;
  }
  if (device_table) *device_table = r.value();
  return EPLOAD_OK;
}

}  // namespace

// ---------------------------------------------------------------------------
// Loader.

Loader::Loader() : m(std::make_unique<Impl>()) {}
Loader::~Loader() = default;

Result<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const Index> index, LoaderOptions options) {
  if (!index) return Error{Errc::invalid_argument, "Loader::create: no index"};
  if (options.group.empty()) return Error{Errc::invalid_argument, "Loader::create: empty group"};
  std::unique_ptr<Loader> loader(new Loader());
  loader->m->index = std::move(index);
  loader->m->options = std::move(options);
  loader->m->setup();
  return loader;
}

void Loader::start() {
  if (m->started.exchange(true)) return;
  const LoadMode mode = m->options.mode;
  if (mode == LoadMode::off) return;
  for (std::uint32_t i = 0; i < m->count; ++i) {
    Slot& s = m->slots[i];
    if (s.alias_of != k_no_slot || !s.enabled) continue;
    if (s.kind == BackendKind::unresolved) continue;
    if (s.kind == BackendKind::python && !m->options.python_loader) continue;
    bool hook;
    {
      std::lock_guard<std::mutex> lock(m->registry);
      hook = s.hook();
    }
    if (mode == LoadMode::eager || hook) (void)m->ensure_loaded(i, "");
  }
}

Result<void*> Loader::lookup(std::string_view device) {
  if (const DeviceEntry* e = m->table->find(device)) {
    if (void* t = e->table.load(std::memory_order_acquire)) return t;
  }
  return m->lookup_slow(device);
}

void* Loader::find(std::string_view device) const noexcept {
  const DeviceEntry* e = m->table->find(device);
  return e ? e->table.load(std::memory_order_acquire) : nullptr;
}

LoadMode Loader::mode() const { return m->options.mode; }

std::vector<BackendStatus> Loader::backends() const {
  std::vector<BackendStatus> out;
  out.reserve(m->count);
  for (std::uint32_t i = 0; i < m->count; ++i) {
    Slot& s = m->slots[i];
    BackendStatus b;
    b.name.assign(s.ep->name);
    b.dist.assign(s.ep->dist->name);
    b.value.assign(s.ep->value);
    b.kind = s.kind;
    b.symbol.assign(s.symbol);
    if (s.alias_of != k_no_slot) b.alias_of.assign(m->slots[s.alias_of].ep->name);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      b.state = s.state.load(std::memory_order_acquire);
      if (b.state == BackendState::failed || b.state == BackendState::disabled) b.error = s.error;
      b.dlopen_ns = s.dlopen_ns;
      b.init_ns = s.init_ns;
      b.load_ns = s.load_ns;
    }
    std::lock_guard<std::mutex> lock(m->registry);
    b.library.assign(s.library);
    b.load_seq = s.load_seq;
    b.devices_known = s.devices_known();
    b.hook = s.hook();
    for (std::string_view d : s.declared) b.devices.emplace_back(d);
    for (std::string_view d : s.learned_devices) b.devices.emplace_back(d);
    b.conflicts = s.conflicts;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<DeviceStatus> Loader::devices() const {
  std::vector<DeviceStatus> out;
  std::lock_guard<std::mutex> lock(m->registry);
  for (const DeviceEntry& e : m->table->entries()) {
    if (e.owner == k_no_slot) continue;
    DeviceStatus d;
    d.name.assign(e.name);
    d.backend = e.owner;
    d.source = e.source;
    d.ready = e.table.load(std::memory_order_acquire) != nullptr;
    out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DeviceStatus& a, const DeviceStatus& b) { return a.backend < b.backend; });
  return out;
}

std::vector<std::size_t> Loader::load_order() const {
  std::lock_guard<std::mutex> lock(m->registry);
  return {m->order.begin(), m->order.end()};
}

std::string Loader::store_file() const { return m->store_path; }

std::string Loader::store_note() const {
  std::lock_guard<std::mutex> lock(m->registry);
  return m->store_note;
}

}  // namespace epload
