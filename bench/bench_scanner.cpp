// bench_scanner.cpp — a cold scan (no cache) of a generated environment:
// list the directory, read every distribution's metadata and entry points.
//
// "Cold" means no epload cache; the kernel's page and dentry caches are warm
// after the first iteration, as they are for a program started repeatedly.
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "epload/scanner.hpp"

namespace {

using epload::bench::env_for;
using epload::bench::fail;

void BM_ScanCold(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const std::vector<std::string> paths{env->site};
  std::size_t dists = 0, backends = 0;
  for (auto _ : state) {
    auto index = epload::scan(paths);
    if (!index) {
      fail(state, index.error().message);
      return;
    }
    dists = index->distributions().size();
    backends = index->group("torch.backends").size();
    benchmark::DoNotOptimize(index);
  }
  if (dists != static_cast<std::size_t>(env->distributions) ||
      backends != static_cast<std::size_t>(env->backends)) {
    fail(state, "the scan's answer does not match the generated environment");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * dists));
  state.counters["dists"] = static_cast<double>(dists);
}
BENCHMARK(BM_ScanCold)->Apply(epload::bench::sizes);

}  // namespace
