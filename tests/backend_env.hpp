// backend_env.hpp — real site-packages trees with real backend libraries,
// for the loader, resolve and learned-store tests.
//
// A BackendEnv is a fresh temporary directory holding site-packages/ (and a
// cache directory).  add() copies a test backend built by
// tests/backends/CMakeLists.txt to <pkg>/<mod><suffix> — a copy, so that
// every backend is its own inode, as installed libraries are — and records a
// torch.backends entry point for it; index() builds the Index the loader
// consumes.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "epload/index.hpp"
#include "index_builder.hpp"

namespace epload::testing {

/// Where tests/backends/CMakeLists.txt puts the test backends.
inline std::string test_backend(const std::string& name) {
  return std::string(EPLOAD_TEST_BUILD_DIR) + "/tests/backends/" + name + ".so";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `data` to `path` through a temporary file and rename (a new inode,
/// as installers do).
inline void write_file(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename to " + path);
}

inline void make_dirs(const std::string& path) {
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  }
}

/// True when a file whose path contains `needle` is mapped into this process.
inline bool mapped(const std::string& needle) {
  return read_file("/proc/self/maps").find(needle) != std::string::npos;
}

/// Stamps older than the coarse clock tick, so that the store trusts them
/// (a stamp taken in the tick of a change is "racy" and not stored).
inline void let_clock_tick() { std::this_thread::sleep_for(std::chrono::milliseconds(25)); }

class BackendEnv {
 public:
  /// `site`: the search path's place under the root (a venv's
  /// "lib/python3.11/site-packages" names its interpreter).
  explicit BackendEnv(const std::string& site = "site-packages") {
    char tmpl[] = "/tmp/epload-loader-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    m_root = tmpl;
    m_site = m_root + "/" + site;
    make_dirs(m_site);
    make_dirs(cache_dir());
  }
  ~BackendEnv() {
    if (std::getenv("EPLOAD_TEST_KEEP") == nullptr) {
      std::string cmd = "rm -rf '" + m_root + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", m_root.c_str());
    }
  }
  BackendEnv(const BackendEnv&) = delete;
  BackendEnv& operator=(const BackendEnv&) = delete;

  const std::string& root() const { return m_root; }
  const std::string& site() const { return m_site; }
  std::string cache_dir() const { return m_root + "/cache"; }

  /// Adds distribution `dist` with entry point `name = <pkg>.<mod>:<symbol>`
  /// and, when `variant` is non-empty, a copy of that test backend at
  /// <pkg>/<mod><suffix>.  Returns the library path.
  std::string add(const std::string& dist, const std::string& name, const std::string& variant,
                  const std::string& symbol = "tb_init", const std::string& suffix = ".so",
                  const std::string& mod = "_native") {
    const std::string pkg = dist;
    const std::string dir = m_site + "/" + pkg;
    make_dirs(dir);
    const std::string lib = dir + "/" + mod + suffix;
    if (!variant.empty()) write_file(lib, read_file(test_backend(variant)));
    add_entry_point(dist, name, pkg + "." + mod + ":" + symbol);
    return lib;
  }

  /// Adds an entry point without any file, in `group` (empty: the group
  /// index() is asked for).
  void add_entry_point(const std::string& dist, const std::string& name, const std::string& value,
                       const std::string& group = "") {
    const std::string meta = m_site + "/" + dist + "-1.0.dist-info";
    make_dirs(meta);
    // What an installer writes; a scan names the distribution by it.
    write_file(meta + "/METADATA", "Metadata-Version: 2.1\nName: " + dist + "\nVersion: 1.0\n");
    m_eps.push_back({dist, name, value, meta, group});
  }

  /// The Index of everything added, in order.
  std::shared_ptr<const Index> index(const std::string& group = "torch.backends") const {
    IndexBuilder b;
    const std::uint32_t sp = b.add_search_path(m_site, FileStamp{});
    std::vector<std::pair<std::string, std::uint32_t>> dists;
    for (const Ep& ep : m_eps) {
      std::uint32_t d = 0;
      bool found = false;
      for (const auto& [name, id] : dists) {
        if (name == ep.dist) {
          d = id;
          found = true;
        }
      }
      if (!found) {
        d = b.add_distribution(ep.dist, "1.0", ep.meta, sp);
        dists.emplace_back(ep.dist, d);
      }
      b.add_entry_point(d, ep.group.empty() ? group : ep.group, ep.name, ep.value);
    }
    return std::make_shared<const Index>(b.build());
  }

 private:
  struct Ep {
    std::string dist, name, value, meta, group;
  };
  std::string m_root, m_site;
  std::vector<Ep> m_eps;
};

}  // namespace epload::testing
