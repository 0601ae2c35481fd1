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
#include "cache_pieces.hpp"
#include "cache_rows.hpp"
#include "json_text.hpp"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"

namespace epload {
namespace {

using test::Invalidation;

/// "N of M path entr..., K of L distributions read" in a refresh's reason.
std::string counts(const CacheReport& r) { return r.reason.substr(0, r.reason.find(" (")); }

TEST(CacheRows, TabsRowsAndStampsAreFoundWhereverTheyFall) {
  // Every length and offset around the 16-byte steps of the tab scan.
  for (std::size_t len = 0; len < 70; ++len) {
    for (std::size_t at = 0; at < len; at += 3) {
      std::string text(len, 'x');
      text[at] = '\t';
      if (len > 1) text[len - 1] = '\t';
      std::vector<std::uint32_t> want;
      for (std::size_t i = 0; i < len; ++i) {
        if (text[i] == '\t') want.push_back(static_cast<std::uint32_t>(i));
      }
      EXPECT_EQ(detail::tabs_of(text), want) << len << " " << at;
    }
  }
  const std::string rows = "[\t[0,\"a/b\",1,2,3,-4,5,6],\t[1,{\"hex\":\"ff\"},7,8,9,10,11,12]\t]";
  const auto tabs = detail::tabs_of(rows);
  ASSERT_EQ(tabs.size(), 3u);
  EXPECT_EQ(detail::row_at(rows, tabs, 0), "[0,\"a/b\",1,2,3,-4,5,6]");
  EXPECT_EQ(detail::row_at(rows, tabs, 1), "[1,{\"hex\":\"ff\"},7,8,9,10,11,12]");
  FileStamp s;
  ASSERT_TRUE(detail::row_stamp(detail::row_at(rows, tabs, 0), s));
  EXPECT_EQ(s.dev, 1u);
  EXPECT_EQ(s.mtime_ns, -4);
  EXPECT_EQ(s.mode, 6u);
  std::uint64_t n;
  std::size_t after;
  ASSERT_TRUE(detail::leading_number(detail::row_at(rows, tabs, 1), n, after));
  EXPECT_EQ(n, 1u);
  EXPECT_FALSE(detail::row_stamp("[0,\"a\",1,2,3]", s)) << "too few numbers";
  const std::string runs = "[[0,\t\"a\",\t{\"hex\":\"ff\"}],[1,\t\"c\"]\t]";
  const auto names = detail::tabs_of(runs);
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(detail::name_at(runs, names, 0), "\"a\"");
  EXPECT_EQ(detail::name_at(runs, names, 1), "{\"hex\":\"ff\"}");
  EXPECT_EQ(detail::name_at(runs, names, 2), "\"c\"");
}

TEST(CacheRows, NumberArraysAreReadExactlyOrNotAtAll) {
  std::vector<std::uint32_t> flat;
  std::vector<std::size_t> at;
  ASSERT_TRUE(detail::number_arrays("[[0,4,17],[2],[4294967295]]\n", flat, at));
  EXPECT_EQ(flat, (std::vector<std::uint32_t>{0, 4, 17, 2, 4294967295u}));
  EXPECT_EQ(at, (std::vector<std::size_t>{0, 3, 4, 5}));
  ASSERT_TRUE(detail::number_arrays("[]\n", flat, at));
  EXPECT_TRUE(flat.empty());
  EXPECT_EQ(at, (std::vector<std::size_t>{0}));
  // Anything the writer never writes: the splice gives up and recomputes.
  for (const char* bad : {"", "[]", "[[]]\n", "[[0]", "[[0]]", "[[0],]\n", "[[0]][]\n", "[[0,]]\n", "[[,0]]\n",
                          "[[4294967296]]\n", "[[99999999999]]\n", "[[-1]]\n", "[[0] ,[1]]\n", "[0]\n",
                          "[[0][1]]\n", "{[0]}\n", "[[1.5]]\n"}) {
    EXPECT_FALSE(detail::number_arrays(bad, flat, at)) << bad;
  }
}

TEST(CachePieces, OwnBytesAndOldRangesMakeExactlyTheirBytesAndHash) {
  // Random pieces over an old text: the bytes are the pieces' in order,
  // their hash is body_hash() of those bytes, and own bytes equal to what
  // follows a range extend it.
  std::mt19937 rng(7);
  std::string old(3000, ' ');
  for (char& c : old) c = static_cast<char>('a' + rng() % 3);
  for (int round = 0; round < 300; ++round) {
    detail::Pieces p(old);
    std::string want;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::size_t len = rng() % 70;
      if (rng() % 2 == 0) {
        const std::size_t at = rng() % (old.size() - len);
        p.copy(std::string_view(old).substr(at, len));
        want.append(old, at, len);
      } else {
        std::string own(len, 'z');
        for (char& c : own) c = static_cast<char>('a' + rng() % 3);
        p.put(own);
        want += own;
      }
    }
    const std::vector<std::string_view> views = p.views();
    std::string got;
    for (std::string_view v : views) got.append(v);
    ASSERT_EQ(got, want) << round;
    EXPECT_EQ(p.size(), want.size());
    EXPECT_EQ(detail::body_hash(views), detail::body_hash(want)) << round;
  }
  // Kept rows in a row, with the separators between them: one range.
  const std::string rows = "[\t[1],\t[2],\t[3]\t]\n";
  detail::Pieces p(rows);
  p.put("[\t");
  p.copy(std::string_view(rows).substr(2, 3));
  p.put(",\t");
  p.copy(std::string_view(rows).substr(7, 3));
  p.put(",\t");
  p.copy(std::string_view(rows).substr(12, 3));
  p.put("\t]\n");
  ASSERT_EQ(p.views().size(), 2u);
  EXPECT_EQ(std::string(p.views()[0]) + std::string(p.views()[1]), rows);
  // Every split of one text hashes as the text.
  for (std::size_t a = 0; a <= 80; ++a) {
    for (std::size_t b = a; b <= 80; b += 7) {
      const std::string_view t = std::string_view(old).substr(0, 80);
      const std::string_view parts[3] = {t.substr(0, a), t.substr(a, b - a), t.substr(b)};
      EXPECT_EQ(detail::body_hash(std::span<const std::string_view>(parts)), detail::body_hash(t)) << a << " " << b;
    }
  }
}

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

TEST_F(Invalidation, AGroupQueryRefreshCopiesTheRowsThatDidNotChange) {
  // What a process asks for (a group) is answered from a file whose changed
  // rows alone were written: open_checked() compares the file with a scan's.
  options.groups = {"g"};
  warm();
  const std::string copied = ", the rest of the file copied";
  auto refresh_then_hit = [&](const std::string& want) { expect_refresh_then_hit(options, want); };
  // Installed in the second entry, in a group of its own and in "g".
  test::make_dist(site2, "delta", "1.0", "[g]\ndelta = delta:main\n[delta.plugins]\nd = delta:p\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 6 distributions read" + copied);
  // In the first entry: every later distribution's number moves.
  test::make_dist(site1, "aaa", "1.0", "[g]\naaa = aaa:main\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 7 distributions read" + copied);
  // Edited in place: its group rows change, a group appears.
  test::write_file(ep_file(site1, "alpha-1.0"), "[g]\nalpha = alpha.cli:g\n[new.group]\nx = y\n");
  refresh_then_hit("0 of 2 path entries listed again, 1 of 7 distributions read" + copied);
  // Broken: its error is the answer's first.
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nno equals sign\n");
  refresh_then_hit("0 of 2 path entries listed again, 1 of 7 distributions read" + copied);
  // Another one installed and removed, the error staying first.
  test::make_dist(site2, "zeta", "1.0", "[g]\nzeta = zeta:main\n");
  refresh_then_hit("1 of 2 path entries listed again, 1 of 8 distributions read" + copied);
  std::filesystem::remove_all(site2 + "/zeta-1.0.dist-info");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 7 distributions read" + copied);
  // One in each entry.
  test::make_dist(site1, "one", "1.0", "[g]\none = one:f\n");
  test::make_dist(site2, "two", "1.0", "[g]\ntwo = two:f\n");
  refresh_then_hit("2 of 2 path entries listed again, 2 of 9 distributions read" + copied);
  std::filesystem::remove_all(site1 + "/one-1.0.dist-info");
  std::filesystem::remove_all(site2 + "/two-1.0.dist-info");
  refresh_then_hit("2 of 2 path entries listed again, 0 of 7 distributions read" + copied);
  // Removed, with its groups: "delta.plugins" is gone.
  std::filesystem::remove_all(site2 + "/delta-1.0.dist-info");
  refresh_then_hit("1 of 2 path entries listed again, 0 of 6 distributions read" + copied);
  // The answer a refresh returns is checked again later as a hit's is: its
  // watched names and digest are the new file's.
  test::make_dist(site2, "eta", "1.0", "[g]\neta = eta:main\n");
  test::next_tick();
  CacheReport r;
  auto got = open_index(options, &r);
  ASSERT_TRUE(got);
  EXPECT_NE(r.reason.find(copied), std::string::npos) << r.reason;
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

TEST_F(Invalidation, AnInstallRewritesOnlyTheSectionsOfTheGroupsItJoins) {
  // The global numbers of a group's distributions live in "numbers": one
  // installed before others moves their numbers, yet the sections of the
  // groups it does not join are copied byte for byte.
  options.groups = {"g"};
  warm();
  const std::string file = cache_file_path(options);
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
      out.push_back(text.substr(at, nl - at));
    }
    return out;
  };
  // head; console_scripts, g, torch.backends; numbers; dists, listings, watched, watch_digest
  const auto before = lines(test::read_file(file));
  ASSERT_EQ(before.size(), 9u);
  test::make_dist(site1, "aaa", "1.0", "[g]\naaa = aaa:main\n");
  expect_refresh_then_hit(options, "1 of 2 path entries listed again, 1 of 6 distributions read, the rest of the file copied");
  const auto after = lines(test::read_file(file));
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(after[1], before[1]);  // console_scripts
  EXPECT_NE(after[2], before[2]);  // g: aaa joined it
  EXPECT_EQ(after[3], before[3]);  // torch.backends: gamma's number moved, in "numbers" only
  EXPECT_NE(after[4], before[4]);  // numbers
  EXPECT_NE(after[4].find(","), std::string::npos);
}

TEST_F(Invalidation, AGroupQueryRefreshRecomputesWhatItCannotCopy) {
  // Changes whose order or first-wins a copy cannot keep: recomputed, and
  // the file is still a scan's (open_checked()).
  options.groups = {"g"};
  warm();
  auto recomputed = [&]() {
    test::next_tick();
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::refreshed) << r.reason;
    EXPECT_EQ(r.reason.find("copied"), std::string::npos) << r.reason;
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
  // The first error's distribution edited: the next error is not known
  // without every row.
  std::filesystem::remove_all(site2 + "/odd-1.0.DIST-INFO");
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nno equals sign\n");
  test::next_tick();
  EXPECT_EQ(open_checked().status, CacheStatus::refreshed);
  test::write_file(ep_file(site2, "gamma-1.0"), "[torch.backends]\nxpu = gamma_xpu:init\n");
  recomputed();
}

TEST_F(Invalidation, AGroupQueryRefreshNeverCopiesADamagedRow) {
  // A byte of a row flipped on disk (its section's hash no longer holds),
  // in a section the refresh would copy and in one it would rewrite: the
  // file is rebuilt, never sealed again with the damage.
  options.groups = {"g"};
  // The third: a digit of "numbers", which only its hash can tell from a good one.
  for (const std::string damaged : {"alpha.cli:main", "site2:shadow", "\n[["}) {
    SCOPED_TRACE(damaged);
    ASSERT_TRUE(clear_cache(options));
    warm();
    const std::string file = cache_file_path(options);
    std::string text = test::read_file(file);
    std::size_t at = text.find(damaged);
    ASSERT_NE(at, std::string::npos);
    if (damaged == "\n[[") {
      at += 3;
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
/// answer and the file against a scan's).  How many steps refreshed, and
/// how many of those copied the unchanged rows.
struct Refreshes {
  int all = 0, copied = 0;
};
/// With `shared_names`, the entries install the same names (and shadow one
/// another's); else each its own.
Refreshes random_change_sequences(const std::string& root, CacheOptions& options,
                                  const std::vector<std::string>& sites, unsigned seed, bool shared_names = true) {
  std::mt19937 rng(seed);
  Refreshes refreshed;
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
    refreshed.all += r.status == CacheStatus::refreshed;
    refreshed.copied += r.reason.find("the rest of the file copied") != std::string::npos;
  }
  return refreshed;
}

TEST_F(Invalidation, RandomChangeSequencesAreRefreshedExactly) {
  const std::string site3 = t / "site3";
  test::make_dist(site3, "gamma", "0.5", "[torch.backends]\nxpu = gamma_old:init\n");
  options.search_paths = {site1, site2, site3};
  warm();
  const int refreshed = random_change_sequences(t / "", options, {site1, site2, site3}, 7).all;
  EXPECT_GT(refreshed, 60) << "most steps change something under a cache file";
}

TEST_F(Invalidation, RandomChangeSequencesOfAGroupQueryAreRefreshedExactly) {
  const std::string site3 = t / "site3";
  test::make_dist(site3, "epsilon", "0.5", "[torch.backends]\nxpu = eps:init\n");
  options.search_paths = {site1, site2, site3};
  options.groups = {"g"};
  warm();
  // Names of their own per entry: most changes are copied around.
  for (unsigned seed : {7u, 8u, 9u}) {
    const Refreshes r = random_change_sequences(t / "", options, {site1, site2, site3}, seed, false);
    EXPECT_GT(r.all, 60);
    EXPECT_GT(r.copied, r.all / 3) << "most single changes are copied around";
  }
  // Shared names: shadowing, recomputed.
  EXPECT_GT(random_change_sequences(t / "", options, {site1, site2, site3}, 10).all, 60);
}

}  // namespace
}  // namespace epload
