// Tests for atomic_file.cpp: the one atomic writer every file epload writes
// goes through.  Real files in a temporary directory; write failures are real
// (a file-size limit in a forked child), not simulated.
#include "atomic_file.hpp"

#include <sys/stat.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache_test_util.hpp"

namespace epload {
namespace {

using test::TempDir;

TEST(AtomicFile, WriteAtomicReplacesTheWholeFileWithExactlyTheMode) {
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

TEST(AtomicFile, PartsAreWrittenInOrderWhateverTheirSizes) {
  // Empty parts among them, and one larger than the rest together.
  TempDir t;
  const std::string path = t / "index.json";
  const std::string big(300 * 1024, 'y');
  auto r = detail::write_atomic(path, {"", "head\n", "", big, "end\n"}, 0600);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(test::read_file(path), "head\n" + big + "end\n");
  EXPECT_EQ(test::list_dir(t.path()), std::vector<std::string>{"index.json"});
}

TEST(AtomicFile, FailedWriteLeavesTheOldFileAndNoTemporary) {
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

TEST(AtomicFile, MissingDirectoryIsNamed) {
  TempDir t;
  auto r = detail::write_atomic(t / "no-such-dir/f.json", {"x"}, 0600);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot create a temporary file in " + t / "no-such-dir"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("No such file or directory"), std::string::npos) << r.error().message;
}

TEST(AtomicFile, DirName) {
  EXPECT_EQ(detail::dir_name("/a/b/c"), "/a/b");
  EXPECT_EQ(detail::dir_name("/a"), "/");
  EXPECT_EQ(detail::dir_name("a"), ".");
  EXPECT_EQ(detail::dir_name("a/b"), "a");
}

}  // namespace
}  // namespace epload
