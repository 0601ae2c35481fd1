// profile_common.cpp — see profile_common.hpp.
#include "cli/profile_common.hpp"

#include <dirent.h>    // opendir: collect trace files
#include <spawn.h>     // posix_spawnp
#include <stdlib.h>    // mkdtemp
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
                std::string& error) {
  std::vector<char*> a, e;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const std::string& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, a[0], &actions, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = "cannot run '" + argv[0] + "': " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
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

// Draws `trace_file` into `png` with scripts/plot_trace.py.
bool plot(const std::string& trace_file, const std::string& png, std::string& error) {
  std::string script;
  if (const char* s = std::getenv("EPLOAD_PLOT_SCRIPT"); s && *s) {
    script = s;
  } else {
    // Next to the executable (a build tree inside the checkout, an
    // installation), then the checkout it was built from (a build tree
    // elsewhere).
    const std::string exe_dir = dir_of(self_exe());
    for (const std::string& c : {exe_dir + "/../scripts/plot_trace.py", exe_dir + "/scripts/plot_trace.py",
                                 exe_dir + "/../share/epload/plot_trace.py",
                                 std::string(EPLOAD_SOURCE_SCRIPTS "/plot_trace.py")}) {
      if (::access(c.c_str(), R_OK) == 0) {
        script = c;
        break;
      }
    }
  }
  if (script.empty() || ::access(script.c_str(), R_OK) != 0) {
    error = "--plot: scripts/plot_trace.py not found next to " + self_exe() + " nor in " +
            EPLOAD_SOURCE_SCRIPTS " (set EPLOAD_PLOT_SCRIPT to its path)";
    return false;
  }
  std::string python = "python3";
  if (const char* p = std::getenv("EPLOAD_PLOT_PYTHON"); p && *p) {
    python = p;
  } else if (::access("/usr/bin/python3", X_OK) == 0) {
    python = "/usr/bin/python3";  // Debian's matplotlib lives there, not in other pythons
  }
  const int rc = run_process({python, script, trace_file, "-o", png}, environment_with({}), -1, error);
  if (rc < 0) return false;
  if (rc != 0) {
    error = "--plot: " + script + " failed (exit status " + std::to_string(rc) + ", message above)";
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
                   std::string& error) {
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
  if (!plot_path.empty() && !plot(file, plot_path, error)) return false;
  return true;
}

}  // namespace epload::cli::profiling
