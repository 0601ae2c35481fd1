// scanner_failures_test.cpp — scan() where the file system fails or
// surprises: zip archives on the path, unreadable files, symlink loops,
// failing system calls, and too few file descriptors.
#include "epload/scanner.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>         // O_DIRECTORY
#include <sys/resource.h>  // setrlimit
#include <grp.h>           // setgroups
#include <sys/stat.h>      // chmod
#include <sys/wait.h>      // waitpid
#include <unistd.h>        // access, fork, geteuid, setuid, symlink

#include <cstdio>   // fprintf, in a child
#include <cstdlib>  // system
#include <functional>
#include <string>
#include <vector>

#include "scanner_test_util.hpp"
#include "index_provenance.hpp"

namespace epload {
namespace {

namespace fs = std::filesystem;
using testing::Scanner;

// Writes the zip archive `zip` with Python's zipfile: `before` runs first
// (module settings), then `members` (writestr calls on `z`).  False if the
// interpreter failed.
bool write_zip(const std::string& zip, const std::string& members, const std::string& before = "") {
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) + " -c \"import zipfile,sys; " + before +
                          "z=zipfile.ZipFile(sys.argv[1],'w');" + members + "z.close()\" " + zip;
  return std::system(cmd.c_str()) == 0;
}

// One distribution with entry points, for write_zip.
constexpr const char* k_zipped_distribution =
    "z.writestr('zipped-1.0.dist-info/entry_points.txt','[g]\\nx=1\\n');";

TEST_F(Scanner, ZipWithoutDistributionsContributesNothing) {
  const std::string zip = path("plain.zip");
  ASSERT_TRUE(write_zip(zip, "z.writestr('pkg/__init__.py','');"
                             "z.writestr('lib/x-1.dist-info/entry_points.txt','[g]\\nx=1\\n');"));
  const Index index = scan_ok({zip});
  EXPECT_TRUE(index.entry_points().empty());
  EXPECT_TRUE(search_path_stamps(index)[0].exists());
}

TEST_F(Scanner, ZipWithDistributionsIsUnsupportedNamingTheArchive) {
  const std::string zip = path("dists.zip");
  ASSERT_TRUE(write_zip(zip, k_zipped_distribution));
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
  ASSERT_TRUE(write_zip(zip, k_zipped_distribution, "zipfile.ZIP_FILECOUNT_LIMIT=0;"));
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

/// Runs `body` as a user who cannot read a mode-000 file: this process,
/// or, under root (which reads any file), a child that has become `nobody`.
/// Returns body's result (the child's exit status; -1: it could not run).
int without_root(const std::function<int()>& body) {
  if (::geteuid() != 0) return body();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(120);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST_F(Scanner, UnreadableEntryPointsTxtIsSkipped) {
  dist("site", "locked-1.0.dist-info", "[g]\nx = 1\n");
  const std::string site = path("site"), file = path("site/locked-1.0.dist-info/entry_points.txt");
  ::chmod(file.c_str(), 0);
  for (const std::string& dir : {path(""), site, path("site/locked-1.0.dist-info")}) ::chmod(dir.c_str(), 0755);
  EXPECT_EQ(without_root([&] {
              if (::access(site.c_str(), R_OK | X_OK) != 0) return std::fprintf(stderr, "cannot list the site\n"), 1;
              if (::access(file.c_str(), R_OK) == 0) return std::fprintf(stderr, "the file is readable\n"), 2;
              const Result<Index> r = scan(std::vector<std::string>{site});
              if (!r.ok()) return std::fprintf(stderr, "scan failed: %s\n", r.error().message.c_str()), 3;
              if (r.value().first_error() != nullptr) return std::fprintf(stderr, "an error was recorded\n"), 4;
              if (!r.value().entry_points().empty()) return std::fprintf(stderr, "entry points listed\n"), 5;
              return 0;
            }),
            0);
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
  EXPECT_TRUE(not_cacheable(clean).empty());
  dist("site", "loop-1.0.dist-info");
  ASSERT_EQ(::symlink("entry_points.txt", path("site/loop-1.0.dist-info/entry_points.txt").c_str()), 0);
  const Index index = scan_ok({path("site")});
  EXPECT_NE(std::string(not_cacheable(index)).find("loop-1.0.dist-info/entry_points.txt"), std::string::npos)
      << not_cacheable(index);
}

// In a child (test::with_failing_syscall): scan({site}) must answer with
// nothing listed and an answer that is not cacheable for `why`.  Returns the
// child's verdict: 0, or what went wrong (on stderr).
int lists_nothing_uncached(const std::string& site, const std::string& why) {
  const std::vector<std::string> paths = {site};
  const Result<Index> r = scan(paths);
  if (!r.ok()) return std::fprintf(stderr, "scan failed: %s\n", r.error().message.c_str()), 1;
  if (!r.value().entry_points().empty()) return std::fprintf(stderr, "entry points listed\n"), 2;
  const std::string got(not_cacheable(r.value()));
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
  EXPECT_TRUE(not_cacheable(index).empty());
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
  EXPECT_TRUE(not_cacheable(scan_ok(paths)).empty());
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
  ASSERT_EQ(watched_files(r.value()).size(), watched_files(unlimited).size());
  for (std::size_t i = 0; i < watched_files(unlimited).size(); ++i) {
    EXPECT_EQ(watched_files(r.value())[i].stamp, watched_files(unlimited)[i].stamp) << i;
  }
}

}  // namespace
}  // namespace epload
