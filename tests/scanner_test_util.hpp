// scanner_test_util.hpp — the Scanner fixture the scanner's tests share:
// distributions written under a temp dir, scanned, and what the index says
// about them.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>  // readdir, to know the raw listing order
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "cache_test_util.hpp"  // FdLimit
#include "index_provenance.hpp"
#include "epload/scanner.hpp"

namespace epload::testing {

namespace fs = std::filesystem;

class Scanner : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/epload-scanner-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    m_root = tmpl;
  }
  void TearDown() override {
    // Give back permissions a test took away, then remove everything.
    for (auto it = fs::recursive_directory_iterator(m_root, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it) {
      std::error_code ec;
      if (!it->is_symlink()) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    std::error_code ec;
    fs::remove_all(m_root, ec);
  }

  std::string path(const std::string& rel) const { return (fs::path(m_root) / rel).string(); }

  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories(fs::path(path(rel)).parent_path());
    std::ofstream(path(rel), std::ios::binary) << text;
  }

  // A dist-info (or any metadata dir) with optional entry_points.txt.
  void dist(const std::string& site, const std::string& dir, const std::string& eps = "",
            const std::string& metadata = "") const {
    fs::create_directories(path(site + "/" + dir));
    if (!eps.empty()) write(site + "/" + dir + "/entry_points.txt", eps);
    if (!metadata.empty()) {
      write(site + "/" + dir + "/METADATA", metadata);
    } else if (!eps.empty() && dir.ends_with(".dist-info")) {
      // What an installer writes: Name and Version as the stem has them.
      const std::string stem = dir.substr(0, dir.rfind('.'));
      const std::size_t dash = stem.find('-');
      write(site + "/" + dir + "/METADATA",
            "Metadata-Version: 2.1\nName: " + stem.substr(0, dash) + "\nVersion: " +
                (dash == std::string::npos ? "0" : stem.substr(dash + 1)) + "\n");
    }
  }

  Index scan_ok(const std::vector<std::string>& paths) const {
    auto r = scan(paths);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : Index();
  }

  // "group:name=value@dist" for every entry point, in order.
  static std::vector<std::string> flat(const Index& index) {
    std::vector<std::string> v;
    for (const EntryPoint& ep : index.entry_points()) {
      v.push_back(std::string(ep.group) + ":" + std::string(ep.name) + "=" + std::string(ep.value) +
                  "@" + std::string(ep.dist->name));
    }
    return v;
  }

  static const WatchedFile* watched(const Index& index, std::string_view rel) {
    for (const WatchedFile& w : watched_files(index)) {
      if (w.rel_path == rel) return &w;
    }
    return nullptr;
  }

  // scan({site}) with one descriptor to spare: the search path's directory,
  // none left for a file.
  static Result<Index> scan_with_one_descriptor(const std::string& site) {
    const std::vector<std::string> paths = {site};
    test::FdLimit limit(1);
    if (!limit.ok()) return Error{Errc::io, "setrlimit failed"};
    return scan(paths);
  }

  // The raw readdir order of `dir`, names only.
  std::vector<std::string> listing(const std::string& dir) const {
    std::vector<std::string> names;
    DIR* d = ::opendir(path(dir).c_str());
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
  }

  std::string m_root;
};

}  // namespace epload::testing
