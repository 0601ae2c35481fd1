// floor_process.cpp — build/bench/epload_floor: the floors under `epload`
// processes on this machine.
//
//   epload_floor                 exits at once
//   epload_floor --stat LIST     stats the files LIST names, then exits
//
// It is linked like build/epload (simdjson compiled in with libstdc++
// static, or Debian's libsimdjson.so and through it libstdc++.so: see
// CMakeLists.txt; libgcc_s, libm, libmimalloc; the same link options) and
// keeps each library in by referring to one symbol of it.
// Without arguments it costs what every epload process costs before doing
// anything: the exec, the dynamic loader's work (mapping, relocating and
// initialising those libraries) and the exit.
//
// With --stat it also makes the stat calls `full` validation makes, the
// fastest way this machine offers and nothing else: LIST holds one
// "DIR<TAB>REL" line per file (REL empty: DIR itself), each file is stat'ed
// relative to an O_PATH descriptor of its DIR, and the calls are shared, 32
// at a time from an atomic counter, by the calling thread and one helper
// created already placed on another allowed CPU (epload's own
// run_on_two_cpus, src/base/parallel.hpp).  LIST is read whole with one read
// and split in place.
// What an `epload entry-points` run under `full` costs above this is ours:
// reading and checking the cache, answering.
//
// scripts/bench_index.py times both forms beside `epload --version` and every
// `epload entry-points` mode, in the same rounds, and compares the targets'
// budgets with them.  simdjson's function is declared here rather than
// through <simdjson.h>: only src/cache/cache.cpp includes that header, and nothing
// here calls it.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <mimalloc.h>

#include "cache_internal.hpp"  // EarlyFullCheck::k_chunk
#include "parallel.hpp"        // run_on_two_cpus

namespace simdjson {
class implementation;
const implementation* get_active_implementation() noexcept;
}  // namespace simdjson

namespace {

// Addresses taken, never called: calling would do work (simdjson picks its
// kernel with cpuid) that is not part of loading.
void* volatile g_keep[] = {reinterpret_cast<void*>(&simdjson::get_active_implementation),
                           reinterpret_cast<void*>(&mi_version)};

struct Item {
  const char* dir;
  const char* rel;  // "" : the directory itself
};

struct Work {
  std::vector<Item> items;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> missing{0};
};

constexpr std::size_t k_chunk = epload::detail::EarlyFullCheck::k_chunk;  // as epload's check
constexpr std::size_t k_max_dirs = 64;

void stat_share(Work& w) {
  // Each thread opens its own descriptors (as epload does: threads sharing
  // one would bounce its reference count between the cores).
  const char* dirs[k_max_dirs];
  int fds[k_max_dirs];
  std::size_t ndirs = 0, missing = 0;
  struct stat st;
  const std::size_t n = w.items.size();
  for (std::size_t c; (c = w.next.fetch_add(k_chunk, std::memory_order_relaxed)) < n;) {
    for (std::size_t i = c, end = c + k_chunk < n ? c + k_chunk : n; i < end; ++i) {
      const Item& it = w.items[i];
      int rc;
      if (*it.rel == '\0') {
        rc = ::stat(it.dir, &st);
      } else {
        std::size_t d = 0;
        while (d < ndirs && dirs[d] != it.dir) ++d;
        if (d == ndirs && ndirs < k_max_dirs) {
          dirs[ndirs] = it.dir;
          fds[ndirs++] = ::open(it.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
        rc = d < ndirs && fds[d] >= 0 ? ::fstatat(fds[d], it.rel, &st, 0) : -1;
      }
      if (rc != 0) ++missing;
    }
  }
  for (std::size_t d = 0; d < ndirs; ++d) {
    if (fds[d] >= 0) ::close(fds[d]);
  }
  w.missing.fetch_add(missing, std::memory_order_relaxed);
}

int fail(const char* what, const char* path) {
  std::fprintf(stderr, "epload_floor: %s %s: %s\n", what, path, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (g_keep[0] == nullptr || g_keep[1] == nullptr) return 1;
  if (argc == 1) return 0;
  constexpr const char* k_usage =
      "usage: epload_floor [--stat LIST]\n"
      "  Exits at once: the floor under every epload process (see bench/floor_process.cpp).\n"
      "  --stat LIST: first stats the files LIST names, one DIR<TAB>REL line each\n"
      "               (REL empty: DIR itself), on two CPUs, and says how many.\n";
  const std::string_view first = argv[1];
  if (argc == 2 && (first == "--help" || first == "-h")) {
    std::fputs(k_usage, stdout);
    return 0;
  }
  if (argc != 3 || first != "--stat") {
    std::fputs(k_usage, stderr);
    return 2;
  }
  const int fd = ::open(argv[2], O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open", argv[2]);
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail("cannot stat", argv[2]);
  std::vector<char> text(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t got = 0;
  for (ssize_t r; got < text.size() - 1; got += static_cast<std::size_t>(r)) {
    r = ::read(fd, text.data() + got, text.size() - 1 - got);
    if (r < 0 && errno == EINTR) {
      r = 0;
      continue;
    }
    if (r <= 0) break;
  }
  ::close(fd);
  if (got != text.size() - 1) return fail("short read of", argv[2]);
  Work w;
  for (char *p = text.data(), *end = p + got; p < end;) {
    char* nl = static_cast<char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (nl == nullptr) nl = end;
    *nl = '\0';
    char* tab = static_cast<char*>(std::memchr(p, '\t', static_cast<std::size_t>(nl - p)));
    if (tab == nullptr) {
      std::fprintf(stderr, "epload_floor: %s: a line without a tab: %s\n", argv[2], p);
      return 1;
    }
    *tab = '\0';
    // Consecutive lines of one directory share its string, so a thread
    // finds its descriptor by pointer.
    const char* dir = !w.items.empty() && std::strcmp(w.items.back().dir, p) == 0
                          ? w.items.back().dir
                          : p;
    w.items.push_back({dir, tab + 1});
    p = nl + 1;
  }
  epload::detail::run_on_two_cpus([](void* p) { stat_share(*static_cast<Work*>(p)); }, &w);
  // Files that do not exist (an entry_points.txt a distribution lacks) are
  // stat'ed all the same, as by epload: they are part of the check.
  std::printf("%zu stat calls, %zu of them for names that do not exist\n", w.items.size(),
              w.missing.load());
  return 0;
}
