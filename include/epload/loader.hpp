// epload/loader.hpp — the lazy device registry: device name -> backend,
// loaded on first lookup, exactly once.
//
// A Loader is built from an Index (the entry points of the autoload group,
// default "torch.backends").  Each entry point is a backend; a native backend
// is a shared library speaking epload/backend.h.  Creating a Loader loads
// nothing: it learns which devices each backend provides from the library's
// declared-devices section or from what earlier processes learned (a small
// store file next to the index cache).  start() runs the hooks (backends
// known to provide no device), or, in eager mode, every backend; a backend
// whose devices are not known yet loads at the first lookup of a name no
// known backend provides.  lookup("npu") loads
// the backend providing "npu" on first use; afterwards it touches memory only
// (no allocation, no system call, no lock).
//
// Thread safety: every member function may be called from any thread at any
// time, also from inside a backend's init (through the host table).  A
// backend's init runs at most once per process however many threads look up
// its devices at the same moment; no lock is held across dlopen or init.
#pragma once

#include <cstdint>      // timings
#include <memory>       // unique_ptr, shared_ptr<const Index>
#include <optional>     // parse_load_mode
#include <string>       // messages, paths
#include <string_view>  // device names
#include <vector>       // status lists

#include "epload/index.hpp"
#include "epload/result.hpp"

struct EploadHost;  // epload/backend.h (a C struct)

namespace epload {

/// When backends are loaded.
enum class LoadMode : std::uint8_t {
  lazy,   ///< on the first lookup of a device they provide (default)
  eager,  ///< all of them at start(), in index order (PyTorch's behaviour)
  off,    ///< never; lookups fail saying autoload is off
};

/// "lazy", "eager", "off".
const char* to_string(LoadMode mode);
/// Parses "lazy" | "eager" | "off"; nullopt otherwise.
std::optional<LoadMode> parse_load_mode(std::string_view text);

/// What implements a backend.
enum class BackendKind : std::uint8_t {
  native,      ///< a shared library speaking backend.h
  python,      ///< a Python module (loaded by the Python layer, if any)
  unresolved,  ///< no library or module found; the backend is failed
};

/// Where a backend is in its life.  unloaded -> loading -> ready | failed.
enum class BackendState : std::uint8_t { unloaded, loading, ready, failed, disabled };

const char* to_string(BackendKind kind);
const char* to_string(BackendState state);

/// How a device name is known without loading its backend.
enum class DeviceSource : std::uint8_t {
  declared,  ///< the backend's distribution declares it (entry-point group epload.devices)
  learned,   ///< the backend registered it when it was loaded (now or earlier)
  section,   ///< the library's epload_devices ELF section says so
};

const char* to_string(DeviceSource source);  ///< "declared", "learned", "section"

/// The entry-point group in which a distribution declares its backends'
/// devices: `<device> = <backend entry-point name>`.
inline constexpr std::string_view k_devices_group = "epload.devices";

/// How a Loader behaves.  apply_environment() (epload/switches.hpp) fills it
/// from the environment.
struct LoaderOptions {
  LoadMode mode = LoadMode::lazy;
  /// The entry-point group whose entry points are the backends.
  std::string group = "torch.backends";
  /// Non-empty: only these backends may load (entry-point or distribution
  /// names; distribution names compare as importlib normalizes them).
  std::vector<std::string> enable;
  /// These backends never load (same matching as `enable`).
  std::vector<std::string> disable;
  /// Where the learned-devices store lives; empty: the index cache's
  /// directory (resolve_cache_dir()).
  std::string cache_dir;
  /// false: neither read nor write the learned-devices store.
  bool use_store = true;
  /// true: stat every known library at create() and re-read the ones that
  /// changed, so that every listed device is current (epload devices).
  /// false (default): trust the store until a backend is loaded, which is
  /// when its library is checked; a stale name is corrected then.
  bool check_libraries = false;
  /// Extension-module suffixes in importlib's order: the target
  /// interpreter's importlib.machinery.EXTENSION_SUFFIXES (the CLI passes
  /// --python's; a Python host its own).  Empty: the EXT_SUFFIX of the
  /// interpreter whose directory the search path is (".../python3.11/
  /// site-packages": ".cpython-311-x86_64-linux-gnu.so"), ".abi3.so", ".so",
  /// then the one "<module>.cpython-3*-<arch>.so" there may be.
  std::vector<std::string> ext_suffixes;
};

/// A snapshot of one backend.
struct BackendStatus {
  std::string name;     ///< entry point name
  std::string dist;     ///< distribution name
  std::string value;    ///< entry point value
  BackendKind kind = BackendKind::unresolved;
  BackendState state = BackendState::unloaded;
  std::string library;  ///< native: the shared library; python: the module file
  std::string symbol;   ///< native: the init function
  /// Failed, disabled or unresolved: the whole message (backend, library,
  /// cause, how to disable it).  Empty otherwise.
  std::string error;
  /// Disabled: the switch that keeps it from loading ("EPLOAD_DISABLE" or
  /// "EPLOAD_ENABLE").  Empty otherwise.
  std::string disabled_by;
  /// The message of its last failed load, in this process or an earlier
  /// one (remembered in the learned-devices store until it loads); for
  /// display only: a load is always tried again.  Empty when none.
  std::string last_failure;
  /// When an earlier process died in its init (UTC, "2026-11-29T06:10:03Z"),
  /// as long as its files are the ones that crashed; empty otherwise.  Lazy
  /// mode then skips it (it fails without being loaded) unless EPLOAD_ENABLE
  /// is set (and names it); eager mode loads it.
  std::string crashed_at;
  /// The devices it provides as far as known (declared, learned, or
  /// registered in this process), in its order; how each is known and its
  /// kind ("" unless learned with one) at the same positions.
  std::vector<std::string> devices;
  std::vector<DeviceSource> sources;
  std::vector<std::string> kinds;
  bool devices_known = false;  ///< false: only loading it will tell
  /// A load of its current file has shown what it registers: its learned
  /// devices are complete, and a kind its distribution declares no longer
  /// counts (the kinds above are what it registered).
  bool devices_learned = false;
  bool hook = false;           ///< known to provide no device: runs at start
  /// Another backend that is the same file and init (two paths, one file);
  /// this one is never loaded itself.  Empty otherwise.
  std::string alias_of;
  /// Devices this backend also provides but an earlier one (index order)
  /// owns, one message each.
  std::vector<std::string> conflicts;
  std::int64_t dlopen_ns = 0;  ///< time in dlopen (or the Python import)
  std::int64_t init_ns = 0;    ///< time in its init
  std::int64_t load_ns = 0;    ///< whole load: checks, dlopen, dlsym, init, publication
  int load_seq = -1;           ///< 0 for the first backend loaded in this process, ...
};

/// A snapshot of one known device.
struct DeviceStatus {
  std::string name;
  std::size_t backend = 0;  ///< index into backends()
  DeviceSource source = DeviceSource::declared;
  bool ready = false;       ///< registered and handed out by lookups
};

/// The lazy device registry.  Not copyable or movable (threads and backends
/// hold pointers to it); owned through unique_ptr.
class Loader {
 public:
  /// Builds the registry for the backends of `options.group` in `index`.
  /// Loads no backend and runs no code of one.  Per native backend it costs
  /// nothing when the store knows it, else resolving its library and reading
  /// one ELF section.  Fails only on unusable options.
  static Result<std::unique_ptr<Loader>> create(std::shared_ptr<const Index> index,
                                                LoaderOptions options = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Call when the host has finished importing: runs the hooks (lazy),
  /// every backend in index order (eager) or nothing (off).  Backend failures do
  /// not stop it; they show in backends().  Later calls do nothing, unless a
  /// load was interrupted (Errc::interrupted, from the Python front): that
  /// stops it, and the next call goes on.
  void start();

  /// Loads backend `index` (an index into backends()) if it is not loaded
  /// yet; its failure (Errc::backend) names it, the cause and the remedy.
  /// Errc::interrupted: a Python KeyboardInterrupt or SystemExit passed
  /// through the load; the backend is unloaded and nothing is recorded.
  Result<void> load(std::size_t index);

  /// The device table `device` was registered with, loading its backend if
  /// needed.  An unknown name loads the backends whose devices are not yet
  /// known, one at a time in index order, until one provides it.  Errors
  /// (Errc::not_found, Errc::backend, Errc::invalid_argument, Errc::interrupted) name the
  /// backend, library and cause, or list the known devices.  After the first
  /// success for a name: no allocation, no system call, no lock.
  Result<void*> lookup(std::string_view device);

  /// Checks backend `index`'s file against what the store says of it (one
  /// stat, once per process); a changed backend is loaded now, to learn what
  /// it provides.  For an irreversible use of what the store says (the
  /// PyTorch front registering a learned PrivateUse1 name ahead).
  Result<void> verify(std::size_t index);

  /// The table of `device` if it is already loaded, else nullptr.  Never
  /// loads anything.  Allocation-free and lock-free.
  void* find(std::string_view device) const noexcept;

  LoadMode mode() const;
  /// Every backend in index order.
  std::vector<BackendStatus> backends() const;
  /// One backend (an index into backends(), which must be in range): what
  /// backends() gives for it, without building the other 999.
  BackendStatus backend(std::size_t index) const;
  /// The backend that provides `device` as far as known now (declared,
  /// learned or registered), or nullopt.  Loads nothing.
  std::optional<std::size_t> provider(std::string_view device) const;
  /// Every known device, in order of its backend then its declaration.
  std::vector<DeviceStatus> devices() const;
  /// Indexes into backends() in the order they were loaded in this process.
  std::vector<std::size_t> load_order() const;
  /// The learned-devices store file ("" when not used) and, if it could not
  /// be read or written, why (for --verbose).
  std::string store_file() const;
  std::string store_note() const;

  /// The registry itself (slots, devices, locks), defined in src/loader:
  /// opaque here, named so that the loader's C callbacks can reach it.
  struct State;

 private:
  friend struct LoaderAccess;  // the library's own fronts (src/loader/)
  Loader();
  std::unique_ptr<State> m;
};

}  // namespace epload
