// bench_refresh.cpp — a stale cache file refreshed from its parts, against a
// plain hit of the same query.
//
// The search path is a script's directory (empty of distributions, first, as
// sys.path[0]) then the generated site-packages; the query is one group under
// `full` validation, as `epload.entry_points(group=...)` asks.  Each case
// makes one change before each iteration (untimed, then a pause of 10 ms so
// that the change is older than the refresh's clock tick: its own stamps are
// then not racy; the plain hit and the floor pause as long, see pause())
// and times open_index(), which must report a refresh:
//
//   BM_RefreshHit       nothing changed: the plain hit (the denominator)
//   BM_RefreshNewFile   a file created in the script's directory (a hit that
//                       lists that directory again)
//   BM_RefreshAddDist   one distribution installed (removed again untimed)
//   BM_RefreshRemoveDist one distribution removed (installed again untimed)
//   BM_RefreshEditDist  one entry_points.txt rewritten
//
// and, with nothing changed, the floor of any refresh of this file, however
// it recomputes:
//
//   BM_RefreshFloorAny  the hit (its check, which a refresh makes too), then
//                       the changed search path listed again (readdir, as a
//                       refresh must to find what was installed or removed),
//                       then the file's own bytes, already in memory, written
//                       atomically (a temporary file, its blocks reserved,
//                       then rename()), as a
//                       refresh replaces the file; no parse, no
//                       serialization, no recompute
//
// so no refresh can cost less than FloorAny / Hit.
// BENCHMARKS.md records the ratios to BM_RefreshHit at 6,000 distributions.
#include <dirent.h>  // opendir
#include <fcntl.h>   // open
#include <unistd.h>  // write, close

#include <chrono>
#include <cstdio>  // fopen, rename
#include <filesystem>
#include <string>
#include <thread>

#include "bench_util.hpp"
#include "epload/cache.hpp"

namespace {

using epload::bench::env_for;
using epload::bench::fail;
using epload::bench::GeneratedEnv;

enum class Change { none, new_file, add_dist, remove_dist, edit_dist };

void write(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

/// The extra distribution the add/remove cases install and remove.
void install_extra(const GeneratedEnv& env) {
  const std::string dir = env.site + "/zz_refresh_extra-1.0.dist-info";
  std::filesystem::create_directories(dir);
  write(dir + "/METADATA", "Metadata-Version: 2.1\nName: zz_refresh_extra\nVersion: 1.0\n\n");
  write(dir + "/entry_points.txt", "[torch.backends]\nzz_refresh_extra = zz_refresh_extra:init\n");
}
void remove_extra(const GeneratedEnv& env) { std::filesystem::remove_all(env.site + "/zz_refresh_extra-1.0.dist-info"); }

/// The untimed 10 ms before every timed iteration of every case, the plain
/// hit's and the floor's too: after the pause the caches are as cold as a
/// starting process finds them (a hit timed back to back costs ~40% less),
/// and a ratio must not give its two sides different caches.
void pause(benchmark::State& state) {
  state.PauseTiming();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  state.ResumeTiming();
}

/// Opens until the cache answers with `want` (after the 10 ms pause that
/// keeps the answer's stamps from being racy); false when it never does.
bool settle(const epload::CacheOptions& o) {
  epload::CacheReport r;
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!epload::open_index(o, &r)) return false;
    if (r.status == epload::CacheStatus::hit) return true;
  }
  return false;
}

/// The options every case opens with: a script's directory (made here)
/// before the generated site, the torch.backends group.
epload::CacheOptions refresh_options(const GeneratedEnv& env) {
  epload::CacheOptions o;
  o.search_paths = {env.cache_dir + "-script", env.site};
  o.cache_dir = env.cache_dir;
  o.groups = {"torch.backends"};
  std::filesystem::create_directories(o.search_paths[0]);
  return o;
}

void refresh(benchmark::State& state, Change change) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const epload::CacheOptions o = refresh_options(*env);
  const std::string& script_dir = o.search_paths[0];
  if (change == Change::remove_dist) install_extra(*env);
  if (!settle(o)) return fail(state, "the cache never hit");
  // A new file in an entry that holds no metadata is a hit: the entry is
  // listed again and still contributes nothing (cache_validate.cpp).
  const epload::CacheStatus want = change == Change::none || change == Change::new_file ? epload::CacheStatus::hit
                                                                                        : epload::CacheStatus::refreshed;
  // The file edited: the first backend distribution's, alternately two texts.
  std::string edited;
  for (const auto& e : std::filesystem::directory_iterator(env->site)) {
    const std::string p = e.path().string() + "/entry_points.txt";
    if (p.find("backend") != std::string::npos && std::filesystem::exists(p)) {
      edited = p;
      break;
    }
  }
  if (change == Change::edit_dist && edited.empty()) return fail(state, "no backend distribution to edit");
  const std::string original = edited.empty() ? "" : [&] {
    std::string s;
    epload::bench::read_file(edited, s);
    return s;
  }();
  static std::size_t n = 0;  // across repetitions too: every new file is new
  for (auto _ : state) {
    state.PauseTiming();
    ++n;
    switch (change) {
      case Change::none: break;
      case Change::new_file: write(script_dir + "/out" + std::to_string(n) + ".log", "step\n"); break;
      case Change::add_dist:
        remove_extra(*env);
        if (!settle(o)) return fail(state, "no hit after the removal");
        install_extra(*env);
        break;
      case Change::remove_dist:
        install_extra(*env);
        if (!settle(o)) return fail(state, "no hit after the install");
        remove_extra(*env);
        break;
      case Change::edit_dist: write(edited, n % 2 != 0 ? original + "# edit\n" : original); break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // see pause()
    state.ResumeTiming();
    epload::CacheReport r;
    auto index = epload::open_index(o, &r);
    if (!index || r.status != want) {
      return fail(state, "not a " + std::string(epload::to_string(want)) + ": " + (index ? r.reason : index.error().message));
    }
    benchmark::DoNotOptimize((*index)->group("torch.backends").size());
  }
  remove_extra(*env);
  if (!edited.empty()) write(edited, original);
}

/// Every entry of `dir` read once, as a refresh lists a changed search path;
/// how many there are.
std::size_t list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  std::size_t n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

/// `bytes` written to `file` through a temporary file and rename(), its
/// blocks reserved first as every epload write does (atomic_file.cpp: ext4
/// would otherwise write the file out inside rename()).
bool write_atomically(const std::string& file, const std::string& bytes) {
  const std::string tmp = file + ".floor.tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  (void)::fallocate(fd, 0, 0, static_cast<off_t>(bytes.size()));
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok && ::rename(tmp.c_str(), file.c_str()) == 0;
}

/// BM_RefreshFloorAny (see above): a hit, a listing, a write of the file's
/// bytes; the file rewritten with its own bytes is the same answer, so every
/// iteration's open is still a hit.
void BM_RefreshFloorAny(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const epload::CacheOptions o = refresh_options(*env);
  if (!settle(o)) return fail(state, "the cache never hit");
  const std::string file = epload::cache_file_path(o);
  std::string bytes;
  if (!epload::bench::read_file(file, bytes)) return fail(state, "cannot read the cache file");
  const std::string& site = o.search_paths.back();
  for (auto _ : state) {
    pause(state);
    epload::CacheReport r;
    auto index = epload::open_index(o, &r);
    if (!index || r.status != epload::CacheStatus::hit) return fail(state, "not a hit");
    benchmark::DoNotOptimize(list_dir(site));
    if (!write_atomically(file, bytes)) return fail(state, "cannot write " + file);
    benchmark::DoNotOptimize((*index)->group("torch.backends").size());
  }
}

/// 6,000 distributions (EPLOAD_BENCH_SIZES overrides; 100 under smoke).
void refresh_sizes(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime()->Iterations(20);
  if (std::getenv("EPLOAD_BENCH_SIZES") != nullptr || epload::bench::smoke()) return epload::bench::sizes(b);
  b->Arg(6000);
}

void BM_RefreshHit(benchmark::State& state) { refresh(state, Change::none); }
void BM_RefreshNewFile(benchmark::State& state) { refresh(state, Change::new_file); }
void BM_RefreshAddDist(benchmark::State& state) { refresh(state, Change::add_dist); }
void BM_RefreshRemoveDist(benchmark::State& state) { refresh(state, Change::remove_dist); }
void BM_RefreshEditDist(benchmark::State& state) { refresh(state, Change::edit_dist); }
BENCHMARK(BM_RefreshHit)->Apply(refresh_sizes);
BENCHMARK(BM_RefreshNewFile)->Apply(refresh_sizes);
BENCHMARK(BM_RefreshAddDist)->Apply(refresh_sizes);
BENCHMARK(BM_RefreshRemoveDist)->Apply(refresh_sizes);
BENCHMARK(BM_RefreshEditDist)->Apply(refresh_sizes);
BENCHMARK(BM_RefreshFloorAny)->Apply(refresh_sizes);

}  // namespace
