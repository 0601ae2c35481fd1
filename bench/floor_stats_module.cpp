// floor_stats_module.cpp — build/bench/_epload_floor_stats*.so: the floor
// under a `full` lookup answered from the cache, in the process that asks.
//
// `full` validation re-stats every search path and every watched metadata
// file at each lookup (the contract: a lookup never trusts an earlier
// check).  Those stat calls are what a cache hit cannot do without, so a
// lookup can cost no less.  This module times nothing itself: the caller
// reads the index of a cache file first (read(), untimed: its cost is not
// part of the floor), then times check(), which is still_valid(index, full):
// the very code a lookup runs (FullCheck in src/cache/cache_validate.cpp,
// the same two threads, the same fstatat calls relative to O_PATH
// descriptors), on the same partial index a one-group lookup reads (the
// group's section and the watched names with their stamps' digest).
// scripts/bench_dynamo.py times it after `import torch`, beside the
// lookups it is the floor of, in the same rounds.
//
// Bench-only: built beside the benchmarks, never installed.

#define PY_SSIZE_T_CLEAN  // Py_ssize_t lengths for "#" formats
#include <Python.h>
#include <fcntl.h>   // open
#include <unistd.h>  // close

#include <cerrno>
#include <cstring>  // strerror
#include <memory>
#include <string>
#include <vector>

#include "cache_internal.hpp"
#include "epload/cache.hpp"
#include "index_provenance.hpp"  // watched_names
#include "memory.hpp"  // cache_files_mapped

namespace {

constexpr const char* k_capsule = "epload floor index";

void free_index(PyObject* capsule) {
  delete static_cast<epload::Index*>(PyCapsule_GetPointer(capsule, k_capsule));
}

/// `paths` (a list of str) as the file-system bytes the cache key holds;
/// false with a Python error set.
bool search_paths(PyObject* paths, std::vector<std::string>& out) {
  if (!PyList_Check(paths)) {
    PyErr_SetString(PyExc_TypeError, "read(): paths must be a list of str (sys.path)");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(paths); ++i) {
    PyObject* item = PyList_GET_ITEM(paths, i);
    if (!PyUnicode_Check(item)) {
      PyErr_Format(PyExc_TypeError, "read(): paths[%zd] is %R, not a str", i, item);
      return false;
    }
    PyObject* bytes = PyUnicode_EncodeFSDefault(item);
    if (bytes == nullptr) return false;
    out.emplace_back(PyBytes_AS_STRING(bytes), static_cast<std::size_t>(PyBytes_GET_SIZE(bytes)));
    Py_DECREF(bytes);
  }
  return true;
}

/// read(paths, interpreter, group) -> index: the cache file of `paths` for
/// this interpreter identity (what epload's own lookup reads), parsed as a
/// one-group lookup under `full` reads it, not checked.
PyObject* read(PyObject*, PyObject* args) {
  PyObject* paths = nullptr;
  const char* interpreter = nullptr;
  Py_ssize_t interpreter_len = 0;
  const char* group = nullptr;
  if (!PyArg_ParseTuple(args, "Oy#s:read", &paths, &interpreter, &interpreter_len, &group)) return nullptr;
  epload::CacheOptions options;
  if (!search_paths(paths, options.search_paths)) return nullptr;
  options.interpreter.assign(interpreter, static_cast<std::size_t>(interpreter_len));
  options.cache_dir = epload::resolve_cache_dir(options);
  const epload::detail::CacheKey key = epload::detail::make_key(options);
  const std::string path = epload::cache_file_path(options);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    PyErr_Format(PyExc_OSError,
                 "no cache file to check: %s: %s (a lookup with EPLOAD_VALIDATE=full and these "
                 "search paths writes it; make one first)",
                 path.c_str(), std::strerror(err));
    return nullptr;
  }
  epload::detail::ReadExpectations expect;
  expect.key = &key;
  expect.groups = {group};
  expect.watched = true;  // the names and their digest, as `full` reads them
  expect.map_file = epload::detail::cache_files_mapped();
  auto index = epload::detail::read_index_fd(fd, path, expect);
  ::close(fd);
  if (!index) {
    PyErr_Format(PyExc_ValueError, "cannot read %s: %s", path.c_str(), index.error().message.c_str());
    return nullptr;
  }
  auto owned = std::make_unique<epload::Index>(std::move(index.value()));
  PyObject* capsule = PyCapsule_New(owned.get(), k_capsule, free_index);
  if (capsule != nullptr) owned.release();
  return capsule;
}

/// check(index) -> (valid, why, stats): still_valid(index, full), why it
/// failed ("" when valid) and the stat calls a passing check makes (one per
/// search path and one per watched file).
PyObject* check(PyObject*, PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, k_capsule)) {
    PyErr_Format(PyExc_TypeError, "check(): the index must be what read() returned, not %R", capsule);
    return nullptr;
  }
  const auto* index = static_cast<const epload::Index*>(PyCapsule_GetPointer(capsule, k_capsule));
  std::string why;
  bool valid = false;
  Py_BEGIN_ALLOW_THREADS  // as a lookup does while it validates
  valid = epload::still_valid(*index, epload::Validation::full, &why);
  Py_END_ALLOW_THREADS
  const std::size_t stats = index->search_paths().size() + epload::watched_names(*index).size();
  return Py_BuildValue("(Ns#n)", PyBool_FromLong(valid), why.data(), static_cast<Py_ssize_t>(why.size()),
                       static_cast<Py_ssize_t>(stats));
}

PyMethodDef g_methods[] = {
    {"read", read, METH_VARARGS,
     "read(paths, interpreter, group): the cache file's index as a one-group `full` lookup reads it."},
    {"check", check, METH_O, "check(index) -> (valid, why, stats): still_valid(index, full)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_epload_floor_stats",
                        "The stat calls of `full` validation alone (see bench/floor_stats_module.cpp).",
                        -1, g_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__epload_floor_stats() { return PyModule_Create(&g_module); }
