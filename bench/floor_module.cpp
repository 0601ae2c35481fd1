// floor_module.cpp — build/bench/_epload_floor*.so: the floor under
// `import epload._native` on this machine.
//
// An extension module linked like epload's own (simdjson as epload_core has
// it: compiled in, or libsimdjson.so; libstdc++, libgcc_s and libm; the same
// options), keeping simdjson in by referring to one of its symbols, whose
// import creates an empty module.  Importing it costs what loading those
// libraries costs a Python process (mapping, relocating, initialising) and
// nothing of ours:
// scripts/bench_startup.py times it beside the epload variants, in the same
// rounds, and compares the targets' budgets with it.
//
// simdjson's function is declared here rather than through <simdjson.h>:
// only src/cache/cache.cpp includes that header, and nothing here calls it.

#include <Python.h>

namespace simdjson {
class implementation;
const implementation* get_active_implementation() noexcept;
}  // namespace simdjson

namespace {
void* volatile g_keep = reinterpret_cast<void*>(&simdjson::get_active_implementation);

PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_epload_floor",
                        "Empty; linked like epload._native (see bench/floor_module.cpp).",
                        -1, nullptr, nullptr, nullptr, nullptr, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit__epload_floor() {
  if (g_keep == nullptr) return nullptr;  // never: keeps the reference
  return PyModule_Create(&g_module);
}
