// cmd_bench.cpp — `epload bench`: the benchmark harness, which is Python
// (the package epload.bench): runs `PYTHON -m epload.bench ARGS...` in place
// of this process.  PYTHON is the interpreter of the environment this command
// is installed in (python3, else python, beside the executable: a venv's
// bin/), else $EPLOAD_PYTHON, else python3 on PATH.  In a build tree
// (<build>/epload beside <build>/python/epload) that package directory goes
// first on PYTHONPATH.
#include <sys/stat.h>  // stat
#include <unistd.h>    // execv, execvp, readlink, access

#include <cerrno>    // errno
#include <cstdlib>   // getenv, setenv
#include <cstring>   // strerror
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace epload::cli {
namespace {

std::string executable_dir() {
  std::string buf(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  buf.resize(static_cast<std::size_t>(n));
  const auto slash = buf.rfind('/');
  return slash == std::string::npos ? std::string() : buf.substr(0, slash);
}

int run(std::vector<std::string_view>& args) {
  const std::string dir = executable_dir();
  std::string python;
  for (const char* name : {"python3", "python"}) {
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    // A file: a build tree has a directory python/ beside the command.
    if (!dir.empty() && ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) {
    const char* env = std::getenv("EPLOAD_PYTHON");
    python = env != nullptr && *env != '\0' ? env : "python3";
  }
  const std::string built = dir + "/python";
  if (!dir.empty() && ::access((built + "/epload/bench/__main__.py").c_str(), R_OK) == 0) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old != nullptr && *old != '\0' ? built + ":" + old : built;
    ::setenv("PYTHONPATH", path.c_str(), 1);
  }
  std::vector<std::string> owned = {python, "-m", "epload.bench"};
  for (std::string_view a : args) owned.emplace_back(a);
  std::vector<char*> argv;
  for (auto& s : owned) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (python.find('/') != std::string::npos) {
    ::execv(python.c_str(), argv.data());
  } else {
    ::execvp(python.c_str(), argv.data());
  }
  const int err = errno;
  return fail("bench: cannot run " + python + " (the Python of epload's environment; set " +
              "EPLOAD_PYTHON to another): " + std::strerror(err));
}

// No help text: `epload bench --help` is the harness's own.
const Registration reg{{"bench", "measure import time with and without epload; a CI gate (Python)",
                        nullptr, run}};

}  // namespace
}  // namespace epload::cli
