// loader_impl.hpp — what loader.cpp (lookups and waits), loader_load.cpp
// (loading one backend; the one file with <dlfcn.h>), loader_setup.cpp
// (creation) and loader_status.cpp (the store, messages, status) share.
#pragma once

#include <atomic>              // slot state
#include <condition_variable>  // waiting for a slot
#include <cstring>             // memcpy
#include <map>                 // declarations
#include <memory>              // outcome, table
#include <mutex>               // registry, waits
#include <span>                // slot lists
#include <string>              // messages
#include <string_view>         // names
#include <thread>              // thread ids
#include <vector>              // load order

#include "arena.hpp"
#include "device_table.hpp"
#include "epload/loader.hpp"
#include "crash_log.hpp"
#include "learned.hpp"
#include "file_stamp.hpp"
#include "python_front.hpp"

namespace epload {

namespace detail {

/// EPLOAD_MAX_DEVICE_NAME of backend.h (not included here).
inline constexpr std::size_t EPLOAD_MAX_DEVICE_NAME_ = 63;

/// What happened to a backend: allocated only for backends that were
/// loaded, failed, were disabled or conflict, so that a start-up with 1,000
/// untouched backends allocates none of it.
struct SlotOutcome {
  std::string error;  ///< the whole message; set with the failed/disabled state
  FileStamp failed_stamp;  ///< the library's stamp when it failed (sticky until it changes)
  int attempts = 0;
  bool crash_skip = false;  ///< failed as an earlier process's crash in its init (not loaded)
  bool changed = false;  ///< the file changed since create() (see load_native)
  /// Failed in a fork()ed child whose parent had its load under way in another
  /// thread: sticky for the life of this process, whatever its file does.
  bool forked = false;
  void* handle = nullptr;
  std::int64_t dlopen_ns = 0, init_ns = 0, load_ns = 0;
  int load_seq = -1;
  std::vector<std::string> conflicts;
};

/// One backend.  Kept small (one cache line and a half): a start-up touches
/// every slot, and 1,000 of them must cost microseconds.
struct Slot {
  // Identity: fixed once create() returns.
  const EntryPoint* ep = nullptr;
  /// The library (or module) file: relative to search path number
  /// `library_base` when that is not k_no_slot (a view into the store
  /// buffer: 1,000 paths are not composed at start-up), else the whole path
  /// (arena or store buffer).  Loader::State::library_of() spells it whole.
  std::string_view library;
  std::string_view symbol;   ///< view into the entry point's value
  std::uint32_t index = 0;
  std::uint32_t alias_of = k_no_slot;
  std::uint32_t library_base = k_no_slot;
  BackendKind kind = BackendKind::unresolved;
  bool enabled = true;
  bool unreadable = false;  ///< its ELF file failed the checks: never stored, never dlopen'ed
  /// A native library in a group of Python callables (PythonFront::callables_only).
  bool foreign = false;

  // Knowledge: guarded by the registry mutex once create() returns.
  bool verified = false;  ///< stamp checked against the file in this process
  bool learned = false;   ///< the 'l' devices are complete for this stamp
  /// "m:<name> ..." — the devices its distribution declares (epload.devices
  /// entry points; from the index, never stored): the head of `devices`.
  std::string_view meta_devices;
  std::int32_t abi = -1;  ///< declared ABI tag; -1: no epload_devices section
  /// "m:<name> d:<name> l:<name>[=<kind>] ..." — declared (entry points,
  /// ELF section) and learned devices (store text or arena); see
  /// detail::for_each_device_entry.
  std::string_view devices;
  FileStamp stamp;
  std::int64_t stamped_at = 0;  ///< coarse clock before `stamp` was taken; 0: from the store

  bool devices_known() const { return abi >= 0 || learned || !meta_devices.empty(); }
  bool hook() const { return devices_known() && devices.empty(); }

  // Life cycle.  `state` changes under the loader's wait mutex (except the
  // release store that ends a load); `out` is written by the loading thread
  // before that store and read after an acquire load of `state`.
  std::atomic<BackendState> state{BackendState::unloaded};
  std::atomic<std::thread::id> loader_thread{};
  std::unique_ptr<SlotOutcome> out;

  SlotOutcome& outcome() {
    if (!out) out = std::make_unique<SlotOutcome>();
    return *out;
  }
};

/// A NUL-terminated copy of a view, on the stack: the load path copies
/// paths and symbol names for the C APIs without allocating (in a fork()ed
/// worker every allocation can cost a copy-on-write page fault).
class CString {
 public:
  explicit CString(std::string_view s) : CString({}, s) {}
  /// `dir` + "/" + `rel` (no slash after an empty `dir` or one ending in
  /// '/'), or `rel` alone when `dir` is empty.
  CString(std::string_view dir, std::string_view rel) {
    const std::size_t slash = dir.empty() || dir.back() == '/' ? 0 : 1;
    m_size = dir.size() + slash + rel.size();
    char* p = m_buf;
    if (m_size >= sizeof m_buf) {
      m_long.resize(m_size);
      p = m_long.data();
    }
    if (!dir.empty()) std::memcpy(p, dir.data(), dir.size());
    if (slash) p[dir.size()] = '/';
    if (!rel.empty()) std::memcpy(p + dir.size() + slash, rel.data(), rel.size());
    p[m_size] = '\0';
    m_ptr = p;
  }
  CString(const CString&) = delete;
  CString& operator=(const CString&) = delete;
  const char* c_str() const { return m_ptr; }
  std::string_view view() const { return {m_ptr, m_size}; }

 private:
  char m_buf[512];
  std::string m_long;
  const char* m_ptr;
  std::size_t m_size;
};

/// One registration from an init: the name (a copy, the backend's string
/// may not outlive init) and the table.
struct Registered {
  char name[EPLOAD_MAX_DEVICE_NAME_ + 1];
  std::size_t size = 0;
  void* table = nullptr;
  char kind[16] = {};  ///< a Python device's kind (PythonDevice::kind), NUL-terminated
  std::string_view view() const { return {name, size}; }
};

/// A learned device and its kind ("" for none), views that outlive the store write.
using LearnedDevice = std::pair<std::string_view, std::string_view>;

/// The ctx of one init call.
struct InitContext {
  Loader::State* impl = nullptr;
  std::uint32_t slot = 0;
  std::thread::id thread;
  // Registrations: a few inline (almost every backend registers one or
  // two devices), the rest in a vector.
  Registered inline_registered[4];
  std::size_t inline_count = 0;
  std::vector<Registered> more_registered;
  template <class Fn>
  void for_each_registered(Fn&& fn) {
    for (std::size_t i = 0; i < inline_count; ++i) fn(inline_registered[i]);
    for (Registered& r : more_registered) fn(r);
  }
  /// Names refused because an earlier backend owns them (EPLOAD_ERR_CONFLICT).
  /// The backend still provides them: they are learned with it, so that a
  /// later process reports the conflict again instead of taking the backend
  /// for a hook (one that provides nothing and is loaded at every start).
  std::vector<std::string> refused;
  std::string message;            ///< set_error
  bool deferred = false;          ///< the Python loader said "not now"
  /// A BaseException passed through the load (the Python loader's, or a
  /// lookup the init made): the slot goes back to unloaded, nothing recorded.
  bool interrupted = false;
  bool devices_unknown = false;   ///< the Python loader cannot tell what it provided
  std::string last_lookup_error;  ///< host->lookup failures, for the report
};

/// How State::load left a slot: loaded or failed (ready | failed), or back
/// to unloaded because the Python loader said "not now" or the load was
/// interrupted (Errc::interrupted).
enum class LoadEnd { done, deferred, interrupted };

/// What a load starts from: the slot's knowledge, read once under the
/// registry mutex together with the creation of its outcome (one lock
/// instead of one per step), and updated by refresh_knowledge.
struct LoadKnowledge {
  bool verified = false;
  FileStamp stamp;
  std::int32_t abi = -1;
};

/// `full` relative to directory `base` when it lies inside it, else `full`.
inline std::string_view relative_to(std::string_view full, std::string_view base) {
  if (base.empty() || full.size() <= base.size() || !full.starts_with(base)) return full;
  if (base.back() == '/') return full.substr(base.size());
  if (full[base.size()] != '/') return full;
  return full.substr(base.size() + 1);
}

/// The kinds an epload.devices value may declare ("<backend> [privateuse1]"
/// or "<backend>:privateuse1"): a device torch knows as its PrivateUse1 name
/// once the backend registers it, or a host attribute only.
inline constexpr std::string_view k_declared_kinds[] = {"privateuse1", "attr"};

/// How a device list's tag (for_each_device_entry) says a device is known.
inline DeviceSource source_of(char tag) {
  return tag == 'm' ? DeviceSource::declared : tag == 'd' ? DeviceSource::section : DeviceSource::learned;
}

/// The host table handed to an init for the load `ctx` describes, and its
/// functions (loader_host.cpp; C ABI, ctx is an InitContext).
EploadHost make_host(InitContext* ctx);
int host_register(void* ctx, const char* name, void* device_table);
void host_set_error(void* ctx, const char* message);
int host_lookup(void* ctx, const char* device, void** device_table);

/// Not loaded yet, or being loaded: may still provide a device.
inline bool pending(const Slot& s) {
  const BackendState st = s.state.load(std::memory_order_acquire);
  return st == BackendState::unloaded || st == BackendState::loading;
}

/// The table of device `name` once its backend's init succeeded, else null.
inline void* provided(const DeviceTable& table, std::string_view name) {
  const DeviceEntry* e = table.find(name);
  return e ? e->table.load(std::memory_order_acquire) : nullptr;
}

}  // namespace detail

/// Creates Loaders: Loader::create for C++ hosts, create_loader (python_front.hpp)
/// for the Python package, with its hooks.
struct LoaderAccess {
  static Result<std::unique_ptr<Loader>> create(std::shared_ptr<const Index> index, LoaderOptions options,
                                                PythonFront front);
  static const Loader::State& state(const Loader& loader) { return *loader.m; }
};

struct Loader::State {
  // Every live State is listed for the fork() child handler (loader_fork.cpp).
  State();
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  /// In a fork()ed child: the locks made anew (a parent thread may have held
  /// one), and each load another parent thread had under way failed, since
  /// its thread does not exist here (loader_fork.cpp).
  void after_fork_in_child();

  std::shared_ptr<const Index> index;
  LoaderOptions options;
  PythonFront python;  ///< the Python package's hooks; empty for a C++ host
  detail::LearnedFile store;  // views in slots point into it
  std::string store_path;
  std::string crash_log;  ///< crash_log.hpp: where a crash in an init is written ("" without a store)
  /// 0: not checked yet; 1: its directory is safe (make_safe_dir); -1: not used.
  std::atomic<int> crash_log_state{0};
  /// crash_log when its directory is one the store may be written to, else "".
  const std::string& crash_log_safe();
  std::string store_note;
  std::unique_ptr<detail::Slot[]> slots;
  std::uint32_t count = 0;
  std::unique_ptr<detail::DeviceTable> table;

  // The registry mutex: device claims, slot knowledge and outcomes'
  // conflicts, the arena, the load order.  Never held across dlopen or init.
  mutable std::mutex registry;
  detail::Arena arena;
  std::vector<std::uint32_t> order;
  bool store_dirty = false;
  /// Backend index -> the message of its last failed load (this process's,
  /// arena; or an earlier one's, store buffer): kept in the store for
  /// `epload devices`, never read to decide a load.  Sparse: failures are rare.
  std::map<std::uint32_t, std::string_view> last_failures;
  std::mutex store_write;  // one writer of the store file at a time

  // Slot state transitions and waits: one mutex and condition variable for
  // all slots (waits are rare and short; a per-slot pair would cost every
  // start-up 1,000 constructions).  Never held across dlopen or init.
  std::mutex wait_mutex;
  std::condition_variable wait_cv;
  std::vector<std::pair<std::thread::id, std::uint32_t>> waiting;  // for cycle detection

  std::atomic<bool> started{false};
  std::atomic<int> batch{0};  // > 0 while start() loads: store writes wait for its end

  // ---- loader_setup.cpp ----------------------------------------------------
  void setup();
  /// (distribution, backend name) -> "m:<device>[=<kind>] ..." from the
  /// index's epload.devices group (a value "<backend> [<kind>]" or
  /// "<backend>:<kind>": see k_declared_kinds); a kind it does not know is a warning in
  /// `declaration_warnings`.
  std::map<std::pair<const Distribution*, std::string_view>, std::string> declared_by_distributions();
  std::vector<std::string> declaration_warnings;  ///< read by clash_warnings()
  bool is_disabled(const EntryPoint& ep, const char** by) const;
  void claim_known_devices(detail::Slot& s);
  /// Sets s.devices to its epload.devices names, then `declared` (the ELF
  /// section's) and `learned` (with their kinds), in the arena.
  void set_devices(detail::Slot& s, const std::vector<std::string_view>& declared,
                   const std::vector<detail::LearnedDevice>& learned);
  /// s.devices = its epload.devices names followed by `rest` (a stored list).
  void set_devices_after_meta(detail::Slot& s, std::string_view rest);
  std::string describe(const detail::Slot& s) const;
  /// Slot `s`'s library path, whole and NUL-terminated (see Slot::library).
  detail::CString library_of(const detail::Slot& s) const {
    if (s.library_base == detail::k_no_slot) return detail::CString(s.library);
    return detail::CString(index->search_paths()[s.library_base], s.library);
  }
  /// The stamps the libraries of slots `which` have now, in that order: one
  /// stat each, on two CPUs when there are many (a check of every library
  /// at 1,000 backends is ~2.5 ms of stat calls on one).  Reads only what
  /// is fixed once create() returns; takes no lock.
  std::vector<FileStamp> stamp_libraries(std::span<const std::uint32_t> which) const;
  void fail(detail::Slot& s, const std::string& cause);
  Error not_found(std::string_view name);
  void save_store();
  /// An earlier process died in `s`'s init, its file is unchanged, the mode
  /// is lazy and EPLOAD_ENABLE does not name it: skip it.  Registry held.
  bool crash_skipped(const detail::Slot& s) const;
  /// Records the outcome of a load of `s` for the store: its failure, or
  /// none since.  Registry mutex held.
  void remember_outcome(const detail::Slot& s, bool ok);

  // ---- loader.cpp ------------------------------------------------------------
  Result<void*> lookup_slow(std::string_view name);
  /// lookup_slow's steps, in order; each returns the table of `name` once a
  /// backend it loaded provides it, else null.  The backend that declares
  /// or learned `name` (`owner`), then, if it failed, the later ones that
  /// claim it too; `note` says so when the owner loaded without providing it.
  /// Each step ends at an interruption (Errc::interrupted): no other
  /// backend loads in the middle of a propagating KeyboardInterrupt.
  Result<void*> load_claimants(std::string_view name, std::uint32_t owner, std::string& note);
  /// The backends whose devices are not known yet.
  Result<void*> load_unknown(std::string_view name);
  /// The backends whose libraries changed since the store was written.
  Result<void*> load_changed(std::string_view name);
  Result<void> ensure_loaded(std::uint32_t i, std::string_view device);

  // ---- loader_load.cpp -------------------------------------------------------
  detail::LoadEnd load(detail::Slot& s);
  bool load_native(detail::Slot& s, detail::InitContext& ctx, std::int32_t abi);
  bool load_python(detail::Slot& s, detail::InitContext& ctx);
  bool refresh_knowledge(detail::Slot& s, detail::LoadKnowledge& k);
  void publish(detail::Slot& s, detail::InitContext& ctx);  // registry held

  detail::Slot& primary(std::uint32_t i) {
    return slots[slots[i].alias_of == detail::k_no_slot ? i : slots[i].alias_of];
  }
};

}  // namespace epload
