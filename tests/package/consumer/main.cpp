// consumer: opens an epload index over the search paths given and prints
// one entry point, the way a C++ host finds its plugins.
//
//   consumer GROUP NAME CACHE_DIR SEARCH_PATH...
//
// Prints "name = value (dist version)" and exits 0, or says why not and
// exits 1.
#include <cstdio>
#include <string>
#include <vector>

#include <epload/cache.hpp>
#include <epload/index.hpp>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: consumer GROUP NAME CACHE_DIR SEARCH_PATH...\n");
    return 2;
  }
  epload::CacheOptions options;
  options.cache_dir = argv[3];
  options.search_paths.assign(argv + 4, argv + argc);
  auto index = epload::open_index(options);
  if (!index) {
    std::fprintf(stderr, "consumer: %s\n", index.error().message.c_str());
    return 1;
  }
  const epload::EntryPoint* ep = (*index)->find(argv[1], argv[2]);
  if (ep == nullptr) {
    std::fprintf(stderr, "consumer: no entry point %s in group %s\n", argv[2], argv[1]);
    return 1;
  }
  std::printf("%.*s = %.*s (%.*s %.*s)\n", int(ep->name.size()), ep->name.data(),
              int(ep->value.size()), ep->value.data(), int(ep->dist->name.size()),
              ep->dist->name.data(), int(ep->dist->version.size()), ep->dist->version.data());
  return 0;
}
