// loader_setup.cpp — creating a Loader: its slots from the learned-devices
// store and the files, aliases, device claims.  (Loading is in loader.cpp;
// messages, the store write and status in loader_status.cpp.)
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
// it changed (loader_load.cpp); LoaderOptions::check_libraries checks them all
// up front instead, for listings that must be current.
#include <fcntl.h>  // AT_FDCWD

#include <algorithm>      // count, fill_n, min, stable_sort
#include <atomic>         // the stat calls' shared counter
#include <cstring>        // memcpy
#include <map>            // epload.devices declarations
#include <unordered_map>  // store lookup fallback
#include <utility>        // pair

#include "crash_log.hpp"
#include "elf.hpp"
#include "epload/backend.h"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "loader_impl.hpp"
#include "memory.hpp"
#include "parallel.hpp"
#include "resolve.hpp"
#include "stamp.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::k_no_slot;
using detail::Slot;

namespace {

// True when `stored` (relative to `base` unless absolute) names `full`.
bool same_path(std::string_view stored, std::string_view base, std::string_view full) {
  if (!stored.empty() && stored[0] == '/') return stored == full;
  return detail::relative_to(full, base) == stored && stored != full;
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

// ---------------------------------------------------------------------------
// Setup.

bool Loader::State::is_disabled(const EntryPoint& ep, const char** by) const {
  *by = disabled_by(options.enable, options.disable, ep.name, ep.dist->name);
  return *by != nullptr;
}

void Loader::State::set_devices(Slot& s, const std::vector<std::string_view>& declared,
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

void Loader::State::set_devices_after_meta(Slot& s, std::string_view rest) {
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

void Loader::State::claim_known_devices(Slot& s) {
  detail::for_each_device_entry(s.devices, [&](std::string_view name, char tag, std::string_view) {
    if (!detail::valid_device_name(name)) return;
    DeviceEntry* e = table->insert(name);
    if (e->owner == k_no_slot) {
      e->owner = s.index;
      e->source = detail::source_of(tag);
    } else if (e->owner != s.index) {
      s.outcome().conflicts.push_back("device '" + std::string(name) + "' is also provided by backend '" +
                                      std::string(slots[e->owner].ep->name) +
                                      "', which comes first in index order and wins");
    }
  });
}

std::map<std::pair<const Distribution*, std::string_view>, std::string>
Loader::State::declared_by_distributions() {
  std::map<std::pair<const Distribution*, std::string_view>, std::string> out;
  for (const EntryPoint& d : index->group(k_devices_group)) {
    if (!detail::valid_device_name(d.name)) continue;
    // "<backend>", "<backend> [<kind>]" or "<backend>:<kind>" (the spelling
    // setuptools accepts in a pyproject.toml, which refuses extras there).
    std::string_view backend = d.value, kind;
    if (d.value.find_first_of("[:") != std::string_view::npos) {
      const auto parts = split_value(d.value);
      if (!parts) continue;  // names no backend
      backend = parts->module;
      std::vector<std::string_view> given = parts->extras;
      if (!parts->attr.empty()) given.push_back(parts->attr);
      const bool known = given.size() == 1 && std::find(std::begin(detail::k_declared_kinds),
                                                        std::end(detail::k_declared_kinds),
                                                        given[0]) != std::end(detail::k_declared_kinds);
      if (known) {
        kind = given[0];
      } else if (!given.empty()) {
        std::string accepted;
        for (std::string_view k : detail::k_declared_kinds) accepted.append(accepted.empty() ? "" : ", ").append(k);
        declaration_warnings.push_back("distribution '" + std::string(d.dist->name) + "' declares device '" +
                                       std::string(d.name) + "' as '" + std::string(d.value) +
                                       "': its kind must be one of " + accepted +
                                       " (the device is taken as declared without a kind)");
      }
    }
    std::string& list = out[{d.dist, backend}];
    if (!list.empty()) list += ' ';
    list.append("m:").append(d.name);
    if (!kind.empty()) list.append("=").append(kind);
  }
  return out;
}

namespace {

/// Fills a Loader's slots (setup()): from the store where it knows a
/// backend, from the files otherwise; then the checks, aliases and claims.
/// One object per create(), so that each step is a function of its own.
class Setup {
 public:
  explicit Setup(Loader::State& impl)
      : m(impl), eps(impl.index->group(impl.options.group)), search_paths(impl.index->search_paths()) {
    ro.ext_suffixes = m.options.ext_suffixes;
    meta = m.declared_by_distributions();
  }

  void run() {
    m.count = static_cast<std::uint32_t>(eps.size());
    m.slots.reset(new Slot[m.count]);
    m.order.reserve(m.count);  // no allocation when a backend loads
    open_store();
    fill();
    // The store's records past the index's last entry point are parsed too:
    // a damaged tail (truncation) voids the whole store.
    if (cur.in_order && !m.store.damaged()) {
      for (detail::LearnedRecord r; m.store.next(r, &m.store_note);) continue;
    }
    if (m.store.damaged()) {
      m.slots.reset(new Slot[m.count]);
      m.store = detail::LearnedFile{};  // next() yields nothing: every slot is resolved afresh
      cur = Cursor{};
      fill();
    }
    if (m.options.check_libraries) check_libraries();
    remember_crashes();
    find_aliases();
    claim_devices();
    if (m.store_dirty) m.save_store();
  }

 private:
  void open_store() {
    if (!m.options.use_store) return;
    CacheOptions co;
    co.cache_dir = m.options.cache_dir;
    const std::string dir = resolve_cache_dir(co);
    if (dir.empty()) {
      m.store_note = "no cache directory (set EPLOAD_CACHE_DIR): devices are not remembered";
      return;
    }
    m.store_path = detail::learned_file_path(dir, m.options.group, search_paths);
    m.crash_log = detail::crash_log_path(m.store_path);
    profile::Span span(profile::Phase::read, m.store_path);
    m.store = detail::LearnedFile::open(m.store_path, &m.store_note, detail::cache_files_mapped());
    crashes = detail::collect_crashes(m.crash_log);
  }

  // Inits that an earlier process began and never finished: remembered as
  // the backend's last failure while its file is the one that crashed.
  void remember_crashes() {
    for (const detail::Crash& c : crashes) {
      for (std::uint32_t i = 0; i < m.count; ++i) {
        const Slot& s = m.slots[i];
        const FileStamp& st = s.stamp;
        if (s.ep->name != c.name || s.ep->value != c.value || st.dev != c.stamp.dev || st.ino != c.stamp.ino ||
            st.size != c.stamp.size || st.mtime_ns != c.stamp.mtime_ns || st.ctime_ns != c.stamp.ctime_ns) {
          continue;
        }
        m.last_failures[i] = m.arena.copy(detail::crash_message(c));
        m.store_dirty = true;
      }
    }
  }

  bool matches(const detail::LearnedRecord& r, const EntryPoint& ep) const {
    return r.search_path == ep.dist->search_path && r.search_path < search_paths.size() && r.name == ep.name &&
           r.value == ep.value && same_path(r.metadata_dir, search_paths[r.search_path], ep.dist->metadata_dir);
  }

  static std::string key_of(std::uint32_t sp, std::string_view dir, std::string_view name, std::string_view value) {
    std::string k = std::to_string(sp);
    k.append("\n").append(dir).append("\n").append(name).append("\n").append(value);
    return k;
  }

  // The store is written in index order: record i is entry point i's, and
  // is parsed when slot i is filled (no table of records).  From the first
  // record that is not (the index changed since it was written), the rest
  // are looked up by key.  Damage found on the way (a malformed record, no
  // trailer) voids everything taken from the store: the slots are filled
  // again without it (see run()).
  const detail::LearnedRecord* record_for(const EntryPoint& ep) {
    detail::LearnedFile& store = m.store;
    if (cur.in_order) {
      if (!cur.have_current) cur.have_current = store.next(cur.current, &m.store_note);
      if (cur.have_current && matches(cur.current, ep)) {
        cur.have_current = false;
        return &cur.current;
      }
      cur.in_order = false;
      if (cur.have_current) cur.rest.push_back(cur.current);
      cur.have_current = false;
      for (detail::LearnedRecord r; store.next(r, &m.store_note);) cur.rest.push_back(r);
      for (std::size_t k = 0; k < cur.rest.size(); ++k) {
        const detail::LearnedRecord& r = cur.rest[k];
        cur.by_key.emplace(key_of(r.search_path, r.metadata_dir, r.name, r.value), k);
      }
    }
    if (cur.rest.empty() || store.damaged() || ep.dist->search_path >= search_paths.size()) return nullptr;
    const std::uint32_t sp = ep.dist->search_path;
    auto it = cur.by_key.find(key_of(sp, detail::relative_to(ep.dist->metadata_dir, search_paths[sp]), ep.name, ep.value));
    if (it == cur.by_key.end() || !matches(cur.rest[it->second], ep)) return nullptr;
    return &cur.rest[it->second];
  }

  // Finds slot s's file and what it declares, from the files themselves.
  void resolve_fresh(Slot& s) {
    const EntryPoint& ep = *s.ep;
    const std::int64_t t = detail::coarse_now_ns();
    profile::Span span(profile::Phase::resolve, ep.name);
    detail::Resolved r = detail::resolve_backend(ep, search_paths[ep.dist->search_path], ro);
    // A module found elsewhere than beside its distribution is imported as
    // importlib finds it; nothing is remembered for it (no file, no stamp).
    // A library beside it is what it is for every front (the store is shared).
    if (m.python.load && r.kind == BackendKind::unresolved) r.kind = BackendKind::python;
    s.kind = r.kind;
    s.library = m.arena.copy(r.file);
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
      m.fail(s, r.error);
    } else if (!r.elf_error.empty()) {
      s.unreadable = true;
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      s.outcome().failed_stamp = r.stamp;
      m.fail(s, r.elf_error);
    } else {
      if (r.declared.has_section) {
        s.abi = static_cast<std::int32_t>(r.declared.abi);
        std::vector<std::string_view> declared(r.declared.devices.begin(), r.declared.devices.end());
        m.set_devices(s, declared, {});
      }
      m.store_dirty = true;
    }
  }

  // A disabled backend says by what; an enabled one is checked for its ABI
  // (a declared ABI other than ours fails the backend before any load).
  void settle(Slot& s, const char* disabled_by) {
    s.foreign = m.python.load && m.python.callables_only && s.kind == BackendKind::native;
    if (!s.enabled) {
      s.state.store(BackendState::disabled, std::memory_order_relaxed);
      s.outcome().error = m.describe(s) + "disabled by " + disabled_by + " (remove it from there to use it)";
    } else if (s.state.load(std::memory_order_relaxed) == BackendState::unloaded && s.kind == BackendKind::native &&
               s.abi >= 0 && s.abi != EPLOAD_ABI_VERSION) {
      s.state.store(BackendState::failed, std::memory_order_relaxed);
      s.outcome().failed_stamp = s.stamp;
      m.fail(s, "ABI version mismatch: the library declares backend ABI " + std::to_string(s.abi) +
                    ", this host speaks ABI " + std::to_string(EPLOAD_ABI_VERSION) +
                    " (rebuild the backend against this epload/backend.h)");
    }
  }

  // Room in the device table: exactly its names when known ("d:a l:b": one
  // space between two), so the table is no bigger than it must be; a guess
  // for the unknown.
  static std::size_t expected_of(const Slot& s) {
    return !s.devices_known() ? 4
           : s.devices.empty() ? 0
                               : 1 + static_cast<std::size_t>(std::count(s.devices.begin(), s.devices.end(), ' '));
  }

  // Slot s from the store, against its library's stamp `now` (taken after
  // `t`): verified, or resolved and read again, and what its stale record
  // decided (an ABI failure) goes with it.  True when resolved again.
  bool verify_or_resolve(Slot& s, const FileStamp& now, std::int64_t t) {
    if (now == s.stamp) {
      s.verified = true;
      s.stamped_at = t;
      return false;
    }
    s.state.store(BackendState::unloaded, std::memory_order_relaxed);
    s.unreadable = false;
    s.out.reset();
    // A crash is remembered for the files that crashed only.
    if (auto f = m.last_failures.find(s.index); f != m.last_failures.end() && detail::is_crash(f->second)) {
      m.last_failures.erase(f);
      m.store_dirty = true;
    }
    resolve_fresh(s);
    const char* disabled_by = nullptr;
    (void)m.is_disabled(*s.ep, &disabled_by);
    settle(s, disabled_by);
    return true;
  }

  // Fills every slot, from the store where it knows the backend.
  void fill() {
    expected_devices = 0;
    for (std::uint32_t i = 0; i < m.count && !m.store.damaged(); ++i) {
      Slot& s = m.slots[i];
      const EntryPoint& ep = eps[i];
      s.ep = &ep;
      s.index = i;
      if (!meta.empty()) {
        if (auto it = meta.find({ep.dist, ep.name}); it != meta.end()) s.meta_devices = m.arena.copy(it->second);
      }
      const char* disabled_by = nullptr;
      if (m.is_disabled(ep, &disabled_by)) s.enabled = false;
      if (const detail::LearnedRecord* r = record_for(ep)) {
        s.kind = r->kind == 'p' ? BackendKind::python : BackendKind::native;
        s.library = r->library;  // a view into the store buffer
        if (r->library[0] != '/') s.library_base = r->search_path;  // spelled whole when used
        s.stamp = r->stamp;
        s.abi = static_cast<std::int32_t>(r->abi);
        s.learned = r->learned;
        m.set_devices_after_meta(s, r->devices);
        s.symbol = attr_of(ep.value);
        if (!r->failure.empty()) m.last_failures[i] = r->failure;
      } else {
        resolve_fresh(s);
      }
      settle(s, disabled_by);
      expected_devices += expected_of(s);
    }
  }

  // Every library the store vouched for, checked against its file at once
  // (two CPUs share the stat calls).
  void check_libraries() {
    std::vector<std::uint32_t> from_store;
    for (std::uint32_t i = 0; i < m.count; ++i) {
      if (!m.slots[i].verified) from_store.push_back(i);  // resolve_fresh() verifies
    }
    const std::int64_t t = detail::coarse_now_ns();  // before any of the stamps
    const std::vector<FileStamp> now = m.stamp_libraries(from_store);
    for (std::size_t k = 0; k < from_store.size(); ++k) {
      Slot& s = m.slots[from_store[k]];
      const std::size_t was_expected = expected_of(s);
      if (verify_or_resolve(s, now[k], t)) expected_devices = expected_devices - was_expected + expected_of(s);
    }
  }

  // Calls on_twin(first, later) for each slot whose identity (dev, ino,
  // symbol) an earlier one has: one pass over an open-addressing table of
  // slot numbers (8 KB at 1,000 backends; a sort of the identities took
  // ~40 us and 40 KB of fresh memory).
  template <class Fn>
  void for_each_twin(Fn&& on_twin) {
    std::size_t cap = 16;
    while (cap < 2 * std::size_t{m.count}) cap *= 2;
    if (!firsts) firsts.reset(new std::uint32_t[cap]);
    std::fill_n(firsts.get(), cap, k_no_slot);
    auto same = [](const Slot& a, const Slot& b) {
      return a.stamp.dev == b.stamp.dev && a.stamp.ino == b.stamp.ino && a.symbol == b.symbol;
    };
    for (std::uint32_t i = 0; i < m.count; ++i) {
      const Slot& s = m.slots[i];
      if (!s.enabled || s.kind != BackendKind::native || !s.stamp.exists()) continue;
      std::uint64_t h = (s.stamp.ino ^ (s.stamp.dev << 40) ^ (s.stamp.dev >> 24)) * 0x9e3779b97f4a7c15ull;
      for (std::size_t b = static_cast<std::size_t>(h >> 32) & (cap - 1);; b = (b + 1) & (cap - 1)) {
        const std::uint32_t j = firsts[b];
        if (j == k_no_slot) {
          firsts[b] = i;
          break;
        }
        if (same(m.slots[j], s)) {
          on_twin(j, i);
          break;
        }
      }
    }
  }

  // One file reached by two paths (or listed twice) is one backend: later
  // enabled slots become aliases of the first enabled one (a disabled entry
  // point loads nothing, so it cannot stand for another).  A stamp from the
  // store may be stale: its inode may now be another file's (a tree removed
  // and installed again reuses inodes).  So the slots of a collision are
  // checked against their files first (one stat each; collisions are rare),
  // stale ones resolved again, and the identities compared afresh.
  void find_aliases() {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> twins;  // (first, later); none: no allocation
    auto collect = [&](std::uint32_t first, std::uint32_t later) { twins.emplace_back(first, later); };
    for_each_twin(collect);
    bool resolved_again = false;
    for (const auto& [first, later] : twins) {
      for (const std::uint32_t i : {first, later}) {
        Slot& s = m.slots[i];
        if (s.verified) continue;
        const std::int64_t t = detail::coarse_now_ns();
        if (verify_or_resolve(s, detail::stamp_at(AT_FDCWD, m.library_of(s).c_str()), t)) resolved_again = true;
      }
    }
    // A slot resolved again may have left its identity or joined another.
    if (resolved_again) {
      twins.clear();
      for_each_twin(collect);
    }
    for (const auto& [first, later] : twins) m.slots[later].alias_of = first;  // a first is never an alias
  }

  // Disabled and failed backends claim nothing, so that a later one may
  // provide the device; not_found() still names them.
  void claim_devices() {
    m.table = std::make_unique<detail::DeviceTable>(expected_devices);
    for (std::uint32_t i = 0; i < m.count; ++i) {
      Slot& s = m.slots[i];
      if (s.alias_of != k_no_slot || !s.enabled) continue;
      if (s.state.load(std::memory_order_relaxed) == BackendState::failed) continue;
      m.claim_known_devices(s);
    }
  }

  struct Cursor {
    detail::LearnedRecord current;  // read, not yet matched
    bool have_current = false, in_order = true;
    std::vector<detail::LearnedRecord> rest;  // once out of order: the rest, by key
    std::unordered_map<std::string, std::size_t> by_key;
  };

  Loader::State& m;
  std::span<const EntryPoint> eps;
  std::span<const std::string_view> search_paths;
  detail::ResolveOptions ro;
  std::map<std::pair<const Distribution*, std::string_view>, std::string> meta;  // epload.devices
  Cursor cur;
  std::vector<detail::Crash> crashes;  // found in the crash log at open_store()
  std::size_t expected_devices = 0;
  std::unique_ptr<std::uint32_t[]> firsts;  // for_each_twin's table
};

}  // namespace

void Loader::State::setup() { Setup(*this).run(); }

// ---------------------------------------------------------------------------
// The libraries' stamps.

std::vector<FileStamp> Loader::State::stamp_libraries(std::span<const std::uint32_t> which) const {
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

}  // namespace epload
