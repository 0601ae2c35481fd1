// Tests for cache_files.cpp: the names of a cache directory, the one atomic
// writer every cache file goes through, pruning and clearing.  Real files in
// a temporary directory; write failures are real (a file-size limit in a
// forked child), not simulated.
#include "cache_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache_test_util.hpp"
#include "stamp.hpp"

namespace epload {
namespace {

using detail::CacheFileKind;
using test::TempDir;

TEST(CacheFiles, KindOfEveryName) {
  EXPECT_EQ(detail::cache_file_kind("index-0123456789abcdef.json"), CacheFileKind::index);
  EXPECT_EQ(detail::cache_file_kind("learned-0123456789abcdef.txt"), CacheFileKind::learned);
  EXPECT_EQ(detail::cache_file_kind("devices-torch.backends-torch.json"), CacheFileKind::devices);
  EXPECT_EQ(detail::cache_file_kind(".index-0123.json.tmp.AbC123"), CacheFileKind::temp);
  EXPECT_EQ(detail::cache_file_kind(".learned-0123.txt.tmp.AbC123"), CacheFileKind::temp);
  EXPECT_EQ(detail::cache_file_kind(".devices-g-h.json.tmp.12.34"), CacheFileKind::temp);
  EXPECT_EQ(detail::cache_file_kind("python-0123456789abcdef.txt"), CacheFileKind::python);
  EXPECT_EQ(detail::cache_file_kind(".python-0123.txt.tmp.AbC123"), CacheFileKind::temp);
  // Not ours: near misses are never touched.
  for (const char* other : {"index-.json", "index-x.json.bak", "learned-x.json", "devices-.json",
                            ".index-x.json", "notes.txt", "index.json", ".tmp.index-x", "learned-.txt"}) {
    EXPECT_EQ(detail::cache_file_kind(other), CacheFileKind::other) << other;
  }
}

TEST(CacheFiles, WriteAtomicReplacesTheWholeFileWithExactlyTheMode) {
  TempDir t;
  const std::string path = t / "f.json";
  test::write_file(path, "old contents");
  const mode_t old_mask = ::umask(077);  // the mode is exact, not filtered by the umask
  auto r = detail::write_atomic(path, {"new ", "contents"}, 0644);
  ::umask(old_mask);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(test::read_file(path), "new contents");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(test::list_dir(t.path()), std::vector<std::string>{"f.json"});
}

TEST(CacheFiles, FailedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir t;
  const std::string path = t / "learned-0123456789abcdef.txt";
  test::write_file(path, "the old store\n");
  const std::string big(64 * 1024, 'x');
  const int code = test::in_child_with_file_size_limit(4096, [&] {
    auto r = detail::write_atomic(path, {big}, 0600);
    if (r) return 1;
    const std::string& m = r.error().message;
    // The call, the temporary file and the cause.
    if (m.find("write " + t.path() + "/.learned-0123456789abcdef.txt.tmp.") != 0) return 2;
    if (m.find("File too large") == std::string::npos) return 3;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(test::read_file(path), "the old store\n");
  EXPECT_EQ(test::list_dir(t.path()), std::vector<std::string>{"learned-0123456789abcdef.txt"});
}

TEST(CacheFiles, MissingDirectoryIsNamed) {
  TempDir t;
  auto r = detail::write_atomic(t / "no-such-dir/f.json", {"x"}, 0600);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot create a temporary file in " + t / "no-such-dir"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("No such file or directory"), std::string::npos) << r.error().message;
}

TEST(CacheFiles, PruneAndClearCoverEveryKindAndNothingElse) {
  TempDir t;
  const std::string dir = t.path();
  const std::int64_t now = detail::coarse_now_ns() / 1000000000;
  auto make_aged = [&](const std::string& name, std::int64_t age_s) {
    const std::string p = dir + "/" + name;
    test::write_file(p, "{}");
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(now - age_s);
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  };
  const std::int64_t month = 31 * 86400;
  make_aged("index-kept.json", 0);
  make_aged("index-old.json", month);
  make_aged("learned-old.txt", month);
  make_aged("learned-new.txt", 86400);
  make_aged("devices-g-old.json", month);
  make_aged("devices-g-new.json", 86400);
  make_aged(".index-a.json.tmp.XXXXXX", 2 * 3600);   // left by a killed process
  make_aged(".learned-a.txt.tmp.XXXXXX", 2 * 3600);
  make_aged(".devices-g-h.json.tmp.1.2", 2 * 3600);
  make_aged(".learned-b.txt.tmp.XXXXXX", 60);        // may still be being written
  make_aged("notes.txt", 10 * month);                 // not ours
  make_aged("learned-old.txt.bak", 10 * month);

  detail::prune_cache_dir(dir, "index-kept.json");
  auto files = test::list_dir(dir);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{".learned-b.txt.tmp.XXXXXX", "devices-g-new.json", "index-kept.json",
                                             "learned-new.txt", "learned-old.txt.bak", "notes.txt"}));

  auto removed = detail::clear_cache_dir(dir);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 4);
  files = test::list_dir(dir);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"learned-old.txt.bak", "notes.txt"}));

  auto none = detail::clear_cache_dir(t / "never-created");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
}

}  // namespace
}  // namespace epload
