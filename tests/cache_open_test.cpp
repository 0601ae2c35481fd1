// cache_open_test.cpp — open_index() and store_index() against real trees:
// rebuilds and hits, bad or foreign cache files and directories (rebuild or
// work uncached, never a crash or a wrong answer), pruning, and processes
// racing a changing tree.
#include <sys/resource.h>  // setrlimit
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>  // sleep_for

#include "cache_format_util.hpp"
#include "cache_internal.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "index_provenance.hpp"

namespace epload {
namespace {

using test::TempDir;
using test::edit_file;

// ---- open_index against real trees -------------------------------------------

class CacheOpen : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("EPLOAD_INDEX");
    site = t / "site";
    test::make_dist(site, "alpha", "1.0", "[console_scripts]\nalpha = alpha.cli:main\n");
    test::make_dist(site, "beta", "2.0", "[torch.backends]\nnpu = beta_npu:init\n");
    test::make_dist(site, "gamma", "3.0", "");
    options.search_paths = {site};
    options.cache_dir = t / "cache";
  }

  CacheReport open_checked() { return test::open_checked(options); }

  TempDir t;
  std::string site;
  CacheOptions options;
};

TEST_F(CacheOpen, RebuildsOnceThenHits) {
  test::next_tick();
  CacheReport first = open_checked();
  EXPECT_EQ(first.status, CacheStatus::rebuilt);
  EXPECT_NE(first.reason.find("no cache"), std::string::npos) << first.reason;
  EXPECT_EQ(first.file, cache_file_path(options));
  struct stat dir_st, before, after;
  ASSERT_EQ(::stat(options.cache_dir.c_str(), &dir_st), 0);
  EXPECT_EQ(dir_st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(first.file.c_str(), &before), 0);
  EXPECT_EQ(before.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(first.file.c_str(), &before), 0);
  CacheReport third = open_checked();
  EXPECT_EQ(third.status, CacheStatus::hit) << third.reason;
  ASSERT_EQ(::stat(first.file.c_str(), &after), 0);
  // A hit writes nothing.
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
}

TEST_F(CacheOpen, StoreIndexWritesTheFileOpenIndexReads) {
  options.interpreter = "/usr/bin/python3|/usr|3.11.2";
  auto idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  test::next_tick();
  idx = scan(options.search_paths);
  ASSERT_TRUE(idx);
  auto stored = store_index(*idx, options);
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(*stored, cache_file_path(options));
  struct stat st;
  ASSERT_EQ(::stat(options.cache_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;

  options.cache_dir = t / "plain-file";
  test::write_file(options.cache_dir, "x");
  EXPECT_FALSE(store_index(*idx, options));
}

TEST_F(CacheOpen, ScanFailureIsReturned) {
  // Without a free file descriptor the scan cannot answer exactly: that error
  // (not a silently empty index) must come back from open_index.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int lowest_free = ::dup(0);
    ::close(lowest_free);
    const struct rlimit lim = {static_cast<rlim_t>(lowest_free), static_cast<rlim_t>(lowest_free)};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(2);
    auto r = open_index(options);
    ::_exit(!r && r.error().code == Errc::io ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "open_index did not return the scan's error";
}

TEST_F(CacheOpen, DisabledCacheScansAndWritesNothing) {
  options.use_cache = false;
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::uncached);
  EXPECT_TRUE(test::list_dir(options.cache_dir).empty());
}

TEST_F(CacheOpen, OtherVersionForeignKeyAndCorruptFilesAreRebuilt) {
  (void)open_checked();
  const std::string file = cache_file_path(options);
  const std::string good = test::read_file(file);

  // The previous format (6) and a foreign one.
  CacheReport r;
  for (const std::string version : {"6", "99"}) {
    edit_file(file, "\"version\":7,", "\"version\":" + version + ",");
    r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::rebuilt);
    EXPECT_NE(r.reason.find("format version " + version + ", this build reads 7"), std::string::npos) << r.reason;
  }

  // Another key's file under this key's name (what a hash collision looks
  // like): the stored key differs, so it is rebuilt, not trusted.
  CacheOptions other = options;
  other.search_paths = {site, t / "elsewhere"};
  (void)open_index(other);
  test::write_file(file, test::read_file(cache_file_path(other)));
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("search-path list"), std::string::npos) << r.reason;

  CacheOptions with_interp = options;
  with_interp.interpreter = "/usr/bin/python3 3.11";
  (void)open_index(with_interp);
  test::write_file(file, test::read_file(cache_file_path(with_interp)));
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("another key"), std::string::npos) << r.reason;

  for (const std::string& bad : {std::string(), std::string("{\"a\":1}"), good.substr(0, good.size() / 2)}) {
    test::write_file(file, bad);
    r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::rebuilt);
    EXPECT_NE(r.reason.find(file), std::string::npos) << r.reason;
  }
}

TEST_F(CacheOpen, GroupQueryHitsWithAPartialIndex) {
  options.groups = {"torch.backends"};
  options.validation = Validation::paths;
  test::next_tick();
  CacheReport r;
  auto rebuilt = open_index(options, &r);  // a scan: the complete index
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_TRUE((*rebuilt)->complete());

  auto hit = open_index(options, &r);
  ASSERT_TRUE(hit);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  const Index& partial = **hit;
  EXPECT_FALSE(partial.complete());
  ASSERT_EQ(partial.group("torch.backends").size(), 1u);
  EXPECT_EQ(partial.group("torch.backends")[0].value, "beta_npu:init");
  EXPECT_EQ(partial.group("torch.backends")[0].dist->name, "beta");
  ASSERT_EQ(partial.distributions().size(), 1u);
  EXPECT_EQ(partial.distributions()[0].metadata_dir, site + "/beta-2.0.dist-info");
  EXPECT_FALSE(partial.has_group("console_scripts"));
  EXPECT_TRUE(watched_files(partial).empty());
  EXPECT_TRUE(still_valid(partial, Validation::paths));
  std::string why;
  EXPECT_FALSE(still_valid(partial, Validation::full, &why));
  EXPECT_NE(why.find("watched"), std::string::npos) << why;

  // Under `full` validation the watched list comes along, and validates.
  options.validation = Validation::full;
  auto full = open_index(options, &r);
  ASSERT_TRUE(full);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  EXPECT_FALSE((*full)->complete());
  EXPECT_TRUE(watched_complete(**full));
  EXPECT_TRUE(still_valid(**full, Validation::full, &why)) << why;


  // The same file serves a complete read.
  options.groups.clear();
  EXPECT_EQ(open_checked().status, CacheStatus::hit);
}

TEST_F(CacheOpen, VersionOneFileIsRebuilt) {
  (void)open_checked();
  const std::string file = cache_file_path(options);
  test::write_file(file,
                   "{\"format\":\"epload-index\",\"version\":1,\"checksum\":\"0123456789abcdef\",\n"
                   "\"key\":{\"interpreter\":\"\",\"cwd\":\"\"},\n\"relocatable\":false,\n\"scanned_at_ns\":1,\n"
                   "\"search_paths\":[],\n\"dists\":[],\n\"entry_points\":[],\n\"watched\":[]}\n");
  ::chmod(file.c_str(), 0600);
  for (auto groups : {std::vector<std::string>{}, std::vector<std::string>{"torch.backends"}}) {
    options.groups = groups;
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::rebuilt);
    EXPECT_NE(r.reason.find("format version 1"), std::string::npos) << r.reason;
    test::write_file(file, "{\"format\":\"epload-index\",\"version\":1,\"checksum\":\"0\",\n\"key\":{}}\n");
    ::chmod(file.c_str(), 0600);
  }
}

TEST_F(CacheOpen, ByteFlippedCacheFilesGiveTheRightAnswer) {
  (void)open_checked();
  const std::string file = cache_file_path(options);
  const std::string good = test::read_file(file);
  for (unsigned seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(seed);
    std::string bad = good;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    test::write_file(file, bad);
    ::chmod(file.c_str(), 0600);
    CacheReport r = open_checked();  // the answer is checked against a scan
    EXPECT_EQ(r.status, CacheStatus::rebuilt) << "seed " << seed;
  }
}

TEST_F(CacheOpen, GroupOrWorldWritableCacheFileIsIgnored) {
  for (mode_t mode : {0620, 0602, 0666}) {
    (void)open_checked();
    const std::string file = cache_file_path(options);
    ASSERT_EQ(::chmod(file.c_str(), mode), 0);
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::rebuilt);
    EXPECT_NE(r.reason.find("unsafe"), std::string::npos) << r.reason;
    EXPECT_NE(r.reason.find("writable by group or others"), std::string::npos) << r.reason;
    struct stat st;
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the rewritten file is private again";
  }
}

TEST_F(CacheOpen, SymlinkedCacheFileIsIgnored) {
  (void)open_checked();
  const std::string file = cache_file_path(options);
  ASSERT_EQ(::rename(file.c_str(), (t / "elsewhere.json").c_str()), 0);
  ASSERT_EQ(::symlink((t / "elsewhere.json").c_str(), file.c_str()), 0);
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("unsafe"), std::string::npos) << r.reason;
}

TEST_F(CacheOpen, CacheOwnedByAnotherUserIsIgnored) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a file to another uid";
  (void)open_checked();
  const std::string file = cache_file_path(options);
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("owned by uid 65534"), std::string::npos) << r.reason;
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);

  // A directory owned by someone else is neither read nor written.
  ASSERT_EQ(::chown(options.cache_dir.c_str(), 65534, 65534), 0);
  const std::string before = test::read_file(file);
  r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::uncached);
  EXPECT_NE(r.reason.find("cache directory"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("owned by uid 65534"), std::string::npos) << r.reason;
  EXPECT_EQ(test::read_file(file), before);
}

TEST_F(CacheOpen, WorldWritableCacheDirectoryIsNotUsed) {
  (void)open_checked();
  ASSERT_EQ(::chmod(options.cache_dir.c_str(), 0777), 0);
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::uncached);
  EXPECT_NE(r.reason.find("unsafe"), std::string::npos) << r.reason;
}

TEST_F(CacheOpen, UnusableCacheDirectoryMeansUncached) {
  test::write_file(t / "plain-file", "x");
  for (const std::string& dir : {t / "plain-file/cache", t / "plain-file",
                                 std::string("/proc/epload-no-such-dir/cache")}) {
    options.cache_dir = dir;
    CacheReport r = open_checked();
    EXPECT_EQ(r.status, CacheStatus::uncached) << dir;
    EXPECT_NE(r.reason.find("unusable"), std::string::npos) << r.reason;
  }
}

/// A disk that fills up while the refreshed index is written: the answer is
/// still right (served uncached, and said so), the old cache file is
/// untouched and no temporary file is left behind.  Then, without the
/// limit, the next query refreshes the old file and stores; its report.
CacheReport expect_failed_write_keeps_the_old_file(const CacheOptions& options, const std::string& site) {
  test::next_tick();
  CacheReport first = test::open_checked(options);
  EXPECT_EQ(first.status, CacheStatus::rebuilt);
  const std::string before = test::read_file(first.file);
  test::make_dist(site, "delta", "4.0", "[torch.backends]\nxpu = delta_xpu:init\n");
  test::next_tick();
  const int code = test::in_child_with_file_size_limit(256, [&] {
    CacheReport r;
    auto idx = open_index(options, &r);
    if (!idx) return 1;
    if ((*idx)->group("torch.backends").size() != 2) return 2;
    if (r.status != CacheStatus::uncached) return 3;
    if (r.reason.find("File too large") == std::string::npos) return 4;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(test::read_file(first.file), before);
  EXPECT_EQ(test::list_dir(options.cache_dir),
            std::vector<std::string>{first.file.substr(first.file.rfind('/') + 1)});
  return test::open_checked(options);
}

TEST_F(CacheOpen, FailedWriteServesUncachedAndKeepsTheOldFile) {
  EXPECT_EQ(expect_failed_write_keeps_the_old_file(options, site).status, CacheStatus::refreshed);
}

TEST_F(CacheOpen, FailedWriteOfAGroupQueryRefreshServesUncachedAndKeepsTheOldFile) {
  // The same for a group query, whose refresh reads the whole file.
  options.groups = {"torch.backends"};
  EXPECT_EQ(expect_failed_write_keeps_the_old_file(options, site).status, CacheStatus::refreshed);
}

TEST_F(CacheOpen, PrunesOldAndExcessFiles) {
  ASSERT_EQ(::mkdir(options.cache_dir.c_str(), 0700), 0);
  const std::int64_t now = detail::coarse_now_ns() / 1000000000;
  auto make_aged = [&](const std::string& name, std::int64_t age_s) {
    const std::string p = options.cache_dir + "/" + name;
    // Each kind's own first bytes (only such files are epload's).
    test::write_file(p, name.find("learned-") != std::string::npos ? "epload-learned 3\nend 0\n"
                        : name.find("index-") != std::string::npos ? "{\"format\":\"epload-index\",\"version\":6}\n"
                                                                   : "{}");
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(now - age_s);
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  };
  for (int i = 0; i < 5; ++i) make_aged("index-old" + std::to_string(i) + ".json", 31 * 86400);
  for (int i = 0; i < 70; ++i) make_aged("index-f" + std::to_string(100 + i) + ".json", 1000 + i);
  make_aged(".index-x.json.tmp.abcdef", 2 * 3600);   // stray temp file: removed
  make_aged(".index-y.json.tmp.abcdef", 60);         // maybe still being written: kept
  make_aged("unrelated.txt", 365 * 86400);       // not ours: kept
  make_aged("learned-old.txt", 31 * 86400);      // learned stores: by last use too
  make_aged("learned-new.txt", 60);
  CacheReport r = open_checked();
  ASSERT_EQ(r.status, CacheStatus::rebuilt);
  const auto files = test::list_dir(options.cache_dir);
  auto has = [&](const std::string& n) { return std::find(files.begin(), files.end(), n) != files.end(); };
  int index_files = 0;
  for (const auto& f : files) index_files += f.rfind("index-", 0) == 0;
  EXPECT_EQ(index_files, 64);
  EXPECT_TRUE(has(r.file.substr(r.file.rfind('/') + 1)));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(has("index-old" + std::to_string(i) + ".json"));
  // The 63 most recently used of the 70 stay (ages 1000..1062 s).
  EXPECT_TRUE(has("index-f100.json"));
  EXPECT_TRUE(has("index-f162.json"));
  EXPECT_FALSE(has("index-f163.json"));
  EXPECT_FALSE(has("index-f169.json"));
  EXPECT_FALSE(has(".index-x.json.tmp.abcdef"));
  EXPECT_TRUE(has(".index-y.json.tmp.abcdef"));
  EXPECT_TRUE(has("unrelated.txt"));
  EXPECT_FALSE(has("learned-old.txt"));
  EXPECT_TRUE(has("learned-new.txt"));

  auto cleared = clear_cache(options);
  ASSERT_TRUE(cleared);
  EXPECT_EQ(*cleared, 66);  // 64 index files, the young temp file, the learned store
  EXPECT_EQ(test::list_dir(options.cache_dir), std::vector<std::string>{"unrelated.txt"});
  options.cache_dir = t / "never-created";
  auto none = clear_cache(options);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
}

/// An answer's lines, sorted: the tree's state without its directory order.
/// Where readdir order follows the order entries were added (tmpfs), a
/// distribution that left and came back is listed elsewhere, so the four
/// states come in many orders; the final comparison, with a fresh scan,
/// keeps the order.
std::vector<std::string> lines_of(const Index& index) {
  std::vector<std::string> lines;
  std::istringstream in(test::answer_text(index));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

/// One of EightProcessesReadAndRebuildWhileTheTreeChanges's processes:
/// waits for `go`, opens the index 40 times while the tree changes, then,
/// once `done` reads EOF, expects a fresh scan's answer.  Exits 0 when all
/// went well.
[[noreturn]] void reader_child(const CacheOptions& options, const std::vector<std::vector<std::string>>& states, int go,
                               int done) {
  char c;
  if (::read(go, &c, 1) != 1) ::_exit(10);
  for (int i = 0; i < 40; ++i) {
    CacheReport rep;
    auto idx = open_index(options, &rep);
    if (!idx) ::_exit(11);
    // A scan that races a rename may see a half-moved distribution, as
    // importlib would; but an answer served from the cache must always
    // be a state the tree was really in.
    const bool consistent = std::find(states.begin(), states.end(), lines_of(**idx)) != states.end();
    if (!consistent && rep.status == CacheStatus::hit) {
      std::fprintf(stderr, "inconsistent cached answer from %s\n", rep.file.c_str());
      ::_exit(12);
    }
  }
  (void)::read(done, &c, 1);  // EOF once the parent stops changing the tree
  auto idx = open_index(options);
  auto fresh = scan(options.search_paths);
  if (!idx || !fresh) ::_exit(13);
  ::_exit(test::answer_text(**idx) == test::answer_text(*fresh) ? 0 : 14);
}

TEST_F(CacheOpen, EightProcessesReadAndRebuildWhileTheTreeChanges) {
  // Two distributions toggle in and out of the search path by rename, so the
  // tree is always in one of four states.  Every answer served from the
  // cache must be one of those (a fresh scan racing a rename may see a
  // half-moved distribution, as importlib would, but such an answer must
  // never be trusted later), and once the tree stops changing, every process
  // must get exactly the final state.
  const std::string stage = t / "stage";
  test::make_dist(stage, "togglea", "1", "[g]\na = m:a\n");
  test::make_dist(stage, "toggleb", "1", "[g]\nb = m:b\n");
  for (int i = 0; i < 20; ++i) test::make_dist(site, "noise" + std::to_string(i), "1", "[g]\nn = m:n\n");
  const std::string names[2] = {"togglea-1.dist-info", "toggleb-1.dist-info"};
  bool present[2] = {false, false};
  auto toggle = [&](int k) {
    const std::string in = site + "/" + names[k], out = stage + "/" + names[k];
    ASSERT_EQ(::rename(present[k] ? in.c_str() : out.c_str(), present[k] ? out.c_str() : in.c_str()), 0);
    present[k] = !present[k];
  };
  std::vector<std::vector<std::string>> states;
  for (int s = 0; s < 4; ++s) {
    if (present[0] != bool(s & 1)) toggle(0);
    if (present[1] != bool(s & 2)) toggle(1);
    auto idx = scan(options.search_paths);
    ASSERT_TRUE(idx);
    states.push_back(lines_of(*idx));
  }
  int go[2], done[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(done), 0);
  std::vector<pid_t> kids;
  for (int k = 0; k < 8; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(done[1]);
      reader_child(options, states, go[0], done[0]);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(done[0]);
  for (int k = 0; k < 8; ++k) ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    toggle(static_cast<int>(rng() % 2));
    ::usleep(500);
  }
  ::close(done[1]);
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  // The file the processes left behind is whole and valid.
  auto final_file = read_index(cache_file_path(options));
  ASSERT_TRUE(final_file) << final_file.error().message;
  CacheReport r = open_checked();
  EXPECT_NE(r.status, CacheStatus::uncached) << r.reason;
  for (const auto& f : test::list_dir(options.cache_dir)) {
    EXPECT_EQ(f.find(".tmp."), std::string::npos) << "temporary file left behind: " << f;
  }
}

}  // namespace
}  // namespace epload
