// autoload.hpp — the Python autoload's native half: the core's Loader for one
// autoload group (see autoload.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace epload::python {

/// Registers _native.open_loader() and its Loader type on `m`.
void register_autoload(pybind11::module_& m);

}  // namespace epload::python
