// cache_invalidation_test.cpp — a cached answer must never outlive the tree
// it describes.  Each test changes a real tree the way installers and people
// do, then compares the cached answer with a fresh scan().  Group queries,
// shipped indexes and Catalog: cache_revalidation_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "cache_invalidation_util.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"
#include "cache_overlap.hpp"
#include "index_builder.hpp"

namespace epload {
namespace {

using test::Invalidation;
using test::TempDir;
namespace fs = std::filesystem;

using test::next_tick;

TEST_F(Invalidation, Install) {
  test::make_dist(site2, "delta", "1.0", "[torch.backends]\nnew = delta:init\n");
  expect_refreshed("search path changed");
}

TEST_F(Invalidation, Uninstall) {
  fs::remove_all(site1 + "/beta-1.0.dist-info");
  expect_refreshed("search path changed");
}

TEST_F(Invalidation, Upgrade) {
  fs::remove_all(site1 + "/alpha-1.0.dist-info");
  test::make_dist(site1, "alpha", "2.0", "[console_scripts]\nalpha = alpha.cli2:main\n");
  expect_refreshed();
}

TEST_F(Invalidation, InPlaceRewriteWithSameSizeAndRestoredMtime) {
  const std::string f = ep_file(site1, "beta-1.0");
  struct stat before;
  ASSERT_EQ(::stat(f.c_str(), &before), 0);
  test::write_file(f, "[torch.backends]\nnpu = beta_npx:init\n");  // same size
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), times, 0), 0);
  struct stat after;
  ASSERT_EQ(::stat(f.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_ino, before.st_ino);
  expect_refreshed("entry_points.txt");
}

TEST_F(Invalidation, WhileValidatingSeesTheHitAndIsDroppedWhenStale) {
  // open_index()'s while_validating (cache_overlap.hpp) runs the caller's
  // work while the `full` check stats on the other CPU; open_index() must
  // return that index only if the check passes.  Enough files for the
  // two-thread check.
  add_noise(700);
  options.groups = {"torch.backends"};
  warm_group();
  const bool two_cpus = test::two_cpus_allowed();

  std::vector<std::shared_ptr<const Index>> seen;
  WhileValidating while_validating = [&](const std::shared_ptr<const Index>& index) {
    ASSERT_TRUE(index);
    EXPECT_EQ(index->group("torch.backends").size(), 2u) << "the cached answer, complete";
    seen.push_back(index);
  };
  CacheReport r;
  auto hit = open_index(options, &r, while_validating);
  ASSERT_TRUE(hit) << hit.error().message;
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  ASSERT_EQ(seen.size(), two_cpus ? 1u : 0u);
  if (two_cpus) {
    EXPECT_EQ(seen[0], hit.value()) << "a valid hit returns the index the callback saw";
  }

  // An in-place rewrite (same size, mtime restored): the callback still sees
  // the cached index, but open_index() rebuilds and returns the new answer.
  const std::string f = ep_file(site1, "beta-1.0");
  struct stat before;
  ASSERT_EQ(::stat(f.c_str(), &before), 0);
  test::write_file(f, "[torch.backends]\nnpu = beta_npx:init\n");
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), times, 0), 0);
  seen.clear();
  auto stale = open_index(options, &r, while_validating);
  ASSERT_TRUE(stale) << stale.error().message;
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  ASSERT_EQ(seen.size(), two_cpus ? 1u : 0u);
  if (two_cpus) {
    EXPECT_NE(seen[0], stale.value());
    EXPECT_EQ(seen[0]->find("torch.backends", "npu")->value, "beta_npu:init") << "the stale answer";
  }
  EXPECT_EQ(stale.value()->find("torch.backends", "npu")->value, "beta_npx:init");

  // A callback that throws: the exception reaches the caller, and the check
  // running on the other CPU is stopped before the index it reads is freed
  // (ASan and TSan builds would see it otherwise).
  warm_group();
  while_validating = [&](const std::shared_ptr<const Index>&) {
    throw std::runtime_error("the host failed while the index was checked");
  };
  if (two_cpus) {
    EXPECT_THROW((void)open_index(options, &r, while_validating), std::runtime_error);
  }
  while_validating = [&](const std::shared_ptr<const Index>& index) { seen.push_back(index); };

  // Never called without the two-thread `full` check: `paths`, or no cache.
  seen.clear();
  next_tick();
  options.validation = Validation::paths;
  ASSERT_TRUE(open_index(options, &r, while_validating));
  options.validation = Validation::full;
  options.use_cache = false;
  ASSERT_TRUE(open_index(options, &r, while_validating));
  EXPECT_TRUE(seen.empty());

  // catalog_get(): the same for a Catalog's get that reads the cache file,
  // and never for one that re-validates the index it holds.
  options.use_cache = true;
  warm_group();
  Catalog catalog(options);
  auto first = catalog_get(catalog, &r, while_validating);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  ASSERT_EQ(seen.size(), two_cpus ? 1u : 0u);
  if (two_cpus) {
    EXPECT_EQ(seen[0], first.value()) << "a valid hit returns the index the callback saw";
  }
  seen.clear();
  auto again = catalog_get(catalog, &r, while_validating);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again.value(), first.value());
  EXPECT_TRUE(seen.empty());
}

TEST_F(Invalidation, EntryPointsFileCreatedInExistingDistInfo) {
  test::write_file(ep_file(site1, "noeps-1.0"), "[g]\nlate = noeps:late\n");
  expect_refreshed("appeared");
}

TEST_F(Invalidation, EntryPointsFileDeleted) {
  ASSERT_EQ(::unlink(ep_file(site1, "alpha-1.0").c_str()), 0);
  expect_refreshed("removed");
}

TEST_F(Invalidation, ShadowingDistAppearsInEarlierPath) {
  test::make_dist(site1, "shadow", "9.0", "[g]\nwho = site1:shadow\n");
  expect_refreshed();
  auto idx = open_index(options);
  ASSERT_TRUE(idx);
  EXPECT_EQ((*idx)->find("g", "who")->value, "site1:shadow");
}

TEST_F(Invalidation, PathOrderChanged) {
  const std::string first_file = cache_file_path(options);
  options.search_paths = {site2, site1};
  EXPECT_NE(cache_file_path(options), first_file);
  expect_rebuilt("no cache file");
  // The original order still has its own, still valid, file.
  options.search_paths = {site1, site2};
  EXPECT_EQ(open_checked().status, CacheStatus::hit);
}

TEST_F(Invalidation, PathAdded) {
  const std::string site3 = t / "site3";
  test::make_dist(site3, "epsilon", "1.0", "[g]\ne = eps:e\n");
  options.search_paths.push_back(site3);
  expect_rebuilt("no cache file");
}

TEST_F(Invalidation, SearchPathCreatedAfterScan) {
  const std::string later = t / "later";
  options.search_paths.push_back(later);
  warm();  // cached with the path absent
  test::make_dist(later, "zeta", "1.0", "[g]\nz = zeta:z\n");
  expect_refreshed("appeared");
}

TEST_F(Invalidation, RacyChangeWithinTheScanTickIsNotMissed) {
  // The worst case, built deterministically: the cache recorded the old
  // answer, yet its stamp of the changed file equals the file's current stamp
  // (the change landed in the scan's clock tick with the same size, so the
  // stamp did not move).  Only the racy rule can catch it.
  const std::string f = ep_file(site1, "beta-1.0");
  auto old_answer = scan(options.search_paths);
  ASSERT_TRUE(old_answer);
  test::write_file(f, "[torch.backends]\nnpu = beta_npx:init\n");
  const FileStamp now = detail::stamp_at(AT_FDCWD, f.c_str());
  const FileStamp site_now = detail::stamp_at(AT_FDCWD, site1.c_str());
  auto forged = [&](std::int64_t scanned_at) {
    test::IndexEdit edit;
    edit.scanned_at = scanned_at;
    edit.watched_stamp = [&](std::string_view rel, FileStamp& s) {
      if (rel == "beta-1.0.dist-info/entry_points.txt") s = now;
    };
    edit.path_stamp = [&](std::uint32_t i, FileStamp& s) {
      if (i == 0) s = site_now;
    };
    return test::copy_index(*old_answer, edit);
  };
  const std::int64_t tick = std::max(now.mtime_ns, now.ctime_ns);

  // Control: were the scan's clock past the change (and past any granule
  // of the file's clock, see racy_time()), the stamps would match and the
  // stale answer would be served; this is the hole the rule closes.
  Index trusting = forged(tick + 2000000001);
  EXPECT_TRUE(still_valid(trusting, Validation::full));

  Index racy = forged(tick);
  std::string why;
  EXPECT_FALSE(still_valid(racy, Validation::full, &why));
  EXPECT_NE(why.find("racy"), std::string::npos) << why;
  EXPECT_FALSE(still_valid(forged(now.ctime_ns - 1), Validation::full));  // ctime alone is enough

  ASSERT_TRUE(write_index(racy, cache_file_path(options)));
  expect_refreshed("racy");
}

// File systems that keep coarser times than nanoseconds truncate them, so a
// change after the scan can carry a time before it: the granule the time
// shows is the racy window.
TEST(RacyTime, TheWindowIsTheGranuleTheFileTimeShows) {
  using detail::racy_time;
  constexpr std::int64_t sec = 1000000000;
  const std::int64_t scan = 1795000000 * sec + 400000123;  // 0.4 s into a second
  // Nanosecond times: racy from the scan's instant on.
  EXPECT_TRUE(racy_time(scan, scan));
  EXPECT_TRUE(racy_time(scan + 7, scan));
  EXPECT_FALSE(racy_time(scan - 7, scan));
  EXPECT_FALSE(racy_time(scan - 3 * sec, scan));
  // Whole seconds (ext2/ext3 with 128-byte inodes, NFS): the scan's second.
  const std::int64_t odd_second = 1795000001 * sec;
  const std::int64_t scan2 = odd_second + 300000000;
  EXPECT_TRUE(racy_time(odd_second, scan2));        // written after the scan, truncated to before it
  EXPECT_FALSE(racy_time(odd_second - 2 * sec, scan2));  // an earlier odd second
  // The even second before could be FAT's two-second granule, which holds
  // the scan: racy (the safe side; one rescan at worst).
  EXPECT_TRUE(racy_time(odd_second - sec, scan2));
  // Two seconds (FAT's mtime): the scan's two-second granule.
  const std::int64_t even_second = 1795000000 * sec;
  EXPECT_TRUE(racy_time(even_second, even_second + 1700000000));
  EXPECT_FALSE(racy_time(even_second, even_second + 2100000000));
  // Microseconds: the scan's microsecond.
  EXPECT_TRUE(racy_time(scan - 123, scan));
  EXPECT_FALSE(racy_time(scan - 123 - 1000, scan));
  // A time set far into the future (touch -d, an archive's dates) is no
  // change in the scan's tick: not racy, or every run would rescan.
  EXPECT_TRUE(racy_time(scan + 60 * sec, scan));  // a long scan's own files
  EXPECT_FALSE(racy_time(scan + 2 * 3600 * sec, scan));
  // A stamp is racy when either of its times is.
  FileStamp s;
  s.mode = 0100644;
  s.mtime_ns = odd_second;
  s.ctime_ns = scan - 3 * sec;
  EXPECT_TRUE(detail::is_racy(s, scan2));
  s.mtime_ns = scan - 3 * sec;
  s.ctime_ns = odd_second;
  EXPECT_TRUE(detail::is_racy(s, scan2));
  s.ctime_ns = odd_second - 3 * sec;
  EXPECT_FALSE(detail::is_racy(s, scan2));
}

// A file dated in the future (touch -d, an archive's dates) is no change in
// the scan's tick: the cache must hit, not rescan on every run, and a later
// rewrite that restores the future date is still seen (by its ctime).
TEST_F(Invalidation, FutureDatedFileDoesNotDefeatTheCacheAndEditsAreSeen) {
  const std::string f = ep_file(site1, "beta-1.0");
  struct timespec future[2];
  future[0].tv_sec = future[1].tv_sec = ::time(nullptr) + 10 * 365 * 86400;
  future[0].tv_nsec = future[1].tv_nsec = 123456789;
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), future, 0), 0);
  next_tick();  // the ctime the dating stamped is older than the next scan
  expect_refreshed("changed");
  EXPECT_EQ(open_checked().status, CacheStatus::hit);
  EXPECT_EQ(open_checked().status, CacheStatus::hit);
  test::write_file(f, "[torch.backends]\nnpu = beta_npx:init\n");  // same size
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), future, 0), 0);
  expect_refreshed("changed");
}

TEST_F(Invalidation, RacySearchPathIsNotTrustedEvenInPathsMode) {
  auto idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  const std::int64_t ctime = search_path_stamps(*idx)[1].ctime_ns;
  test::IndexEdit edit;
  edit.scanned_at = ctime;
  std::string why;
  EXPECT_FALSE(still_valid(test::copy_index(*idx, edit), Validation::paths, &why));
  EXPECT_NE(why.find("racy"), std::string::npos) << why;
  edit.scanned_at = scanned_at_ns(*idx);
  EXPECT_TRUE(still_valid(test::copy_index(*idx, edit), Validation::paths, &why)) << why;
}

TEST_F(Invalidation, PathsModeMissesInPlaceEditsButNotInstalls) {
  // The documented trade-off of `paths`: an edit inside an existing
  // dist-info does not touch the search path, so it goes unnoticed.
  options.validation = Validation::paths;
  warm();
  test::write_file(ep_file(site1, "beta-1.0"), "[torch.backends]\nnpu = edited:init\n");
  CacheReport r;
  auto stale = open_index(options, &r);
  ASSERT_TRUE(stale);
  EXPECT_EQ(r.status, CacheStatus::hit);
  EXPECT_EQ((*stale)->find("torch.backends", "npu")->value, "beta_npu:init");
  options.validation = Validation::full;
  expect_refreshed("entry_points.txt");

  options.validation = Validation::paths;
  warm();
  test::make_dist(site2, "installed", "1.0", "[g]\ni = inst:i\n");
  expect_refreshed("search path");
  warm();
  fs::remove_all(site2 + "/installed-1.0.dist-info");
  expect_refreshed("search path");
}

TEST_F(Invalidation, LargeWatchListIsCheckedOnBothThreads) {
  // Above 500 watched files the check is split over two threads; a change in
  // either half must be found and named.
  auto idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  const std::string rels[] = {"alpha-1.0.dist-info/entry_points.txt", "beta-1.0.dist-info/entry_points.txt",
                              "noeps-1.0.dist-info/METADATA", "missing-9.dist-info/entry_points.txt"};
  auto build = [&](std::size_t bad) {
    IndexBuilder b;
    b.add_search_path(site1, search_path_stamps(*idx)[0]);
    for (std::size_t i = 0; i < 2000; ++i) {
      const std::string& rel = rels[i % 4];
      FileStamp s = detail::stamp_at(AT_FDCWD, (site1 + "/" + rel).c_str());
      if (i == bad) s.size += 1;
      b.add_watched_file(0, rel, s);
    }
    b.set_scanned_at(scanned_at_ns(*idx));
    return b.build();
  };
  std::string why;
  EXPECT_TRUE(still_valid(build(std::size_t(-1)), Validation::full, &why)) << why;
  for (std::size_t bad : {std::size_t(5), std::size_t(1001), std::size_t(1999)}) {
    EXPECT_FALSE(still_valid(build(bad), Validation::full, &why)) << bad;
    EXPECT_NE(why.find(site1 + "/" + rels[bad % 4]), std::string::npos) << why;
    EXPECT_TRUE(still_valid(build(bad), Validation::paths));
  }
}

TEST_F(Invalidation, ManySearchPathsAreAllWatched) {
  // An in-place edit is seen in any of 24 search paths, with the two-thread
  // split (720 distributions) and without it (after 17 empty paths).
  const std::vector<std::string> paths = many_paths(24, 30);
  options.search_paths = paths;
  for (const std::string& edited : {paths[3], paths[20], paths[23]}) {
    warm();
    const std::string dist = fs::path(edited).filename().string().substr(4);
    ASSERT_NO_FATAL_FAILURE(rewrite_in_place(edited + "/d" + dist + "x7-1.0.dist-info/entry_points.txt",
                                             "[g]\nd" + dist + "x7 = m:h\n"));
    expect_refreshed();
  }
  // Fewer files than the two-thread threshold: the same on one thread, with
  // the edited tree the 18th search path (after 17 empty ones).
  options.search_paths.clear();
  for (int p = 0; p < 17; ++p) {
    options.search_paths.push_back(t / ("empty" + std::to_string(p)));
    fs::create_directories(options.search_paths.back());
  }
  options.search_paths.push_back(paths[17]);
  warm();
  ASSERT_NO_FATAL_FAILURE(rewrite_in_place(paths[17] + "/d17x2-1.0.dist-info/entry_points.txt", "[g]\nd17x2 = m:h\n"));
  expect_refreshed("entry_points.txt");
}

TEST_F(Invalidation, MoreSearchPathsThanDescriptorsAreWatched) {
  // 300 search paths, each holding distributions, under a limit of 40 free
  // descriptors: the cache is written, hit, and an in-place edit in a path
  // far past any descriptor budget is seen.
  options.search_paths = many_paths(300, 3);
  test::FdLimit limit(40);
  ASSERT_TRUE(limit.ok());
  warm();
  ASSERT_NO_FATAL_FAILURE(
      rewrite_in_place(options.search_paths[280] + "/d280x1-1.0.dist-info/entry_points.txt", "[g]\nd280x1 = m:h\n"));
  expect_refreshed();
}

TEST_F(Invalidation, RescanOutOfDescriptorsNeverPoisonsTheCache) {
  // A change makes the next open rescan; that rescan runs out of file
  // descriptors.  It must fail, not cache "cannot read" errors that the next
  // run (with descriptors to spare) would then serve as a hit.
  test::make_dist(site2, "delta", "1.0", "[torch.backends]\nnew = delta:init\n");
  next_tick();
  {
    test::FdLimit limit(1);  // a search path's directory, nothing more
    ASSERT_TRUE(limit.ok());
    CacheReport r;
    auto got = open_index(options, &r);
    ASSERT_FALSE(got) << "with one descriptor, a file of the rescan cannot be read";
    EXPECT_NE(got.error().message.find("Too many open files"), std::string::npos) << got.error().message;
  }
  CacheReport r = open_checked();  // equal to a fresh scan, or it fails
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  auto got = open_index(options, &r);
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)->first_error(), nullptr);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
}

TEST_F(Invalidation, UnreadableFileAnswerIsServedButNotCached) {
  // An OSError that importlib raises (ELOOP here) is the answer, but not one
  // to keep: the same unchanged file may read fine next time (EIO).
  const std::string f = ep_file(site1, "noeps-1.0");
  ASSERT_EQ(::symlink("entry_points.txt", f.c_str()), 0);
  next_tick();
  for (int run = 0; run < 2; ++run) {
    CacheReport r;
    auto got = open_index(options, &r);
    ASSERT_TRUE(got);
    ASSERT_NE((*got)->first_error(), nullptr);
    EXPECT_NE(std::string((*got)->first_error()->error).find("Too many levels of symbolic links"),
              std::string::npos);
    EXPECT_EQ(r.status, CacheStatus::uncached) << r.reason;
    EXPECT_NE(r.reason.find("not cached"), std::string::npos) << r.reason;
  }
  auto idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  auto stored = store_index(*idx, options);
  ASSERT_FALSE(stored);
  EXPECT_NE(stored.error().message.find("could not be read"), std::string::npos) << stored.error().message;
  // The link gone, the tree is what the cache file (never overwritten by
  // the answers above) describes: it is served again.
  ASSERT_EQ(::unlink(f.c_str()), 0);
  next_tick();
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
}

TEST_F(Invalidation, RelativeSearchPathFollowsTheCurrentDirectory) {
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(site1.c_str()), 0);
  options.search_paths = {""};
  next_tick();
  CacheReport first = open_checked();
  ASSERT_EQ(::chdir(site2.c_str()), 0);
  CacheReport second = open_checked();  // another directory: another key
  EXPECT_NE(first.file, second.file);
  EXPECT_EQ(second.status, CacheStatus::rebuilt);
  ASSERT_EQ(::chdir(old), 0);
}

// The working directory at the head of the path ('' for `python -c`) is
// left out of the key while it holds no metadata: a first query from a new
// directory is a hit on the others' file and writes nothing; a directory
// that holds a distribution is keyed as any path, and its answer has it.
// Every open_checked() compares the answer with a fresh scan of the whole
// path, head included.
TEST_F(Invalidation, AWorkingDirectoryWithoutMetadataSharesTheOthersFile) {
  const std::string shared = test::open_checked(options).file;
  const std::string empty1 = t / "empty1", empty2 = t / "empty2";
  test::write_file(empty1 + "/notes.txt", "not a distribution");
  test::write_file(empty2 + "/script.py", "");
  options.search_paths.insert(options.search_paths.begin(), "");
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(empty1.c_str()), 0);
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_EQ(r.file, shared);
  ASSERT_EQ(::chdir(empty2.c_str()), 0);
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_EQ(r.file, shared);
  EXPECT_EQ(test::list_dir(options.cache_dir).size(), 1u);

  // A distribution in the working directory: keyed with it, answered with it.
  test::make_dist(empty2, "delta", "1.0", "[torch.backends]\nhpu = delta_hpu:init\n");
  next_tick();
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt) << r.reason;
  EXPECT_NE(r.file, shared);
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  std::filesystem::remove_all(empty2 + "/delta-1.0.dist-info");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_EQ(r.file, shared);
  ASSERT_EQ(::chdir(old), 0);
}

// A Catalog that keeps an answer made without the head re-checks that the
// head still holds nothing: a distribution that appears there is answered.
TEST_F(Invalidation, CatalogSeesADistributionAppearInTheWorkingDirectory) {
  const std::string work = t / "work";
  test::write_file(work + "/notes.txt", "");
  options.search_paths.insert(options.search_paths.begin(), work);
  Catalog catalog(options);
  auto text = [&] {
    auto got = catalog.get();
    EXPECT_TRUE(got);
    return got ? test::answer_text(**got) : std::string();
  };
  auto fresh = [&] { return test::answer_text(scan(options.search_paths).value()); };
  EXPECT_EQ(text(), fresh());
  test::make_dist(work, "delta", "1.0", "[torch.backends]\nhpu = delta_hpu:init\n");
  const std::string with_delta = text();
  EXPECT_NE(with_delta.find("delta_hpu"), std::string::npos) << with_delta;
  EXPECT_EQ(with_delta, fresh());
  std::filesystem::remove_all(work + "/delta-1.0.dist-info");
  EXPECT_EQ(text(), fresh());
}

}  // namespace
}  // namespace epload
