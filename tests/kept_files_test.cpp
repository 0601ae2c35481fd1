// Tests for kept_files.cpp: the names of a cache directory, pruning and
// clearing.  Real files in a temporary directory.  The kinds are those the
// core's modules register (index files, the learned store and the one it
// replaced); the CLI's memo files are tested with the CLI
// (tests/cli/test_python_memo.py).
#include "kept_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache_test_util.hpp"
#include "stamp.hpp"

namespace epload {
namespace {

using test::TempDir;

/// The prefix of the kind `name` is of, with "temp " before it for a
/// temporary file; "other" when it is not ours.
std::string kind(std::string_view name) {
  const detail::KeptName k = detail::kept_file_kind(name);
  if (k.files == nullptr) return "other";
  return (k.temp ? "temp " : "") + std::string(k.files->prefix);
}

TEST(CacheFiles, KindOfEveryName) {
  EXPECT_EQ(kind("index-0123456789abcdef.json"), "index-");
  EXPECT_EQ(kind("learned-0123456789abcdef.txt"), "learned-");
  EXPECT_EQ(kind("devices-torch.backends-torch.json"), "devices-");
  EXPECT_EQ(kind(".index-0123.json.tmp.AbC123"), "temp index-");
  EXPECT_EQ(kind(".learned-0123.txt.tmp.AbC123"), "temp learned-");
  EXPECT_EQ(kind(".devices-g-h.json.tmp.12.34"), "temp devices-");
  // Not ours: near misses are never touched.
  for (const char* other : {"index-.json", "index-x.json.bak", "learned-x.json", "devices-.json",
                            ".index-x.json", "notes.txt", "index.json", ".tmp.index-x", "learned-.txt"}) {
    EXPECT_EQ(kind(other), "other") << other;
  }
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
