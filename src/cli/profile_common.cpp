// profile_common.cpp — see profile_common.hpp.
#include "cli/profile_common.hpp"

#include <dirent.h>    // opendir: collect trace files
#include <glob.h>      // the plot module in an installed package
#include <signal.h>    // sigaction: shield from Ctrl-C while the command runs
#include <spawn.h>     // posix_spawnp
#include <stdlib.h>    // mkdtemp
#include <sys/stat.h>  // stat: a venv's python
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // readlink, access, unlink, rmdir

#include <algorithm>  // sort
#include <cerrno>     // errno
#include <cstdarg>    // va_list
#include <cstdio>     // vsnprintf
#include <cstring>    // strerror

extern char** environ;

namespace epload::cli::profiling {

// ---- formatting -----------------------------------------------------------------

std::string ms(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}
std::string us(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(ns) / 1e3);
  return buf;
}
std::string cell(std::int64_t ns) { return ns > 0 ? ms(ns) : std::string("-"); }

void add_line(std::string& out, const char* format, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  out += buf;
}

// ---- processes ------------------------------------------------------------------

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "epload";
  return std::string(buf, static_cast<std::size_t>(n));
}

namespace {

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd,
                std::string& error, ProcessEnd* end, bool shield) {
  std::vector<char*> a, e;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const std::string& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  // Shielded: SIGINT and SIGQUIT ignored here while the child runs; the
  // child gets back the default action of those that had it (a signal the
  // caller of epload ignored stays ignored, as it would without epload).
  struct sigaction ignore = {}, old_int = {}, old_quit = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (shield) {
    ::sigaction(SIGINT, &ignore, &old_int);
    ::sigaction(SIGQUIT, &ignore, &old_quit);
    sigset_t defaults;
    sigemptyset(&defaults);
    if (old_int.sa_handler != SIG_IGN) sigaddset(&defaults, SIGINT);
    if (old_quit.sa_handler != SIG_IGN) sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  }
  auto unshield = [&] {
    if (!shield) return;
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
  };
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, a[0], &actions, &attr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    unshield();
    if (end) end->spawn_error = rc;
    error = "cannot run '" + argv[0] + "': " + (rc == ENOENT ? std::string("command not found") : std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unshield();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    if (end) end->signal = WTERMSIG(status);
    return 128 + WTERMSIG(status);
  }
  return 1;
}

std::string shell_quoted(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                               "0123456789_@%+=:,./-") == std::string::npos;
    if (plain) {
      out += word;
      continue;
    }
    out += '\'';
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** p = environ; *p != nullptr; ++p) {
    const std::string_view kv = *p;
    bool replaced = false;
    for (const auto& [name, value] : set) {
      replaced = replaced || (kv.size() > name.size() && kv.substr(0, name.size()) == name && kv[name.size()] == '=');
    }
    if (!replaced) env.emplace_back(kv);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/epload-profile-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
}

TempDir::~TempDir() {
  if (path.empty()) return;
  if (DIR* d = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ::unlink((path + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

prof::Trace TempDir::collect(std::vector<std::string>& problems) const {
  prof::Trace all;
  std::vector<std::string> files;
  if (DIR* d = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string_view n = e->d_name;
      if (n.starts_with("trace-") && n.ends_with(".json")) files.push_back(path + "/" + e->d_name);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    auto t = prof::read_trace(f);
    if (!t) {
      problems.push_back(t.error().message);
      continue;
    }
    prof::merge(all, *t);
  }
  return all;
}

// ---- the plot --------------------------------------------------------------------

namespace {

// The package's plot module (epload/profile_plot.py) beside this
// executable: a build tree (<build>/epload, <build>/python/epload/), or a pip
// installation (<prefix>/bin/epload, <prefix>/lib/pythonX.Y/site-packages/
// epload/; dist-packages on Debian).  Empty when not found.
std::string plot_module_file(const std::string& exe_dir) {
  const std::string build_tree = exe_dir + "/python/epload/profile_plot.py";
  if (::access(build_tree.c_str(), R_OK) == 0) return build_tree;
  for (const char* packages : {"site-packages", "dist-packages"}) {
    const std::string pattern = exe_dir + "/../lib/python3*/" + packages + "/epload/profile_plot.py";
    glob_t g;
    std::string found;
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) found = g.gl_pathv[g.gl_pathc - 1];
    ::globfree(&g);
    if (!found.empty()) return found;
  }
  return {};
}

// The Python that draws: EPLOAD_PLOT_PYTHON, else the Python of this
// executable's environment: a venv's bin/python3 beside bin/epload (where
// `pip install matplotlib` puts matplotlib), a build tree's the one its
// package was built for; else python3 on PATH.
std::string plot_python(const std::string& exe_dir) {
  if (const char* p = std::getenv("EPLOAD_PLOT_PYTHON"); p && *p) return p;
  for (const char* name : {"/python3", "/python"}) {
    struct stat st;
    const std::string path = exe_dir + name;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0) return path;
  }
#ifdef EPLOAD_BUILD_PYTHON
  if (::access((exe_dir + "/CMakeCache.txt").c_str(), R_OK) == 0 && ::access(EPLOAD_BUILD_PYTHON, X_OK) == 0) {
    return EPLOAD_BUILD_PYTHON;
  }
#endif
  return "python3";
}

// Draws `trace_file` into `png` (and its twin, png's .plot.json) with the
// package's plot module (python -m epload.profile_plot).
bool plot(const std::string& trace_file, const std::string& png, const std::string& title, std::string& error) {
  const std::string exe_dir = dir_of(self_exe());
  const std::string python = plot_python(exe_dir);
  std::vector<std::string> argv = {python};
  if (std::string file = plot_module_file(exe_dir); !file.empty()) {
    argv.push_back(file);
  } else {
    argv.insert(argv.end(), {"-m", "epload.profile_plot"});  // wherever that Python finds the package
  }
  argv.insert(argv.end(), {trace_file, "-o", png});
  if (!title.empty()) argv.insert(argv.end(), {"--title", title});
  const int rc = run_process(argv, environment_with({}), -1, error);
  if (rc < 0) {
    error = "--plot: " + error + " (EPLOAD_PLOT_PYTHON names the Python to draw with)";
    return false;
  }
  if (rc == 3) {
    error = "--plot: matplotlib is not installed for " + python + ": pip install matplotlib (the report" +
            " and the trace were written)";
    return false;
  }
  if (rc != 0) {
    error = "--plot: " + python + " -m epload.profile_plot failed (exit status " + std::to_string(rc) +
            ", message above)";
    return false;
  }
  return true;
}

}  // namespace

// ---- shared report pieces ----------------------------------------------------------

void phase_table(std::string& out, const prof::Summary& s) {
  out += "\nphases (self time = span minus nested spans; costliest first):\n";
  add_line(out, "  %-10s %8s %12s %12s %7s\n", "phase", "spans", "self ms", "total ms", "share");
  std::int64_t self_sum = 0;
  for (const auto& p : s.phases) self_sum += p.self_ns;
  for (const auto& p : s.phases) {
    add_line(out, "  %-10s %8llu %12s %12s %6.1f%%\n", prof::phase_name(p.phase),
             static_cast<unsigned long long>(p.count), ms(p.self_ns).c_str(), ms(p.total_ns).c_str(),
             self_sum > 0 ? 100.0 * static_cast<double>(p.self_ns) / static_cast<double>(self_sum) : 0.0);
  }
}

void counters_line(std::string& out, const std::uint64_t* counters) {
  out += "system calls counted:";
  for (int k = 0; k < static_cast<int>(prof::Counter::count_); ++k) {
    add_line(out, " %s %llu", prof::counter_name(static_cast<prof::Counter>(k)),
             static_cast<unsigned long long>(counters[k]));
  }
  out += "\n";
}

void json_phases(std::string& out, const prof::Summary& s, const std::uint64_t* counters) {
  out += ",\"counters\":{";
  for (int k = 0; k < static_cast<int>(prof::Counter::count_); ++k) {
    add_line(out, "%s\"%s\":%llu", k ? "," : "", prof::counter_name(static_cast<prof::Counter>(k)),
             static_cast<unsigned long long>(counters[k]));
  }
  out += "},\"phases\":[";
  for (std::size_t k = 0; k < s.phases.size(); ++k) {
    const auto& p = s.phases[k];
    add_line(out, "%s{\"phase\":\"%s\",\"spans\":%llu,\"self_us\":%s,\"total_us\":%s}", k ? "," : "",
             prof::phase_name(p.phase), static_cast<unsigned long long>(p.count), us(p.self_ns).c_str(),
             us(p.total_ns).c_str());
  }
  out += "]";
}

bool write_outputs(const std::string& trace_path, const std::string& plot_path, const prof::Trace* trace,
                   std::string& error, const std::string& title) {
  std::string file = trace_path;
  TempDir tmp;
  if (file.empty() && !plot_path.empty()) {
    if (tmp.path.empty()) {
      error = "--plot: cannot create a temporary directory";
      return false;
    }
    file = tmp.path + "/trace-plot.json";
  }
  if (!file.empty()) {
    const bool ok = trace ? prof::write_trace(*trace, file, &error) : prof::write_trace(file, &error);
    if (!ok) return false;
  }
  if (!plot_path.empty() && !plot(file, plot_path, title, error)) return false;
  return true;
}

}  // namespace epload::cli::profiling
