// replay_main.cpp — the `main` of a fuzz target in the normal build: feeds
// every file named on the command line (every regular file of a directory,
// in name order) to LLVMFuzzerTestOneInput once.  ctest runs each target
// over its corpus (tests/fuzz/corpus/<target>/) as `fuzz.<target>`, so every
// seed and every crash regression is replayed by every build, sanitized or
// not.  Exit status: 0 when every input ran, 1 when an argument cannot be
// read (a crash ends the process on its own).
#include <algorithm>   // sort
#include <cstdint>     // uint8_t
#include <cstdio>      // fprintf
#include <filesystem>  // directory listing
#include <fstream>     // reading inputs
#include <iterator>    // istreambuf_iterator
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy in its own allocation, so that ASan sees a read past its end.
  std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  std::size_t ran = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      ok = run_file(arg) && ok;
      ++ran;
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    if (ec) {
      std::fprintf(stderr, "replay: cannot list %s: %s\n", arg.c_str(), ec.message().c_str());
      ok = false;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      ok = run_file(f) && ok;
      ++ran;
    }
  }
  std::printf("replayed %zu input(s)\n", ran);
  return ok ? 0 : 1;
}
