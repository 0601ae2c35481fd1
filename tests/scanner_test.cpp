// scanner_test.cpp — scan() on real directories under a temp dir: discovery
// order, first-wins de-duplication, errors recorded per distribution, zip
// archives, and the provenance stamps a cache relies on.
#include "epload/scanner.hpp"

#include <gtest/gtest.h>

#include <dirent.h>        // readdir, to know the raw listing order
#include <fcntl.h>         // O_DIRECTORY
#include <sys/resource.h>  // setrlimit
#include <sys/stat.h>  // chmod, mkdir
#include <unistd.h>    // getcwd, chdir, geteuid, symlink

#include <algorithm>  // std::find
#include <cstdio>     // fprintf, in a child
#include <cstdlib>    // mkdtemp, system
#include <filesystem>
#include <fstream>
#include <iterator>  // istreambuf_iterator
#include <string>
#include <vector>

#include "cache_test_util.hpp"  // FdLimit
#include "stamp.hpp"

namespace epload {
namespace {

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
    for (const WatchedFile& w : index.watched_files()) {
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
  ASSERT_EQ(index.search_path_stamps().size(), 3u);
  EXPECT_FALSE(index.search_path_stamps()[0].exists());
  EXPECT_TRUE(index.search_path_stamps()[1].exists());
  EXPECT_TRUE(index.search_path_stamps()[2].exists());
  EXPECT_EQ(index.search_paths()[0], path("missing"));
}

TEST_F(Scanner, PathWithANulByteContributesNothing) {
  // os.listdir and zipfile both raise ValueError, which importlib suppresses.
  dist("site", "real-1.0.dist-info", "[g]\nr = 1\n");
  const std::string nul = path("site") + std::string(1, '\0') + "x";
  const Index index = scan_ok({nul, path("site")});
  EXPECT_EQ(flat(index), (std::vector<std::string>{"g:r=1@real"}));
  EXPECT_FALSE(index.search_path_stamps()[0].exists());
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

TEST_F(Scanner, ZipWithoutDistributionsContributesNothing) {
  const std::string zip = path("plain.zip");
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) +
                          " -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w');"
                          "z.writestr('pkg/__init__.py','');"
                          "z.writestr('lib/x-1.dist-info/entry_points.txt','[g]\\nx=1\\n');z.close()\" " +
                          zip;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const Index index = scan_ok({zip});
  EXPECT_TRUE(index.entry_points().empty());
  EXPECT_TRUE(index.search_path_stamps()[0].exists());
}

TEST_F(Scanner, ZipWithDistributionsIsUnsupportedNamingTheArchive) {
  const std::string zip = path("dists.zip");
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) +
                          " -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w');"
                          "z.writestr('zipped-1.0.dist-info/entry_points.txt','[g]\\nx=1\\n');z.close()\" " +
                          zip;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto r = scan(std::vector<std::string>{zip});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unsupported);
  EXPECT_NE(r.error().message.find(zip), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("zip"), std::string::npos) << r.error().message;
}

// Found by fuzzing: a zip64 end record claiming a central directory of 2^63
// bytes overflowed the signed offset arithmetic; zipfile raises "Bad offset
// for central directory" (importlib then lists nothing), and so does the scan.
TEST_F(Scanner, Zip64WithAnImpossibleDirectorySizeIsNotAZip) {
  const std::string zip = path("zip64.zip");
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) +
                          " -c \"import zipfile,sys; zipfile.ZIP_FILECOUNT_LIMIT=0;"
                          "z=zipfile.ZipFile(sys.argv[1],'w');"
                          "z.writestr('zipped-1.0.dist-info/entry_points.txt','[g]\\nx=1\\n');z.close()\" " +
                          zip;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_FALSE(scan(std::vector<std::string>{zip}).ok()) << "a valid zip64 archive with a distribution";
  std::ifstream in(zip, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t end64 = bytes.find(std::string("PK\x06\x06", 4));
  ASSERT_NE(end64, std::string::npos);
  bytes.replace(end64 + 40, 8, std::string("\0\0\0\0\0\0\0\x80", 8));  // size of the directory: 2^63
  write("zip64.zip", bytes);
  const Index index = scan_ok({zip});
  EXPECT_TRUE(index.entry_points().empty());
}

TEST_F(Scanner, TruncatedZipIsNotAZip) {
  write("cut.zip", std::string("PK\x05\x06", 4) + std::string(10, '\0'));  // EOCD cut short
  const Index index = scan_ok({path("cut.zip")});
  EXPECT_TRUE(index.entry_points().empty());
}

TEST_F(Scanner, EntryPointsTxtThatIsADirectoryIsSkipped) {
  dist("site", "d-1.0.dist-info");
  fs::create_directories(path("site/d-1.0.dist-info/entry_points.txt"));
  const Index index = scan_ok({path("site")});
  EXPECT_EQ(index.first_error(), nullptr);
  EXPECT_TRUE(index.entry_points().empty());
}

TEST_F(Scanner, UnreadableEntryPointsTxtIsSkipped) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: root reads mode-000 files";
  dist("site", "locked-1.0.dist-info", "[g]\nx = 1\n");
  ::chmod(path("site/locked-1.0.dist-info/entry_points.txt").c_str(), 0);
  const Index index = scan_ok({path("site")});
  EXPECT_EQ(index.first_error(), nullptr);
  EXPECT_TRUE(index.entry_points().empty());
}

TEST_F(Scanner, SymlinkLoopIsAnErrorLikeImportlibsOSError) {
  // ELOOP is not among the errors read_text suppresses.
  dist("site", "loop-1.0.dist-info");
  ASSERT_EQ(::symlink("entry_points.txt", path("site/loop-1.0.dist-info/entry_points.txt").c_str()), 0);
  const Index index = scan_ok({path("site")});
  ASSERT_NE(index.first_error(), nullptr);
  EXPECT_NE(std::string(index.first_error()->error).find("loop-1.0.dist-info/entry_points.txt"),
            std::string::npos);
}

TEST_F(Scanner, SymlinkLoopAnswerIsNotCacheable) {
  // An OSError is not the file's content: the answer may differ next time
  // with the file's stamp unchanged, so it must not be cached.
  dist("site", "ok-1.0.dist-info", "[g]\nok = 1\n");
  const Index clean = scan_ok({path("site")});
  EXPECT_TRUE(clean.not_cacheable().empty());
  dist("site", "loop-1.0.dist-info");
  ASSERT_EQ(::symlink("entry_points.txt", path("site/loop-1.0.dist-info/entry_points.txt").c_str()), 0);
  const Index index = scan_ok({path("site")});
  EXPECT_NE(std::string(index.not_cacheable()).find("loop-1.0.dist-info/entry_points.txt"), std::string::npos)
      << index.not_cacheable();
}

// In a child (test::with_failing_syscall): scan({site}) must answer with
// nothing listed and an answer that is not cacheable for `why`.  Returns the
// child's verdict: 0, or what went wrong (on stderr).
int lists_nothing_uncached(const std::string& site, const std::string& why) {
  const std::vector<std::string> paths = {site};
  const Result<Index> r = scan(paths);
  if (!r.ok()) return std::fprintf(stderr, "scan failed: %s\n", r.error().message.c_str()), 1;
  if (!r.value().entry_points().empty()) return std::fprintf(stderr, "entry points listed\n"), 2;
  const std::string got(r.value().not_cacheable());
  if (got.find(site + ": " + why) == std::string::npos) {
    return std::fprintf(stderr, "not_cacheable: '%s'\n", got.c_str()), 3;
  }
  return 0;
}

TEST_F(Scanner, ListingFailureListsNothingAndIsNotCacheable) {
  // os.listdir raising makes importlib list nothing for the path; the same
  // here, but a failure (EIO) says nothing about the directory, whose stamp
  // stays the same, so the answer must not be cached.
  dist("site", "d-1.0.dist-info", "[g]\nd = 1\n");
  const std::string site = path("site");
  EXPECT_EQ(test::with_failing_syscall(__NR_getdents64, EIO, [&] {
              return lists_nothing_uncached(site, "cannot list the search path: Input/output error");
            }),
            0);
  const Index index = scan_ok({site});  // listable again: the distribution, cacheable
  EXPECT_EQ(index.entry_points().size(), 1u);
  EXPECT_TRUE(index.not_cacheable().empty());
}

TEST_F(Scanner, SearchPathOpenFailureIsNotCacheable) {
  // The same for an open() of the directory that fails with EIO: not an
  // answer about the path (ENOENT, ENOTDIR, EACCES are, and its stamp
  // records them).
  dist("site", "d-1.0.dist-info", "[g]\nd = 1\n");
  const std::string site = path("site");
  const auto body = [&] { return lists_nothing_uncached(site, "cannot open the search path: Input/output error"); };
  EXPECT_EQ(test::with_failing_syscall(__NR_openat, EIO, body, 2, O_DIRECTORY), 0);
  const std::string absent = path("absent");  // ENOENT: an answer, cacheable
  const std::vector<std::string> paths = {absent};
  EXPECT_TRUE(scan_ok(paths).not_cacheable().empty());
}

TEST_F(Scanner, ListingOutOfMemoryIsAScanError) {
  dist("site", "d-1.0.dist-info", "[g]\nd = 1\n");
  const std::string site = path("site");
  const int status = test::with_failing_syscall(__NR_getdents64, ENOMEM, [&] {
    const std::vector<std::string> paths = {site};
    const Result<Index> r = scan(paths);
    if (r.ok()) return std::fprintf(stderr, "scan answered\n"), 1;
    if (r.error().message != site + ": cannot list the search path: Cannot allocate memory; "
                                    "free some memory and retry.") {
      return std::fprintf(stderr, "message: '%s'\n", r.error().message.c_str()), 2;
    }
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST_F(Scanner, OutOfDescriptorsIsAScanErrorNotADistributionError) {
  // EMFILE says nothing about the file: recorded on the distribution, it
  // would be cached and served after the limit is raised again.
  for (int i = 0; i < 5; ++i) {
    dist("site", "d" + std::to_string(i) + "-1.0.dist-info", "[g]\nd" + std::to_string(i) + " = 1\n");
  }
  const Result<Index> r = scan_with_one_descriptor(path("site"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::io);
  EXPECT_NE(r.error().message.find("entry_points.txt: cannot read: Too many open files"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("ulimit -n"), std::string::npos) << r.error().message;
  const Index index = scan_ok({path("site")});
  EXPECT_EQ(index.first_error(), nullptr);
  EXPECT_EQ(index.entry_points().size(), 5u);
}

TEST_F(Scanner, OutOfDescriptorsReadingMetadataIsAScanError) {
  // The same for METADATA, read for a name (phase 1) or for a version.
  dist("site", "Named.DIST-INFO", "[g]\nn = 1\n", "Name: named\nVersion: 2\n");
  const Result<Index> r = scan_with_one_descriptor(path("site"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("Named.DIST-INFO/METADATA: cannot read: Too many open files"),
            std::string::npos) << r.error().message;
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
  EXPECT_EQ(index.search_path_stamps()[0], detail::stamp_at(AT_FDCWD, path("site").c_str()));
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
  ASSERT_GT(index.watched_files().size(), 8u);
  for (const WatchedFile& w : index.watched_files()) {
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
  EXPECT_GE(index.scanned_at_ns(), before);
  EXPECT_LE(index.scanned_at_ns(), after);
}

TEST_F(Scanner, ManySearchPathsDoNotExhaustFileDescriptors) {
  // Directories without distributions are closed as soon as they are listed,
  // so a path list far longer than the descriptor limit still scans exactly.
  std::vector<std::string> paths;
  for (int i = 0; i < 300; ++i) {
    fs::create_directories(path("empty" + std::to_string(i)));
    paths.push_back(path("empty" + std::to_string(i)));
  }
  dist("site", "last-1.0.dist-info", "[g]\nlast = 1\n");
  paths.push_back(path("site"));
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto r = scan(paths);
  ::setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(flat(r.value()), (std::vector<std::string>{"g:last=1@last"}));
}

TEST_F(Scanner, ManySearchPathsWithDistributionsDoNotExhaustFileDescriptors) {
  // One directory per distribution, more of them than the descriptor limit
  // (some build systems lay environments out so): past a budget, files are
  // read by whole paths, with the same answer and the same stamps.
  std::vector<std::string> paths;
  for (int i = 0; i < 300; ++i) {
    const std::string site = "p" + std::to_string(i);
    dist(site, "d" + std::to_string(i) + "-1.0.dist-info", "[g]\nd" + std::to_string(i) + " = m:f\n");
    dist(site, "Named" + std::to_string(i) + ".DIST-INFO", "[h]\nn = m:f\n",
         "Name: named" + std::to_string(i) + "\nVersion: 2\n");
    paths.push_back(path(site));
  }
  const Index unlimited = scan_ok(paths);
  ASSERT_EQ(unlimited.entry_points().size(), 600u);
  Result<Index> r = Error{Errc::io, ""};
  {
    test::FdLimit limit(40);
    ASSERT_TRUE(limit.ok());
    r = scan(paths);
  }
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::string why;
  EXPECT_TRUE(same_answer(r.value(), unlimited, &why)) << why;
  ASSERT_EQ(r.value().watched_files().size(), unlimited.watched_files().size());
  for (std::size_t i = 0; i < unlimited.watched_files().size(); ++i) {
    EXPECT_EQ(r.value().watched_files()[i].stamp, unlimited.watched_files()[i].stamp) << i;
  }
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
