// bench_baseline.cpp — reference costs that the CI gate (scripts/bench_gate)
// divides epload's figures by, so that it compares ratios measured in one
// run rather than absolute times that depend on the machine and its load.
//
//   BM_HashMapLookup/N  std::unordered_map<std::string_view, void*>::find of
//                       one of N device names ("dev0000"...): what a plain
//                       hash map costs for the lookup Loader::lookup() does
//                       after a device is loaded (BM_LoaderHotLookup/N).
//
// It is also the loader suite's "for scale" row (BENCHMARKS.md, Loader).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

void BM_HashMapLookup(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "dev%04d", i);
    names.emplace_back(buf);
  }
  std::unordered_map<std::string_view, void*> map;
  for (const std::string& s : names) map.emplace(s, const_cast<char*>(s.data()));
  // A separate copy of the key, as a caller's string would be.
  const std::string device = names[static_cast<std::size_t>(n / 2)];
  const std::string_view name = device;
  for (auto _ : state) {
    auto it = map.find(name);
    benchmark::DoNotOptimize(it);
  }
}
BENCHMARK(BM_HashMapLookup)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kNanosecond);

}  // namespace
