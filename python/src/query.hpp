// query.hpp — what epload._native's calls share: one index query, and the
// conversion of its entry points to the tuples the Python layer reads.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache_overlap.hpp"  // WhileValidating
#include "epload/cache.hpp"
#include "epload/entry_point.hpp"
#include "epload/index.hpp"

namespace epload::python {

/// Owns one reference; keeps the error paths of the C-API code short.
struct Ref {
  PyObject* p = nullptr;
  Ref() = default;
  explicit Ref(PyObject* o) : p(o) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p); }
  PyObject* release() {
    PyObject* o = p;
    p = nullptr;
    return o;
  }
};

/// str from UTF-8 already validated by the scanner (new reference, or
/// nullptr with an error set).
PyObject* text(std::string_view s);

/// str from a path's bytes, as os.listdir() decodes them (new reference, or
/// nullptr with an error set).
PyObject* fs_path(std::string_view s);

/// The str of the group of consecutive entry points, made once per run of
/// equal groups (an index lists a group's entry points together).
class GroupText {
 public:
  GroupText() = default;
  GroupText(const GroupText&) = delete;
  GroupText& operator=(const GroupText&) = delete;
  ~GroupText() { Py_XDECREF(m_obj); }
  /// A borrowed reference, valid until the next call; nullptr with an error set.
  PyObject* get(std::string_view group) {
    if (m_obj == nullptr || group != m_text) {
      PyObject* g = text(group);
      if (g == nullptr) return nullptr;
      Py_XDECREF(m_obj);
      m_obj = g;
      m_text = group;
    }
    return m_obj;
  }

 private:
  PyObject* m_obj = nullptr;
  std::string_view m_text;
};

/// How many entry points `parts` holds.
inline std::size_t entry_point_count(const std::vector<std::span<const EntryPoint>>& parts) {
  std::size_t total = 0;
  for (const auto& s : parts) total += s.size();
  return total;
}

/// Calls `visit(ep, group)` for each entry point of `parts` in order, with
/// `group` the str of ep.group (borrowed, made once per run of equal
/// groups).  False, with an error set, when a group str cannot be made or
/// `visit` returns false (having set one).
template <typename Visit>
bool for_each_entry_point(const std::vector<std::span<const EntryPoint>>& parts, Visit visit) {
  GroupText groups;
  for (const auto& span : parts) {
    for (const EntryPoint& ep : span) {
      PyObject* group = groups.get(ep.group);
      if (group == nullptr || !visit(ep, group)) return false;
    }
  }
  return true;
}

/// One query's outcome: `index` is set unless `problem` is (kind, message),
/// which means importlib must answer.
struct QueryAnswer {
  pybind11::object status, reason, file, problem;
  std::shared_ptr<const Index> index;
};

/// Runs one query (see query() in native.cpp for the arguments); `groups`
/// null: all groups.  Raises on bad arguments only.  `while_validating`:
/// what catalog_get() calls with a cache hit for this query
/// (cache_overlap.hpp; called without the GIL).
QueryAnswer run_query(pybind11::list paths, const std::vector<std::string>* groups,
                      const std::string& validation, const std::string& cache_dir, bool use_cache,
                      pybind11::bytes interpreter, const WhileValidating& while_validating = {});

/// The index of the `full` query of these arguments and all groups (a walk's)
/// held in this process, checked as `paths` validation checks (its search
/// paths' stamps): for answers made from the listings alone (catalog_listing()).
/// `index` null when there is none, it changed, or it holds a distribution
/// importlib would raise for (run_query() then answers).
QueryAnswer listing_query(pybind11::list paths, const std::string& cache_dir, bool use_cache,
                          pybind11::bytes interpreter);

/// (dists, eps): dists = ((name, version, metadata_dir, ""), ...) in order
/// of first use, eps = ((name, value, group, dist_position), ...); new
/// reference, or nullptr with an error set.  `cwd` non-empty: relative
/// metadata directories are joined to it.
PyObject* convert(const std::vector<std::span<const EntryPoint>>& parts, std::string_view cwd = {});

/// The metadata directory of `d`, joined to `cwd` (as os.path.join does)
/// when it is relative and `cwd` is not empty; the join is written to
/// `scratch`, so the view lives until `scratch` next changes.
std::string_view metadata_dir(const Distribution& d, std::string_view cwd, std::string& scratch);

}  // namespace epload::python
