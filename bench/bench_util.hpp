// bench_util.hpp — shared helpers for the Google Benchmark suites: generated
// environments, the sizes every suite runs at, and small file utilities.
//
// Environments come from scripts/gen_env.py (the same generator the process-
// level harness and the tests use), run once per size and per process into a
// private temporary directory that is removed when the process exits.  One
// distribution in six is a backend, the proportion of the benchmarks' reference
// environment (1,000 backends among 6,000 distributions).  Backends are of
// the Python kind: these suites time discovery, never loading.
//
// Environment variables:
//   EPLOAD_BENCH_SOURCE_DIR  source tree holding scripts/gen_env.py
//                            (default: the tree this binary was built from)
//   EPLOAD_BENCH_PYTHON      interpreter that runs the generator
//                            (default: the one the build was configured with)
//   EPLOAD_BENCH_SMOKE=1     run the smallest size only (ctest bench.smoke)
//   EPLOAD_BENCH_SIZES=a,b   run these distribution counts instead
#pragma once

#include <benchmark/benchmark.h>
#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat
#include <unistd.h>    // read, close, mkdtemp

#include <cstdio>      // snprintf
#include <cstdlib>     // getenv, system, strtol
#include <filesystem>  // remove_all, directory_iterator
#include <iostream>    // flush before a failing exit
#include <map>         // per-size environments
#include <memory>      // unique_ptr
#include <string>      // paths
#include <vector>      // file lists

namespace epload::bench {

/// One generated environment: OUT/site-packages with `distributions`
/// distributions, `backends` of them with a torch.backends entry point.
struct GeneratedEnv {
  std::string root;         ///< OUT (removed at exit)
  std::string site;         ///< OUT/site-packages, the one search path
  std::string cache_dir;    ///< OUT/cache: a private, empty cache directory
  int distributions = 0;
  int backends = 0;
};

/// True under ctest's bench.smoke.
inline bool smoke() {
  const char* s = std::getenv("EPLOAD_BENCH_SMOKE");
  return s != nullptr && s[0] != '\0' && std::string(s) != "0";
}

/// Applies the distribution counts every suite runs at: 100, 1,000 and
/// 10,000; 100 only under EPLOAD_BENCH_SMOKE; or the comma-separated list in
/// EPLOAD_BENCH_SIZES (scripts/bench_index.py uses it to time the bare stat
/// baseline at the size of its own environment).
inline void sizes(benchmark::internal::Benchmark* b) {
  // The scanner and `full` validation split their work over two threads, so
  // wall time is the figure, and the CPU column counts the whole process.
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime();
  if (const char* list = std::getenv("EPLOAD_BENCH_SIZES"); list != nullptr && list[0] != '\0') {
    const char* p = list;
    while (*p != '\0') {
      char* end = nullptr;
      const long n = std::strtol(p, &end, 10);
      if (end == p || n < 6 || (*end != ',' && *end != '\0')) {
        std::fprintf(stderr, "epload_bench: EPLOAD_BENCH_SIZES must be comma-separated "
                             "distribution counts >= 6, got '%s'\n", list);
        std::exit(2);
      }
      b->Arg(n);
      p = (*end == ',') ? end + 1 : end;
    }
    return;
  }
  b->Arg(100);
  if (!smoke()) b->Arg(1000)->Arg(10000);
}

namespace detail {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? std::string(v) : std::string(fallback);
}

/// Quotes a string for /bin/sh.
inline std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

/// Owns every generated tree and removes them at process exit (static
/// destruction runs after the benchmarks, also when main returns early).
/// Google Benchmark's main exits 0 even when a benchmark was skipped with an
/// error, which would let bench.smoke pass on a broken cache; so a failure
/// recorded through fail() turns the exit status into 1 here.
struct Registry {
  std::map<int, std::unique_ptr<GeneratedEnv>> envs;
  std::vector<std::string> failures;
  ~Registry() {
    for (auto& [n, env] : envs) {
      std::error_code ec;
      std::filesystem::remove_all(env->root, ec);
    }
    if (!failures.empty()) {
      std::cout.flush();
      std::fflush(stdout);
      std::fprintf(stderr, "epload_bench: %zu benchmark(s) failed:\n", failures.size());
      for (const std::string& f : failures) std::fprintf(stderr, "  %s\n", f.c_str());
      std::_Exit(1);
    }
  }
};

inline Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace detail

/// The environment with `distributions` distributions, generated on first
/// use.  Returns nullptr (and sets *error) when the generator fails; callers
/// then SkipWithError so the failure is visible, not silently measured.
inline const GeneratedEnv* generated_env(int distributions, std::string* error) {
  auto& reg = detail::registry();
  auto it = reg.envs.find(distributions);
  if (it != reg.envs.end()) return it->second.get();

#ifndef EPLOAD_BENCH_SOURCE_DIR
#define EPLOAD_BENCH_SOURCE_DIR "."
#endif
#ifndef EPLOAD_BENCH_PYTHON
#define EPLOAD_BENCH_PYTHON "/usr/bin/python3"
#endif
  const std::string source = detail::env_or("EPLOAD_BENCH_SOURCE_DIR", EPLOAD_BENCH_SOURCE_DIR);
  const std::string python = detail::env_or("EPLOAD_BENCH_PYTHON", EPLOAD_BENCH_PYTHON);
  const std::string script = source + "/scripts/gen_env.py";
  if (!std::filesystem::exists(script)) {
    *error = "generator not found: " + script + " (set EPLOAD_BENCH_SOURCE_DIR to the source tree)";
    return nullptr;
  }

  std::string tmpl = (std::filesystem::temp_directory_path() / "epload-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    *error = "cannot create a temporary directory under " +
             std::filesystem::temp_directory_path().string();
    return nullptr;
  }
  auto env = std::make_unique<GeneratedEnv>();
  env->root = tmpl;
  env->site = tmpl + "/env/site-packages";
  env->cache_dir = tmpl + "/cache";
  env->distributions = distributions;
  env->backends = distributions / 6;
  // Register before running, so a failed generation is cleaned up too.
  GeneratedEnv* raw = env.get();
  reg.envs.emplace(distributions, std::move(env));

  const std::string cmd = detail::sh_quote(python) + " " + detail::sh_quote(script) + " " +
                          detail::sh_quote(raw->root + "/env") + " --backends " +
                          std::to_string(raw->backends) + " --noise " +
                          std::to_string(distributions - raw->backends) + " --kind python >&2";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    *error = "generator failed (status " + std::to_string(rc) + "): " + cmd;
    return nullptr;
  }
  std::filesystem::create_directory(raw->cache_dir);
  std::filesystem::permissions(raw->cache_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  return raw;
}

/// Marks the running benchmark as failed: it stops with `message`, and the
/// process exits with status 1 after all benchmarks ran.
inline void fail(benchmark::State& state, const std::string& message) {
  state.SkipWithError(message.c_str());
  detail::registry().failures.push_back("at " + std::to_string(state.range(0)) +
                                        " distributions: " + message);
}

/// generated_env() for a benchmark: fails the benchmark with the reason when
/// the environment cannot be generated.
inline const GeneratedEnv* env_for(benchmark::State& state) {
  std::string error;
  const GeneratedEnv* env = generated_env(static_cast<int>(state.range(0)), &error);
  if (env == nullptr) fail(state, error);
  return env;
}

/// Reads a whole file; false on any error.
inline bool read_file(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (ok && got < out.size()) {
      const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
      if (r <= 0) ok = false;
      else got += static_cast<std::size_t>(r);
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace epload::bench
