// scanner_test.cpp — scan() on real directories under a temp dir: discovery
// order, first-wins de-duplication, errors recorded per distribution, names
// and versions, and the provenance stamps a cache relies on.  Failures of the
// file system and zip archives: scanner_failures_test.cpp.
#include "epload/scanner.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>     // AT_FDCWD
#include <sys/stat.h>  // chmod, mkdir
#include <unistd.h>    // getcwd, chdir

#include <algorithm>
#include <string>
#include <vector>

#include "scanner_test_util.hpp"
#include "stamp.hpp"
#include "index_provenance.hpp"

namespace epload {
namespace {

namespace fs = std::filesystem;
using testing::Scanner;

TEST_F(Scanner, FindsDistributionsAndEntryPoints) {
  dist("site", "alpha-1.0.dist-info", "[console_scripts]\nalpha = alpha:main\n[g]\na = alpha.p\n");
  dist("site", "beta-2.0.dist-info", "[g]\nb = beta.p [x]\n");
  const Index index = scan_ok({path("site")});
  ASSERT_EQ(index.distributions().size(), 2u);
  EXPECT_EQ(index.group("console_scripts").size(), 1u);
  ASSERT_EQ(index.group("g").size(), 2u);
  const EntryPoint* b = index.find("g", "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->value, "beta.p [x]");
  EXPECT_EQ(b->dist->name, "beta");
  EXPECT_EQ(b->dist->version, "2.0");
  EXPECT_EQ(b->dist->metadata_dir, path("site") + "/beta-2.0.dist-info");
  EXPECT_EQ(index.first_error(), nullptr);
}

TEST_F(Scanner, FirstSearchPathWinsByNormalizedName) {
  dist("a", "My_Pkg-1.0.dist-info", "[g]\nx = from_a\n");
  dist("b", "my.pkg-2.0.dist-info", "[g]\nx = from_b\n");
  const Index index = scan_ok({path("a"), path("b")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:x=from_a@My_Pkg"}));
  EXPECT_EQ(index.distributions().size(), 1u);
}

TEST_F(Scanner, ShadowedBrokenCopyIsNeverRead) {
  dist("a", "pkg-1.0.dist-info", "[g]\nok = a\n");
  dist("b", "pkg-2.0.dist-info", "[g]\nno equals here\n");
  dist("b", "PKG.DIST-INFO", "[g]\nalso = hidden\n", "Name: pkg\n");
  const Index index = scan_ok({path("a"), path("b")});
  EXPECT_EQ(index.first_error(), nullptr);
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:ok=a@pkg"}));
  // Nothing of the shadowed copies is watched except the METADATA read to name one.
  EXPECT_EQ(watched(index, "pkg-2.0.dist-info/entry_points.txt"), nullptr);
  EXPECT_NE(watched(index, "PKG.DIST-INFO/METADATA"), nullptr);
}

TEST_F(Scanner, DistInfoWithoutEntryPointsStillShadows) {
  dist("a", "quiet-1.0.dist-info");
  dist("b", "quiet-0.9.dist-info", "[g]\nhidden = q\n");
  const Index index = scan_ok({path("a"), path("b")});
  EXPECT_TRUE(index.entry_points().empty());
  ASSERT_EQ(index.distributions().size(), 1u);
  EXPECT_EQ(index.distributions()[0].version, "1.0");
}

TEST_F(Scanner, ParseErrorIsRecordedOnTheDistributionNotTheScan) {
  dist("site", "bad-1.0.dist-info", "[g]\nfine = 1\nbroken line\n");
  dist("site", "good-1.0.dist-info", "[g]\ngood = 1\n");
  const Index index = scan_ok({path("site")});
  const Distribution* bad = index.first_error();
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->name, "bad");
  const std::string msg(bad->error);
  EXPECT_NE(msg.find(path("site") + "/bad-1.0.dist-info/entry_points.txt:3:"), std::string::npos) << msg;
  // The broken distribution contributes nothing; the good one is intact.
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:good=1@good"}));
}

TEST_F(Scanner, InvalidUtf8IsRecordedWithTheFileName) {
  dist("site", "latin-1.0.dist-info", "[g]\nx = caf\xe9\n");
  const Index index = scan_ok({path("site")});
  ASSERT_NE(index.first_error(), nullptr);
  EXPECT_NE(std::string(index.first_error()->error).find("latin-1.0.dist-info/entry_points.txt:2:"),
            std::string::npos);
}

TEST_F(Scanner, SuffixesMatchCaseInsensitivelyAndNameComesFromMetadata) {
  dist("site", "Dir-Name.DIST-INFO", "[g]\nu = 1\n", "Name: Real-Name\nVersion: 4.2\n");
  dist("b", "real_name-1.0.dist-info", "[g]\nshadowed = 1\n");
  const Index index = scan_ok({path("site"), path("b")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:u=1@Real-Name"}));
  EXPECT_EQ(index.distributions()[0].version, "4.2");
}

TEST_F(Scanner, MissingNameIsAnErrorNamingTheDirectory) {
  dist("site", "Nameless.DIST-INFO", "[g]\nx = 1\n", "Version: 1\n\nName: in-body\n");
  const Index index = scan_ok({path("site")});
  ASSERT_NE(index.first_error(), nullptr);
  const std::string msg(index.first_error()->error);
  EXPECT_NE(msg.find(path("site") + "/Nameless.DIST-INFO"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Name"), std::string::npos) << msg;
  EXPECT_TRUE(index.entry_points().empty());
}

TEST_F(Scanner, EmptyMetadataFallsBackToPkgInfo) {
  dist("site", "Fb.DIST-INFO", "[g]\nx = 1\n");
  write("site/Fb.DIST-INFO/METADATA", "");
  write("site/Fb.DIST-INFO/PKG-INFO", "Name: fallback\nVersion: 3\n");
  const Index index = scan_ok({path("site")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:x=1@fallback"}));
}

TEST_F(Scanner, GroupsInfosByLookupKeyInFirstSeenOrder) {
  // kN-1.dist-info and KN.DIST-INFO share Lookup key kN but de-duplicate by
  // different names, so both survive and must come out next to each other.
  for (int k = 0; k < 8; ++k) {
    const std::string n = std::to_string(k);
    dist("site", "k" + n + "-1.dist-info", "[g]\nk" + n + " = lower\n");
    dist("site", "K" + n + ".DIST-INFO", "[g]\nK" + n + " = upper\n", "Name: other" + n + "\n");
  }
  // Expected: walk the raw listing; each key's entries at its first position.
  std::vector<std::string> keys, expected;
  for (const std::string& name : listing("site")) {
    const std::string id = name.substr(1, 1);  // the digit: kN / KN share key kN
    if (std::find(keys.begin(), keys.end(), id) == keys.end()) keys.push_back(id);
  }
  const std::vector<std::string> raw = listing("site");
  for (const std::string& id : keys) {
    for (const std::string& name : raw) {
      if (name.substr(1, 1) == id) {
        expected.push_back(std::string("g:") + name[0] + id + "=" + (name[0] == 'k' ? "lower" : "upper"));
      }
    }
  }
  const Index index = scan_ok({path("site")});
  std::vector<std::string> got;
  for (const EntryPoint& ep : index.entry_points()) {
    got.push_back("g:" + std::string(ep.name) + "=" + std::string(ep.value));
  }
  EXPECT_EQ(got, expected);
}

TEST_F(Scanner, EggInfoFileHasNoEntryPointsButShadowsAndIsWatched) {
  write("a/shadow-1.0-py3.11.egg-info", "Metadata-Version: 1.1\nName: shadow\nVersion: 1.0\n");
  dist("b", "shadow-2.0.dist-info", "[g]\nhidden = 1\n");
  const Index index = scan_ok({path("a"), path("b")});
  EXPECT_TRUE(index.entry_points().empty());
  ASSERT_EQ(index.distributions().size(), 1u);
  const WatchedFile* w = watched(index, "shadow-1.0-py3.11.egg-info");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->stamp.exists());
  EXPECT_EQ(w->search_path, 0u);
}

TEST_F(Scanner, EggDirectoryEggInfoComesAfterTheInfos) {
  write("thing-1.0-py3.11.egg/EGG-INFO/PKG-INFO", "Name: thing\nVersion: 1.0\n");
  write("thing-1.0-py3.11.egg/EGG-INFO/entry_points.txt", "[g]\nthing = t\n");
  dist("thing-1.0-py3.11.egg", "inner-1.0.dist-info", "[g]\ninner = i\n");
  const Index index = scan_ok({path("thing-1.0-py3.11.egg")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:inner=i@inner", "g:thing=t@thing"}));
  EXPECT_EQ(index.distributions()[1].version, "1.0");
  // A trailing slash makes the basename empty: not an egg.
  const Index slash = scan_ok({path("thing-1.0-py3.11.egg") + "/"});
  EXPECT_EQ(flat(slash), (std::vector<std::string>{"g:inner=i@inner"}));
}

TEST_F(Scanner, DistributionWithEntryPointsIsNamedByItsMetadata) {
  // ep.dist.name is METADATA's Name as written, even where the stem names
  // the distribution (normalised); one without entry points keeps its stem
  // (METADATA is not read for it).  Where the stem names it, METADATA is
  // read but not watched (`full` validation's cost: see scanner.cpp).
  dist("site", "jinja2-3.1.2.dist-info", "[g]\nj = 1\n", "Metadata-Version: 2.1\nName: Jinja2\nVersion: 3.1.2\n");
  dist("site", "quiet-1.0.dist-info");
  write("site/quiet-1.0.dist-info/METADATA", "Name: Loud\nVersion: 9\n");
  const Index index = scan_ok({path("site")});
  ASSERT_EQ(index.distributions().size(), 2u);
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:j=1@Jinja2"}));
  EXPECT_EQ(watched(index, "jinja2-3.1.2.dist-info/METADATA"), nullptr);
  for (const Distribution& d : index.distributions()) {
    if (d.name != "Jinja2") {
      EXPECT_EQ(d.name, "quiet");
    }
  }
  EXPECT_EQ(watched(index, "quiet-1.0.dist-info/METADATA"), nullptr);
}

TEST_F(Scanner, EggInfoDirectoryVersionComesFromPkgInfo) {
  dist("site", "Legacy-0.5-py3.11.egg-info", "[g]\nl = 1\n");
  write("site/Legacy-0.5-py3.11.egg-info/PKG-INFO", "Name: Legacy\nVersion: 0.5\n");
  const Index index = scan_ok({path("site")});
  ASSERT_EQ(index.distributions().size(), 1u);
  EXPECT_EQ(index.distributions()[0].name, "Legacy");
  EXPECT_EQ(index.distributions()[0].version, "0.5");
  EXPECT_NE(watched(index, "Legacy-0.5-py3.11.egg-info/PKG-INFO"), nullptr);
}

TEST_F(Scanner, NonexistentAndPlainFilePathsContributeNothing) {
  write("notes.txt", "not a zip\n");
  dist("site", "real-1.0.dist-info", "[g]\nr = 1\n");
  const Index index = scan_ok({path("missing"), path("notes.txt"), path("site")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:r=1@real"}));
  ASSERT_EQ(search_path_stamps(index).size(), 3u);
  EXPECT_FALSE(search_path_stamps(index)[0].exists());
  EXPECT_TRUE(search_path_stamps(index)[1].exists());
  EXPECT_TRUE(search_path_stamps(index)[2].exists());
  EXPECT_EQ(index.search_paths()[0], path("missing"));
}

TEST_F(Scanner, PathWithANulByteContributesNothing) {
  // os.listdir and zipfile both raise ValueError, which importlib suppresses.
  dist("site", "real-1.0.dist-info", "[g]\nr = 1\n");
  const std::string nul = path("site") + std::string(1, '\0') + "x";
  const Index index = scan_ok({nul, path("site")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:r=1@real"}));
  EXPECT_FALSE(search_path_stamps(index)[0].exists());
}

TEST_F(Scanner, EmptyPathIsTheCurrentDirectory) {
  dist("cwd", "here-1.0.dist-info", "[g]\nhere = 1\n");
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(path("cwd").c_str()), 0);
  auto r = scan(std::vector<std::string>{"", "."});
  ASSERT_EQ(::chdir(old), 0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(flat(r.value()), (std::vector<std::string>{"g:here=1@here"}));
  EXPECT_EQ(r.value().distributions()[0].metadata_dir, "here-1.0.dist-info");
  EXPECT_EQ(r.value().search_paths()[0], "");
}

TEST_F(Scanner, WatchesEntryPointsFilesPresentOrAbsent) {
  dist("site", "has-1.0.dist-info", "[g]\nx = 1\n");
  dist("site", "hasnot-1.0.dist-info");
  const Index index = scan_ok({path("site")});
  const WatchedFile* has = watched(index, "has-1.0.dist-info/entry_points.txt");
  const WatchedFile* hasnot = watched(index, "hasnot-1.0.dist-info/entry_points.txt");
  ASSERT_NE(has, nullptr);
  ASSERT_NE(hasnot, nullptr);
  EXPECT_EQ(has->stamp, detail::stamp_at(AT_FDCWD, path("site/has-1.0.dist-info/entry_points.txt").c_str()));
  EXPECT_FALSE(hasnot->stamp.exists());  // creation will be noticed
  EXPECT_EQ(search_path_stamps(index)[0], detail::stamp_at(AT_FDCWD, path("site").c_str()));
}

TEST_F(Scanner, WatchedStampsEqualWhatAValidatorSees) {
  // Every recorded stamp must equal a fresh fstatat of the same path, or a
  // cache would find the answer stale forever (or never).
  dist("a", "plain-1.0.dist-info", "[g]\nx = 1\n");
  dist("a", "noeps-1.0.dist-info");
  dist("a", "dirfile-1.0.dist-info");
  fs::create_directories(path("a/dirfile-1.0.dist-info/entry_points.txt"));
  dist("a", "Bare.DIST-INFO", "[g]\nb = 1\n");  // no METADATA, no PKG-INFO: TypeError
  dist("a", "Pkg.DIST-INFO", "[g]\np = 1\n");
  write("a/Pkg.DIST-INFO/PKG-INFO", "Name: pkg\nVersion: 1\n");
  dist("a", "Egg-1.0.egg-info", "[g]\ne = 1\n");
  write("a/Egg-1.0.egg-info/PKG-INFO", "Name: egg\nVersion: 1\n");
  write("a/file-1.0.egg-info", "Name: file\n");
  write("a/Upper.EGG-INFO", "Name: upper\n");
  const Index index = scan_ok({path("a")});
  ASSERT_GT(watched_files(index).size(), 8u);
  for (const WatchedFile& w : watched_files(index)) {
    const std::string full = std::string(index.search_paths()[w.search_path]) + "/" + std::string(w.rel_path);
    EXPECT_EQ(w.stamp, detail::stamp_at(AT_FDCWD, full.c_str())) << full;
  }
  EXPECT_NE(watched(index, "Bare.DIST-INFO"), nullptr);  // the '' read: the directory itself
}

TEST_F(Scanner, ScanTimeIsTakenBeforeAnyStamp) {
  dist("site", "t-1.0.dist-info", "[g]\nx = 1\n");
  const std::int64_t before = detail::coarse_now_ns();
  const Index index = scan_ok({path("site")});
  const std::int64_t after = detail::coarse_now_ns();
  EXPECT_GE(scanned_at_ns(index), before);
  EXPECT_LE(scanned_at_ns(index), after);
}

TEST_F(Scanner, LargeScanKeepsDiscoveryOrderAcrossThreads) {
  // Enough distributions for phase 2 to split across two threads.
  for (int i = 0; i < 700; ++i) {
    const std::string n = "d" + std::to_string(i);
    dist("site", n + "-1.0.dist-info", "[g]\n" + n + " = m" + std::to_string(i) + "\n");
  }
  dist("site", "broken-1.0.dist-info", "[g]\nno equals\n");
  const Index index = scan_ok({path("site")});
  std::vector<std::string> expected;
  for (const std::string& name : listing("site")) {
    const std::string n = name.substr(0, name.find('-'));
    if (n != "broken") expected.push_back(n);
  }
  std::vector<std::string> got;
  for (const EntryPoint& ep : index.group("g")) got.push_back(std::string(ep.name));
  EXPECT_EQ(got, expected);
  ASSERT_NE(index.first_error(), nullptr);
  EXPECT_EQ(index.first_error()->name, "broken");
  EXPECT_EQ(index.distributions().size(), 701u);
}

}  // namespace
}  // namespace epload
