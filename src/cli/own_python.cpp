// own_python.cpp — the command's own interpreter (own_python.hpp).
//
// pip installs `epload` into an environment's bin/ beside that
// environment's `python`, the way it installs console scripts, whose
// shebang names that interpreter: `venv/bin/pip` acts on the venv even when
// the venv is not activated.  The command does the same: without --python
// it asks the `python` beside its own executable, found through
// /proc/self/exe (the real file, so a symlink to the command, e.g. from
// ~/bin, still leads to its environment).  The interpreter itself is used
// by the path found, never resolved: a venv's bin/python is a symlink to
// the base interpreter, and only the venv's path makes CPython read its
// pyvenv.cfg.  Nothing beside (a build tree, a copy of the command): the
// `python3` first on PATH.
#include "cli/own_python.hpp"

#include <limits.h>    // PATH_MAX
#include <sys/stat.h>  // stat
#include <unistd.h>    // readlink, access

namespace epload::cli {

namespace {

struct Choice {
  std::string python, reason;
};

/// The directory of this process's executable file, "" when unknown.
std::string own_directory() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  const std::string exe(buf, static_cast<std::size_t>(n));
  const std::size_t slash = exe.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string() : exe.substr(0, slash);
}

bool is_executable_file(const std::string& path) {
  struct stat st;  // follows symlinks: a venv's python is one
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

const Choice& choice() {
  static const Choice chosen = [] {
    const std::string dir = own_directory();
    if (!dir.empty()) {
      for (const char* name : {"python", "python3"}) {
        std::string candidate = dir + '/' + name;
        if (is_executable_file(candidate)) return Choice{std::move(candidate), "the interpreter beside this command"};
      }
    }
    return Choice{"python3", "python3 on PATH; none beside this command" + (dir.empty() ? std::string() : " in " + dir)};
  }();
  return chosen;
}

}  // namespace

const std::string& own_python() { return choice().python; }
const std::string& own_python_reason() { return choice().reason; }

}  // namespace epload::cli
