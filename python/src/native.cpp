// native.cpp — epload._native: the one call the Python layer makes per query.
//
// epload.entry_points() must cost a fraction of importlib.metadata's, so the
// boundary is a single call that takes the raw sys.path and returns the
// requested groups: EntryPoint objects made here (objects.hpp, the one costly
// part), with distributions as plain tuples; the rest of importlib's shape
// (selection, EntryPoints, SelectableGroups) is the pure-Python layer's.
// Per call:
//
//   1. The key (interpreter, validation, cache directory, search paths,
//      groups) picks a long-lived Catalog from a small process-wide table;
//      the Catalog re-validates its index with a few stats and rebuilds it
//      when the file system changed (or the current directory, when a path
//      is relative).  The Catalog of a group asked later in the process reads
//      its group through the first Catalog of the same sys.path (make_catalog()
//      sibling), whose `full` check then covers both.
//      The GIL is released meanwhile, so other threads run during the stats.
//   2. Only the requested groups are converted to Python objects (for
//      entry_points(), EntryPoint objects made here: objects.hpp).  Group
//      strings are created once per group; distributions are returned once in
//      a side table that entry points refer to by position, so a query for
//      1,000 entry points creates ~3,000 strings, not 6,000.
//
// The autoload asks open_loader() instead (autoload.cpp): the same query,
// then the core's Loader over the group's entry points.
//
// Strings that come from entry_points.txt were validated as UTF-8 by the
// scanner and are decoded strictly; paths are bytes on Linux and are decoded
// with the file-system encoding (surrogateescape), exactly as os.listdir()
// would give them to importlib.
#include <Python.h>
#include <pthread.h>  // pthread_atfork
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // the switches' lists

#include <memory>
#include <mutex>
#include <new>  // placement new: the table's lock made anew in a child
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "epload/cache.hpp"
#include "epload/entry_point.hpp"
#include "epload/index.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "autoload.hpp"
#include "gil.hpp"  // NoGil, WithGil: never pybind11's (see gil.hpp)
#include "objects.hpp"
#include "query.hpp"
#include "walk.hpp"

namespace py = pybind11;

namespace epload::python {

PyObject* text(std::string_view s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
}

PyObject* fs_path(std::string_view s) {
  return PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
}

namespace {

// ---- the Catalog table ------------------------------------------------------

// One Catalog per key, for the life of the process.  A program that walks
// through many different sys.path values would grow this without bound, so
// it is simply emptied past k_max_catalogs (Catalogs are cheap to recreate:
// the next get() reads the cache file again).
constexpr std::size_t k_max_catalogs = 32;

std::mutex g_catalogs_mutex;
std::unordered_map<std::string, std::shared_ptr<Catalog>>* g_catalogs = nullptr;

// fork(): the child has only the thread that forked, which held the GIL;
// any other thread may have been inside this table or a Catalog at that
// moment, with the GIL released and a lock taken (a Catalog holds its lock
// across a refresh), and that lock stays taken in the child for ever: its
// owner does not exist there, and the child's first query would wait on it.
// So the child forgets the table: a fresh lock, no Catalog, and its first
// query reads the cache file again (a hit, a few stats more).  The parent's
// Catalogs stay in the child's memory as they were, never touched again (one
// may be half-changed).  This is the one design that holds whatever the
// other threads were doing: a prepare handler that took every lock first
// would have to wait for a refresh to end, and a refresh can wait for the
// GIL (cache_overlap.hpp's early work), which the forking thread holds.
void forget_catalogs_in_child() {
  new (&g_catalogs_mutex) std::mutex();  // the old one may be locked: not destroyed
  g_catalogs = nullptr;                  // the old table is left as it is
  // The parent's threads inside a NoGil are not in the child (the forking
  // thread holds the GIL): nothing for its exit to wait for.
  gil_detail::g_without_gil.store(0, std::memory_order_relaxed);
}

// The key without the groups (self-delimiting: the path list is counted),
// shared by the Catalogs of one sys.path that differ in their groups.
std::string catalog_base_key(const CacheOptions& o) {
  std::string k;
  auto field = [&k](std::string_view s) {
    k += std::to_string(s.size());
    k += ':';
    k += s;
  };
  field(o.interpreter);
  field(o.cache_dir);
  field(o.validation == Validation::full ? "f" : "p");
  field(o.use_cache ? "c" : "n");
  k += std::to_string(o.search_paths.size());
  k += ':';
  for (const std::string& p : o.search_paths) field(p);
  return k;
}

std::string catalog_key(const CacheOptions& o) {
  std::string k = catalog_base_key(o);
  k += std::to_string(o.groups.size());
  k += ':';
  for (const std::string& g : o.groups) {
    k += std::to_string(g.size());
    k += ':';
    k += g;
  }
  return k;
}

std::shared_ptr<Catalog> catalog_for(const CacheOptions& options) {
  const std::string key = catalog_key(options);
  std::lock_guard lock(g_catalogs_mutex);
  if (g_catalogs == nullptr) {
    // Never destroyed: Python may still call in from a daemon thread while
    // the interpreter (and static destructors) shut down.
    g_catalogs = new std::unordered_map<std::string, std::shared_ptr<Catalog>>();
  }
  auto it = g_catalogs->find(key);
  if (it != g_catalogs->end()) return it->second;
  if (g_catalogs->size() >= k_max_catalogs) g_catalogs->clear();
  // The first Catalog of this sys.path with other groups lends its index
  // (see make_catalog()); the others were made with it as sibling.
  std::shared_ptr<Catalog> sibling;
  const std::string base = catalog_base_key(options);
  for (const auto& [k, c] : *g_catalogs) {
    if (k.starts_with(base) && !has_sibling(*c)) {
      sibling = c;
      break;
    }
  }
  auto catalog = make_catalog(options, std::move(sibling));
  g_catalogs->emplace(key, catalog);
  return catalog;
}

const char* errc_name(Errc c) {
  switch (c) {
    case Errc::io: return "io";
    case Errc::parse: return "parse";
    case Errc::encoding: return "encoding";
    case Errc::unsupported: return "unsupported";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::not_found: return "not_found";
    case Errc::cache: return "cache";
    case Errc::backend: return "backend";
    case Errc::interrupted: return "interrupted";
  }
  return "unknown";
}

// Encodes one sys.path entry (a str) to the bytes the file system sees.
bool encode_path(PyObject* item, std::string& out) {
  Ref b(PyUnicode_EncodeFSDefault(item));
  if (b.p == nullptr) return false;
  out.assign(PyBytes_AS_STRING(b.p), static_cast<std::size_t>(PyBytes_GET_SIZE(b.p)));
  return true;
}

}  // namespace

std::string_view metadata_dir(const Distribution& d, std::string_view cwd, std::string& scratch) {
  const std::string_view dir = d.metadata_dir;
  if (cwd.empty() || dir.starts_with('/')) return dir;
  scratch.assign(cwd);
  if (!cwd.ends_with('/')) scratch.append(1, '/');
  scratch.append(dir);
  return scratch;
}

PyObject* convert(const std::vector<std::span<const EntryPoint>>& parts, std::string_view cwd) {
  Ref eps(PyTuple_New(static_cast<Py_ssize_t>(entry_point_count(parts))));
  if (eps.p == nullptr) return nullptr;
  Ref dists_list(PyList_New(0));
  if (dists_list.p == nullptr) return nullptr;
  std::unordered_map<const Distribution*, Py_ssize_t> dist_pos;

  std::string joined;
  Py_ssize_t i = 0;
  const bool done = for_each_entry_point(parts, [&](const EntryPoint& ep, PyObject* group) {
    auto [it, fresh] = dist_pos.try_emplace(ep.dist, PyList_GET_SIZE(dists_list.p));
    if (fresh) {
      const Distribution& d = *ep.dist;
      const std::string_view dir = metadata_dir(d, cwd, joined);
      Ref row(Py_BuildValue("(NNNN)", text(d.name), text(d.version), fs_path(dir), text("")));
      if (row.p == nullptr || PyList_Append(dists_list.p, row.p) != 0) return false;
    }
    Ref name(text(ep.name));
    Ref value(text(ep.value));
    Ref pos(PyLong_FromSsize_t(it->second));
    if (name.p == nullptr || value.p == nullptr || pos.p == nullptr) return false;
    PyObject* row = PyTuple_New(4);
    if (row == nullptr) return false;
    Py_INCREF(group);
    PyTuple_SET_ITEM(row, 0, name.release());
    PyTuple_SET_ITEM(row, 1, value.release());
    PyTuple_SET_ITEM(row, 2, group);
    PyTuple_SET_ITEM(row, 3, pos.release());
    PyTuple_SET_ITEM(eps.p, i++, row);
    return true;
  });
  if (!done) return nullptr;
  Ref dists(PyList_AsTuple(dists_list.p));
  if (dists.p == nullptr) return nullptr;
  return PyTuple_Pack(2, dists.p, eps.p);
}

namespace {

/// The options of one query (see query() below for the arguments).  Raises
/// on bad arguments.
CacheOptions query_options(py::list paths, const std::vector<std::string>* groups, const std::string& validation,
                           const std::string& cache_dir, bool use_cache, py::bytes interpreter) {
  CacheOptions options;
  options.search_paths.resize(static_cast<std::size_t>(PyList_GET_SIZE(paths.ptr())));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(paths.ptr()); ++i) {
    PyObject* item = PyList_GET_ITEM(paths.ptr(), i);
    if (!PyUnicode_Check(item)) throw py::type_error("search paths must be str");
    if (!encode_path(item, options.search_paths[static_cast<std::size_t>(i)])) {
      throw py::error_already_set();
    }
  }
  if (validation == "full") {
    options.validation = Validation::full;
  } else if (validation == "paths") {
    options.validation = Validation::paths;
  } else {
    throw py::value_error("validation must be 'full' or 'paths', not '" + validation + "'");
  }
  options.use_cache = use_cache;
  // Resolved now ($EPLOAD_CACHE_DIR may change between calls): the Catalog
  // table is keyed by the directory actually used.
  options.cache_dir = cache_dir;
  if (use_cache) options.cache_dir = resolve_cache_dir(options);
  options.interpreter = std::string(interpreter);
  // A cache hit then reads only these groups.
  if (groups != nullptr) options.groups = *groups;
  return options;
}

/// A message or reason as Python text: it may quote paths, which are
/// bytes, so it is decoded like a path.
py::object loose(std::string_view s) {
  auto o = py::reinterpret_steal<py::object>(fs_path(s));
  if (!o) throw py::error_already_set();
  return o;
}

/// The status, reason and cache file of `report` as Python objects.
QueryAnswer answer_of(const CacheReport& report) {
  return QueryAnswer{py::str(to_string(report.status)), loose(report.reason), loose(report.file), py::none(),
                     nullptr};
}

}  // namespace

QueryAnswer run_query(py::list paths, const std::vector<std::string>* groups,
                      const std::string& validation, const std::string& cache_dir, bool use_cache,
                      py::bytes interpreter, const WhileValidating& while_validating) {
  const CacheOptions options = query_options(paths, groups, validation, cache_dir, use_cache, interpreter);
  CacheReport report;
  std::shared_ptr<const Index> index;
  std::string error_kind, error_message;
  {
    NoGil release;
    auto catalog = catalog_for(options);
    auto got = catalog_get(*catalog, &report, while_validating);
    if (got) {
      index = std::move(got.value());
    } else {
      error_kind = errc_name(got.error().code);
      error_message = got.error().message;
    }
  }
  if (!report.shipped_problem.empty()) {
    // Said even unasked, once per process (the GIL orders this flag):
    // EPLOAD_INDEX names a file someone meant to be used.
    static bool said = false;
    if (!said) {
      said = true;
      PySys_FormatStderr("epload: warning: %s; working without it (EPLOAD_INDEX)\n",
                         report.shipped_problem.c_str());
    }
  }
  QueryAnswer a = answer_of(report);
  if (!index) {
    a.problem = py::make_tuple(error_kind, loose(error_message));
  } else if (const Distribution* bad = index->first_error()) {
    a.problem = py::make_tuple("error", loose(bad->error));
  } else {
    a.index = std::move(index);
  }
  return a;
}

QueryAnswer listing_query(py::list paths, const std::string& cache_dir, bool use_cache, py::bytes interpreter) {
  const CacheOptions options = query_options(paths, nullptr, "full", cache_dir, use_cache, interpreter);
  CacheReport report;
  std::shared_ptr<const Index> index;
  {
    NoGil release;
    std::shared_ptr<Catalog> catalog;
    {
      std::lock_guard lock(g_catalogs_mutex);
      if (g_catalogs != nullptr) {
        const auto it = g_catalogs->find(catalog_key(options));
        if (it != g_catalogs->end()) catalog = it->second;
      }
    }
    if (catalog) index = catalog_listing(*catalog, &report);
  }
  if (!index || index->first_error() != nullptr) return QueryAnswer{};
  QueryAnswer a = answer_of(report);
  a.index = std::move(index);
  return a;
}

namespace {

/// query(paths, groups, validation, cache_dir, use_cache, interpreter, cwd, objects)
///   paths:      list of str (sys.path as it is now; relative entries allowed)
///   groups:     None (all groups, importlib order), or a tuple of group names
///   validation: "full" or "paths"
///   cwd:        the current directory's bytes when a path is relative (the
///               metadata directories are returned joined to it), else b""
///   objects:    True: eps is a list of EntryPoint objects and dists None,
///               when bind_classes() succeeded
/// Returns (status, reason, cache_file, problem, dists, eps); `problem` is
/// None or (kind, message) when the answer must come from importlib instead:
/// a distribution importlib would raise for (kind "error"), input the
/// scanner cannot answer exactly (kind "unsupported"), or any other failure.
py::object query(py::list paths, py::object groups, const std::string& validation,
                 const std::string& cache_dir, bool use_cache, py::bytes interpreter,
                 py::bytes cwd, bool objects) {
  epload::profile::Span span(epload::profile::Phase::total, "entry_points query");
  std::vector<std::string> wanted;
  const bool all_groups = groups.is_none();
  if (!all_groups) {
    for (py::handle g : py::tuple(groups)) wanted.push_back(g.cast<std::string>());
  }
  auto parts_of = [&](const Index& index) {
    std::vector<std::span<const EntryPoint>> parts;
    if (all_groups) {
      parts.push_back(index.entry_points());
    } else {
      for (const std::string& g : wanted) parts.push_back(index.group(g));
    }
    return parts;
  };
  const bool make_objects = objects && classes_bound();
  const std::string_view cwd_bytes(cwd);
  // On a cache hit under `full`, the objects are made while the stat calls
  // run on the other CPU (cache_overlap.hpp), not after them:
  // they are kept only if the check passes and that index is the answer.
  py::object made;
  std::shared_ptr<const Index> made_for;
  WhileValidating make_early;
  if (make_objects) {
    make_early = [&](const std::shared_ptr<const Index>& candidate) {
      WithGil gil;
      PyObject* list = entry_point_objects(parts_of(*candidate), cwd_bytes);
      if (list == nullptr) {
        PyErr_Clear();  // made again below, where an error is raised
        return;
      }
      made = py::reinterpret_steal<py::object>(list);
      made_for = candidate;
    };
  }
  QueryAnswer a = run_query(paths, all_groups ? nullptr : &wanted, validation, cache_dir,
                            use_cache, interpreter, make_early);
  if (!a.index) return py::make_tuple(a.status, a.reason, a.file, a.problem, py::tuple(), py::tuple());
  if (make_objects) {
    if (!made || made_for != a.index) {
      made = py::reinterpret_steal<py::object>(entry_point_objects(parts_of(*a.index), cwd_bytes));
      if (!made) throw py::error_already_set();
    }
    return py::make_tuple(a.status, a.reason, a.file, py::none(), py::none(), made);
  }
  const auto parts = parts_of(*a.index);
  auto converted = py::reinterpret_steal<py::tuple>(convert(parts, cwd_bytes));
  if (!converted) throw py::error_already_set();
  return py::make_tuple(a.status, a.reason, a.file, py::none(), converted[0], converted[1]);
}

}  // namespace

}  // namespace epload::python

// The module works in the main interpreter only.  In a subinterpreter that
// shares the main interpreter's GIL (every one of 3.10 and 3.11, a legacy one
// of 3.12+) it deadlocked the process: PyGILState_Ensure() -- pybind11 2's
// get_internals() in the module's init, and WithGil -- finds this thread's
// state of the main interpreter and waits for the GIL that this very thread
// holds through its subinterpreter's state.  So PyInit__native refuses a
// subinterpreter before pybind11 runs (an ImportError: the package answers
// with importlib), and in_main_interpreter() tells the package when 3.10 or
// 3.11 handed it a module made in the main interpreter without running
// PyInit (they copy a single-phase module's dictionary into each one).
#define PyInit__native epload_pybind11_init_native
PYBIND11_MODULE(_native, m) {
  using namespace epload::python;
  m.def("in_main_interpreter", [] { return PyInterpreterState_Get() == PyInterpreterState_Main(); },
        "False in a subinterpreter, where the package answers with importlib instead.");
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] {
    ::pthread_atfork(nullptr, nullptr, forget_catalogs_in_child);
    Py_AtExit(drain_at_exit);  // see gil.hpp
  });
  m.doc() = "epload's native core: the cached entry-point index (see docs/python.md)";
  m.def("query", &query, py::arg("paths"), py::arg("groups"), py::arg("validation"),
        py::arg("cache_dir"), py::arg("use_cache"), py::arg("interpreter"),
        py::arg("cwd") = py::bytes(), py::arg("objects") = false);
  m.def(
      "bind_classes",
      [](py::handle entry_point, py::handle dist_ref) { return bind_classes(entry_point.ptr(), dist_ref.ptr()); },
      py::arg("entry_point"), py::arg("dist_ref"),
      "Lets query(objects=True) make EntryPoint and _DistRef objects itself; False when their "
      "layout is not the one it writes (see objects.hpp).");
  register_autoload(m);
  register_walk(m);
  // The environment switches, read by the core for every front
  // (epload/switches.hpp): the Python layer never parses them itself.
  m.def(
      "switches",
      [](const std::string& group) {
        epload::LoaderOptions options;
        options.group = group;
        const epload::Switches s = epload::apply_environment(options);
        return py::make_tuple(epload::to_string(s.mode), s.off_by, s.enable, s.disable, s.warnings);
      },
      py::arg("group"),
      "(mode, off_by, enable, disable, warnings) for autoload group `group`: EPLOAD_MODE, the "
      "variable turning autoload off ('' if none), EPLOAD_ENABLE, EPLOAD_DISABLE, bad values.");
  m.def(
      "unmatched_names",
      [](const std::string& group, const std::vector<std::string>& enable, const std::vector<std::string>& disable,
         const std::vector<std::pair<std::string, std::string>>& backends) {
        std::vector<epload::BackendName> names;
        for (const auto& [name, dist] : backends) names.push_back({name, dist});
        return epload::unmatched_names(enable, disable, group, names);
      },
      py::arg("group"), py::arg("enable"), py::arg("disable"), py::arg("backends"),
      "One warning per EPLOAD_ENABLE / EPLOAD_DISABLE name that is none of `backends` "
      "((entry-point name, distribution name) pairs), naming the close ones.");
  m.def(
      "validation",
      [] {
        std::vector<std::string> warnings;
        const auto v = epload::read_validation(&warnings);
        return py::make_tuple(v == epload::Validation::paths ? "paths" : "full", warnings);
      },
      "(validation, warnings): EPLOAD_VALIDATE ('full' or 'paths') and a bad value's warning.");
  m.def(
      "disabled_by",
      [](const std::vector<std::string>& enable, const std::vector<std::string>& disable, const std::string& name,
         const std::string& dist) -> py::object {
        const char* by = epload::disabled_by(enable, disable, name, dist);
        return by ? py::object(py::str(by)) : py::object(py::none());
      },
      py::arg("enable"), py::arg("disable"), py::arg("name"), py::arg("dist"),
      "'EPLOAD_DISABLE', 'EPLOAD_ENABLE' or None: what keeps backend `name` of distribution "
      "`dist` from loading (names match the entry point or the distribution, normalized).");
  m.def("default_cache_dir", [] { return epload::resolve_cache_dir(epload::CacheOptions{}); });
  // The profiler (EPLOAD_TRACE): the Python layer times backend imports and
  // calls with time.monotonic_ns() (CLOCK_MONOTONIC, the native clock too)
  // and hands each span to the native recorder, which writes the trace.
  m.def("trace_enabled", [] { return epload::profile::enabled(); },
        "True when spans are being recorded (EPLOAD_TRACE is set).");
  m.def(
      "trace_record",
      [](const std::string& phase, const std::string& detail, long long start_ns, long long dur_ns,
         py::object thread) {
        const auto p = epload::profile::parse_phase(phase);
        if (!p) throw py::value_error("unknown profile phase '" + phase + "'");
        if (thread.is_none()) {
          epload::profile::record(*p, detail, start_ns, dur_ns);
        } else {
          epload::profile::record_for(thread.cast<std::uint64_t>(), *p, detail, start_ns, dur_ns);
        }
      },
      py::arg("phase"), py::arg("detail"), py::arg("start_ns"), py::arg("dur_ns"), py::arg("thread") = py::none(),
      "Records a span timed with time.monotonic_ns() on the calling thread, or on the thread "
      "`thread` names (threading.get_ident() of the thread that timed it).");
}
#undef PyInit__native

extern "C" PYBIND11_EXPORT PyObject* PyInit__native() {
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
    PyErr_SetString(PyExc_ImportError,
                    "epload._native cannot be loaded in a subinterpreter (it works in the main interpreter only)");
    return nullptr;
  }
  return epload_pybind11_init_native();
}
