// A stale cache file is refreshed from its parts: only changed search path
// entries are listed again and only new, gone or changed distributions read,
// and the answer (and what it records to check it next time) is a scan's,
// through sequences of changes.  open_checked() compares each answer with a
// fresh scan, and a refresh's watched files and stamps with the scan's.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache_invalidation_util.hpp"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"

namespace epload {
namespace {

using test::Invalidation;

/// "N of M path entr..., K of L distributions read" in a refresh's reason.
std::string counts(const CacheReport& r) { return r.reason.substr(0, r.reason.find(" (")); }

/// The next open refreshes, reporting `want`, and the one after hits.  Each
/// change is followed by a clock tick first, so that the refresh's stamps
/// are not racy (else the next open refreshes again).
void expect_refresh_then_hit(const CacheOptions& options, const std::string& want) {
  test::next_tick();
  CacheReport r = test::open_checked(options);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ(counts(r), want);
  r = test::open_checked(options);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
}

TEST_F(Invalidation, RefreshReadsOnlyWhatChanged) {
  auto refresh_then_hit = [&](const std::string& want) { expect_refresh_then_hit(options, want); };
  // A file that is no distribution in the first entry (a script's directory).
  test::write_file(site1 + "/train.log", "step 1\n");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 5 distributions read");
  // One distribution installed in the second: it alone is read.
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 6 distributions read");
  // One entry_points.txt edited: no entry listed, that distribution read.
  test::write_file(ep_file(site1, "alpha-1.0"), "[console_scripts]\nalpha = alpha.cli:main2\n");
  refresh_then_hit("0 of 2 path entries listed again, 1 of 6 distributions read");
  // One removed: nothing read.
  std::filesystem::remove_all(site2 + "/delta-1.0.dist-info");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 5 distributions read");
}

TEST_F(Invalidation, AnEntryWithoutMetadataThatChangesIsListedAgainNotRefreshed) {
  // A directory of modules on the path (PYTHONPATH): files come and go
  // there.  (First on the path, such a directory is not even part of the
  // key: cache_invalidation_test.cpp.)
  const std::string script = t / "script";
  test::write_file(script + "/train.py", "print()\n");
  options.search_paths = {site1, script, site2};
  warm();
  const std::string file = cache_file_path(options);
  const std::string bytes = test::read_file(file);
  test::write_file(script + "/train.log", "step 1\n");
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_EQ(test::read_file(file), bytes) << "nothing to write";
  // Until metadata appears there: then it is a refresh.
  test::make_dist(script, "local", "1.0", "[g]\nlocal = local:main\n");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ(counts(r), "1 of 3 path entries listed again, 1 of 6 distributions read");
  // And an entry that goes from no metadata to a file (a zip, maybe) is not
  // taken for an empty one.
  std::filesystem::remove_all(script);
  test::next_tick();
  EXPECT_EQ(open_checked().status, CacheStatus::refreshed);
  test::next_tick();
  EXPECT_EQ(open_checked().status, CacheStatus::hit);
  test::write_file(script, "not a directory");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
}

TEST_F(Invalidation, AMetadataReadThatDisagreesWithTheStemIsNeverTrusted) {
  // A scan that races a rename or an install can list a distribution and
  // then find its METADATA gone, empty, or another Name or Version than
  // its directory's name says.  Such a read is watched, so that it is
  // read again once the file is there: by a `full` check, and by a refresh
  // that reuses the distribution's other parts.
  const std::string meta = site1 + "/alpha-1.0.dist-info/METADATA";
  const std::string good = test::read_file(meta);
  const std::string bad[] = {"", "Metadata-Version: 2.1\nVersion: 1.0\n\n",
                             "Metadata-Version: 2.1\nName: alpha\nVersion: 0.9\n\n",
                             "Metadata-Version: 2.1\nName: other\nVersion: 1.0\n\n"};
  // The cache file starts from a scan that read `text` (an agreeing
  // METADATA is not watched, so an in-place edit to it is not seen).
  auto start_from = [&](const std::string& text) {
    if (text.empty()) {
      std::filesystem::remove(meta);
    } else {
      test::write_file(meta, text);
    }
    ASSERT_TRUE(clear_cache(options));
    warm();
  };
  for (const std::string& text : bad) {
    // Right again in place: the search path unchanged.
    start_from(text);
    test::write_file(meta, good);
    expect_refreshed("alpha-1.0.dist-info/METADATA");
    // The same, with another path entry changed too: the refresh lists it
    // again and must not take alpha's answer from the stale file.
    start_from(text);
    test::write_file(meta, good);
    test::write_file(site1 + "/train.log", "step 1\n");
    expect_refreshed();
    std::filesystem::remove(site1 + "/train.log");
    warm();
  }
}

TEST_F(Invalidation, RefreshNeverReadsAShadowedCopyAndReadsAnUnshadowedOne) {
  // site2's "shadow" is shadowed once site1 has its own copy; a broken copy
  // there is never read (its error never surfaces) while shadowed.
  test::make_dist(site1, "shadow", "1.0", "[g]\nwho = site1:shadow\n");
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  test::next_tick();
  test::write_file(ep_file(site2, "shadow-2.0"), "[g]\nno equals sign here\n");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  auto got = open_index(options, &r);
  ASSERT_TRUE(got);
  EXPECT_EQ((*got)->first_error(), nullptr);
  EXPECT_EQ((*got)->find("g", "who")->value, "site1:shadow");

  // Unshadowed: site2's copy, never read before, is read now (and its error
  // is the answer's, as importlib's).
  test::next_tick();
  std::filesystem::remove_all(site1 + "/shadow-1.0.dist-info");
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ(counts(r), "1 of 2 path entries listed again, 1 of 5 distributions read");
  got = open_index(options, &r);
  ASSERT_TRUE(got);
  ASSERT_NE((*got)->first_error(), nullptr);
  EXPECT_NE(std::string((*got)->first_error()->metadata_dir).find("shadow-2.0"), std::string::npos);
}

TEST_F(Invalidation, RefreshFollowsAPathEntryThatDisappearsAndComesBack) {
  std::filesystem::rename(site2, site2 + ".away");
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ(counts(r), "1 of 2 path entries listed again, 0 of 3 distributions read");
  std::filesystem::rename(site2 + ".away", site2);
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  // Its distributions come back as new ones: read again.
  EXPECT_EQ(counts(r), "1 of 2 path entries listed again, 2 of 5 distributions read");
}

TEST_F(Invalidation, PathsRefreshListsOnlyTheChangedEntry) {
  options.validation = Validation::paths;
  warm();
  // An in-place edit under an unchanged entry is not seen under `paths` (its
  // documented trade-off) and an install in the other entry is: only that
  // entry is listed again, and only its distributions are checked.
  test::write_file(ep_file(site1, "alpha-1.0"), "[console_scripts]\nalpha = alpha.cli:other\n");
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n");
  CacheReport r;
  auto got = open_index(options, &r);
  ASSERT_TRUE(got);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_EQ(counts(r), "1 of 2 path entries listed again, 1 of 6 distributions read");
  EXPECT_EQ((*got)->find("console_scripts", "alpha")->value, "alpha.cli:main") << "site1 was trusted";
  EXPECT_NE((*got)->find("g", "delta"), nullptr);
}

TEST_F(Invalidation, ShippedIndexIsNeverRewrittenByARefresh) {
  const std::string shipped = t / "env.index";
  auto idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  ASSERT_TRUE(write_index(*idx, shipped, /*relocatable=*/true));
  const std::string bytes = test::read_file(shipped);
  options.shipped_index = shipped;
  test::next_tick();
  CacheReport r = open_checked();
  ASSERT_EQ(r.status, CacheStatus::shipped) << r.reason;
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n");
  r = open_checked();  // the user cache answers, refreshed
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  EXPECT_NE(r.shipped_problem.find("stale"), std::string::npos) << r.shipped_problem;
  EXPECT_EQ(test::read_file(shipped), bytes);
}

TEST_F(Invalidation, ConcurrentRefreshesAllAnswerRightAndLeaveAGoodFile) {
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n");
  auto fresh = scan(options.search_paths);
  ASSERT_TRUE(fresh);
  const std::string want = test::answer_text(*fresh);
  std::vector<std::string> answers(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    threads.emplace_back([&, i] {
      auto got = open_index(options);
      answers[i] = got ? test::answer_text(**got) : got.error().message;
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& a : answers) EXPECT_EQ(a, want);
  test::next_tick();
  CacheReport r = open_checked();
  EXPECT_TRUE(r.status == CacheStatus::hit || r.status == CacheStatus::refreshed) << r.reason;
}

/// Random sequences of changes over three entries, each step checked against
/// a fresh scan (open_checked), no clock waits between steps but for the
/// racy rule's own.
TEST_F(Invalidation, RefreshAfterAFullCheckStatsNoWatchedFileTwice) {
  // The `full` check that finds the file stale stats every watched file (it
  // does not stop at the changed one) and tells the refresh what it saw: a
  // refresh then stats about what a hit does, not every file once more.
  for (int i = 0; i < 40; ++i) {
    test::make_dist(site2, "many" + std::to_string(i), "1.0", "[g]\nm" + std::to_string(i) + " = m:f\n");
  }
  options.groups = {"g"};  // read by names and digest, as a query reads
  warm_group();
  struct Counting {
    Counting() { profile::enable(); }
    ~Counting() { profile::reset(); }
  } counting;
  auto stats_of_open = [&](CacheStatus want) {
    const std::uint64_t before = profile::counter(profile::Counter::stat);
    CacheReport r;
    EXPECT_TRUE(open_index(options, &r));
    EXPECT_EQ(r.status, want) << r.reason;
    return profile::counter(profile::Counter::stat) - before;
  };
  const std::uint64_t hit = stats_of_open(CacheStatus::hit);
  ASSERT_GE(hit, 45u);  // the watched files at least
  // Edited: the file is racy by its new time, and the check goes on past it.
  test::write_file(ep_file(site2, "many7-1.0"), "[g]\nm7 = m:g\n");
  test::next_tick();  // so that the refreshed stamps are not racy
  EXPECT_LE(stats_of_open(CacheStatus::refreshed), hit + 8);
  test::next_tick();
  stats_of_open(CacheStatus::hit);
  // Removed: a search path changed and a watched file is gone.
  std::filesystem::remove_all(site2 + "/many3-1.0.dist-info");
  test::next_tick();
  EXPECT_LE(stats_of_open(CacheStatus::refreshed), hit + 8);
  test::next_tick();
  stats_of_open(CacheStatus::hit);
  // And the refreshed answer is the tree's.
  auto index = open_index(options);
  ASSERT_TRUE(index);
  std::string values;
  for (const EntryPoint& ep : (*index)->group("g")) {
    if (ep.name == "m7" || ep.name == "m3") values += std::string(ep.name) + "=" + std::string(ep.value) + " ";
  }
  EXPECT_EQ(values, "m7=m:g ");
}

TEST_F(Invalidation, AGroupQueryRefreshFollowsInstallsRemovalsAndEdits) {
  // What a process asks for (a group) is answered from a refreshed file:
  // open_checked() compares the answer and the file with a scan's.
  options.groups = {"g"};
  warm();
  auto refresh_then_hit = [&](const std::string& want) { expect_refresh_then_hit(options, want); };
  // Installed in the second entry, in a group of its own and in "g".
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n[delta.plugins]\nd = delta:p\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 6 distributions read");
  // In the first entry: every later distribution's number moves.
  test::make_dist(site1, "aaa", "1.0", "[g]\naaa = aaa:main\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 7 distributions read");
  // Edited in place: its group rows change, a group appears.
  test::write_file(ep_file(site1, "alpha-1.0"), "[g]\nalpha = alpha.cli:g\n[new.group]\nx = y\n");
  refresh_then_hit("0 of 2 path entries listed again, 1 of 7 distributions read");
  // Broken: its error is the answer's first.
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nno equals sign\n");
  refresh_then_hit("0 of 2 path entries listed again, 1 of 7 distributions read");
  // Another one installed and removed, the error staying first.
  test::make_dist(site2, "zeta", "1.0", "[g]\nzeta = zeta:main\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 8 distributions read");
  std::filesystem::remove_all(site2 + "/zeta-1.0.dist-info");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 7 distributions read");
  // One in each entry.
  test::make_dist(site1, "one", "1.0", "[g]\none = one:f\n");
  test::make_dist(site2, "two", "1.0", "[g]\ntwo = two:f\n");
  refresh_then_hit("2 of 2 path entries listed again, 2 of 9 distributions read");
  std::filesystem::remove_all(site1 + "/one-1.0.dist-info");
  std::filesystem::remove_all(site2 + "/two-1.0.dist-info");
  refresh_then_hit("2 of 2 path entries listed again, 0 of 7 distributions read");
  // Removed, with its groups: "delta.plugins" is gone.
  std::filesystem::remove_all(site2 + "/delta-1.0.dist-info");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 6 distributions read");
  // The answer a refresh returns is checked again later as a hit's is: its
  // watched names and digest are the new file's.
  test::make_dist(site2, "eta", "1.0", "[g]\neta = eta:main\n");
  test::next_tick();
  CacheReport r;
  auto got = open_index(options, &r);
  ASSERT_TRUE(got);
  EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  ASSERT_TRUE(watched_complete(**got));
  std::string why;
  EXPECT_TRUE(still_valid(**got, Validation::full, &why)) << why;
  rewrite_in_place(ep_file(site2, "eta-1.0"), "[g]\neta = eta:mair\n");
  EXPECT_FALSE(still_valid(**got, Validation::full, &why));
  options.groups.clear();
  auto all = open_index(options, nullptr);
  ASSERT_TRUE(all);
  for (std::string_view g : (*all)->groups()) EXPECT_NE(g, "delta.plugins");
  EXPECT_EQ((*all)->find("g", "eta")->value, "eta:mair");
}

TEST_F(Invalidation, AGroupQueryRefreshFollowsShadowingOddNamesAndTheFirstError) {
  // Changes that move importlib's order or first-wins: the file is still a
  // scan's (open_checked()).
  options.groups = {"g"};
  warm();
  auto recomputed = [&]() {
    test::next_tick();
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
  };
  // Shadowing site2's "shadow", then unshadowing it.
  test::make_dist(site1, "shadow", "1.0", "[g]\nwho = site1:shadow\n");
  recomputed();
  std::filesystem::remove_all(site1 + "/shadow-1.0.dist-info");
  recomputed();
  // A directory whose name does not name its distribution.
  test::make_dist(site2, "odd", "1.0", "[g]\nodd = odd:f\n");
  std::filesystem::rename(site2 + "/odd-1.0.dist-info", site2 + "/odd-1.0.DIST-INFO");
  recomputed();
  // The first error's distribution edited, broken then mended.
  std::filesystem::remove_all(site2 + "/odd-1.0.DIST-INFO");
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nno equals sign\n");
  test::next_tick();
  EXPECT_EQ(open_checked().status, CacheStatus::refreshed);
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nxpu = gamma_xpu:init\n");
  recomputed();
}

TEST_F(Invalidation, AGroupQueryRefreshNeverKeepsADamagedRow) {
  // A byte of a row flipped on disk (its section's hash no longer holds),
  // in a group the query does not ask for and in the one it asks for: the
  // refresh reads the whole file, so it is rebuilt, never sealed again with
  // the damage.
  options.groups = {"g"};
  // The third: a digit of a group row's distribution number, which only its
  // hash can tell from a good one.
  const std::string number = "{\"dists\":[[";
  for (const std::string& damaged : {std::string("alpha.cli:main"), std::string("site2:shadow"), number}) {
    SCOPED_TRACE(damaged);
    ASSERT_TRUE(clear_cache(options));
    warm();
    const std::string file = cache_file_path(options);
    std::string text = test::read_file(file);
    std::size_t at = text.find(damaged);
    ASSERT_NE(at, std::string::npos);
    if (damaged == number) {
      at += number.size();
      ASSERT_TRUE(text[at] >= '0' && text[at] <= '9');
      text[at] = text[at] == '1' ? '2' : '1';
    } else {
      text[at] = 'X';
    }
    test::write_file(file, text);
    ::chmod(file.c_str(), 0600);
    test::make_dist(site2, "delta" + std::to_string(at), "1.0", "[h]\nd = d:f\n");
    const CacheReport r = open_checked();  // compares the file with a scan's
    EXPECT_EQ(r.status, CacheStatus::rebuilt) << r.reason;
  }
}

/// Random sequences of installs, removals, edits, entries away and back and
/// files that are no distribution, each checked by open_checked() (the
/// answer and the file against a scan's).  Returns how many steps
/// refreshed.  With `shared_names`, the entries install the same names (and shadow one
/// another's); else each its own.
int random_change_sequences(const std::string& root, CacheOptions& options,
                                  const std::vector<std::string>& sites, unsigned seed, bool shared_names = true) {
  std::mt19937 rng(seed);
  int refreshed = 0;
  for (int step = 0; step < 120; ++step) {
    const std::size_t which = rng() % sites.size();
    const std::string& site = sites[which];
    const std::string name = (shared_names ? "p" : "p" + std::to_string(which) + "x") + std::to_string(rng() % 6);
    const std::string dir = site + "/" + name + "-1.0.dist-info";
    const bool there = std::filesystem::exists(dir);
    switch (rng() % 6) {
      case 0:  // install (or shadow, when another entry has it)
      case 1:
        if (!there) test::make_dist(site, name, "1.0", "[g]\n" + name + " = " + site.substr(site.size() - 5) + ":x\n");
        break;
      case 2:  // remove (or unshadow)
        std::filesystem::remove_all(dir);
        break;
      case 3:  // edit
        if (there) test::write_file(dir + "/entry_points.txt", "[g]\n" + name + " = e" + std::to_string(step) + ":x\n");
        break;
      case 4:  // an entry goes away or comes back
        if (std::filesystem::exists(site + ".away") && std::filesystem::exists(site)) break;
        if (std::filesystem::exists(site)) std::filesystem::rename(site, site + ".away");
        else if (std::filesystem::exists(site + ".away")) std::filesystem::rename(site + ".away", site);
        break;
      default:  // not a distribution
        if (std::filesystem::exists(site)) test::write_file(site + "/out" + std::to_string(step) + ".log", "x");
        break;
    }
    SCOPED_TRACE("step " + std::to_string(step) + " under " + root);
    const CacheReport r = test::open_checked(options);
    EXPECT_NE(r.status, CacheStatus::uncached) << r.reason;
    refreshed += r.status == CacheStatus::refreshed;
  }
  return refreshed;
}

TEST_F(Invalidation, RandomChangeSequencesAreRefreshedExactly) {
  const std::string site3 = t / "site3";
  test::make_dist(site3, "gamma", "0.5", "[torch.backends]\nxpu = gamma_old:init\n");
  options.search_paths = {site1, site2, site3};
  warm();
  const int refreshed = random_change_sequences(t / "", options, {site1, site2, site3}, 7);
  EXPECT_GT(refreshed, 60) << "most steps change something under a cache file";
}

TEST_F(Invalidation, RandomChangeSequencesOfAGroupQueryAreRefreshedExactly) {
  const std::string site3 = t / "site3";
  test::make_dist(site3, "epsilon", "0.5", "[torch.backends]\nxpu = eps:init\n");
  options.search_paths = {site1, site2, site3};
  options.groups = {"g"};
  warm();
  // Names of their own per entry.
  for (unsigned seed : {7u, 8u, 9u}) {
    EXPECT_GT(random_change_sequences(t / "", options, {site1, site2, site3}, seed, false), 60);
  }
  // Shared names: shadowing.
  EXPECT_GT(random_change_sequences(t / "", options, {site1, site2, site3}, 10), 60);
}

}  // namespace
}  // namespace epload
