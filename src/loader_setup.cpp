// loader_setup.cpp — creating a Loader, the learned-devices store, messages
// and status snapshots.  (Loading itself is in loader.cpp.)
//
// create() must be cheap enough that a lazy start-up with 1,000 backends
// costs about 1% of loading them.  It does no system call per backend when
// the store knows them: one read of the store file (into memory of its own,
// which a later truncation of the file cannot take away), an in-place parse,
// then per backend a positional key match (the store is written in index order),
// a slot of ~150 bytes filled with views into the store, and its device names
// inserted into the device table.  Only backends the store does not know
// cost file-system work: resolving the library (an open per suffix tried)
// and reading its declared devices (a few preads).  The store is trusted
// until a backend loads, which is when its library is stat'ed and re-read if
// it changed (loader.cpp); LoaderOptions::check_libraries checks them all
// up front instead, for listings that must be current.
#include <fcntl.h>  // AT_FDCWD

#include <algorithm>      // count, fill_n, min, stable_sort
#include <atomic>         // the stat calls' shared counter
#include <cstring>        // memcpy
#include <map>            // epload.devices declarations
#include <unordered_map>  // store lookup fallback
#include <utility>        // pair

#include "elf.hpp"
#include "epload/backend.h"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "loader_impl.hpp"
#include "parallel.hpp"
#include "resolve.hpp"
#include "stamp.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::k_no_slot;
using detail::Slot;

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

const char* to_string(DeviceSource source) {
  switch (source) {
    case DeviceSource::declared: return "declared";
    case DeviceSource::learned: return "learned";
    case DeviceSource::section: return "section";
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

// `full` relative to directory `base` when it lies inside it, else `full`.
std::string_view relative_to(std::string_view full, std::string_view base) {
  if (base.empty() || full.size() <= base.size() || !full.starts_with(base)) return full;
  if (base.back() == '/') return full.substr(base.size());
  if (full[base.size()] != '/') return full;
  return full.substr(base.size() + 1);
}

// True when `stored` (relative to `base` unless absolute) names `full`.
bool same_path(std::string_view stored, std::string_view base, std::string_view full) {
  if (!stored.empty() && stored[0] == '/') return stored == full;
  return relative_to(full, base) == stored && stored != full;
}

// The attr of "module:attr" without the general parser in the common case
// (no spaces, no extras); split_value otherwise.  A view into `value`.
std::string_view attr_of(std::string_view value) {
  const std::size_t colon = value.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view attr = value.substr(colon + 1);
  // A plain loop: find_first_of calls a search of the 3-byte set per byte,
  // which made this a tenth of creating a 1,000-backend loader.
  bool plain = !attr.empty();
  for (char c : attr) plain &= c != ' ' && c != '\t' && c != '[';
  if (plain) return attr;
  auto parts = split_value(value);
  return parts ? parts->attr : std::string_view();
}

}  // namespace

std::vector<std::string> apply_environment(LoaderOptions& options) {
  Switches s = read_switches(options.group);
  options.mode = s.off_by.empty() ? s.mode : LoadMode::off;
  options.enable = std::move(s.enable);
  options.disable = std::move(s.disable);
  return std::move(s.warnings);
}

// ---------------------------------------------------------------------------
// Setup.

bool Loader::Impl::is_disabled(const EntryPoint& ep, const char** by) const {
  *by = disabled_by(options.enable, options.disable, ep.name, ep.dist->name);
  return *by != nullptr;
}

void Loader::Impl::set_devices(Slot& s, const std::vector<std::string_view>& declared,
                               const std::vector<detail::LearnedDevice>& learned) {
  if (s.meta_devices.empty() && declared.empty() && learned.empty()) {
    s.devices = {};
    return;
  }
  std::size_t n = s.meta_devices.size() + 1;
  for (std::string_view d : declared) n += d.size() + 3;
  for (const auto& [d, kind] : learned) n += d.size() + kind.size() + 4;
  char* p = arena.allocate(n);
  std::size_t at = 0;
  auto put = [&](char tag, std::string_view d, std::string_view kind) {
    if (at) p[at++] = ' ';
    p[at++] = tag;
    p[at++] = ':';
    std::memcpy(p + at, d.data(), d.size());
    at += d.size();
    if (!kind.empty()) {
      p[at++] = '=';
      std::memcpy(p + at, kind.data(), kind.size());
      at += kind.size();
    }
  };
  if (!s.meta_devices.empty()) {
    std::memcpy(p, s.meta_devices.data(), s.meta_devices.size());
    at = s.meta_devices.size();
  }
  for (std::string_view d : declared) put('d', d, {});
  for (const auto& [d, kind] : learned) put('l', d, kind);
  s.devices = {p, at};
}

void Loader::Impl::set_devices_after_meta(Slot& s, std::string_view rest) {
  if (s.meta_devices.empty() || rest.empty()) {
    s.devices = s.meta_devices.empty() ? rest : s.meta_devices;
    return;
  }
  char* p = arena.allocate(s.meta_devices.size() + 1 + rest.size());
  std::memcpy(p, s.meta_devices.data(), s.meta_devices.size());
  p[s.meta_devices.size()] = ' ';
  std::memcpy(p + s.meta_devices.size() + 1, rest.data(), rest.size());
  s.devices = {p, s.meta_devices.size() + 1 + rest.size()};
}

void Loader::Impl::claim_known_devices(Slot& s) {
  detail::for_each_device_entry(s.devices, [&](std::string_view name, char tag, std::string_view) {
    if (!detail::valid_device_name(name)) return;
    DeviceEntry* e = table->insert(name);
    if (e->owner == k_no_slot) {
      e->owner = s.index;
      e->source = tag == 'm' ? DeviceSource::declared : tag == 'd' ? DeviceSource::section : DeviceSource::learned;
    } else if (e->owner != s.index) {
      s.outcome().conflicts.push_back("device '" + std::string(name) + "' is also provided by backend '" +
                                      std::string(slots[e->owner].ep->name) +
                                      "', which comes first in index order and wins");
    }
  });
}

std::map<std::pair<const Distribution*, std::string_view>, std::string> Loader::Impl::declared_by_distributions()
    const {
  std::map<std::pair<const Distribution*, std::string_view>, std::string> out;
  for (const EntryPoint& d : index->group(k_devices_group)) {
    if (!detail::valid_device_name(d.name)) continue;
    std::string& list = out[{d.dist, d.value}];
    if (!list.empty()) list += ' ';
    list.append("m:").append(d.name);
  }
  return out;
}

void Loader::Impl::setup() {
  std::span<const EntryPoint> eps = index->group(options.group);
  count = static_cast<std::uint32_t>(eps.size());
  slots.reset(new Slot[count]);
  order.reserve(count);  // no allocation when a backend loads

  if (options.use_store) {
    CacheOptions co;
    co.cache_dir = options.cache_dir;
    const std::string dir = resolve_cache_dir(co);
    if (!dir.empty()) {
      store_path = detail::learned_file_path(dir, options.group, index->search_paths());
      profile::Span span(profile::Phase::read, store_path);
      store = detail::LearnedFile::open(store_path, &store_note, options.map_files);
    } else {
      store_note = "no cache directory (set EPLOAD_CACHE_DIR): devices are not remembered";
    }
  }
  std::span<const std::string_view> search_paths = index->search_paths();
  auto matches = [&](const detail::LearnedRecord& r, const EntryPoint& ep) {
    return r.search_path == ep.dist->search_path && r.search_path < search_paths.size() &&
           r.name == ep.name && r.value == ep.value &&
           same_path(r.metadata_dir, search_paths[r.search_path], ep.dist->metadata_dir);
  };
  // The store is written in index order: record i is entry point i's, and
  // is parsed when slot i is filled (no table of records).  From the first
  // record that is not (the index changed since it was written), the rest
  // are looked up by key.  Damage found on the way (a malformed record, no
  // trailer) voids everything taken from the store: the slots are filled
  // again without it (see below).
  struct Cursor {
    detail::LearnedRecord current;  // read, not yet matched
    bool have_current = false, in_order = true;
    std::vector<detail::LearnedRecord> rest;  // once out of order: the rest, by key
    std::unordered_map<std::string, std::size_t> by_key;
  } cur;
  auto key_of = [](std::uint32_t sp, std::string_view dir, std::string_view name, std::string_view value) {
    std::string k = std::to_string(sp);
    k.append("\n").append(dir).append("\n").append(name).append("\n").append(value);
    return k;
  };
  auto record_for = [&](const EntryPoint& ep) -> const detail::LearnedRecord* {
    if (cur.in_order) {
      if (!cur.have_current) cur.have_current = store.next(cur.current, &store_note);
      if (cur.have_current && matches(cur.current, ep)) {
        cur.have_current = false;
        return &cur.current;
      }
      cur.in_order = false;
      if (cur.have_current) cur.rest.push_back(cur.current);
      cur.have_current = false;
      for (detail::LearnedRecord r; store.next(r, &store_note);) cur.rest.push_back(r);
      for (std::size_t k = 0; k < cur.rest.size(); ++k) {
        const detail::LearnedRecord& r = cur.rest[k];
        cur.by_key.emplace(key_of(r.search_path, r.metadata_dir, r.name, r.value), k);
      }
    }
    if (cur.rest.empty() || store.damaged() || ep.dist->search_path >= search_paths.size()) return nullptr;
    const std::uint32_t sp = ep.dist->search_path;
    auto it = cur.by_key.find(key_of(sp, relative_to(ep.dist->metadata_dir, search_paths[sp]), ep.name, ep.value));
    if (it == cur.by_key.end() || !matches(cur.rest[it->second], ep)) return nullptr;
    return &cur.rest[it->second];
  };

  detail::ResolveOptions ro;
  ro.ext_suffixes = options.ext_suffixes;
  // The Python layer loads every backend as PyTorch does (ep.load()()):
  // a library is a Python extension module there, not a backend.h one.
  ro.read_declared = !options.python_loader;
  const std::map<std::pair<const Distribution*, std::string_view>, std::string> meta = declared_by_distributions();
  // Finds slot s's file and what it declares, from the files themselves.
  auto resolve_fresh = [&](Slot& s) {
    const EntryPoint& ep = *s.ep;
    const std::int64_t t = detail::coarse_now_ns();
    profile::Span span(profile::Phase::resolve, ep.name);
    detail::Resolved r = detail::resolve_backend(ep, search_paths[ep.dist->search_path], ro);
    // A module found elsewhere than beside its distribution is imported as
    // importlib finds it; nothing is remembered for it (no file, no stamp).
    if (options.python_loader) r.kind = BackendKind::python;
    s.kind = r.kind;
    s.library = arena.copy(r.file);
    s.library_base = detail::k_no_slot;
    s.symbol = attr_of(ep.value);
    s.stamp = r.stamp;
    s.stamped_at = t;
    s.verified = true;
    s.abi = -1;
    s.learned = false;
    s.devices = s.meta_devices;
    if (r.kind == BackendKind::unresolved) {
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      fail(s, r.error);
    } else if (!r.elf_error.empty()) {
      s.unreadable = true;
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      s.outcome().failed_stamp = r.stamp;
      fail(s, r.elf_error);
    } else {
      if (r.declared.has_section) {
        s.abi = static_cast<std::int32_t>(r.declared.abi);
        std::vector<std::string_view> declared(r.declared.devices.begin(), r.declared.devices.end());
        set_devices(s, declared, {});
      }
      store_dirty = true;
    }
  };
  // A declared ABI other than ours fails the backend before any load.
  auto check_abi = [&](Slot& s) {
    if (s.state.load(std::memory_order_relaxed) == BackendState::unloaded && s.kind == BackendKind::native &&
        s.abi >= 0 && s.abi != EPLOAD_ABI_VERSION) {
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      s.outcome().failed_stamp = s.stamp;
      fail(s, "ABI version mismatch: the library declares backend ABI " + std::to_string(s.abi) +
                  ", this host speaks ABI " + std::to_string(EPLOAD_ABI_VERSION) +
                  " (rebuild the backend against this epload/backend.h)");
    }
  };
  // A disabled backend says by what; an enabled one is checked for its ABI.
  auto settle = [&](Slot& s, const char* disabled_by) {
    if (!s.enabled) {
      s.state.store(BackendState::disabled, std::memory_order_relaxed);
      s.outcome().error = describe(s) + "disabled by " + disabled_by + " (remove it from there to use it)";
    } else {
      check_abi(s);
    }
  };
  // Room in the device table: exactly its names when known ("d:a l:b": one
  // space between two), so the table is no bigger than it must be; a guess
  // for the unknown.
  auto expected_of = [](const Slot& s) -> std::size_t {
    return !s.devices_known() ? 4
           : s.devices.empty() ? 0
                               : 1 + static_cast<std::size_t>(std::count(s.devices.begin(), s.devices.end(), ' '));
  };
  // Slot s from the store, against its library's stamp `now` (taken after
  // `t`): verified, or resolved and read again, and what its stale record
  // decided (an ABI failure) goes with it.  True when resolved again.
  auto verify_or_resolve = [&](Slot& s, const FileStamp& now, std::int64_t t) {
    if (now == s.stamp) {
      s.verified = true;
      s.stamped_at = t;
      return false;
    }
    s.state.store(BackendState::unloaded, std::memory_order_relaxed);
    s.unreadable = false;
    s.out.reset();
    resolve_fresh(s);
    const char* disabled_by = nullptr;
    (void)is_disabled(*s.ep, &disabled_by);
    settle(s, disabled_by);
    return true;
  };
  std::size_t expected_devices = 0;
  // Fills every slot, from the store where it knows the backend.
  auto fill = [&] {
    expected_devices = 0;
    for (std::uint32_t i = 0; i < count && !store.damaged(); ++i) {
      Slot& s = slots[i];
      const EntryPoint& ep = eps[i];
      s.ep = &ep;
      s.index = i;
      if (!meta.empty()) {
        if (auto it = meta.find({ep.dist, ep.name}); it != meta.end()) s.meta_devices = arena.copy(it->second);
      }
      const char* disabled_by = nullptr;
      if (is_disabled(ep, &disabled_by)) s.enabled = false;
      bool known = false;
      if (const detail::LearnedRecord* r = record_for(ep)) {
        s.kind = r->kind == 'p' || options.python_loader ? BackendKind::python : BackendKind::native;
        s.library = r->library;  // a view into the store buffer
        if (r->library[0] != '/') s.library_base = r->search_path;  // spelled whole when used
        s.stamp = r->stamp;
        s.abi = static_cast<std::int32_t>(r->abi);
        s.learned = r->learned;
        set_devices_after_meta(s, r->devices);
        s.symbol = attr_of(ep.value);
        known = true;
      }
      if (!known) resolve_fresh(s);
      settle(s, disabled_by);
      expected_devices += expected_of(s);
    }
  };
  fill();
  // The store's records past the index's last entry point are parsed too:
  // a damaged tail (truncation) voids the whole store.
  if (cur.in_order && !store.damaged()) {
    for (detail::LearnedRecord r; store.next(r, &store_note);) continue;
  }
  if (store.damaged()) {
    slots.reset(new Slot[count]);
    store = detail::LearnedFile{};  // next() yields nothing: every slot is resolved afresh
    cur = Cursor{};
    fill();
  }
  // Every library the store vouched for, checked against its file at once
  // (two CPUs share the stat calls).
  if (options.check_libraries) {
    std::vector<std::uint32_t> from_store;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (!slots[i].verified) from_store.push_back(i);  // resolve_fresh() verifies
    }
    const std::int64_t t = detail::coarse_now_ns();  // before any of the stamps
    const std::vector<FileStamp> now = stamp_libraries(from_store);
    for (std::size_t k = 0; k < from_store.size(); ++k) {
      Slot& s = slots[from_store[k]];
      const std::size_t was_expected = expected_of(s);
      if (verify_or_resolve(s, now[k], t)) expected_devices = expected_devices - was_expected + expected_of(s);
    }
  }

  // One file reached by two paths (or listed twice) is one backend: later
  // enabled slots become aliases of the first enabled one (a disabled entry
  // point loads nothing, so it cannot stand for another).  Identity is
  // (dev, ino, symbol), found in one pass over an open-addressing table of
  // slot numbers (8 KB at 1,000 backends; a sort of the identities took
  // ~40 us and 40 KB of fresh memory).  A stamp from the store may be
  // stale: its inode may now be another file's (a tree removed and
  // installed again reuses inodes).  So the slots of a collision are
  // checked against their files first (one stat each; collisions are rare),
  // stale ones resolved again, and the identities compared afresh.
  std::size_t cap = 16;
  while (cap < 2 * std::size_t{count}) cap *= 2;
  std::unique_ptr<std::uint32_t[]> firsts(new std::uint32_t[cap]);
  auto same = [&](const Slot& a, const Slot& b) {
    return a.stamp.dev == b.stamp.dev && a.stamp.ino == b.stamp.ino && a.symbol == b.symbol;
  };
  // Calls on_twin(first, later) for each slot whose identity an earlier one has.
  auto for_each_twin = [&](auto&& on_twin) {
    std::fill_n(firsts.get(), cap, k_no_slot);
    for (std::uint32_t i = 0; i < count; ++i) {
      const Slot& s = slots[i];
      if (!s.enabled || s.kind != BackendKind::native || !s.stamp.exists()) continue;
      std::uint64_t h = (s.stamp.ino ^ (s.stamp.dev << 40) ^ (s.stamp.dev >> 24)) * 0x9e3779b97f4a7c15ull;
      for (std::size_t b = static_cast<std::size_t>(h >> 32) & (cap - 1);; b = (b + 1) & (cap - 1)) {
        const std::uint32_t j = firsts[b];
        if (j == k_no_slot) {
          firsts[b] = i;
          break;
        }
        if (same(slots[j], s)) {
          on_twin(j, i);
          break;
        }
      }
    }
  };
  std::vector<std::pair<std::uint32_t, std::uint32_t>> twins;  // (first, later); none: no allocation
  auto collect = [&](std::uint32_t first, std::uint32_t later) { twins.emplace_back(first, later); };
  for_each_twin(collect);
  bool resolved_again = false;
  for (const auto& [first, later] : twins) {
    for (const std::uint32_t i : {first, later}) {
      Slot& s = slots[i];
      if (s.verified) continue;
      const std::int64_t t = detail::coarse_now_ns();
      if (verify_or_resolve(s, detail::stamp_at(AT_FDCWD, library_of(s).c_str()), t)) resolved_again = true;
    }
  }
  // A slot resolved again may have left its identity or joined another.
  if (resolved_again) {
    twins.clear();
    for_each_twin(collect);
  }
  for (const auto& [first, later] : twins) slots[later].alias_of = first;  // a first is never an alias

  // Disabled and failed backends claim nothing, so that a later one may
  // provide the device; not_found() still names them.
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
  std::string out = "backend '" + std::string(s.ep->name) + "' (distribution " + std::string(s.ep->dist->name);
  if (!s.library.empty()) {
    out += s.kind == BackendKind::python ? ", module " : ", library ";
    out.append(library_of(s).view());
  }
  out += "): ";
  return out;
}

void Loader::Impl::fail(Slot& s, const std::string& cause) {
  s.outcome().error = describe(s) + cause + ". Disable it with EPLOAD_DISABLE=" + std::string(s.ep->name);
}

std::vector<FileStamp> Loader::Impl::stamp_libraries(std::span<const std::uint32_t> which) const {
  const std::size_t n = which.size();
  // Each path spelled once, NUL-terminated, into one buffer: no allocation
  // per file, and none at all on the helper thread.
  std::string paths;
  std::vector<std::size_t> at(n);
  for (std::size_t k = 0; k < n; ++k) {
    at[k] = paths.size();
    paths.append(library_of(slots[which[k]]).view());
    paths.push_back('\0');
  }
  std::vector<FileStamp> now(n);
  // Files in chunks from a shared counter, so that a thread whose CPU is
  // busy takes fewer.  A second thread costs ~60 us to start: worth it
  // from a few dozen files.
  constexpr std::size_t k_chunk = 16, k_two_cpus_from = 64;
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t c; (c = next.fetch_add(k_chunk, std::memory_order_relaxed)) < n;) {
      for (std::size_t k = c; k < std::min(c + k_chunk, n); ++k) now[k] = detail::stamp_at(AT_FDCWD, paths.c_str() + at[k]);
    }
  };
  if (n >= k_two_cpus_from) {
    detail::run_on_two_cpus(work);
  } else {
    work();
  }
  return now;
}

Error Loader::Impl::not_found(std::string_view name) {
  std::string msg = "no backend provides device '" + std::string(name) + "'";
  std::lock_guard<std::mutex> lock(registry);
  // A disabled or failed backend that declares it is the likeliest
  // explanation (neither claims its devices, so that a later one may).
  for (std::uint32_t i = 0; i < count; ++i) {
    const Slot& s = slots[i];
    if (s.alias_of != k_no_slot) continue;
    const BackendState st = s.state.load(std::memory_order_acquire);
    if (st != BackendState::disabled && st != BackendState::failed) continue;
    bool declares = false;
    detail::for_each_device(s.devices, [&](std::string_view d, bool) { declares = declares || d == name; });
    if (declares) return Error{Errc::not_found, msg + ": " + s.out->error};
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
      if (failed++ < 10) failures += "\n  " + s.out->error;
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
// The store.

void Loader::Impl::save_store() {
  if (store_path.empty()) return;
  std::lock_guard<std::mutex> writer(store_write);
  std::vector<detail::LearnedRecord> records;
  {
    std::lock_guard<std::mutex> lock(registry);
    if (!store_dirty) return;
    store_dirty = false;
    records.reserve(count);
    bool relative = false;  // a backend under a relative search path: not remembered
    std::string_view relative_path;  // the first one's
    for (std::uint32_t i = 0; i < count; ++i) {
      const Slot& s = slots[i];
      if (s.kind == BackendKind::unresolved || s.unreadable || s.library.empty() || !s.stamp.exists()) {
        continue;  // nothing worth remembering: resolved and checked again next time
      }
      if (library_of(s).view()[0] != '/') {
        // A relative search path names another directory from another
        // working directory: a record of it could send a later process to
        // this directory's library.
        if (!relative && s.ep->dist->search_path < index->search_paths().size()) {
          relative_path = index->search_paths()[s.ep->dist->search_path];
        }
        relative = true;
        continue;
      }
      // A stamp taken in the same clock tick as a change may hide it.
      if (s.stamped_at != 0 && detail::is_racy(s.stamp, s.stamped_at)) continue;
      detail::LearnedRecord r;
      r.search_path = s.ep->dist->search_path;
      const std::string_view base = r.search_path < index->search_paths().size()
                                        ? index->search_paths()[r.search_path]
                                        : std::string_view();
      r.metadata_dir = relative_to(s.ep->dist->metadata_dir, base);
      r.name = s.ep->name;
      r.value = s.ep->value;
      r.kind = s.kind == BackendKind::python ? 'p' : 'n';
      if (s.library_base != detail::k_no_slot && s.library_base != r.search_path) continue;
      // Relative to its search path already (from the store), or whole.
      r.library = s.library_base == r.search_path ? s.library : relative_to(s.library, base);
      r.stamp = s.stamp;
      r.abi = s.abi;
      r.learned = s.learned;
      // Arena or store: outlives this call.  The epload.devices names are
      // the index's to say, never stored.
      r.devices = s.devices;
      if (!s.meta_devices.empty()) {
        r.devices = r.devices.size() > s.meta_devices.size() ? r.devices.substr(s.meta_devices.size() + 1)
                                                              : std::string_view();
      }
      records.push_back(r);
    }
    if (relative) {
      const std::string why = "backends under the relative search path '" + std::string(relative_path) +
                              "' are not remembered (relative to the working directory, it names another "
                              "directory from another one): give the path whole to have their devices remembered";
      if (store_note.find(why) == std::string::npos) store_note += (store_note.empty() ? "" : "; ") + why;
    }
  }
  auto r = detail::write_learned(store_path, records);
  if (!r) {
    std::lock_guard<std::mutex> lock(registry);
    store_note = r.error().message;
  }
}

// ---------------------------------------------------------------------------
// Creation and status.

Loader::Loader() : m(std::make_unique<Impl>()) {}
Loader::~Loader() = default;

Result<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const Index> index, LoaderOptions options) {
  if (!index) return Error{Errc::invalid_argument, "Loader::create: no index"};
  if (options.group.empty()) return Error{Errc::invalid_argument, "Loader::create: empty group"};
  profile::Span span(profile::Phase::total, "loader create");
  std::unique_ptr<Loader> loader(new Loader());
  loader->m->index = std::move(index);
  loader->m->options = std::move(options);
  loader->m->setup();
  return loader;
}

LoadMode Loader::mode() const { return m->options.mode; }

std::vector<BackendStatus> Loader::backends() const {
  std::vector<BackendStatus> out;
  out.reserve(m->count);
  for (std::uint32_t i = 0; i < m->count; ++i) out.push_back(backend(i));
  return out;
}

std::optional<std::size_t> Loader::provider(std::string_view device) const {
  std::lock_guard<std::mutex> lock(m->registry);
  const DeviceEntry* e = m->table->find(device);
  if (e == nullptr || e->owner == k_no_slot) return std::nullopt;
  return e->owner;
}

BackendStatus Loader::backend(std::size_t index) const {
  {
    Slot& s = m->slots[index];
    BackendStatus b;
    b.name.assign(s.ep->name);
    b.dist.assign(s.ep->dist->name);
    b.value.assign(s.ep->value);
    b.kind = s.kind;
    b.symbol.assign(s.symbol);
    if (s.alias_of != k_no_slot) b.alias_of.assign(m->slots[s.alias_of].ep->name);
    {
      std::lock_guard<std::mutex> lock(m->wait_mutex);
      b.state = s.state.load(std::memory_order_acquire);
    }
    std::lock_guard<std::mutex> lock(m->registry);
    if (s.out && b.state != BackendState::loading) {
      if (b.state == BackendState::failed || b.state == BackendState::disabled) b.error = s.out->error;
      b.dlopen_ns = s.out->dlopen_ns;
      b.init_ns = s.out->init_ns;
      b.load_ns = s.out->load_ns;
      b.load_seq = s.out->load_seq;
      b.conflicts = s.out->conflicts;
    }
    b.library.assign(m->library_of(s).view());
    b.devices_known = s.devices_known();
    b.hook = s.hook();
    detail::for_each_device_entry(s.devices, [&](std::string_view d, char tag, std::string_view kind) {
      b.devices.emplace_back(d);
      b.sources.push_back(tag == 'm' ? DeviceSource::declared : tag == 'd' ? DeviceSource::section : DeviceSource::learned);
      b.kinds.emplace_back(kind);
    });
    return b;
  }
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
