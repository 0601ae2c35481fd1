// learned_test.cpp — the learned-devices store file: round trip, escaping,
// atomic 0600 writes, and every kind of damage meaning "no store".
#include "learned.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <limits>
#include <random>

#include "backend_env.hpp"

namespace epload::detail {
namespace {

using testing::BackendEnv;

LearnedRecord record(std::string_view dir, std::string_view lib, std::string_view devices) {
  LearnedRecord r;
  r.search_path = 3;
  r.metadata_dir = dir;
  r.name = "npu";
  r.value = "pkg.mod:init";
  r.library = lib;
  r.stamp = FileStamp{1, 2, 3, 4000000001, -5, 0100644};
  r.abi = 1;
  r.learned = true;
  r.devices = devices;
  return r;
}

TEST(Learned, RoundTripWithEscapes) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/sub/dir/learned.txt";
  std::vector<LearnedRecord> in = {record("/site/a\tb\\c\nd.dist-info", "/site/a/mod.so", "d:npu l:npu2"),
                                   record("/site/x.dist-info", "/site/x\r/mod.so", "")};
  in[1].kind = 'p';
  in[1].abi = -1;
  in[1].learned = false;
  ASSERT_TRUE(write_learned(path, in).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((env.cache_dir() + "/sub/dir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  std::string why;
  LearnedFile f = LearnedFile::read(path, &why);
  ASSERT_EQ(f.records().size(), 2u) << why;
  const LearnedRecord& a = f.records()[0];
  EXPECT_EQ(a.metadata_dir, "/site/a\tb\\c\nd.dist-info");
  EXPECT_EQ(a.library, "/site/a/mod.so");
  EXPECT_EQ(a.search_path, 3u);
  EXPECT_EQ(a.stamp, in[0].stamp);
  EXPECT_EQ(a.abi, 1);
  EXPECT_TRUE(a.learned);
  EXPECT_EQ(a.kind, 'n');
  std::vector<std::pair<std::string, bool>> devices;
  for_each_device(a.devices, [&](std::string_view n, bool declared) { devices.emplace_back(n, declared); });
  EXPECT_EQ(devices, (std::vector<std::pair<std::string, bool>>{{"npu", true}, {"npu2", false}}));
  const LearnedRecord& b = f.records()[1];
  EXPECT_EQ(b.library, "/site/x\r/mod.so");
  EXPECT_EQ(b.kind, 'p');
  EXPECT_EQ(b.abi, -1);
  EXPECT_FALSE(b.learned);
  EXPECT_TRUE(b.devices.empty());
}

TEST(Learned, FileNameDependsOnGroupAndPaths) {
  std::vector<std::string_view> p1 = {"/a", "/b"}, p2 = {"/a/b"}, p3 = {"/b", "/a"};
  const std::string a = learned_file_path("/c", "torch.backends", p1);
  EXPECT_EQ(a.rfind("/c/learned-", 0), 0u);
  EXPECT_NE(a, learned_file_path("/c", "torch.backends", p2));
  EXPECT_NE(a, learned_file_path("/c", "torch.backends", p3));
  EXPECT_NE(a, learned_file_path("/c", "other", p1));
  EXPECT_EQ(a, learned_file_path("/c/", "torch.backends", p1));
}

TEST(Learned, DamageMeansNoStore) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::vector<LearnedRecord> in = {record("/s/a.dist-info", "/s/a.so", "d:npu"),
                                   record("/s/b.dist-info", "/s/b.so", "l:x l:y")};
  ASSERT_TRUE(write_learned(path, in).ok());
  const std::string good = testing::read_file(path);
  auto read_text = [&](const std::string& text) {
    testing::write_file(path, text);
    ::chmod(path.c_str(), 0600);
    std::string why;
    LearnedFile f = LearnedFile::read(path, &why);
    return std::make_pair(f.records().size(), why);
  };
  EXPECT_EQ(read_text(good).first, 2u);
  const std::vector<std::string> bads = {
       std::string(), good.substr(0, good.size() - 1), good.substr(0, good.size() / 2),
        "epload-learned 2\nend 0\n", good + "extra\n", "not a store",
        good.substr(0, good.find('\n') + 1) + "a\tb\n" + "end 1\n",
        std::string("epload-learned 1\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\tx:bad\nend 1\n"),
        std::string("epload-learned 1\n0\t/a\tb\tc\tq\t/l\t1:2:3:4:5:6\t1\t0\t\nend 1\n"),
        std::string("epload-learned 1\nx\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\nend 1\n"),
        std::string("epload-learned 1\n0\t/a\tb\tc\tn\t\t1:2:3:4:5:6\t1\t0\t\nend 1\n"),
        std::string("epload-learned 1\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\textra\nend 1\n"),
        std::string("epload-learned 1\n0\t/a\\x\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\nend 1\n"),
        std::string("epload-learned 1\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5\t1\t0\t\nend 1\n")};
  for (const std::string& bad : bads) {
    auto [n, why] = read_text(bad);
    EXPECT_EQ(n, 0u) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  // Random byte flips: never a crash; either all records or none.
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t = good;
    t[rng() % t.size()] = static_cast<char>(rng());
    auto [n, why] = read_text(t);
    EXPECT_TRUE(n == 0 || n == 2) << n;
  }
}

// Found by fuzzing: numbers are read back exactly as the writer writes them
// (dev, ino and size unsigned 64-bit, times signed, mode 32-bit); anything
// else, negative sizes and out-of-range values included, is damage.
TEST(Learned, StampsReadBackWhateverTheirRange) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::vector<LearnedRecord> in = {record("/s/a.dist-info", "/s/a.so", "d:npu")};
  in[0].stamp = FileStamp{~std::uint64_t{0}, std::uint64_t{1} << 63, 0, std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max(), 0xffffffffu};
  ASSERT_TRUE(write_learned(path, in).ok());
  std::string why;
  LearnedFile f = LearnedFile::read(path, &why);
  ASSERT_EQ(f.records().size(), 1u) << why;
  EXPECT_EQ(f.records()[0].stamp, in[0].stamp);

  const std::string head = "epload-learned 1\n0\t/a\tb\tc\tn\t/l\t";
  const std::string tail = "\t0\t\nend 1\n";
  const std::string bads[] = {
      "1:-2:3:4:5:6\t1",                         // a negative inode (read as 2^64 - 2 before)
      "1:2:-3:4:5:6\t1",                         // a negative size
      "1:2:3:4:5:4294967296\t1",                 // mode past 32 bits
      "18446744073709551616:2:3:4:5:6\t1",       // dev past 64 bits
      "99999999999999999999:2:3:4:5:6\t1",       // 20 digits, far past 64 bits
      "1844674407370955161x:2:3:4:5:6\t1",       // a 20th character that is no digit
      "184467440737095516150:2:3:4:5:6\t1",      // 21 digits
      "1a:2:3:4:5:6\t1",                         // a letter among the digits
      "1:2:3:4:5:/\t1",                          // the character before '0'
      "1:2:3:9223372036854775808:5:6\t1",        // mtime past int64
      "1:2:3:4:5:6\t-9223372036854775808",       // an ABI below -1 (signed overflow before)
  };
  for (const std::string& bad : bads) {
    testing::write_file(path, head + bad + tail);
    ::chmod(path.c_str(), 0600);
    EXPECT_TRUE(LearnedFile::read(path, &why).records().empty()) << bad;
  }
}

TEST(Learned, UnsafeFileIsIgnored) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::vector<LearnedRecord> in = {record("/s/a.dist-info", "/s/a.so", "d:npu")};
  ASSERT_TRUE(write_learned(path, in).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  std::string why;
  EXPECT_TRUE(LearnedFile::read(path, &why).records().empty());
  EXPECT_NE(why.find("writable by group/others"), std::string::npos) << why;
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_EQ(LearnedFile::read(path).records().size(), 1u);
}

}  // namespace
}  // namespace epload::detail
