// cache_revalidation_test.cpp — the cache invalidation rules (see
// cache_invalidation_test.cpp) for the other ways an answer is kept: group
// queries (partial loads), shipped read-only indexes, and Catalog, which
// revalidates a kept answer on every get(), also when a sibling Catalog lends
// it a checked cache file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cache_invalidation_util.hpp"
#include "cache_overlap.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/scanner.hpp"
#include "index_provenance.hpp"
#include "stamp.hpp"

namespace epload {
namespace {

using test::Invalidation;
using test::TempDir;
namespace fs = std::filesystem;

using test::next_tick;

// ---- group queries (partial loads) ----------------------------------------------

TEST_F(Invalidation, GroupQueryNoticesWhatACompleteQueryNotices) {
  // A partial load under `full` validation carries the whole watched list,
  // so an in-place edit of any distribution, in the group or not, is seen.
  options.groups = {"torch.backends"};
  CacheReport r;
  auto idx = open_index(options, &r);
  ASSERT_TRUE(idx);
  ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_FALSE((*idx)->complete());
  ASSERT_EQ((*idx)->group("torch.backends").size(), 2u);

  const std::string f = ep_file(site1, "beta-1.0");
  struct stat before;
  ASSERT_EQ(::stat(f.c_str(), &before), 0);
  test::write_file(f, "[torch.backends]\nnpu = beta_npx:init\n");  // same size
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), times, 0), 0);
  idx = open_index(options, &r);
  ASSERT_TRUE(idx);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_NE(r.reason.find("entry_points.txt"), std::string::npos) << r.reason;
  EXPECT_EQ((*idx)->find("torch.backends", "npu")->value, "beta_npx:init");

  // Outside the group too (its answer could not change, but the rule is
  // the same as for a complete query).
  next_tick();
  ASSERT_TRUE(open_index(options, &r));
  ASSERT_TRUE(open_index(options, &r));
  ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  ASSERT_EQ(::unlink(ep_file(site1, "alpha-1.0").c_str()), 0);
  ASSERT_TRUE(open_index(options, &r));
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
}

TEST_F(Invalidation, GroupCatalogRevalidatesOnEveryGet) {
  for (Validation v : {Validation::full, Validation::paths}) {
    options.groups = {"torch.backends"};
    options.validation = v;
    warm_group();
    Catalog catalog(options);
    CacheReport r;
    auto a = catalog.get(&r);
    ASSERT_TRUE(a);
    EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
    EXPECT_FALSE((*a)->complete());
    auto b = catalog.get(&r);
    ASSERT_TRUE(b);
    EXPECT_EQ(a->get(), b->get());

    const std::string name = v == Validation::full ? "late" : "later";
    test::make_dist(site2, name, "1.0", "[torch.backends]\n" + name + " = late:init\n");
    auto c = catalog.get(&r);
    ASSERT_TRUE(c);
    EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
    EXPECT_NE((*c)->find("torch.backends", name), nullptr);
    next_tick();
  }
}

// ---- shipped (relocatable, read-only) indexes --------------------------------

TEST_F(Invalidation, ShippedIndexSurvivesCopyingTheEnvironment) {
  // An environment with its index, copied elsewhere preserving times (as
  // cp -a, tar and container layers do): the index is used as is.
  const std::string env = t / "env";
  test::make_dist(env + "/site", "shipped", "1.0", "[torch.backends]\nsh = shipped:init\n");
  next_tick();
  auto idx = scan(std::vector<std::string>{env + "/site"});
  ASSERT_TRUE(idx);
  fs::create_directories(env + "/share");
  ASSERT_TRUE(write_index(*idx, env + "/share/index.json", /*relocatable=*/true));
  const std::string copy = t / "copy";
  ASSERT_EQ(std::system(("cp -a '" + env + "' '" + copy + "'").c_str()), 0);

  options.search_paths = {copy + "/site"};
  options.shipped_index = copy + "/share/index.json";
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::shipped) << r.reason;
  auto got = open_index(options);
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)->search_paths()[0], copy + "/site");
  EXPECT_EQ((*got)->distributions()[0].metadata_dir.substr(0, copy.size()), copy);

  // A working directory that holds nothing, first on the path (`python -c`
  // in a project's directory): it contributes nothing, the index answers.
  const std::string work = t / "work";
  test::write_file(work + "/notes.txt", "");
  options.search_paths = {work, copy + "/site"};
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::shipped) << r.reason;
  options.search_paths = {copy + "/site"};

  // Through the environment variable too.
  options.shipped_index.clear();
  ::setenv("EPLOAD_INDEX", (copy + "/share/index.json").c_str(), 1);
  EXPECT_EQ(open_checked().status, CacheStatus::shipped);

  // Another search-path list: ignored, with the reason.
  options.search_paths = {copy + "/site", site1};
  r = open_checked();
  EXPECT_NE(r.status, CacheStatus::shipped);
  EXPECT_NE(r.reason.find("shipped index"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("search-path list"), std::string::npos) << r.reason;

  // A change to the environment: ignored as stale.
  options.search_paths = {copy + "/site"};
  test::make_dist(copy + "/site", "added", "1.0", "[g]\na = added:a\n");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("stale"), std::string::npos) << r.reason;

  // A world-writable shipped index is never trusted.
  ::chmod((env + "/share/index.json").c_str(), 0666);
  ::setenv("EPLOAD_INDEX", (env + "/share/index.json").c_str(), 1);
  options.search_paths = {env + "/site"};
  r = open_checked();
  EXPECT_NE(r.status, CacheStatus::shipped);
  EXPECT_NE(r.reason.find("unsafe"), std::string::npos) << r.reason;
  ::unsetenv("EPLOAD_INDEX");
}

// ---- Catalog -------------------------------------------------------------------

TEST_F(Invalidation, CatalogRevalidatesOnEveryGet) {
  Catalog catalog(options);
  CacheReport r;
  auto a = catalog.get(&r);
  ASSERT_TRUE(a);
  EXPECT_EQ(r.status, CacheStatus::hit);
  auto b = catalog.get(&r);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->get(), b->get()) << "an unchanged tree keeps the same Index";

  test::make_dist(site2, "late", "1.0", "[torch.backends]\nlate = late:init\n");
  auto c = catalog.get(&r);
  ASSERT_TRUE(c);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_NE((*c)->find("torch.backends", "late"), nullptr);
  EXPECT_EQ((*a)->find("torch.backends", "late"), nullptr) << "old users keep the old index";
}

TEST_F(Invalidation, CatalogListingChecksTheSearchPathsOnly) {
  Catalog catalog(options);
  EXPECT_EQ(catalog_listing(catalog, nullptr), nullptr) << "nothing held before a get()";
  auto a = catalog.get();
  ASSERT_TRUE(a);
  CacheReport r;
  EXPECT_EQ(catalog_listing(catalog, &r), *a);
  EXPECT_EQ(r.status, CacheStatus::hit);
  // An edit inside a distribution is left to the `full` check of a get().
  rewrite_in_place(ep_file(site1, "alpha-1.0"), "[console_scripts]\nalpha = alpha.clx:main\n");
  EXPECT_EQ(catalog_listing(catalog, nullptr), *a);
  // A distribution added changes a search path's listing.
  test::make_dist(site2, "late", "1.0", "[g]\nlate = late:init\n");
  EXPECT_EQ(catalog_listing(catalog, nullptr), nullptr);
  auto b = catalog.get();
  ASSERT_TRUE(b);
  next_tick();
  auto c = catalog.get();
  ASSERT_TRUE(c);
  EXPECT_EQ(catalog_listing(catalog, nullptr), *c);
}

TEST_F(Invalidation, CatalogDoesNotKeepAnAnswerHoldingAnIoError) {
  // In memory as on disk: the same unchanged file may read fine next time.
  const std::string f = ep_file(site1, "noeps-1.0");
  ASSERT_EQ(::symlink("entry_points.txt", f.c_str()), 0);
  next_tick();
  Catalog catalog(options);
  CacheReport r;
  auto a = catalog.get(&r);
  ASSERT_TRUE(a);
  ASSERT_NE((*a)->first_error(), nullptr);
  auto b = catalog.get(&r);
  ASSERT_TRUE(b);
  EXPECT_EQ(r.status, CacheStatus::uncached) << r.reason;
  EXPECT_NE(a->get(), b->get()) << "read again, not kept";
  ASSERT_EQ(::unlink(f.c_str()), 0);
  next_tick();
  auto c = catalog.get(&r);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->first_error(), nullptr);
}

TEST_F(Invalidation, CatalogIsThreadSafe) {
  Catalog catalog(options);
  std::atomic<int> bad{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int k = 0; k < 4; ++k) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto idx = catalog.get();
        if (!idx || (*idx)->find("console_scripts", "alpha") == nullptr) ++bad;
      }
    });
  }
  for (int i = 0; i < 30; ++i) {
    test::make_dist(site2, "churn" + std::to_string(i), "1.0", "[g]\nc = churn:c\n");
    ::usleep(1000);
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  next_tick();
  auto final_idx = catalog.get();
  ASSERT_TRUE(final_idx);
  auto fresh = scan(options.search_paths);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(test::answer_text(**final_idx), test::answer_text(*fresh));
}

// ---- Catalog with a sibling (a group asked later in the process) --------------

/// A Catalog of `options` for `group` alone, with `first` as its sibling.
std::shared_ptr<Catalog> later_catalog(CacheOptions options, const std::string& group, std::shared_ptr<Catalog> first) {
  options.groups = {group};
  return make_catalog(std::move(options), std::move(first));
}

TEST_F(Invalidation, SiblingLendsItsCheckedFileToAnotherGroup) {
  auto first = std::make_shared<Catalog>(options);  // the complete index
  CacheReport r;
  ASSERT_TRUE(first->get(&r));
  ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  auto later = later_catalog(options, "g", first);
  auto a = later->get(&r);
  ASSERT_TRUE(a);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_FALSE(watched_complete(**a)) << "read through the sibling, without the watched files";
  ASSERT_NE((*a)->find("g", "who"), nullptr);
  EXPECT_EQ((*a)->find("g", "who")->value, "site2:shadow");
  auto b = later->get(&r);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->get(), b->get());

  // The sibling's `full` check covers this group's distributions: an
  // in-place edit of one (same size, mtime restored) is seen.
  rewrite_in_place(ep_file(site2, "shadow-2.0"), "[g]\nwho = site2:shadoW\n");
  auto c = later->get(&r);
  ASSERT_TRUE(c);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ((*c)->find("g", "who")->value, "site2:shadoW");
  EXPECT_TRUE(watched_complete(**c)) << "read on its own once the sibling's file was stale";
}

TEST_F(Invalidation, SiblingIsNotUsedWhenItsIndexIsStale) {
  auto first = std::make_shared<Catalog>(options);
  ASSERT_TRUE(first->get());
  test::make_dist(site2, "late", "1.0", "[g]\nlate = late:init\n");
  auto later = later_catalog(options, "g", first);
  CacheReport r;
  auto a = later->get(&r);
  ASSERT_TRUE(a);
  EXPECT_NE(r.status, CacheStatus::hit) << r.reason;
  EXPECT_TRUE(watched_complete(**a));
  EXPECT_NE((*a)->find("g", "late"), nullptr);
}

TEST_F(Invalidation, SiblingIsNotUsedWhenTheCacheFileWasReplaced) {
  auto first = std::make_shared<Catalog>(options);
  CacheReport r;
  ASSERT_TRUE(first->get(&r));
  ASSERT_EQ(r.status, CacheStatus::hit) << r.reason;
  // Another process stores the same answer again: another file version.
  auto fresh = scan(options.search_paths);
  ASSERT_TRUE(fresh);
  const std::string file = r.file;
  struct stat before, after;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  ASSERT_TRUE(store_index(*fresh, options));
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  ASSERT_NE(before.st_ino, after.st_ino);
  auto later = later_catalog(options, "torch.backends", first);
  auto a = later->get(&r);
  ASSERT_TRUE(a);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_TRUE(watched_complete(**a)) << "read on its own, the sibling's file version is gone";
  EXPECT_EQ((*a)->group("torch.backends").size(), 2u);
}

}  // namespace
}  // namespace epload
