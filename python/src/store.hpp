// store.hpp — reading the learned-device store without importing `json`.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace epload::python {

/// Reads the JSON file at `path` into Python objects (dict, list, str, int,
/// float, bool, None).  Returns None, never raises, when the file is missing,
/// unreadable, not owned by the current user, writable by group or others,
/// larger than a few MB, or not well-formed JSON: the store is only a hint,
/// and a bad one means "learn again".
pybind11::object read_store(const std::string& path);

}  // namespace epload::python
