// loader_status.cpp — what a Loader says: names of its enums, messages
// (a backend's description, failures, the not-found explanation), the write
// of the learned-devices store, and status snapshots.  (Creation is in
// loader_setup.cpp, loading in loader_load.cpp.)
#include <algorithm>  // min, stable_sort
#include <iterator>   // size

#include "atomic_file.hpp"  // make_safe_dir
#include "crash_log.hpp"
#include "enum_names.hpp"
#include "epload/profile.hpp"
#include "loader_impl.hpp"
#include "stamp.hpp"
#include "torch_rules.hpp"

namespace epload {

using detail::DeviceEntry;
using detail::k_no_slot;
using detail::Slot;

namespace {

// Each enum's names, in the order of its values (enum_names.hpp); the last
// value's place is checked so that a new value cannot go unnamed.
constexpr const char* k_mode_names[] = {"lazy", "eager", "off"};
constexpr const char* k_kind_names[] = {"native", "python", "unresolved"};
constexpr const char* k_source_names[] = {"declared", "learned", "section"};
constexpr const char* k_state_names[] = {"unloaded", "loading", "ready", "failed", "disabled"};
static_assert(std::size(k_mode_names) == static_cast<std::size_t>(LoadMode::off) + 1);
static_assert(std::size(k_kind_names) == static_cast<std::size_t>(BackendKind::unresolved) + 1);
static_assert(std::size(k_source_names) == static_cast<std::size_t>(DeviceSource::section) + 1);
static_assert(std::size(k_state_names) == static_cast<std::size_t>(BackendState::disabled) + 1);

}  // namespace

const char* to_string(LoadMode mode) { return detail::enum_name(mode, k_mode_names); }
const char* to_string(BackendKind kind) { return detail::enum_name(kind, k_kind_names); }
const char* to_string(DeviceSource source) { return detail::enum_name(source, k_source_names); }
const char* to_string(BackendState state) { return detail::enum_name(state, k_state_names); }

std::optional<LoadMode> parse_load_mode(std::string_view text) {
  return detail::parse_enum<LoadMode>(text, k_mode_names);
}

// ---------------------------------------------------------------------------
// Messages.

std::string Loader::State::describe(const Slot& s) const {
  std::string out = "backend '" + std::string(s.ep->name) + "' (distribution " + std::string(s.ep->dist->name);
  if (!s.library.empty()) {
    out += s.kind == BackendKind::python ? ", module " : ", library ";
    out.append(library_of(s).view());
  }
  out += "): ";
  return out;
}

void Loader::State::fail(Slot& s, const std::string& cause) {
  s.outcome().error = describe(s) + cause + ". Disable it with EPLOAD_DISABLE=" + std::string(s.ep->name);
}

Error Loader::State::not_found(std::string_view name) {
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
    // Its backend failed (Errc::backend), or is disabled: then none provides it.
    if (declares) return Error{st == BackendState::failed ? Errc::backend : Errc::not_found, msg + ": " + s.out->error};
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
    } else if (s.kind == BackendKind::python && !this->python.load && !s.devices_known()) {
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

void Loader::State::remember_outcome(const Slot& s, bool ok) {
  // Skipped by this front (not a failed load of the library), or for an
  // earlier crash, which stays remembered.
  if (s.foreign || (s.out && s.out->crash_skip)) return;
  auto it = last_failures.find(s.index);
  if (ok) {
    if (it == last_failures.end()) return;
    last_failures.erase(it);
  } else {
    if (it != last_failures.end() && it->second == s.out->error) return;
    last_failures[s.index] = arena.copy(s.out->error);
  }
  store_dirty = true;
}

const std::string& Loader::State::crash_log_safe() {
  static const std::string k_none;
  int st = crash_log_state.load(std::memory_order_acquire);
  if (st == 0 && !crash_log.empty()) {
    // Never into a directory others can write, as the store (atomic_file.hpp).
    st = detail::make_safe_dir(detail::dir_name(crash_log)) ? 1 : -1;
    crash_log_state.store(st, std::memory_order_release);
  }
  return st == 1 ? crash_log : k_none;
}

bool Loader::State::crash_skipped(const Slot& s) const {
  if (options.mode == LoadMode::eager || !options.enable.empty() || (s.out && s.out->changed)) return false;
  auto f = last_failures.find(s.index);
  return f != last_failures.end() && detail::is_crash(f->second);
}

void Loader::State::save_store() {
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
      r.metadata_dir = detail::relative_to(s.ep->dist->metadata_dir, base);
      r.name = s.ep->name;
      r.value = s.ep->value;
      r.kind = s.kind == BackendKind::python ? 'p' : 'n';
      if (s.library_base != detail::k_no_slot && s.library_base != r.search_path) continue;
      // Relative to its search path already (from the store), or whole.
      r.library = s.library_base == r.search_path ? s.library : detail::relative_to(s.library, base);
      r.stamp = s.stamp;
      r.abi = s.abi;
      r.learned = s.learned;
      // Arena or store: outlives this call.  The epload.devices names are
      // the index's to say, never stored.
      r.devices = s.devices;
      if (auto f = last_failures.find(i); f != last_failures.end()) r.failure = f->second;
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

Loader::Loader() : m(std::make_unique<State>()) {}
Loader::~Loader() = default;

Result<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const Index> index, LoaderOptions options) {
  return LoaderAccess::create(std::move(index), std::move(options), PythonFront{});
}

Result<std::unique_ptr<Loader>> create_loader(std::shared_ptr<const Index> index, LoaderOptions options,
                                              PythonFront front) {
  return LoaderAccess::create(std::move(index), std::move(options), std::move(front));
}

Result<std::unique_ptr<Loader>> LoaderAccess::create(std::shared_ptr<const Index> index, LoaderOptions options,
                                                     PythonFront front) {
  if (!index) return Error{Errc::invalid_argument, "Loader::create: no index"};
  if (options.group.empty()) return Error{Errc::invalid_argument, "Loader::create: empty group"};
  profile::Span span(profile::Phase::total, "loader create");
  std::unique_ptr<Loader> loader(new Loader());
  loader->m->index = std::move(index);
  loader->m->options = std::move(options);
  loader->m->python = std::move(front);
  loader->m->setup();
  return loader;
}

std::vector<std::string> clash_warnings(const Loader& loader, bool torch) {
  const Loader::State& m = LoaderAccess::state(loader);
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(m.registry);
  if (torch) {
    for (const DeviceEntry& e : m.table->entries()) {
      if (e.owner != k_no_slot && detail::is_torch_device_type(e.name)) {
        out.push_back(detail::torch_device_clash(e.name, m.slots[e.owner].ep->name));
      }
    }
  }
  out.insert(out.end(), m.declaration_warnings.begin(), m.declaration_warnings.end());
  for (std::uint32_t i = 0; i < m.count; ++i) {
    const Slot& s = m.slots[i];
    if (!s.out) continue;
    for (const std::string& c : s.out->conflicts) out.push_back("backend '" + std::string(s.ep->name) + "': " + c);
  }
  return out;
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
      if (b.state == BackendState::disabled) {
        const char* by = nullptr;
        if (m->is_disabled(*s.ep, &by) && by) b.disabled_by = by;
      }
      b.dlopen_ns = s.out->dlopen_ns;
      b.init_ns = s.out->init_ns;
      b.load_ns = s.out->load_ns;
      b.load_seq = s.out->load_seq;
      b.conflicts = s.out->conflicts;
    }
    b.library.assign(m->library_of(s).view());
    if (auto f = m->last_failures.find(s.index); f != m->last_failures.end()) {
      b.last_failure.assign(f->second);
      b.crashed_at.assign(detail::crash_time(f->second));
    }
    b.devices_known = s.devices_known();
    b.hook = s.hook();
    b.devices_learned = s.learned;
    detail::for_each_device_entry(s.devices, [&](std::string_view d, char tag, std::string_view kind) {
      // A kind its distribution declares holds until a load has shown what
      // the backend registers (then only learned kinds count).
      if (tag == 'm' && s.learned) kind = {};
      // A declared device learned with a kind is listed once: declared, of that kind.
      for (std::size_t k = 0; k < b.devices.size(); ++k) {
        if (b.devices[k] != d) continue;
        if (b.kinds[k].empty()) b.kinds[k].assign(kind);
        return;
      }
      b.devices.emplace_back(d);
      b.sources.push_back(detail::source_of(tag));
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
