// cache_invalidation_util.hpp — the Invalidation fixture of the cache
// invalidation tests (cache_invalidation_test.cpp, cache_revalidation_test.cpp):
// a real tree of two search paths, its cache warmed, and the changes those
// tests make to it.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cache_test_util.hpp"
#include "epload/cache.hpp"

namespace epload::test {

class Invalidation : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("EPLOAD_INDEX");
    site1 = t / "site1";
    site2 = t / "site2";
    test::make_dist(site1, "alpha", "1.0", "[console_scripts]\nalpha = alpha.cli:main\n");
    test::make_dist(site1, "beta", "1.0", "[torch.backends]\nnpu = beta_npu:init\n");
    test::make_dist(site1, "noeps", "1.0", "");
    test::make_dist(site2, "gamma", "1.0", "[torch.backends]\nxpu = gamma_xpu:init\n");
    test::make_dist(site2, "shadow", "2.0", "[g]\nwho = site2:shadow\n");
    options.search_paths = {site1, site2};
    options.cache_dir = t / "cache";
    warm();
  }

  /// Brings the cache to a valid, non-racy state for the current tree.
  void warm() {
    next_tick();
    CacheReport r = open_checked();
    ASSERT_NE(r.status, CacheStatus::uncached) << r.reason;
    r = open_checked();
    ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  }

  /// Brings the cache to a valid state and checks a group query hits.
  void warm_group() {
    const auto groups = options.groups;
    options.groups.clear();
    warm();
    options.groups = groups;
    CacheReport r;
    ASSERT_TRUE(open_index(options, &r));
    ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  }

  CacheReport open_checked() { return test::open_checked(options); }

  /// Adds `n` distributions to site1, enough past ~500 files for the
  /// two-thread `full` check.
  void add_noise(int n) {
    for (int i = 0; i < n; ++i) {
      test::make_dist(site1, "noise" + std::to_string(i), "1.0", "[console_scripts]\nn = m:f\n");
    }
  }

  /// Expects the next open to find no usable cache file and scan.
  void expect_rebuilt(const std::string& reason_part = "") { expect_status(CacheStatus::rebuilt, reason_part); }
  /// Expects the next open to notice a change and refresh the cache file.
  void expect_refreshed(const std::string& reason_part = "") { expect_status(CacheStatus::refreshed, reason_part); }
  void expect_status(CacheStatus status, const std::string& reason_part) {
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, status) << r.reason;
    if (!reason_part.empty()) {
      EXPECT_NE(r.reason.find(reason_part), std::string::npos) << r.reason;
    }
  }

  std::string ep_file(const std::string& site, const std::string& dist) {
    return site + "/" + dist + ".dist-info/entry_points.txt";
  }

  /// `count` search paths many<p>, each holding `per_path` distributions
  /// d<p>x<i> with one entry point `d<p>x<i> = m:f` in group g.
  std::vector<std::string> many_paths(int count, int per_path) {
    std::vector<std::string> paths;
    for (int p = 0; p < count; ++p) {
      const std::string site = t / ("many" + std::to_string(p));
      for (int i = 0; i < per_path; ++i) {
        const std::string name = "d" + std::to_string(p) + "x" + std::to_string(i);
        test::make_dist(site, name, "1.0", "[g]\n" + name + " = m:f\n");
      }
      paths.push_back(site);
    }
    return paths;
  }

  /// Rewrites `file` in place with `text` (the same size) and restores its
  /// mtime: only ctime shows the change.
  static void rewrite_in_place(const std::string& file, const std::string& text) {
    struct stat before;
    ASSERT_EQ(::stat(file.c_str(), &before), 0);
    test::write_file(file, text);
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
  }

  TempDir t;
  std::string site1, site2;
  CacheOptions options;
};

}  // namespace epload::test
