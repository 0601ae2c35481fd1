// python_front.hpp — what the Python package (python/src/) hands a Loader and
// no C++ host needs: its loader of Python backends and the two rules of a
// Python host (load the backends whose devices are unknown at start, stop an
// eager start at the first failure, as PyTorch's loop does).  Internal: the
// public loader.hpp holds only what a C++ host uses.
#pragma once

#include <cstddef>      // index
#include <functional>   // PythonFront::Load
#include <memory>       // unique_ptr, shared_ptr<const Index>
#include <string>       // device names
#include <string_view>  // backend fields
#include <vector>       // device lists

#include "epload/loader.hpp"

namespace epload {

/// A Python backend, as handed to PythonFront::load.
struct PythonBackend {
  std::size_t index = 0;    ///< its position in backends()
  std::string_view name;    ///< entry point name
  std::string_view value;   ///< "module:attr"
  std::string_view module;
  std::string_view attr;
  std::string_view dist;    ///< distribution name
};

/// A device a Python backend provided when the Python layer loaded it.
struct PythonDevice {
  std::string name;
  /// How it provided it, remembered with the device: "attr" (an attribute
  /// of the host module), "privateuse1" (PyTorch's PrivateUse1 name), ...;
  /// [a-z0-9_]{0,15}.
  std::string kind;
};

/// What PythonFront::load reports for a backend it ran.
struct PythonLoaded {
  std::vector<PythonDevice> devices;
  /// false: what the backend provided cannot be told (it was imported
  /// before, or it removed a host attribute): `devices` are registered but
  /// nothing is learned, so its devices stay unknown.
  bool known = true;
};

/// The Python package's hooks into a Loader.
struct PythonFront {
  /// Imports and calls a Python backend and returns the devices it
  /// provided, which the Loader registers and remembers.  Null: Python
  /// backends are listed but not loaded.  Set: a backend whose module file
  /// is not found under its distribution's search path is a Python backend
  /// too (the Python layer imports it as importlib finds it; nothing is
  /// remembered for it).  An error with code Errc::unsupported means "not
  /// now" (its module is itself being imported): the backend stays
  /// unloaded, to be tried again.
  using Load = std::function<Result<PythonLoaded>(const PythonBackend& backend)>;
  Load load;
  /// Lazy start() also loads the backends whose devices are not known yet
  /// (they may be hooks, and their devices are learned for the next run):
  /// a Python host cannot route every use of a device through lookup()
  /// (PyTorch uses devices from C++).
  bool start_unknown = false;
  /// Eager start() stops at the first backend that fails (PyTorch's loop).
  bool stop_at_failure = false;
  /// The group's entry points are Python callables only (PyTorch's): a
  /// native library there is imported in eager mode, as PyTorch does (and
  /// fails as it does), and in lazy mode fails at start() without being
  /// loaded (detail::native_in_torch_group).  Otherwise (a host's own group)
  /// native libraries load through dlopen, as in every front.
  bool callables_only = false;
};

/// What a host should warn about before any load, one line each naming both
/// sides: a device two backends declare (the later one's conflict), and,
/// with `torch`, a device that is one of PyTorch's own types
/// (torch_rules.hpp).  Cheap: it looks at the device table and at the
/// backends that have an outcome only.
std::vector<std::string> clash_warnings(const Loader& loader, bool torch);

/// Loader::create with the Python front's hooks.
Result<std::unique_ptr<Loader>> create_loader(std::shared_ptr<const Index> index, LoaderOptions options,
                                              PythonFront front);

/// True while the calling thread runs PythonFront::load (a Python backend's
/// import and call).  A lookup of a device no backend is known to provide,
/// made from there, loads no other backend (it would run in the middle of
/// this one: torch._register_device_module's hasattr probes): it answers
/// Errc::unsupported, "not there yet".
bool in_python_load();

/// What the Python front shows about a backend that failed to load; its
/// wording lives here only.  The Python values arrive quoted as Python
/// quotes them (repr): `*_repr`.
struct FailureText {
  std::string_view group, group_repr;  ///< the autoload group
  std::string_view name;               ///< the backend (entry point name)
  std::string_view value_repr;         ///< its entry point value; empty: not said
  std::string_view dist_path;          ///< its distribution's metadata directory; empty: not said
  std::string_view cause;              ///< "ValueError: ..." or the core's message
  std::string_view device_repr, host_repr;  ///< the device asked for on its host; empty: none
};

/// "[Device 'npu' of module 'torch' is unavailable: ]Failed to load the
/// backend extension: <name>[ (<value> from <dist path>)]: <cause>. You can
/// disable ... or this backend alone with EPLOAD_DISABLE=<name>."
std::string failure_message(const FailureText& text);

/// PyTorch's own RuntimeError text for a backend that failed in its eager
/// loop (the group's switch named as PyTorch names it).
std::string pytorch_failure_message(std::string_view group, std::string_view name);

}  // namespace epload
