// bench_loader.cpp — the lazy loader against eager loading, at 10, 100 and
// 1,000 native backends (scripts/gen_env.py --kind native, no noise).
//
// A library, once loaded, stays loaded (the loader never closes one), so any
// case that loads backends runs each iteration in a fresh fork()ed child and
// reports the child's own measurement (manual time): every iteration pays
// for real dlopens, as a new process would.  Those report, as manual time,
// the child's CPU time (user + system) for the measured step: on a shared
// 2-core machine wall time mostly measures the neighbours.  Cases that load
// nothing, or that measure what happens after loading, run in-process (read
// their CPU column for the same reason).
//
//   BM_LoaderStartupLazy/N    create + start, warm learned store: nothing loads
//   BM_LoaderStartupCold/N    the same without a store: resolve + ELF read per backend
//   BM_LoaderStartupEager/N   create + start in eager mode: every backend loads
//   BM_LoaderFirstLookup/N/cold_code:C  the first lookup of one device (lazy, warm
//                             store); counters: bare_us = dlopen + dlsym + init by hand
//                             of a twin library in the same child, ratio = lookup / bare,
//                             faults_over_bare = minor page faults of the lookup minus those
//                             of the bare load (counted outside both timed steps).
//                             cold_code:1 = the first lookup in the process (its
//                             code is cold; the build binds symbols at load, -z now)
//   BM_LoaderBareDlopen/N     dlopen + dlsym + init by hand, alone in a child
//   BM_LoaderHotLookup/N      lookup of a loaded device
//   (for scale: BM_HashMapLookup/N in bench_baseline.cpp)
//   BM_LoaderUnknownDevice/N  lookup of a name no backend provides (the error path)
//
// Counters: mapped_backends = backend libraries in /proc/self/maps after the
// measured step (0 after a lazy start: nothing was loaded).
#include <benchmark/benchmark.h>
#include <dlfcn.h>  // the bare baseline only; the library itself keeps dlfcn in loader_load.cpp
#include <sys/resource.h>  // getrusage: page faults
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>   // popen
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_util.hpp"
#include "epload/backend.h"
#include "epload/loader.hpp"
#include "epload/scanner.hpp"

namespace {

using epload::Loader;
using epload::LoaderOptions;
using epload::LoadMode;

struct LoaderEnv {
  std::string root, site, cache_dir;
  int backends = 0;
  std::shared_ptr<const epload::Index> index;
  /// The generator's interpreter's EXTENSION_SUFFIXES: the libraries are
  /// named for it, and a host passes its interpreter's list.
  std::vector<std::string> ext_suffixes;
};

/// importlib.machinery.EXTENSION_SUFFIXES of `python`, one popen.
std::vector<std::string> ext_suffixes_of(const std::string& python) {
  const std::string cmd = epload::bench::detail::sh_quote(python) +
                          " -c 'import importlib.machinery as m; print(*m.EXTENSION_SUFFIXES)'";
  std::vector<std::string> out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    std::string text;
    while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
    ::pclose(f);
    std::istringstream words(text);
    for (std::string w; words >> w;) out.push_back(w);
  }
  return out;
}

struct LoaderEnvs {
  std::map<int, std::unique_ptr<LoaderEnv>> envs;
  ~LoaderEnvs() {
    for (auto& [n, env] : envs) {
      std::error_code ec;
      std::filesystem::remove_all(env->root, ec);
    }
  }
};

LoaderEnvs& loader_envs() {
  static LoaderEnvs e;
  return e;
}

void loader_sizes(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMicrosecond);
  b->Arg(10);
  if (!epload::bench::smoke()) b->Arg(100)->Arg(1000);
}

// N native backends and nothing else, generated once per process, with a
// warm learned-devices store.
const LoaderEnv* env_for(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto& envs = loader_envs().envs;
  if (auto it = envs.find(n); it != envs.end()) return it->second.get();
  std::string tmpl = (std::filesystem::temp_directory_path() / "epload-bench-loader-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    epload::bench::fail(state, "mkdtemp failed");
    return nullptr;
  }
  auto env = std::make_unique<LoaderEnv>();
  env->root = tmpl;
  env->site = tmpl + "/env/site-packages";
  env->cache_dir = tmpl + "/cache";
  env->backends = n;
  LoaderEnv* raw = env.get();
  envs.emplace(n, std::move(env));
  const std::string source = epload::bench::detail::env_or("EPLOAD_BENCH_SOURCE_DIR", EPLOAD_BENCH_SOURCE_DIR);
  const std::string python = epload::bench::detail::env_or("EPLOAD_BENCH_PYTHON", EPLOAD_BENCH_PYTHON);
  using epload::bench::detail::sh_quote;
  const std::string cmd = sh_quote(python) + " " + sh_quote(source + "/scripts/gen_env.py") + " " +
                          sh_quote(raw->root + "/env") + " --kind native --backends " +
                          std::to_string(n) + " --noise 0 >&2";
  if (std::system(cmd.c_str()) != 0) {
    epload::bench::fail(state, "generator failed: " + cmd);
    return nullptr;
  }
  std::vector<std::string> paths = {raw->site};
  auto index = epload::scan(paths);
  if (!index) {
    epload::bench::fail(state, "scan failed: " + index.error().message);
    return nullptr;
  }
  raw->index = std::make_shared<const epload::Index>(std::move(index).value());
  raw->ext_suffixes = ext_suffixes_of(python);
  // Stamps taken in the clock tick of the generation are "racy" and not
  // stored; wait one tick, then let a loader write the store.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  LoaderOptions o;
  o.cache_dir = raw->cache_dir;
  o.ext_suffixes = raw->ext_suffixes;
  auto warm = Loader::create(raw->index, o);
  if (!warm) {
    epload::bench::fail(state, warm.error().message);
    return nullptr;
  }
  return raw;
}

LoaderOptions options(const LoaderEnv& env, LoadMode mode = LoadMode::lazy) {
  LoaderOptions o;
  o.mode = mode;
  o.cache_dir = env.cache_dir;
  o.ext_suffixes = env.ext_suffixes;
  return o;
}

int mapped_backends() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  std::string last;
  while (std::getline(maps, line)) {
    const auto at = line.find("/gen_backend_");
    if (at == std::string::npos) continue;
    std::string path = line.substr(line.find('/'));
    if (path != last) ++n;  // one library spans several adjacent mappings
    last = path;
  }
  return n;
}

// The measuring thread's CPU time (user + system): what a step costs, also
// on a busy machine, where wall time mostly measures the other processes.
double now_s() {
  struct timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Minor page faults of the calling thread so far.
long minor_faults() {
  struct rusage ru;
  ::getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

// What a child reports: seconds (negative: failed) and up to two counters.
struct ChildOut {
  double seconds = -1, counter = 0, extra = 0;
};
ChildOut child_out(std::pair<double, double> p) { return {p.first, p.second, 0}; }
ChildOut child_out(ChildOut o) { return o; }

// Runs `fn` in a fork()ed child; fn returns {seconds, counter} or a
// ChildOut.  Returns false when the child failed.
template <class Fn>
bool in_child(Fn fn, double& seconds, double& counter, double* extra = nullptr) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const ChildOut o = child_out(fn());
    const double out[3] = {o.seconds, o.counter, o.extra};
    if (::write(fds[1], out, sizeof out) != static_cast<ssize_t>(sizeof out)) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  double got[3] = {-1, 0, 0};
  const bool read_ok = ::read(fds[0], got, sizeof got) == static_cast<ssize_t>(sizeof got);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  seconds = got[0];
  counter = got[1];
  if (extra) *extra = got[2];
  return read_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 && seconds >= 0;
}

std::string middle_device(const LoaderEnv& env) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "dev%04d", env.backends / 2);
  return buf;
}

void BM_LoaderStartupLazy(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  for (auto _ : state) {
    auto loader = Loader::create(env->index, options(*env));
    loader.value()->start();
    benchmark::DoNotOptimize(loader.value().get());
  }
  state.counters["mapped_backends"] = mapped_backends();
}
BENCHMARK(BM_LoaderStartupLazy)->Apply(loader_sizes);

void BM_LoaderStartupCold(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  for (auto _ : state) {
    LoaderOptions o = options(*env);
    o.use_store = false;
    auto loader = Loader::create(env->index, o);
    loader.value()->start();
    benchmark::DoNotOptimize(loader.value().get());
  }
  state.counters["mapped_backends"] = mapped_backends();
}
BENCHMARK(BM_LoaderStartupCold)->Apply(loader_sizes);

void BM_LoaderStartupEager(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  double mapped = 0;
  for (auto _ : state) {
    double seconds = 0;
    const bool ok = in_child(
        [&] {
          const double t = now_s();
          auto loader = Loader::create(env->index, options(*env, LoadMode::eager));
          loader.value()->start();
          const double s = now_s() - t;
          return std::pair<double, double>(s, mapped_backends());
        },
        seconds, mapped);
    if (!ok) {
      epload::bench::fail(state, "eager child failed");
      return;
    }
    state.SetIterationTime(seconds);
  }
  state.counters["mapped_backends"] = mapped;
}
BENCHMARK(BM_LoaderStartupEager)->Apply(loader_sizes)->UseManualTime()->Iterations(5);

// The floor the first lookup is compared with: what a host that knew the
// library already would do by hand.  Its register callback does the least
// any host must do with a registration: keep the device's name and entry
// (reading the name touches the backend's page that holds it, as every
// host's does).
struct BareRegistration {
  char name[64];
  void* entry;
};
BareRegistration g_bare_registration;
int bare_register(void*, const char* name, void* entry) {
  const std::size_t n = ::strnlen(name, sizeof g_bare_registration.name - 1);
  std::memcpy(g_bare_registration.name, name, n);
  g_bare_registration.name[n] = '\0';
  g_bare_registration.entry = entry;
  return EPLOAD_OK;
}
void bare_set_error(void*, const char*) {}
int bare_lookup(void*, const char*, void**) { return EPLOAD_ERR_INVALID; }

// The library gen_env.py wrote for backend i: `_backend` + the generating
// interpreter's extension suffix, so it is looked up rather than spelled.
std::string library_of(const LoaderEnv& env, int i) {
  char pkg[64];
  std::snprintf(pkg, sizeof pkg, "gen_backend_%04d", i);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(env.site + "/" + pkg, ec)) {
    if (e.path().filename().string().starts_with("_backend.")) return e.path().string();
  }
  return env.site + "/" + pkg + "/_backend.so";  // absent: the caller's load reports it
}

std::string device_of(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "dev%04d", i);
  return buf;
}

// dlopen + dlsym + init by hand; seconds of CPU, or -1.
double bare_load(const std::string& lib) {
  const double t = now_s();
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return -1;
  auto init = reinterpret_cast<EploadBackendInit>(::dlsym(h, "gen_backend_init"));
  if (init == nullptr) return -1;
  EploadHost host{EPLOAD_ABI_VERSION, sizeof(EploadHost), nullptr, bare_register, bare_set_error,
                  bare_lookup};
  const int rc = init(&host);
  const double s = now_s() - t;
  return rc == EPLOAD_OK ? s : -1;
}

// The first lookup of a device, and, in the same child, a bare load of
// another copy of the same library (same variant, only the device name
// differs), in alternating order: both pay the same process state, so the
// ratio counter compares like with like.  Manual time: the lookup.
void BM_LoaderFirstLookup(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  const int a = env->backends / 2, b = env->backends / 2 - 1;
  const std::string device = device_of(a), other = library_of(*env, b);
  // The very first lookup in a process runs cold code (and, were the build
  // not linked with -z now, would bind the loader's calls into libc and
  // libstdc++ then); warm that up on a third backend unless measuring it.
  const bool cold_code = state.range(1) != 0;
  const std::string warmup = device_of(env->backends / 2 + 1), warmup_lib = library_of(*env, 1);
  double bare_total = 0, lookup_total = 0, faults_total = 0;
  int iteration = 0;
  for (auto _ : state) {
    const bool bare_first = (iteration++ % 2) == 0;
    double lookup = 0, bare = 0, faults = 0;
    const bool ok = in_child(
        [&] {
          auto loader = Loader::create(env->index, options(*env));
          loader.value()->start();
          if (!cold_code && (!loader.value()->lookup(warmup).ok() || bare_load(warmup_lib) < 0)) {
            return ChildOut{};
          }
          // Fault counts are read outside the timed steps (bare_load times
          // itself inside), so they change no measured interval.
          double bare_s = 0;
          long bare_faults = 0;
          auto bare_step = [&] {
            const long f = minor_faults();
            bare_s = bare_load(other);
            bare_faults = minor_faults() - f;
          };
          if (bare_first) bare_step();
          const long f0 = minor_faults();
          const double t = now_s();
          auto r = loader.value()->lookup(device);
          const double s = now_s() - t;
          const long lookup_faults = minor_faults() - f0;
          if (!bare_first) bare_step();
          return ChildOut{r.ok() && bare_s > 0 ? s : -1, bare_s,
                          static_cast<double>(lookup_faults - bare_faults)};
        },
        lookup, bare, &faults);
    if (!ok) {
      epload::bench::fail(state, "first lookup of " + device + " (or bare load of " + other + ") failed");
      return;
    }
    state.SetIterationTime(lookup);
    lookup_total += lookup;
    bare_total += bare;
    faults_total += faults;
  }
  state.counters["bare_us"] = bare_total / static_cast<double>(state.iterations()) * 1e6;
  state.counters["faults_over_bare"] = faults_total / static_cast<double>(state.iterations());
  state.counters["ratio"] = bare_total > 0 ? lookup_total / bare_total : 0;
}
void first_lookup_sizes(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMicrosecond)->ArgNames({"", "cold_code"});
  for (int cold : {0, 1}) {
    b->Args({10, cold});
    if (!epload::bench::smoke()) b->Args({100, cold})->Args({1000, cold});
  }
}
BENCHMARK(BM_LoaderFirstLookup)->Apply(first_lookup_sizes)->UseManualTime()->Iterations(300);

void BM_LoaderBareDlopen(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  const std::string lib = library_of(*env, env->backends / 2);
  for (auto _ : state) {
    double seconds = 0, unused = 0;
    const bool ok = in_child([&] { return std::pair<double, double>(bare_load(lib), 0); }, seconds, unused);
    if (!ok) {
      epload::bench::fail(state, "bare dlopen of " + lib + " failed");
      return;
    }
    state.SetIterationTime(seconds);
  }
}
BENCHMARK(BM_LoaderBareDlopen)->Apply(loader_sizes)->UseManualTime()->Iterations(300);

void BM_LoaderHotLookup(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  auto loader = Loader::create(env->index, options(*env));
  const std::string device = middle_device(*env);
  if (!loader.value()->lookup(device).ok()) {
    epload::bench::fail(state, "lookup of " + device + " failed");
    return;
  }
  const std::string_view name = device;
  for (auto _ : state) {
    auto r = loader.value()->lookup(name);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LoaderHotLookup)->Apply(loader_sizes)->Unit(benchmark::kNanosecond);

void BM_LoaderUnknownDevice(benchmark::State& state) {
  const LoaderEnv* env = env_for(state);
  if (env == nullptr) return;
  auto loader = Loader::create(env->index, options(*env));
  for (auto _ : state) {
    auto r = loader.value()->lookup("nosuchdevice");
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LoaderUnknownDevice)->Apply(loader_sizes);

}  // namespace
