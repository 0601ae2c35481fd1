// objects.hpp — epload.EntryPoint objects made natively.
//
// entry_points() returns one EntryPoint per row.  Built in Python from the
// tuples convert() returns, each cost an object.__new__, four slot
// descriptor calls and a tuple (~1.2 us; 1.2 ms at 1,000 backends, a tenth
// of the whole query's cost over a bare interpreter).  Here the objects are
// allocated by their type and their slots written directly, as the slots'
// own descriptors write them.  The Python layer hands over its two classes
// once (bind_classes); if their layout is not the expected one (every field
// a __slots__ slot), binding fails and the Python path stays in use.
#pragma once

#include <Python.h>

#include <span>
#include <string_view>
#include <vector>

#include "epload/entry_point.hpp"

namespace epload::python {

/// Takes EntryPoint (slots name, value, group, _dist) and _DistRef (slots
/// path, name, version, stamp, _real).  False, no error set, when either is
/// not a type with those object slots.
bool bind_classes(PyObject* entry_point, PyObject* dist_ref);

/// True once bind_classes() succeeded.
bool classes_bound();

/// A list of EntryPoint objects for `parts`, in order; the entry points of
/// one distribution share one _DistRef (path = its metadata directory,
/// joined to `cwd` when relative and `cwd` is not empty; stamp "").  New
/// reference, or nullptr with an error set.  Requires classes_bound().
PyObject* entry_point_objects(const std::vector<std::span<const EntryPoint>>& parts, std::string_view cwd);

}  // namespace epload::python
