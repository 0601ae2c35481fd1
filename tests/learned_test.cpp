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

/// Takes records from `f` with next(), one per record of `want`, and
/// expects each to be that one (its paths, devices and stamp).
void expect_next_records(LearnedFile& f, const std::vector<LearnedRecord>& want, std::string& why) {
  LearnedRecord r;
  for (const LearnedRecord& w : want) {
    ASSERT_TRUE(f.next(r, &why)) << why;
    EXPECT_EQ(r.metadata_dir, w.metadata_dir);
    EXPECT_EQ(r.library, w.library);
    EXPECT_EQ(r.devices, w.devices);
    EXPECT_EQ(r.stamp, w.stamp);
    EXPECT_FALSE(f.ended());
  }
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

// open() + next(): the same records one at a time; the end is the checked
// trailer, and damage after good records is reported as such.
TEST(Learned, RecordsOneAtATime) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::vector<LearnedRecord> in = {record("/site/a\\b.dist-info", "/site/a/mod.so", "d:npu"),
                                   record("/site/b.dist-info", "b/mod.so", "l:tpu"),
                                   record("/site/c.dist-info", "c/mod.so", "")};
  ASSERT_TRUE(write_learned(path, in).ok());
  std::string why;
  LearnedFile f = LearnedFile::open(path, &why);
  EXPECT_TRUE(f.records().empty());
  expect_next_records(f, in, why);
  LearnedRecord r;
  EXPECT_FALSE(f.next(r, &why));
  EXPECT_TRUE(f.ended());
  EXPECT_FALSE(f.damaged());
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_FALSE(f.next(r, &why));  // stays at the end

  // The trailer counts records: one line less is damage, found at the end.
  std::string text = testing::read_file(path);
  const std::size_t second = text.find('\n', text.find('\n') + 1) + 1;
  text.erase(second, text.find('\n', second) + 1 - second);
  testing::write_file(path, text);
  LearnedFile g = LearnedFile::open(path, &why);
  ASSERT_TRUE(g.next(r, &why)) << why;
  ASSERT_TRUE(g.next(r, &why)) << why;
  EXPECT_FALSE(g.next(r, &why));
  EXPECT_TRUE(g.damaged());
  EXPECT_FALSE(g.ended());
  EXPECT_NE(why.find("bad trailer"), std::string::npos) << why;
  EXPECT_FALSE(g.next(r, &why));

  // A file that cannot be read, or is not a store, yields nothing (its
  // memory is gone: next() must not look), and that is not damage.
  LearnedFile none = LearnedFile::open(env.cache_dir() + "/missing.txt", &why);
  EXPECT_FALSE(none.next(r, &why));
  EXPECT_FALSE(none.damaged());
  testing::write_file(path, "epload-learned 0\n" + text.substr(text.find('\n') + 1));
  LearnedFile foreign = LearnedFile::open(path, &why);
  EXPECT_NE(why.find("not a learned-devices file"), std::string::npos) << why;
  EXPECT_FALSE(foreign.next(r, &why));
  EXPECT_FALSE(foreign.damaged());
}

// open(path, why, map_file = true) reads a private mapping of the file (the
// CLI's way): the same records, escapes undone in place without reaching
// the file, and damage found the same way.
TEST(Learned, MappedFileGivesTheSameRecordsAndStaysAsItWas) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::vector<std::string> owned;  // what the records' views point into
  owned.reserve(300 * 3);
  std::vector<LearnedRecord> in;
  for (int i = 0; i < 300; ++i) {  // several pages, escapes on some of them
    const std::string n = std::to_string(i);
    const std::string& dir = owned.emplace_back(i % 7 == 0 ? "/site/a\\b\t" + n + ".dist-info" : "/site/" + n + ".dist-info");
    const std::string& lib = owned.emplace_back(n + "/mod.so");
    in.push_back(record(dir, lib, owned.emplace_back("d:dev" + n)));
  }
  ASSERT_TRUE(write_learned(path, in).ok());
  const std::string before = testing::read_file(path);
  for (const bool map : {false, true}) {
    SCOPED_TRACE(map ? "mapped" : "copied");
    std::string why;
    LearnedFile f = LearnedFile::open(path, &why, map);
    expect_next_records(f, in, why);
    LearnedRecord r;
    EXPECT_FALSE(f.next(r, &why));
    EXPECT_TRUE(f.ended()) << why;
    EXPECT_EQ(testing::read_file(path), before) << "undoing escapes in place reached the file";
  }
  // Cut in the middle of a record: damage, mapped or not.
  testing::write_file(path, before.substr(0, before.size() / 2));
  for (const bool map : {false, true}) {
    std::string why;
    LearnedFile f = LearnedFile::open(path, &why, map);
    LearnedRecord r;
    while (f.next(r, &why)) {
    }
    EXPECT_TRUE(f.damaged()) << map;
  }
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
        std::string("epload-learned 5\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\tx:bad\t\nend 1\n"),
        std::string("epload-learned 5\n0\t/a\tb\tc\tq\t/l\t1:2:3:4:5:6\t1\t0\t\t\nend 1\n"),
        std::string("epload-learned 5\nx\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\t\nend 1\n"),
        std::string("epload-learned 5\n0\t/a\tb\tc\tn\t\t1:2:3:4:5:6\t1\t0\t\t\nend 1\n"),
        std::string("epload-learned 5\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\t\textra\nend 1\n"),
        std::string("epload-learned 5\n0\t/a\\x\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\t\t\nend 1\n"),
        std::string("epload-learned 5\n0\t/a\tb\tc\tn\t/l\t1:2:3:4:5\t1\t0\t\t\nend 1\n")};
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

  const std::string head = "epload-learned 5\n0\t/a\tb\tc\tn\t/l\t";
  const std::string tail = "\t0\t\t\nend 1\n";
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
      "1:2:3:4:5:6:7\t1",                       // a seventh field
      "1:2:3:4:5\t1",                           // five
      "1::3:4:5:6\t1",                          // an empty field
      "1:2:3:4:5:6:\t1",                        // a trailing colon
      ":1:2:3:4:5:6\t1",                        // a leading one
  };
  for (const std::string& bad : bads) {
    testing::write_file(path, head + bad + tail);
    ::chmod(path.c_str(), 0600);
    EXPECT_TRUE(LearnedFile::read(path, &why).records().empty()) << bad;
  }
}

// The first 16 digits of a number are read eight at a time: numbers of
// every length read back exactly, and a character that is no digit at any
// place of one (inside or past an eight-byte step) is damage.
TEST(Learned, StampNumbersOfEveryLengthReadBackExactly) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::mt19937_64 rng(5);
  for (int digits = 1; digits <= 20; ++digits) {
    for (int trial = 0; trial < 20; ++trial) {
      auto of_length = [&](int n, std::uint64_t max) {
        std::uint64_t lo = 1;
        for (int i = 1; i < n; ++i) lo *= 10;
        const std::uint64_t hi = n >= 20 ? max : std::min(max, lo * 10 - 1);
        return n == 1 && rng() % 2 ? std::uint64_t{0} : lo + rng() % (hi - lo + 1);
      };
      const std::uint64_t u = of_length(digits, ~std::uint64_t{0});
      const auto i = static_cast<std::int64_t>(of_length(std::min(digits, 19), std::numeric_limits<std::int64_t>::max()));
      std::vector<LearnedRecord> in = {record("/s/a.dist-info", "/s/a.so", "d:npu")};
      in[0].stamp = FileStamp{u, u ^ 1, u, trial % 2 ? -i : i, i, static_cast<std::uint32_t>(u)};
      ASSERT_TRUE(write_learned(path, in).ok());
      std::string why;
      LearnedFile f = LearnedFile::read(path, &why);
      ASSERT_EQ(f.records().size(), 1u) << digits << ": " << why;
      EXPECT_EQ(f.records()[0].stamp, in[0].stamp) << digits;
    }
  }
  const std::string head = "epload-learned 5\n0\t/a\tb\tc\tn\t/l\t";
  const std::string tail = "\t1\t0\t\t\nend 1\n";
  const std::string number = "12345678901234567";
  for (std::size_t at = 0; at < number.size(); ++at) {
    for (const char bad : {'/', ':', 'a', ' ', '\x80', '\xff'}) {
      std::string n = number;
      n[at] = bad;
      for (const std::string& stamp : {n + ":2:3:4:5:6", "1:2:3:" + n + ":5:6"}) {
        testing::write_file(path, head + stamp + tail);
        ::chmod(path.c_str(), 0600);
        std::string why;
        EXPECT_TRUE(LearnedFile::read(path, &why).records().empty()) << stamp;
      }
    }
  }
}

// Records are split at their tabs 16 bytes at a time: fields of every
// length, escapes and tabs at every offset (across the 16-byte steps) read
// back exactly, and one tab too many or too few anywhere in a record is
// damage.
TEST(Learned, RecordsSplitExactlyAtEveryOffset) {
  BackendEnv env;
  const std::string path = env.cache_dir() + "/learned.txt";
  std::mt19937 rng(11);
  const std::string alphabet = "ab/._-\t\\\n\rxyz0";
  auto text = [&](std::size_t min) {
    std::string t(min + rng() % 40, 'a');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    return t;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> keep;  // the views' storage
    std::vector<LearnedRecord> in;
    const int n = 1 + static_cast<int>(rng() % 4);
    keep.reserve(5 * static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      LearnedRecord r = record("", "", i % 2 ? "d:npu" : "");
      r.metadata_dir = keep.emplace_back(text(1));
      r.name = keep.emplace_back(text(0));
      r.value = keep.emplace_back(text(0));
      r.library = keep.emplace_back(text(1));
      r.failure = keep.emplace_back(text(0));  // a backend's last failure, any text
      in.push_back(r);
    }
    ASSERT_TRUE(write_learned(path, in).ok());
    std::string why;
    LearnedFile f = LearnedFile::read(path, &why);
    ASSERT_EQ(f.records().size(), in.size()) << why;
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(f.records()[i].metadata_dir, in[i].metadata_dir);
      EXPECT_EQ(f.records()[i].name, in[i].name);
      EXPECT_EQ(f.records()[i].value, in[i].value);
      EXPECT_EQ(f.records()[i].library, in[i].library);
      EXPECT_EQ(f.records()[i].failure, in[i].failure);
      EXPECT_EQ(f.records()[i].stamp, in[i].stamp);
      EXPECT_EQ(f.records()[i].devices, in[i].devices);
    }
  }
  // One record, a field of every length from 0 to 40 before it: an extra or
  // a missing tab at each offset is caught.
  const std::string tail = "\tb\tc\tn\t/l\t1:2:3:4:5:6\t1\t0\td:x\tf";
  for (std::size_t len = 1; len <= 40; ++len) {
    const std::string dir(len, 'd');
    for (const std::string& rec : {"0\t" + dir + tail, "0\t" + dir + "\t" + tail,
                                   "0\t" + dir + tail + "\t", "0" + dir + tail}) {
      testing::write_file(path, "epload-learned 5\n" + rec + "\nend 1\n");
      ::chmod(path.c_str(), 0600);
      std::string why;
      const bool good = rec == "0\t" + dir + tail;
      EXPECT_EQ(LearnedFile::read(path, &why).records().size(), good ? 1u : 0u) << len << ": " << rec;
    }
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
