// bench_metadata.cpp — the entry_points.txt parser and the METADATA header
// reader, on the real files of a generated environment.
//
// The files are read into memory once, outside the timed loop, so these
// figures are pure parsing: what a cold scan spends per file on top of the
// system calls that read it.
#include <filesystem>  // directory_iterator
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "epload/metadata.hpp"

namespace {

namespace fs = std::filesystem;
using epload::bench::env_for;
using epload::bench::fail;
using epload::bench::read_file;

/// Every file called `leaf` inside a metadata directory of the environment.
std::vector<std::string> load_texts(const std::string& site, const char* leaf) {
  std::vector<std::string> texts;
  for (const fs::directory_entry& e : fs::directory_iterator(site)) {
    if (!e.is_directory()) continue;
    std::string text;
    if (read_file((e.path() / leaf).string(), text)) texts.push_back(std::move(text));
  }
  return texts;
}

void BM_ParseEntryPoints(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  const std::vector<std::string> texts = load_texts(env->site, "entry_points.txt");
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  std::vector<epload::ParsedEntry> out;
  out.reserve(64);
  std::size_t entries = 0;
  for (auto _ : state) {
    entries = 0;
    for (const std::string& t : texts) {
      out.clear();
      auto r = epload::parse_entry_points(t, "entry_points.txt", out);
      if (!r) {
        fail(state, r.error().message);
        return;
      }
      entries += out.size();
    }
    benchmark::DoNotOptimize(entries);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * texts.size()));
  state.counters["files"] = static_cast<double>(texts.size());
  state.counters["entries"] = static_cast<double>(entries);
}
BENCHMARK(BM_ParseEntryPoints)->Apply(epload::bench::sizes);

void BM_ParseMetadataHeaders(benchmark::State& state) {
  const auto* env = env_for(state);
  if (env == nullptr) return;
  std::vector<std::string> texts = load_texts(env->site, "METADATA");
  for (std::string& t : load_texts(env->site, "PKG-INFO")) texts.push_back(std::move(t));
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  for (auto _ : state) {
    for (const std::string& t : texts) {
      epload::MetadataHeaders h = epload::parse_metadata_headers(t);
      benchmark::DoNotOptimize(h);
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * texts.size()));
  state.counters["files"] = static_cast<double>(texts.size());
}
BENCHMARK(BM_ParseMetadataHeaders)->Apply(epload::bench::sizes);

}  // namespace
