// python_memo.hpp — what an interpreter says about itself (its identity,
// sys.path, extension-module suffixes), remembered in the cache directory so
// that a run without --path does not start the interpreter.
#pragma once

#include <string>  // paths
#include <vector>  // sys.path, suffixes

#include "epload/result.hpp"  // Result

namespace epload::cli {

/// What `python -c ...` reports.  Paths are bytes (os.fsencode).
struct PythonFacts {
  std::string executable, prefix, version;   ///< sys.executable, sys.prefix, sys.version
  std::vector<std::string> sys_path;         ///< sys.path, in order
  std::vector<std::string> ext_suffixes;     ///< importlib.machinery.EXTENSION_SUFFIXES
  /// The interpreter part of the index's cache key: "executable\0prefix\0version"
  /// (byte for byte what the Python module uses, so both share cache files).
  std::string identity() const { return executable + '\0' + prefix + '\0' + version; }
};

/// How to get them.
struct FactsRequest {
  std::string python = "python3";  ///< --python: a name looked up on PATH, or a path
  std::string cache_dir;           ///< the resolved cache directory ("": none)
  bool use_memo = true;            ///< false (--no-cache): ask, and remember nothing
};

/// The facts of `request.python`: from its memo file
/// (`<cache dir>/python-<hash>.txt`) when every input recorded there is as
/// it was, else asked from the interpreter (one process start) and
/// remembered.  The inputs: the interpreter file found on PATH (its stamp),
/// for a pyenv shim the inputs of pyenv's choice of version, the
/// environment variables that shape sys.path, the current directory where
/// an entry depends on it, and the stamps of pyvenv.cfg, the site and
/// sys.path directories, the .pth files and the directories they name.
/// `note` gets what happened, for --verbose (a memo file that cannot be
/// trusted, corrupt or foreign, is ignored and said there).  Fails only when
/// the interpreter cannot be asked.
Result<PythonFacts> python_facts(const FactsRequest& request, std::string& note);

}  // namespace epload::cli
