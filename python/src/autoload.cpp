// autoload.cpp — _native.open_loader(): the core's Loader (include/epload/
// loader.hpp) for the Python autoload, so that Python runs obey the rules
// the CLI and C++ hosts obey (switches, the learned-devices store, what a
// backend is and how its devices are known) by running the same code.
//
// The Loader decides what loads and when; the Python layer only imports and
// calls a backend when the Loader asks (PythonFront::load, src/loader/python_front.hpp, called
// with the GIL taken) and says which devices it provided.  Every call that
// may load releases the GIL first: a thread waiting for another thread's
// load of the same backend must not hold it, or that load (which needs the
// GIL to import) could never finish.
//
// A BaseException that is not an Exception (KeyboardInterrupt, SystemExit)
// raised by a backend interrupts its load: the Python loader keeps the
// exception object, the core ends the load as Errc::interrupted (nothing
// recorded, the slot unloaded), and the Loader call that ran it raises the
// same object again when it returns to Python, as stock PyTorch's loop,
// which catches Exception only, lets it through.
#include "autoload.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "epload/loader.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "gil.hpp"           // NoGil, WithGil: never pybind11's (see gil.hpp)
#include "python_front.hpp"  // the Python front's hooks and messages (src/loader/)
#include "torch_rules.hpp"   // PyTorch's group and device types (src/loader/)
#include "query.hpp"

namespace py = pybind11;

namespace epload::python {

namespace {

/// The exception that interrupted a backend's load in this thread, kept by
/// the Python loader until the Loader call that ran the load returns (a
/// strong reference; null: none).
thread_local PyObject* t_interrupt = nullptr;

/// Raises t_interrupt again, unchanged (its own traceback, no new context),
/// if a load in this Loader call was interrupted.  GIL held.
void raise_if_interrupted() {
  PyObject* value = t_interrupt;
  if (value == nullptr) return;
  t_interrupt = nullptr;
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(value));
  Py_INCREF(type);
  PyErr_Restore(type, value, PyException_GetTraceback(value));  // steals the three references
  throw py::error_already_set();
}

/// One autoload group's Loader, with the index it was built from.
class PyLoader {
 public:
  PyLoader(std::shared_ptr<const Index> index, std::unique_ptr<Loader> loader, std::string group)
      : m_index(std::move(index)), m_loader(std::move(loader)), m_eps(m_index->group(group)) {}

  std::size_t count() const { return m_eps.size(); }

  void start() {
    {
      NoGil release;
      m_loader->start();
    }
    raise_if_interrupted();
  }

  /// None when backend `i` is loaded, else its LoadError.
  py::object load(std::size_t i) {
    checked(i);
    return without_gil([&] { return m_loader->load(i); });
  }

  /// None when `device` is registered (loading its backend if needed), else
  /// its LoadError.
  py::object lookup(const std::string& device) {
    if (m_loader->find(device) != nullptr) return py::none();
    return without_gil([&] { return m_loader->lookup(device); });
  }

  /// None when backend `i`'s file is as the store knows it (or it was
  /// loaded now, having changed), else its LoadError.
  py::object verify(std::size_t i) {
    checked(i);
    return without_gil([&] { return m_loader->verify(i); });
  }

  bool ready(const std::string& device) const { return m_loader->find(device) != nullptr; }

  /// The address of the table a native backend registered `device` with
  /// (None until it is loaded): what a host hands its C code.
  py::object table(const std::string& device) const {
    void* t = m_loader->find(device);
    return t ? py::object(py::int_(reinterpret_cast<std::uintptr_t>(t))) : py::object(py::none());
  }

  /// What a host warns about before any load (python_front.hpp).
  std::vector<std::string> clash_warnings(bool torch) const { return epload::clash_warnings(*m_loader, torch); }

  py::object provider(const std::string& device) const {
    auto p = m_loader->provider(device);
    return p ? py::object(py::int_(*p)) : py::object(py::none());
  }

  /// (name, value, dist name, dist version, metadata dir) of backend `i`.
  py::tuple entry(std::size_t i) const {
    const EntryPoint& ep = m_eps[checked(i)];
    return py::make_tuple(std::string(ep.name), std::string(ep.value), std::string(ep.dist->name),
                          std::string(ep.dist->version),
                          py::reinterpret_steal<py::object>(fs_path(ep.dist->metadata_dir)));
  }

  py::object index_of(const std::string& name) const {
    for (std::size_t i = 0; i < m_eps.size(); ++i) {
      if (m_eps[i].name == name) return py::int_(i);
    }
    return py::none();
  }

  /// The core's description of backend `i` (BackendStatus, named fields).
  BackendStatus status(std::size_t i) const { return m_loader->backend(checked(i)); }

  /// Every known device (DeviceStatus), in backend order.
  std::vector<DeviceStatus> devices() const { return m_loader->devices(); }

  std::vector<std::size_t> load_order() const { return m_loader->load_order(); }
  std::string store_file() const { return m_loader->store_file(); }
  std::string store_note() const { return m_loader->store_note(); }
  std::string mode() const { return to_string(m_loader->mode()); }

 private:
  /// `i`, or IndexError when there is no backend `i`.
  std::size_t checked(std::size_t i) const {
    if (i >= m_eps.size()) throw py::index_error("no such backend");
    return i;
  }

  /// Runs `call` (a Loader call that may load, returning a Result) without
  /// the GIL; None when it succeeded, else its error (LoadError).
  template <typename Call>
  static py::object without_gil(Call call) {
    auto r = [&] {
      NoGil release;
      return call();
    }();
    raise_if_interrupted();
    return r ? py::object(py::none()) : py::cast(std::move(r.error()));
  }

  std::shared_ptr<const Index> m_index;
  std::unique_ptr<Loader> m_loader;
  std::span<const EntryPoint> m_eps;  // the backends, in the Loader's order
};

/// _native.NotNow: what the Python loader raises for "not now" (the
/// backend's module is itself being imported); set by register_autoload().
PyObject* g_not_now = nullptr;

/// "TypeName: message" of the Python exception `e`.
std::string describe_exception(py::error_already_set& e) {
  try {
    return py::str(e.type().attr("__name__")).cast<std::string>() + ": " + py::str(e.value()).cast<std::string>();
  } catch (py::error_already_set&) {
    return e.what();
  }
}

/// The Python loader: `fn(index)` returns a Loaded, raises NotNow (not now)
/// or raises what the backend raised (its failure).  Called by the Loader
/// without the GIL.
PythonFront::Load python_loader_of(py::object fn) {
  // Never released: a Loader lives as long as the process's autoload
  // session, and a release at interpreter shutdown could run without the GIL.
  PyObject* f = fn.release().ptr();
  return [f](const PythonBackend& b) -> Result<PythonLoaded> {
    WithGil gil;
    // An interruption on its way back to Python: no other backend runs.
    if (t_interrupt != nullptr) return Error{Errc::interrupted, "interrupted"};
    try {
      py::object got = py::reinterpret_borrow<py::object>(f)(b.index);
      return got.cast<PythonLoaded>();
    } catch (py::error_already_set& e) {
      if (e.matches(g_not_now)) return Error{Errc::unsupported, py::str(e.value()).cast<std::string>()};
      if (!e.matches(PyExc_Exception)) {
        // KeyboardInterrupt, SystemExit...: not the backend's failure.
        const std::string what = py::str(e.type().attr("__name__")).cast<std::string>();
        Py_XDECREF(t_interrupt);
        t_interrupt = e.value().inc_ref().ptr();
        return Error{Errc::interrupted, "interrupted by " + what};
      }
      return Error{Errc::backend, describe_exception(e)};
    } catch (const std::exception& e) {
      return Error{Errc::backend, std::string("the Python loader returned a bad value: ") + e.what()};
    } catch (...) {
      // Only the forced unwind of a thread CPython ends as it waits for the
      // GIL at exit (a backend's init that waited without it, in a daemon
      // thread) gets here: it stays, as in gil.hpp, and the exit goes on
      // with the program's status.
      gil_detail::stay();
    }
  };
}

/// `text` (a str) as UTF-8 bytes, surrogates kept (surrogatepass: a path
/// decoded with surrogateescape comes back byte for byte).
std::string utf8_of(py::handle text) {
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(text.ptr(), "utf-8", "surrogatepass"));
  if (!b) throw py::error_already_set();
  return b.cast<std::string>();
}

py::str str_of(const std::string& utf8) {
  PyObject* s = PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "surrogatepass");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

/// failure_message(group, name, cause, value=None, dist_path=None,
/// device=None, host=None): the core's wording (python_front.hpp), with the
/// Python values quoted as Python quotes them.
py::str failure_message_of(py::str group, py::str name, py::str cause, py::object value, py::object dist_path,
                           py::object device, py::object host) {
  const std::string g = utf8_of(group), gr = utf8_of(py::repr(group)), n = utf8_of(name), c = utf8_of(cause);
  const std::string v = value.is_none() ? "" : utf8_of(py::repr(value));
  const std::string d = dist_path.is_none() ? "" : utf8_of(dist_path);
  const std::string dr = device.is_none() ? "" : utf8_of(py::repr(device));
  const std::string hr = device.is_none() ? "" : utf8_of(py::repr(host));
  return str_of(failure_message(FailureText{g, gr, n, v, d, c, dr, hr}));
}

/// open_loader(paths, validation, use_cache, interpreter, group, mode,
///             ext_suffixes, loader) -> (status, reason, file, problem, Loader or None)
py::tuple open_loader(py::list paths, const std::string& validation, bool use_cache, py::bytes interpreter,
                      const std::string& group, const std::string& mode, std::vector<std::string> ext_suffixes,
                      py::object python_loader) {
  const std::vector<std::string> groups = {group, std::string(k_devices_group)};
  QueryAnswer a = [&] {
    profile::Span span(profile::Phase::total, "entry_points query");
    return run_query(paths, &groups, validation, "", use_cache, interpreter);
  }();
  if (!a.index) return py::make_tuple(a.status, a.reason, a.file, a.problem, py::none());
  LoaderOptions lo;
  lo.group = group;
  (void)apply_environment(lo);  // EPLOAD_ENABLE / EPLOAD_DISABLE; warned about by the caller
  const auto m = parse_load_mode(mode);
  if (!m) throw py::value_error("mode must be lazy, eager or off, not '" + mode + "'");
  lo.mode = *m;
  lo.use_store = use_cache;
  lo.ext_suffixes = std::move(ext_suffixes);
  PythonFront front;
  front.load = python_loader_of(std::move(python_loader));
  front.start_unknown = true;    // PyTorch uses devices from C++, past any lookup
  front.stop_at_failure = true;  // eager is PyTorch's loop
  front.callables_only = group == detail::k_torch_group;  // PyTorch calls each entry point
  std::unique_ptr<Loader> loader;
  {
    NoGil release;
    auto created = create_loader(a.index, std::move(lo), std::move(front));
    if (created) loader = std::move(created.value());
  }
  if (!loader) throw py::value_error("cannot create the loader");
  auto wrapped = std::make_unique<PyLoader>(a.index, std::move(loader), group);
  return py::make_tuple(a.status, a.reason, a.file, py::none(), py::cast(std::move(wrapped)));
}

}  // namespace

void register_autoload(py::module_& m) {
  // The core's enums and status, by name: the Python package reads fields,
  // never positions or message text.  module_local: another extension in
  // the process (torch's) has its own pybind11 registry.
  py::enum_<BackendState>(m, "State", py::module_local())
      .value("unloaded", BackendState::unloaded)
      .value("loading", BackendState::loading)
      .value("ready", BackendState::ready)
      .value("failed", BackendState::failed)
      .value("disabled", BackendState::disabled);
  py::enum_<BackendKind>(m, "Kind", py::module_local())
      .value("native", BackendKind::native)
      .value("python", BackendKind::python)
      .value("unresolved", BackendKind::unresolved);
  py::enum_<DeviceSource>(m, "Source", py::module_local())
      .value("declared", DeviceSource::declared)
      .value("learned", DeviceSource::learned)
      .value("section", DeviceSource::section);
  py::class_<BackendStatus>(m, "BackendStatus", py::module_local(),
                            "One backend as the core describes it (include/epload/loader.hpp).")
      .def_readonly("name", &BackendStatus::name)
      .def_readonly("value", &BackendStatus::value)
      .def_readonly("state", &BackendStatus::state)
      .def_readonly("kind", &BackendStatus::kind)
      .def_property_readonly("library",
                             [](const BackendStatus& b) { return py::reinterpret_steal<py::object>(fs_path(b.library)); })
      .def_readonly("error", &BackendStatus::error)
      .def_property_readonly("disabled_by",
                             [](const BackendStatus& b) {
                               return b.disabled_by.empty() ? py::object(py::none()) : py::object(py::str(b.disabled_by));
                             })
      .def_readonly("devices_known", &BackendStatus::devices_known)
      .def_readonly("devices_learned", &BackendStatus::devices_learned)
      .def_readonly("hook", &BackendStatus::hook)
      .def_readonly("devices", &BackendStatus::devices)
      .def_readonly("sources", &BackendStatus::sources)
      .def_readonly("kinds", &BackendStatus::kinds)
      .def_readonly("conflicts", &BackendStatus::conflicts)
      .def_readonly("last_failure", &BackendStatus::last_failure)
      .def_readonly("crashed_at", &BackendStatus::crashed_at);
  py::class_<DeviceStatus>(m, "DeviceStatus", py::module_local(), "One known device (include/epload/loader.hpp).")
      .def_readonly("name", &DeviceStatus::name)
      .def_readonly("backend", &DeviceStatus::backend)
      .def_readonly("source", &DeviceStatus::source)
      .def_readonly("ready", &DeviceStatus::ready);
  py::class_<Error>(m, "LoadError", py::module_local(), "Why a load or lookup did not give a device.")
      .def_readonly("message", &Error::message)
      .def_property_readonly("later", [](const Error& e) { return e.code == Errc::unsupported; },
                             "Not now: the backend's module is itself being imported, or a backend "
                             "is being loaded in this thread; nothing failed.");
  py::class_<PythonLoaded>(m, "Loaded", py::module_local(), "What the Python loader reports for a backend it ran.")
      .def(py::init([](const std::vector<std::pair<std::string, std::string>>& devices, bool known) {
             PythonLoaded out;
             for (const auto& [name, kind] : devices) out.devices.push_back({name, kind});
             out.known = known;
             return out;
           }),
           py::arg("devices"), py::arg("known"));
  // Kept for the life of the process, as the module that holds it.
  g_not_now = PyErr_NewException("epload._native.NotNow", PyExc_Exception, nullptr);
  if (g_not_now == nullptr) throw py::error_already_set();
  m.attr("NotNow") = py::reinterpret_borrow<py::object>(g_not_now);
  m.def("failure_message", &failure_message_of, py::arg("group"), py::arg("name"), py::arg("cause"),
        py::arg("value") = py::none(), py::arg("dist_path") = py::none(), py::arg("device") = py::none(),
        py::arg("host") = py::none(), "What a front shows about a backend that failed to load.");
  m.def(
      "pytorch_failure_message",
      [](const std::string& group, const std::string& name) { return pytorch_failure_message(group, name); },
      py::arg("group"), py::arg("name"), "PyTorch's RuntimeError text for a backend its eager loop could not load.");
  py::class_<PyLoader>(m, "Loader", "The core's Loader for one autoload group (include/epload/loader.hpp).")
      .def_property_readonly("count", &PyLoader::count)
      .def_property_readonly("mode", &PyLoader::mode)
      .def("start", &PyLoader::start)
      .def("load", &PyLoader::load, py::arg("index"))
      .def("lookup", &PyLoader::lookup, py::arg("device"))
      .def("verify", &PyLoader::verify, py::arg("index"))
      .def("ready", &PyLoader::ready, py::arg("device"))
      .def("table", &PyLoader::table, py::arg("device"))
      .def("clash_warnings", &PyLoader::clash_warnings, py::arg("torch"))
      .def("provider", &PyLoader::provider, py::arg("device"))
      .def("entry", &PyLoader::entry, py::arg("index"))
      .def("index_of", &PyLoader::index_of, py::arg("name"))
      .def("status", &PyLoader::status, py::arg("index"))
      .def("devices", &PyLoader::devices)
      .def("load_order", &PyLoader::load_order)
      .def("store_file", &PyLoader::store_file)
      .def("store_note", &PyLoader::store_note);
  m.def(
      "torch_device_types",
      [] {
        std::vector<std::string> out;
        for (std::string_view t : detail::k_torch_device_types) out.emplace_back(t);
        return out;
      },
      "PyTorch's own device types (a backend declaring one is never consulted for it under torch).");
  m.def("open_loader", &open_loader, py::arg("paths"), py::arg("validation"), py::arg("use_cache"),
        py::arg("interpreter"), py::arg("group"), py::arg("mode"), py::arg("ext_suffixes"), py::arg("loader"),
        "The index query for `group` (and epload.devices), then the core's Loader over it.");
}

}  // namespace epload::python
