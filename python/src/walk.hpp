// walk.hpp — the native half of epload.distributions(): per search path, the
// metadata directories importlib.metadata.distributions() finds, with the
// entry points of each from the index (see walk.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace epload::python {

/// Registers _native.walk() on `m`.
void register_walk(pybind11::module_& m);

}  // namespace epload::python
