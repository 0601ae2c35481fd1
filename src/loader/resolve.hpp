// resolve.hpp — from a backend entry point to the file that implements it.
#pragma once

#include <string>       // paths
#include <string_view>  // search path
#include <vector>       // suffixes

#include "elf.hpp"                  // DeclaredDevices
#include "file_stamp.hpp"
#include "epload/entry_point.hpp"   // EntryPoint
#include "epload/index.hpp"         // FileStamp
#include "epload/loader.hpp"        // BackendKind

namespace epload::detail {

/// How to resolve.
struct ResolveOptions {
  /// Extension-module suffixes, tried in order: the target interpreter's
  /// importlib.machinery.EXTENSION_SUFFIXES; empty: default_ext_suffixes().
  std::vector<std::string> ext_suffixes;
  /// Also read the declared devices of a native library (one ELF section,
  /// with pread, from the descriptor already open).
  bool read_declared = true;
};

/// The outcome of resolving one entry point.
struct Resolved {
  BackendKind kind = BackendKind::unresolved;
  std::string module;   ///< "pkg.mod"
  std::string symbol;   ///< the attr: the init function of a native backend
  std::string file;     ///< native: the library; python: the module's file
  FileStamp stamp;      ///< of `file` (native: dev+ino identify the backend)
  std::string error;    ///< unresolved: why, naming what was tried
  /// native with read_declared: the section's content, or why it could not
  /// be read (then elf_error is set and the library must not be loaded).
  DeclaredDevices declared;
  std::string elf_error;
};

/// The suffixes every CPython 3 on Linux accepts, ".abi3.so", ".so".
const std::vector<std::string>& default_ext_suffixes();

/// What is tried when the caller names no interpreter: the EXT_SUFFIX of the
/// interpreter whose directory `search_path` is (".cpython-311-x86_64-linux-gnu.so"
/// for ".../python3.11/site-packages"), then default_ext_suffixes().  (Past
/// them, resolve_backend also takes the one `mod.cpython-3*-<arch>.so`.)
std::vector<std::string> ext_suffixes_for(std::string_view search_path);

/// Resolves `ep` (value "pkg.mod:symbol") to `pkg/mod<suffix>` under
/// `search_path` (the directory the distribution was found in), first suffix
/// that exists wins, as importlib's FileFinder does; an extension module
/// takes precedence over `pkg/mod.py`, `pkg/mod.pyc` and
/// `pkg/mod/__init__.py`, which make it a Python backend.  System calls: one
/// open per suffix tried, then fstat and a few preads for a native library.
Resolved resolve_backend(const EntryPoint& ep, std::string_view search_path,
                         const ResolveOptions& options);

/// True when `s` is a C identifier (what dlsym can find for a C function).
bool is_c_identifier(std::string_view s);

}  // namespace epload::detail
