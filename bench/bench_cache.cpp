// bench_cache.cpp — the cached path: load a cache file and validate it, as
// every start of a program does, at both validation levels.
//
// BM_CacheLoadValidate{Full,Paths} time open_index() on a warm cache (key,
// cache-file checks, read, parse, validate) and fail unless every iteration
// is a hit.  The pieces are timed on their own too: BM_CacheRead (read and
// parse only), BM_CacheValidate{Full,Paths} (stats only, on an index in
// memory) and BM_CacheWrite (serialize + atomic replace).
//
// BM_CacheStatBaseline is the reference for the target "within 1.5x of the
// bare cost of the stat calls it makes": the same fstatat calls `full`
// validation needs (one per search path and per watched file, relative to a
// directory descriptor), and nothing else.
#include <fcntl.h>     // open, O_PATH
#include <sys/stat.h>  // fstatat
#include <unistd.h>    // close

#include <chrono>  // warm-up back-off
#include <thread>  // sleep_for
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "index_provenance.hpp"
#include "epload/cache.hpp"
#include "epload/scanner.hpp"

namespace {

using epload::bench::env_for;
using epload::bench::fail;
using epload::bench::GeneratedEnv;

epload::CacheOptions options_for(const GeneratedEnv& env, epload::Validation v) {
  epload::CacheOptions o;
  o.search_paths = {env.site};
  o.cache_dir = env.cache_dir;
  o.validation = v;
  return o;
}

/// Opens the index until the cache reports a hit.  The first open writes the
/// cache; a second may still rebuild when the generator's last files share
/// the clock tick of that scan (the racy rule), so retry briefly.  Returns
/// false (with the benchmark skipped) if the cache never hits.
bool warm(benchmark::State& state, const epload::CacheOptions& o) {
  epload::CacheReport report;
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto index = epload::open_index(o, &report);
    if (!index) {
      fail(state, index.error().message);
      return false;
    }
    if (report.status == epload::CacheStatus::hit) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string why = "cache never hit: " + report.reason;
  fail(state, why);
  return false;
}

void load_validate(benchmark::State& state, epload::Validation v) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const epload::CacheOptions o = options_for(*env, v);
  if (!warm(state, o)) return;
  epload::CacheReport report;
  std::size_t backends = 0;
  for (auto _ : state) {
    auto index = epload::open_index(o, &report);
    if (!index || report.status != epload::CacheStatus::hit) {
      const std::string why = "not a cache hit: " + (index ? report.reason : index.error().message);
      fail(state, why);
      return;
    }
    backends = (*index)->group("torch.backends").size();
    benchmark::DoNotOptimize(backends);
  }
  if (backends != static_cast<std::size_t>(env->backends)) {
    fail(state, "the cached answer does not match the generated environment");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * env->distributions));
}

void BM_CacheLoadValidateFull(benchmark::State& state) {
  load_validate(state, epload::Validation::full);
}
BENCHMARK(BM_CacheLoadValidateFull)->Apply(epload::bench::sizes);

void BM_CacheLoadValidatePaths(benchmark::State& state) {
  load_validate(state, epload::Validation::paths);
}
BENCHMARK(BM_CacheLoadValidatePaths)->Apply(epload::bench::sizes);

void BM_CacheRead(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const epload::CacheOptions o = options_for(*env, epload::Validation::full);
  if (!warm(state, o)) return;
  const std::string file = epload::cache_file_path(o);
  for (auto _ : state) {
    auto index = epload::read_index(file);
    if (!index) {
      fail(state, index.error().message);
      return;
    }
    benchmark::DoNotOptimize(index);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * env->distributions));
}
BENCHMARK(BM_CacheRead)->Apply(epload::bench::sizes);

/// A freshly scanned index, made safe from the racy rule by waiting for the
/// coarse clock to move past the generator's writes before scanning.
epload::Result<epload::Index> settled_scan(const GeneratedEnv& env) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return epload::scan(std::vector<std::string>{env.site});
}

void validate(benchmark::State& state, epload::Validation v) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  auto index = settled_scan(*env);
  if (!index) {
    fail(state, index.error().message);
    return;
  }
  std::string why;
  if (!epload::still_valid(*index, v, &why)) {
    why = "fresh index not valid: " + why;
    fail(state, why);
    return;
  }
  for (auto _ : state) {
    bool ok = epload::still_valid(*index, v);
    benchmark::DoNotOptimize(ok);
  }
  state.counters["stats"] = static_cast<double>(
      search_path_stamps(*index).size() +
      (v == epload::Validation::full ? watched_files(*index).size() : 0));
}

void BM_CacheValidateFull(benchmark::State& state) { validate(state, epload::Validation::full); }
BENCHMARK(BM_CacheValidateFull)->Apply(epload::bench::sizes);

void BM_CacheValidatePaths(benchmark::State& state) { validate(state, epload::Validation::paths); }
BENCHMARK(BM_CacheValidatePaths)->Apply(epload::bench::sizes);

void BM_CacheStatBaseline(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  auto index = settled_scan(*env);
  if (!index) {
    fail(state, index.error().message);
    return;
  }
  // Copy the relative paths out: the loop must not touch the Index.
  std::vector<std::string> paths(index->search_paths().begin(), index->search_paths().end());
  std::vector<std::pair<std::uint32_t, std::string>> files;
  for (const epload::WatchedFile& w : watched_files(*index))
    files.emplace_back(w.search_path, std::string(w.rel_path));
  std::vector<int> fds(paths.size(), -1);
  struct stat st;
  for (auto _ : state) {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      fds[i] = ::open(paths[i].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      ::fstat(fds[i], &st);
    }
    for (const auto& [sp, rel] : files) benchmark::DoNotOptimize(::fstatat(fds[sp], rel.c_str(), &st, 0));
    for (int& fd : fds) ::close(fd);
  }
  state.counters["stats"] = static_cast<double>(paths.size() + files.size());
}
BENCHMARK(BM_CacheStatBaseline)->Apply(epload::bench::sizes);

void BM_CacheWrite(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  auto index = epload::scan(std::vector<std::string>{env->site});
  if (!index) {
    fail(state, index.error().message);
    return;
  }
  const std::string file = env->root + "/write-bench.json";
  for (auto _ : state) {
    auto r = epload::write_index(*index, file);
    if (!r) {
      fail(state, r.error().message);
      return;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * env->distributions));
}
BENCHMARK(BM_CacheWrite)->Apply(epload::bench::sizes);

}  // namespace
