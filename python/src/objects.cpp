// objects.cpp — see objects.hpp.
#include "objects.hpp"

#include <structmember.h>  // PyMemberDef, T_OBJECT_EX

#include <string>
#include <unordered_map>

#include "query.hpp"  // Ref, text, fs_path, metadata_dir, for_each_entry_point

namespace epload::python {

namespace {

/// A class and the byte offsets of its object slots, in the order asked.
template <std::size_t N>
struct Layout {
  PyTypeObject* type = nullptr;
  Py_ssize_t offset[N] = {};
};

Layout<4> g_entry_point;  // name, value, group, _dist
Layout<5> g_dist_ref;     // path, name, version, stamp, _real

/// Fills `out` from `cls`'s member descriptors `names`; false (no error
/// set) unless each is an object slot of this very class, and the class
/// has neither a __dict__ nor a custom allocator.
template <std::size_t N>
bool layout_of(PyObject* cls, const char* const (&names)[N], Layout<N>& out) {
  if (!PyType_Check(cls)) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (type->tp_dictoffset != 0 || type->tp_alloc != PyType_GenericAlloc) return false;
  for (std::size_t i = 0; i < N; ++i) {
    // The class's own dict: a descriptor inherited or overridden in a
    // subclass is not what the Python layer builds with.
    PyObject* d = PyDict_GetItemString(type->tp_dict, names[i]);  // borrowed
    if (d == nullptr || Py_TYPE(d) != &PyMemberDescr_Type) return false;
    const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY) != 0 || m->offset <= 0 ||
        m->offset + static_cast<Py_ssize_t>(sizeof(PyObject*)) > type->tp_basicsize) {
      return false;
    }
    out.offset[i] = m->offset;
  }
  out.type = type;
  return true;
}

/// A fresh instance of `l.type` with its slots set to `values` (stolen).
template <std::size_t N>
PyObject* make(const Layout<N>& l, PyObject* const (&values)[N]) {
  PyObject* o = l.type->tp_alloc(l.type, 0);  // slots zeroed
  if (o == nullptr) {
    for (PyObject* v : values) Py_DECREF(v);
    return nullptr;
  }
  for (std::size_t i = 0; i < N; ++i) {
    *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + l.offset[i]) = values[i];
  }
  if (PyObject_IS_GC(o)) PyObject_GC_UnTrack(o);  // see the note above entry_point_objects
  return o;
}

}  // namespace

bool bind_classes(PyObject* entry_point, PyObject* dist_ref) {
  static const char* const ep_names[] = {"name", "value", "group", "_dist"};
  static const char* const ref_names[] = {"path", "name", "version", "stamp", "_real"};
  Layout<4> ep;
  Layout<5> ref;
  if (!layout_of(entry_point, ep_names, ep) || !layout_of(dist_ref, ref_names, ref)) return false;
  // Kept for the life of the process, as the Python module keeps them.
  Py_INCREF(entry_point);
  Py_INCREF(dist_ref);
  Py_XDECREF(reinterpret_cast<PyObject*>(g_entry_point.type));
  Py_XDECREF(reinterpret_cast<PyObject*>(g_dist_ref.type));
  g_entry_point = ep;
  g_dist_ref = ref;
  return true;
}

bool classes_bound() { return g_entry_point.type != nullptr; }

// The objects made here are left untracked by the cycle collector, as
// CPython leaves a tuple of strings: they can be in no reference cycle.  An
// EntryPoint is immutable and holds three strings and its _DistRef; a
// _DistRef holds strings and, once its distribution is asked for,
// importlib's PathDistribution, which refers to neither.  Tracked, every
// collection of the generation they are in walks them, the interpreter's
// last one at exit included.
PyObject* entry_point_objects(const std::vector<std::span<const EntryPoint>>& parts, std::string_view cwd) {
  const std::size_t total = entry_point_count(parts);
  Ref out(PyList_New(static_cast<Py_ssize_t>(total)));
  if (out.p == nullptr) return nullptr;
  Ref empty(PyUnicode_FromStringAndSize("", 0));
  if (empty.p == nullptr) return nullptr;
  // Borrowed: each _DistRef is owned by the first EntryPoint that uses it.
  std::unordered_map<const Distribution*, PyObject*> refs;
  refs.reserve(total);
  std::string joined;
  Py_ssize_t i = 0;
  const bool done = for_each_entry_point(parts, [&](const EntryPoint& ep, PyObject* group) {
    auto [it, fresh] = refs.try_emplace(ep.dist, nullptr);
    if (fresh) {
      const Distribution& d = *ep.dist;
      PyObject* path = fs_path(metadata_dir(d, cwd, joined));
      PyObject* name = text(d.name);
      PyObject* version = text(d.version);
      if (path == nullptr || name == nullptr || version == nullptr) {
        Py_XDECREF(path);
        Py_XDECREF(name);
        Py_XDECREF(version);
        return false;
      }
      Py_INCREF(empty.p);
      Py_INCREF(Py_None);
      it->second = make(g_dist_ref, {path, name, version, empty.p, Py_None});
      if (it->second == nullptr) return false;
    } else {
      Py_INCREF(it->second);
    }
    PyObject* dist = it->second;  // a reference for this entry point
    PyObject* name = text(ep.name);
    PyObject* value = name != nullptr ? text(ep.value) : nullptr;
    if (value == nullptr) {
      Py_XDECREF(name);
      Py_DECREF(dist);
      return false;
    }
    Py_INCREF(group);
    PyObject* obj = make(g_entry_point, {name, value, group, dist});
    if (obj == nullptr) return false;
    PyList_SET_ITEM(out.p, i++, obj);
    return true;
  });
  if (!done) return nullptr;
  return out.release();
}

}  // namespace epload::python
