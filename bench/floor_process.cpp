// floor_process.cpp — build/bench/epload_floor: the floor under every
// `epload` process on this machine.
//
// It is linked like build/epload (the same shared libraries: libsimdjson,
// and through it libstdc++, libgcc_s and libm; libmimalloc; the same link
// options), keeps each library needed by referring to one symbol of it, and
// exits at once.  What it costs is the exec, the dynamic loader's work
// (mapping, relocating and initialising those libraries) and the exit: a
// cost no code of ours can shorten.  scripts/bench_index.py times it beside
// `epload --version` and every `epload entry-points` mode, in the same
// rounds, and compares the targets' budgets with it.
//
// simdjson's function is declared here rather than through <simdjson.h>:
// only src/cache.cpp includes that header, and nothing here calls it.

#include <mimalloc.h>

namespace simdjson {
class implementation;
const implementation* get_active_implementation() noexcept;
}  // namespace simdjson

namespace {
// Addresses taken, never called: calling would do work (simdjson picks its
// kernel with cpuid) that is not part of loading.
void* volatile g_keep[] = {reinterpret_cast<void*>(&simdjson::get_active_implementation),
                           reinterpret_cast<void*>(&mi_version)};
}  // namespace

int main() { return g_keep[0] == nullptr || g_keep[1] == nullptr; }
