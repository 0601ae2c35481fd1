// autoload.cpp — _native.open_loader(): the core's Loader (include/epload/
// loader.hpp) for the Python autoload, so that Python runs obey the rules
// the CLI and C++ hosts obey (switches, the learned-devices store, what a
// backend is and how its devices are known) by running the same code.
//
// The Loader decides what loads and when; the Python layer only imports and
// calls a backend when the Loader asks (LoaderOptions::python_loader, called
// with the GIL taken) and says which devices it provided.  Every call that
// may load releases the GIL first: a thread waiting for another thread's
// load of the same backend must not hold it, or that load (which needs the
// GIL to import) could never finish.
#include "autoload.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "epload/loader.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "query.hpp"

namespace py = pybind11;

namespace epload::python {

namespace {

/// One autoload group's Loader, with the index it was built from.
class PyLoader {
 public:
  PyLoader(std::shared_ptr<const Index> index, std::unique_ptr<Loader> loader, std::string group)
      : m_index(std::move(index)), m_loader(std::move(loader)), m_eps(m_index->group(group)) {}

  std::size_t count() const { return m_eps.size(); }

  void start() {
    py::gil_scoped_release release;
    m_loader->start();
  }

  /// None when backend `i` is loaded, else (error code name, message).
  py::object load(std::size_t i) {
    checked(i);
    return without_gil([&] { return m_loader->load(i); });
  }

  /// None when `device` is registered (loading its backend if needed), else
  /// (error code name, message).
  py::object lookup(const std::string& device) {
    if (m_loader->find(device) != nullptr) return py::none();
    return without_gil([&] { return m_loader->lookup(device); });
  }

  /// None when backend `i`'s file is as the store knows it (or it was
  /// loaded now, having changed), else (error code name, message).
  py::object verify(std::size_t i) {
    checked(i);
    return without_gil([&] { return m_loader->verify(i); });
  }

  bool ready(const std::string& device) const { return m_loader->find(device) != nullptr; }

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

  /// The core's description of backend `i` (BackendStatus): (state, kind,
  /// library, error, devices_known, hook, ((device, source, kind), ...)).
  py::tuple status(std::size_t i) const {
    const BackendStatus b = m_loader->backend(checked(i));
    py::list devices;
    for (std::size_t k = 0; k < b.devices.size(); ++k) {
      devices.append(py::make_tuple(b.devices[k], to_string(b.sources[k]), b.kinds[k]));
    }
    return py::make_tuple(to_string(b.state), to_string(b.kind),
                          py::reinterpret_steal<py::object>(fs_path(b.library)), b.error, b.devices_known,
                          b.hook, py::tuple(devices));
  }

  /// Every known device: ((name, backend index, source), ...), backend order.
  py::list devices() const {
    py::list out;
    for (const DeviceStatus& d : m_loader->devices()) out.append(py::make_tuple(d.name, d.backend, to_string(d.source)));
    return out;
  }

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
  /// the GIL; None when it succeeded, else outcome() of its error.
  template <typename Call>
  static py::object without_gil(Call call) {
    auto r = [&] {
      py::gil_scoped_release release;
      return call();
    }();
    return r ? py::object(py::none()) : outcome(r.error());
  }

  static py::object outcome(const Error& e) {
    const char* code = e.code == Errc::backend        ? "backend"
                       : e.code == Errc::unsupported  ? "later"
                       : e.code == Errc::not_found    ? "not_found"
                                                      : "invalid";
    return py::make_tuple(code, e.message);
  }

  std::shared_ptr<const Index> m_index;
  std::unique_ptr<Loader> m_loader;
  std::span<const EntryPoint> m_eps;  // the backends, in the Loader's order
};

/// The Python loader: `fn(index)` returns (devices, known) with devices a
/// sequence of (name, kind), or a str: the failure ("" + "later:" prefix:
/// not now).  Called by the Loader without the GIL.
LoaderOptions::PythonLoaderFn python_loader_of(py::object fn) {
  // Never released: a Loader lives as long as the process's autoload
  // session, and a release at interpreter shutdown could run without the GIL.
  PyObject* f = fn.release().ptr();
  return [f](const PythonBackend& b) -> Result<PythonLoaded> {
    py::gil_scoped_acquire gil;
    try {
      py::object got = py::reinterpret_borrow<py::object>(f)(b.index);
      if (py::isinstance<py::str>(got)) {
        std::string why = got.cast<std::string>();
        if (why.starts_with("later:")) return Error{Errc::unsupported, why.substr(6)};
        return Error{Errc::backend, why};
      }
      auto t = got.cast<py::tuple>();
      PythonLoaded out;
      for (py::handle d : t[0]) {
        auto pair = d.cast<py::tuple>();
        out.devices.push_back({pair[0].cast<std::string>(), pair[1].cast<std::string>()});
      }
      out.known = t[1].cast<bool>();
      return out;
    } catch (py::error_already_set& e) {
      return Error{Errc::backend, std::string("the Python loader raised: ") + e.what()};
    } catch (const std::exception& e) {
      return Error{Errc::backend, std::string("the Python loader returned a bad value: ") + e.what()};
    }
  };
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
  lo.start_unknown = true;     // PyTorch uses devices from C++, past any lookup
  lo.stop_at_failure = true;   // eager is PyTorch's loop
  lo.python_loader = python_loader_of(std::move(python_loader));
  std::unique_ptr<Loader> loader;
  {
    py::gil_scoped_release release;
    auto created = Loader::create(a.index, std::move(lo));
    if (created) loader = std::move(created.value());
  }
  if (!loader) throw py::value_error("cannot create the loader");
  auto wrapped = std::make_unique<PyLoader>(a.index, std::move(loader), group);
  return py::make_tuple(a.status, a.reason, a.file, py::none(), py::cast(std::move(wrapped)));
}

}  // namespace

void register_autoload(py::module_& m) {
  py::class_<PyLoader>(m, "Loader", "The core's Loader for one autoload group (include/epload/loader.hpp).")
      .def_property_readonly("count", &PyLoader::count)
      .def_property_readonly("mode", &PyLoader::mode)
      .def("start", &PyLoader::start)
      .def("load", &PyLoader::load, py::arg("index"))
      .def("lookup", &PyLoader::lookup, py::arg("device"))
      .def("verify", &PyLoader::verify, py::arg("index"))
      .def("ready", &PyLoader::ready, py::arg("device"))
      .def("provider", &PyLoader::provider, py::arg("device"))
      .def("entry", &PyLoader::entry, py::arg("index"))
      .def("index_of", &PyLoader::index_of, py::arg("name"))
      .def("status", &PyLoader::status, py::arg("index"))
      .def("devices", &PyLoader::devices)
      .def("load_order", &PyLoader::load_order)
      .def("store_file", &PyLoader::store_file)
      .def("store_note", &PyLoader::store_note);
  m.def("open_loader", &open_loader, py::arg("paths"), py::arg("validation"), py::arg("use_cache"),
        py::arg("interpreter"), py::arg("group"), py::arg("mode"), py::arg("ext_suffixes"), py::arg("loader"),
        "The index query for `group` (and epload.devices), then the core's Loader over it.");
}

}  // namespace epload::python
