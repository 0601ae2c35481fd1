// discovery.hpp — the lazy autoload's discovery kept native (see discovery.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace epload::python {

/// Registers _native.discover() and its Discovery type on `m`.
void register_discovery(pybind11::module_& m);

}  // namespace epload::python
