// Tests for kept_files.cpp: the names of a cache directory, pruning and
// clearing.  Real files in a temporary directory.  The kinds are those the
// core's modules register (index files, the learned store); the CLI's memo
// files are tested with the CLI (tests/cli/test_python_memo.py).
#include "kept_files.hpp"

#include <sys/stat.h>
#include <unistd.h>  // symlink

#include <algorithm>
#include <filesystem>
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

// What each kind's writer puts first (cache_write.cpp, learned.cpp).
const std::string k_index_text = "{\"format\":\"epload-index\",\"version\":6,\"checksum\":\"0\"}\n";
const std::string k_learned_text = "epload-learned 3\nend 0\n";

/// A directory of files with given contents and ages.
struct AgedDir {
  TempDir t;
  std::string dir = t.path();
  std::int64_t now = detail::coarse_now_ns() / 1000000000;

  void make(const std::string& name, const std::string& content, std::int64_t age_s) {
    const std::string p = dir + "/" + name;
    test::write_file(p, content);
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(now - age_s);
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  }
  std::vector<std::string> files() const {
    auto f = test::list_dir(dir);
    std::sort(f.begin(), f.end());
    return f;
  }
};

constexpr std::int64_t k_month = 31 * 86400;

TEST(CacheFiles, KindOfEveryName) {
  EXPECT_EQ(kind("index-0123456789abcdef.json"), "index-");
  EXPECT_EQ(kind("learned-0123456789abcdef.txt"), "learned-");
  EXPECT_EQ(kind(".index-0123.json.tmp.AbC123"), "temp index-");
  EXPECT_EQ(kind(".learned-0123.txt.tmp.AbC123"), "temp learned-");
  // Not ours: near misses are never touched.
  for (const char* other : {"index-.json", "index-x.json.bak", "learned-x.json", "devices-g-h.json",
                            ".index-x.json", "notes.txt", "index.json", ".tmp.index-x", "learned-.txt"}) {
    EXPECT_EQ(kind(other), "other") << other;
  }
}

TEST(CacheFiles, PruneAndClearCoverEveryKindAndNothingElse) {
  AgedDir d;
  d.make("index-kept.json", k_index_text, 0);
  d.make("index-old.json", k_index_text, k_month);
  d.make("learned-old.txt", k_learned_text, k_month);
  d.make("learned-new.txt", k_learned_text, 86400);
  d.make(".index-a.json.tmp.XXXXXX", k_index_text.substr(0, 10), 2 * 3600);  // left by a killed process
  d.make(".learned-a.txt.tmp.XXXXXX", "", 2 * 3600);
  d.make(".learned-b.txt.tmp.XXXXXX", k_learned_text, 60);                    // may still be being written
  d.make("notes.txt", "", 10 * k_month);                                       // not ours
  d.make("learned-old.txt.bak", k_learned_text, 10 * k_month);

  detail::prune_cache_dir(d.dir, "index-kept.json");
  EXPECT_EQ(d.files(), (std::vector<std::string>{".learned-b.txt.tmp.XXXXXX", "index-kept.json", "learned-new.txt",
                                                 "learned-old.txt.bak", "notes.txt"}));

  auto removed = detail::clear_cache_dir(d.dir);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 3);
  EXPECT_EQ(d.files(), (std::vector<std::string>{"learned-old.txt.bak", "notes.txt"}));

  auto none = detail::clear_cache_dir(d.t / "never-created");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
  EXPECT_FALSE(std::filesystem::exists(d.t / "never-created"));
}

// A shared cache directory (a project's, $HOME): files named like ours,
// old, but written by someone else, are neither pruned nor cleared.
TEST(CacheFiles, LookAlikesBesideTheCacheAreKept) {
  AgedDir d;
  d.make("index-kept.json", k_index_text, 0);
  d.make("index-old.json", k_index_text, k_month);  // ours: pruned
  const std::vector<std::pair<std::string, std::string>> theirs = {
      {"index-en.json", "{\"title\": \"English index\"}\n"},
      {"index-0123456789abcdef.json", "{\"format\":\"something-else\"}\n"},
      {"learned-lessons.txt", "Lessons learned\n"},
      {"learned-0123456789abcdef.txt", "epload-learned"},  // shorter than the magic
      {".index-en.json.tmp.AbC123", "{\"title\""},           // not a prefix of the magic
      {"index-empty.json", ""},
  };
  for (const auto& [name, text] : theirs) d.make(name, text, 10 * k_month);
  ::symlink((d.dir + "/index-old.json").c_str(), (d.dir + "/index-link.json").c_str());

  detail::prune_cache_dir(d.dir, "index-kept.json");
  std::vector<std::string> want = {"index-kept.json", "index-link.json"};
  for (const auto& [name, text] : theirs) want.push_back(name);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(d.files(), want);
  for (const auto& [name, text] : theirs) EXPECT_EQ(test::read_file(d.dir + "/" + name), text) << name;

  auto removed = detail::clear_cache_dir(d.dir);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 1);  // index-kept.json
  want.erase(std::find(want.begin(), want.end(), "index-kept.json"));
  EXPECT_EQ(d.files(), want);
}

// The count bound: at most k_keep_newest files of a kind, the least
// recently used removed first; look-alikes of others neither count nor go.
TEST(CacheFiles, EachKindIsBoundedInCount) {
  AgedDir d;
  const std::size_t n = detail::k_keep_newest + 6;
  for (std::size_t i = 0; i < n; ++i) {
    d.make("learned-" + std::to_string(100 + i) + ".txt", k_learned_text, 1000 + static_cast<std::int64_t>(i));
  }
  for (int i = 0; i < 10; ++i) d.make("learned-theirs" + std::to_string(i) + ".txt", "notes\n", 5000);
  d.make("index-kept.json", k_index_text, 0);
  detail::prune_cache_dir(d.dir, "index-kept.json");
  const auto files = d.files();
  auto has = [&](const std::string& f) { return std::find(files.begin(), files.end(), f) != files.end(); };
  std::size_t ours = 0;
  for (std::size_t i = 0; i < n; ++i) ours += has("learned-" + std::to_string(100 + i) + ".txt");
  EXPECT_EQ(ours, detail::k_keep_newest);
  EXPECT_TRUE(has("learned-100.txt"));                                         // the most recently used
  EXPECT_FALSE(has("learned-" + std::to_string(100 + n - 1) + ".txt"));        // the least
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(has("learned-theirs" + std::to_string(i) + ".txt"));
}

}  // namespace
}  // namespace epload
