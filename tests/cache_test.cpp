// cache_test.cpp — the serialized index: round trips of every field, its key,
// and every way a cache file's bytes can be bad (each must be refused, never a
// crash and never a wrong answer).  Partial reads: cache_partial_test.cpp;
// open_index() against real trees: cache_open_test.cpp.
#include <gtest/gtest.h>
#include <sched.h>  // sched_getaffinity
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>  // sleep_for

#include <sys/mman.h>      // memfd_create
#include <sys/resource.h>  // setrlimit

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "cache_format_util.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "index_builder.hpp"

namespace epload {
namespace {

using test::TempDir;
using test::parse_bytes;
using test::reseal;
using test::edit_line;
using test::edit_file;
using test::sample_index;
using test::tiny_index;


int python_check(const std::string& script, const std::string& arg) {
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) + " -c '" + script + "' '" + arg + "'";
  return std::system(cmd.c_str());
}

TEST(Cache, RoundTripKeepsEveryField) {
  TempDir t;
  const Index original = sample_index(3);
  const std::string file = t / "index.json";
  ASSERT_TRUE(write_index(original, file));
  auto back = read_index(file);
  ASSERT_TRUE(back) << back.error().message;
  std::string why;
  EXPECT_TRUE(test::identical(original, *back, &why)) << why;
  EXPECT_EQ(back->find("console_scripts", "alpha")->value, "alpha.cli:main");
  EXPECT_EQ(back->first_error()->name, "broken");

  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The file is strict JSON Lines (Python's parser agrees: every line is one
  // document), and the non-UTF-8 path is stored as hex bytes that decode
  // back exactly.
  EXPECT_EQ(python_check("import json,sys; "
                         "assert len([json.loads(l) for l in open(sys.argv[1], encoding=\"utf-8\")]) > 4",
                         file),
            0);
  EXPECT_EQ(python_check("import json,sys; d=json.loads(open(sys.argv[1]).readline()); "
                         "assert bytes.fromhex(d[\"search_paths\"][1][\"path\"][\"hex\"])"
                         "==b\"/tmp/bad-\\xff\\xfe-byte\"; "
                         "assert d[\"search_paths\"][0][\"path\"].startswith(\"/tmp/site \\\"quoted\\\" \\\\back\")",
                         file),
            0);
}

TEST(Cache, EscapesEveryByteValue) {
  std::string ascii, all;
  for (int c = 0; c < 0x80; ++c) ascii += static_cast<char>(c);
  for (int c = 0; c < 0x100; ++c) all += static_cast<char>(c);
  IndexBuilder b;
  b.add_search_path(ascii, FileStamp{});
  b.add_search_path(all, FileStamp{});
  const auto d = b.add_distribution(ascii, all, all + "/" + ascii, 1, all);
  b.add_entry_point(d, ascii, all, ascii);
  b.add_watched_file(1, all, test::fake_stamp(9));
  const Index original = b.build();
  TempDir t;
  ASSERT_TRUE(write_index(original, t / "i.json"));
  auto back = read_index(t / "i.json");
  ASSERT_TRUE(back) << back.error().message;
  std::string why;
  EXPECT_TRUE(test::identical(original, *back, &why)) << why;
  EXPECT_EQ(python_check("import json,sys; d=json.loads(open(sys.argv[1]).readline()); "
                         "assert d[\"search_paths\"][0][\"path\"]==\"\".join(map(chr,range(128)))",
                         t / "i.json"),
            0);
}

TEST(Cache, EmptyIndexRoundTrips) {
  TempDir t;
  IndexBuilder b;
  const Index original = b.build();
  ASSERT_TRUE(write_index(original, t / "i.json"));
  auto back = read_index(t / "i.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(test::identical(original, *back));
}

TEST(Cache, RelocatableIndexStoresPathsRelativeToItsDirectory) {
  TempDir t;
  IndexBuilder b;
  const auto sp = b.add_search_path(t / "env/lib/site-packages", test::fake_stamp(1));
  const auto d = b.add_distribution("foo", "1", t / "env/lib/site-packages/foo-1.dist-info", sp);
  b.add_entry_point(d, "g", "n", "v");
  const Index original = b.build();
  const std::string file = t / "env/share/epload/index.json";
  test::write_file(file, "");
  ASSERT_TRUE(write_index(original, file, /*relocatable=*/true));
  const std::string text = test::read_file(file);
  EXPECT_NE(text.find("\"../../lib/site-packages\""), std::string::npos) << text;
  EXPECT_NE(text.find(",\"foo-1.dist-info\","), std::string::npos) << text;
  EXPECT_EQ(text.find(t.path()), std::string::npos) << "no absolute path in a relocatable index";
  auto back = read_index(file);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->search_paths()[0], t / "env/lib/site-packages");
  EXPECT_EQ(back->distributions()[0].metadata_dir, t / "env/lib/site-packages/foo-1.dist-info");

  IndexBuilder rel;
  rel.add_search_path("relative", FileStamp{});
  auto refused = write_index(rel.build(), t / "r.json", true);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid_argument);

  // A relative metadata directory outside its (relative) search path has no
  // representation: refused, never written wrongly.
  IndexBuilder odd;
  odd.add_distribution("x", "1", "elsewhere/x.dist-info", odd.add_search_path("lib", FileStamp{}));
  auto odd_refused = write_index(odd.build(), t / "o.json");
  ASSERT_FALSE(odd_refused);
  EXPECT_NE(odd_refused.error().message.find("elsewhere/x.dist-info"), std::string::npos);
}

TEST(Cache, KeySeparatesPathOrderInterpreterAndCurrentDirectory) {
  CacheOptions a;
  a.cache_dir = "/c";
  a.search_paths = {"/x", "/y"};
  CacheOptions b = a;
  b.search_paths = {"/y", "/x"};
  EXPECT_NE(cache_file_path(a), cache_file_path(b));
  CacheOptions c = a;
  c.interpreter = "/usr/bin/python3|/usr|3.11.2";
  EXPECT_NE(cache_file_path(a), cache_file_path(c));
  CacheOptions d = a;
  d.search_paths = {"/x/", "/y"};
  EXPECT_NE(cache_file_path(a), cache_file_path(d));
  CacheOptions e1 = a, e2 = a;  // length-prefixed: no ambiguity in concatenation
  e1.search_paths = {"/a", "bc"};
  e2.search_paths = {"/ab", "c"};
  EXPECT_NE(cache_file_path(e1), cache_file_path(e2));
  EXPECT_EQ(cache_file_path(a), cache_file_path(CacheOptions(a)));
  EXPECT_EQ(cache_file_path(a).rfind("/c/index-", 0), 0u);

  // A relative entry makes the current directory part of the key (here
  // the current directory holds distributions: see the next test).
  TempDir t1, t2;
  test::make_dist(t1.path(), "a", "1", "");
  test::make_dist(t2.path(), "a", "1", "");
  CacheOptions r = a;
  r.search_paths = {"", "/x"};
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(t1.path().c_str()), 0);
  const std::string in1 = cache_file_path(r), abs1 = cache_file_path(a);
  ASSERT_EQ(::chdir(t2.path().c_str()), 0);
  const std::string in2 = cache_file_path(r), abs2 = cache_file_path(a);
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_NE(in1, in2);
  EXPECT_EQ(abs1, abs2);
}

// A first search path in which importlib finds nothing (the working
// directory of `python -c`, a script's directory) is not part of the key:
// every such directory shares the file of the entries that follow.
TEST(Cache, KeyLeavesOutAFirstPathThatHoldsNoMetadata) {
  TempDir t, empty1, empty2, dists;
  test::write_file(empty1 / "notes.txt", "not a distribution");
  test::write_file(empty2 / "script.py", "");
  test::make_dist(dists.path(), "a", "1", "");
  CacheOptions rest;
  rest.cache_dir = t / "c";
  rest.search_paths = {t.path()};
  auto with_head = [&](const std::string& head) {
    CacheOptions o = rest;
    o.search_paths.insert(o.search_paths.begin(), head);
    return o;
  };
  const std::string file = cache_file_path(rest);
  EXPECT_EQ(cache_file_path(with_head(empty1.path())), file);
  EXPECT_EQ(cache_file_path(with_head(empty2.path())), file);
  EXPECT_NE(cache_file_path(with_head(dists.path())), file);  // it holds metadata: keyed
  EXPECT_NE(cache_file_path(with_head(t / "missing")), file);  // nothing there: keyed as given
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(empty1.path().c_str()), 0);
  const std::string in_empty = cache_file_path(with_head(""));
  ASSERT_EQ(::chdir(dists.path().c_str()), 0);
  const std::string in_dists = cache_file_path(with_head(""));
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(in_empty, file);
  EXPECT_NE(in_dists, file);
  // A single entry stays in its key.
  CacheOptions alone = rest, none = rest;
  alone.search_paths = {empty1.path()};
  none.search_paths = {};
  EXPECT_NE(cache_file_path(alone), cache_file_path(none));
}

// The executable is keyed by its real path: a venv's `python` and
// `python3`, links to one file, share the cache files.
TEST(Cache, KeyTakesTheInterpretersRealPath) {
  TempDir t;
  test::write_file(t / "python3.11", "");
  ASSERT_EQ(::symlink("python3.11", (t / "python3").c_str()), 0);
  ASSERT_EQ(::symlink("python3", (t / "python").c_str()), 0);
  CacheOptions o;
  o.cache_dir = t / "c";
  o.search_paths = {"/x"};
  auto keyed = [&](const std::string& exe, const std::string& prefix) {
    CacheOptions c = o;
    c.interpreter = exe + std::string(1, '\0') + prefix + std::string(1, '\0') + "3.11.2";
    return cache_file_path(c);
  };
  EXPECT_EQ(keyed(t / "python", "/venv"), keyed(t / "python3", "/venv"));
  EXPECT_EQ(keyed(t / "python", "/venv"), keyed(t / "python3.11", "/venv"));
  EXPECT_NE(keyed(t / "python", "/venv"), keyed(t / "python", "/other-venv"));
  EXPECT_NE(keyed(t / "python", "/venv"), keyed(t / "missing", "/venv"));
}

TEST(Cache, ResolvesCacheDirectoryFromOptionsThenEnvironment) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  } saved[] = {{"EPLOAD_CACHE_DIR", {}}, {"XDG_CACHE_HOME", {}}, {"HOME", {}}};
  for (auto& s : saved) {
    if (const char* v = std::getenv(s.name)) s.value = v;
  }
  CacheOptions o;
  ::setenv("EPLOAD_CACHE_DIR", "/e", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  o.cache_dir = "/opt";
  EXPECT_EQ(resolve_cache_dir(o), "/opt");
  o.cache_dir.clear();
  EXPECT_EQ(resolve_cache_dir(o), "/e");
  ::unsetenv("EPLOAD_CACHE_DIR");
  EXPECT_EQ(resolve_cache_dir(o), "/xdg/epload");
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // invalid per the XDG spec: ignored
  EXPECT_EQ(resolve_cache_dir(o), "/home/u/.cache/epload");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(resolve_cache_dir(o), "/home/u/.cache/epload");
  ::unsetenv("HOME");
  EXPECT_NE(resolve_cache_dir(o), "");  // from the password database
  for (auto& s : saved) {
    if (s.value) ::setenv(s.name, s.value->c_str(), 1);
    else ::unsetenv(s.name);
  }
}

TEST(Cache, ReadRejectsOtherFormatVersion) {
  // The previous format (6, with its "numbers" section) and a later one.
  TempDir t;
  for (const int version : {6, 8}) {
    ASSERT_TRUE(write_index(sample_index(), t / "i.json"));
    edit_file(t / "i.json", "\"version\":7,", "\"version\":" + std::to_string(version) + ",");
    auto r = read_index(t / "i.json");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::cache);
    EXPECT_NE(r.error().message.find("format version " + std::to_string(version) + ", this build reads 7"),
              std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(t / "i.json"), std::string::npos) << r.error().message;
  }
}

TEST(Cache, ReadRejectsForeignAndEmptyFiles) {
  TempDir t;
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"{}", "not an epload index"},
      {"[1,2,3]", "not an epload index"},
      {"\"epload-index\"", "not an epload index"},
      {"{\"format\":\"stevedore\",\"version\":1}", "not an epload index"},
      {"{\"groups\":{\"console_scripts\":[]},\"path_values\":[]}", "not an epload index"},
      {"{\"format\":\"epload-index\",\"version\":7}", "truncated"},
      {"{\"format\":\"epload-index\",\"version\":7}\n", "truncated"},
      {"{\"format\":\"epload-index\",\"version\":3,\"checksum\":\"0123456789abcdef\"}\n", "format version 3"},
      {"{\"format\":\"epload-index\",\"version\":1,\"checksum\":\"0123456789abcdef\",\n\"key\":{}}", "format version 1"},
      {"{\n\"format\": \"epload-index\"}", "malformed"},
      {"{\"format\":\"epload-index\",\"version\":\"1\"}", "version"},
      {"not json at all", "not an epload index"},
      {"\xff\xfe{}", "malformed"},
  };
  for (const auto& [text, expected] : cases) {
    test::write_file(t / "i.json", text);
    auto r = read_index(t / "i.json");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, Errc::cache);
    EXPECT_NE(r.error().message.find(expected), std::string::npos) << text << " -> " << r.error().message;
  }
  auto missing = read_index(t / "missing.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing.json"), std::string::npos);
}


TEST(Cache, ReadRejectsValidJsonWithBadContent) {
  // Structurally valid files (correct checksums) whose values are wrong must
  // still be rejected by the strict reader: build each one from a good file.
  TempDir t;
  ASSERT_TRUE(write_index(tiny_index(), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  reseal(t / "bad.json", good);
  ASSERT_EQ(test::read_file(t / "bad.json"), good) << "the Python re-sealer must agree with the writer";
  struct Edit {
    int line;
    std::string from, to;
    bool group_read_sees = true;  // the head or line 1 (group:g) is read by a query of "g"
  };
  const Edit edits[] = {
      {2, ",0,\"\"]", ",7,\"\"]"},                           // dist -> nonexistent search path
      {2, ",0,\"\"]", ",0]"},                                // short dist
      {2, ",0,\"\"]", ",0,\"\",1]"},                          // long dist
      {1, "\"entry_points\":[[0,", "\"entry_points\":[[5,"},  // entry point -> nonexistent dist
      {1, "{\"dists\":[[0,", "{\"dists\":[[1,"},              // group dist -> nonexistent dist
      {1, "\"n.dist-info\",0]", "\"n.dist-info\",4]"},         // group dist -> nonexistent path
      {1, "{\"dists\":[[0,", "{\"dists\":[[0,0,"},            // long group dist
      {1, "{\"dists\"", "{\"distz\""},
      {4, "[[0,\"n.dist-info", "[[3,\"n.dist-info"},          // watched -> nonexistent path
      {2, "[[\"n\",", "[[1,"},                                // wrong type
      {2, "[[\"n\",", "[[{\"hex\":\"zz\"},"},                 // bad hex
      {2, "[[\"n\",", "[[{\"hex\":\"6\"},"},                  // odd hex
      {2, "[[\"n\",", "[[{\"hex\":\"6e\",\"x\":1},"},         // extra field
      {2, "[[\"n\",", "[[\"\\ud800\","},                        // lone surrogate
      {2, "[[\"n\",", "[[\"\\q\","},                            // unknown escape
      {0, "\"relocatable\":false", "\"relocatable\":0"},
      {1, ",\"e\",\"v\"]", ",\"e\"]"},                          // short entry point
      {1, ",\"e\",\"v\"]", ",\"e\",\"v\",\"w\"]"},
      {0, "\"scanned_at_ns\"", "\"scanned_at\""},
      {4, "]]", "]]{}"},                                       // trailing data in a section
      {4, "]]", "]]\n{}"},                                     // a line after the last section
      {0, "]]}", "]],\"extra\":1}"},
      {0, "\"stamp\":[", "\"stamp\":[1,"},                      // 7 stamp fields
      {0, "\"stamp\":[", "\"stamp\":[-1,"},
      {0, "\"first_error\":null", "\"first_error\":1"},
      // A first error the distributions do not have, or out of range.
      {0, "\"first_error\":null", "\"first_error\":{\"dist\":[0,\"n\",\"1\",\"n.dist-info\",0],\"message\":\"x\"}",
       false},  // (only the "dists" section can contradict it)
      {0, "\"first_error\":null", "\"first_error\":{\"dist\":[1,\"n\",\"1\",\"n.dist-info\",0],\"message\":\"x\"}"},
      {0, "\"listings\"", "\"watched\""},                      // listings missing, two watched sections
      {0, "\"dists\"", "\"distz\""},                            // unknown section
      {0, "\"watched\"", "\"dists\""},                          // two dists sections
      {0, ",1],[\"listings\"", ",2],[\"listings\"", false},     // count disagrees (only "dists" can say)
      {3, "[]", "[[0]]"},                                      // an empty listing
      {3, "[]", "[[0,\"n.dist-info\"]]"},                      // more children than the head says
      {0, "\"listings\"", "\"stamps:g\""},                      // a section of format 3
  };
  for (const Edit& e : edits) {
    reseal(t / "bad.json", edit_line(good, e.line, e.from, e.to));
    auto r = read_index(t / "bad.json");
    EXPECT_FALSE(r) << "accepted: " << e.to;
    if (!r) {
      EXPECT_EQ(r.error().code, Errc::cache);
    }
    if (e.line <= 1 && e.group_read_sees) {
      // The head and the group's own section are read by a query of the group too.
      auto partial = read_index(t / "bad.json", {"g"});
      EXPECT_FALSE(partial) << "accepted by a group read: " << e.to;
    }
  }
  // Escapes the writer never produces are still decoded as JSON defines them.
  const std::pair<std::string, std::string> decodes[] = {
      {"\\u006e", "n"}, {"\\/", "/"}, {"\\ud83d\\ude00", "\xf0\x9f\x98\x80"}, {"\\u00e9", "\xc3\xa9"}};
  for (const auto& [escaped, decoded] : decodes) {
    std::string text = edit_line(good, 2, "[[\"n\",", "[[\"" + escaped + "\",");
    text = edit_line(text, 1, "[[0,\"n\",", "[[0,\"" + escaped + "\",");
    reseal(t / "bad.json", text);
    auto r = read_index(t / "bad.json");
    ASSERT_TRUE(r) << escaped << ": " << r.error().message;
    EXPECT_EQ(r->distributions()[0].name, decoded);
    auto partial = read_index(t / "bad.json", {"g"});
    ASSERT_TRUE(partial) << escaped << ": " << partial.error().message;
    EXPECT_EQ(partial->distributions()[0].name, decoded);
  }
}

TEST(Cache, ReadRejectsBadSectionLayout) {
  TempDir t;
  ASSERT_TRUE(write_index(tiny_index(), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  const std::pair<std::string, std::string> forged[] = {
      {"rows[-1][2]+=100", "past the end"},                   // the last section runs past EOF
      {"rows[0][1]=10**12", "starts at byte"},                // a section far past EOF
      {"rows[1][1]-=3", "overlap"},                           // two sections overlap
      {"rows[2][1]+=1", "gap"},                               // a gap between sections
      {"rows[0][2]=1", "too short"},
      {"rows[0][3]=\"0\"*16", "hash mismatch"},
      {"rows[0][3]=\"x\"*16", "16 hex digits"},
      {"rows[3][0]=\"group:z\"", "out of order"},            // a group section after "dists"
      {"rows.pop()", "missing"},                              // no "watch_digest"
      {"rows[-1][4]+=1", "disagree on the number of files"},
      {"rows[-2][0],rows[-1][0]=rows[-1][0],rows[-2][0]", "out of order"},  // "watch_digest" first
      {"rows.append([\"other\",0,2,\"0\"*16,0])", "unknown section"},
      // Counts no section of that size can hold (the reader reserved room
      // for them: found by fuzzing).
      {"rows[0][4]=2**40", "items in"},
      {"rows[-3][4]=2**32-1", "items in"},
      {"rows[-2][4]=rows[-1][4]=2**60", "items in"},
  };
  for (const auto& [mutate, expected] : forged) {
    reseal(t / "bad.json", good, mutate);
    auto r = read_index(t / "bad.json");
    ASSERT_FALSE(r) << mutate;
    EXPECT_EQ(r.error().code, Errc::cache);
    EXPECT_NE(r.error().message.find(expected), std::string::npos) << mutate << " -> " << r.error().message;
    EXPECT_FALSE(read_index(t / "bad.json", {"g"})) << mutate;
  }
}

TEST(Cache, ByteFlipsAreRejectedOrHarmless) {
  TempDir t;
  const Index original = sample_index(40);
  ASSERT_TRUE(write_index(original, t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  constexpr unsigned k_seeds = 10000;
  int rejected = 0;
  for (unsigned seed = 0; seed < k_seeds; ++seed) {
    std::mt19937 rng(seed);
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    auto r = parse_bytes(bad);
    if (r) {
      std::string why;
      EXPECT_TRUE(test::identical(original, *r, &why)) << "seed " << seed << ": " << why;
    } else {
      EXPECT_EQ(r.error().code, Errc::cache);
      ++rejected;
    }
  }
  // The checksum makes every one of these a rejection, not just a harmless load.
  EXPECT_EQ(rejected, static_cast<int>(k_seeds));
}

TEST(Cache, EveryTruncationIsRejected) {
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(10), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  for (std::size_t n = 0; n < good.size(); ++n) {
    auto r = parse_bytes(good.substr(0, n));
    ASSERT_FALSE(r) << "truncated at " << n << " of " << good.size();
    EXPECT_EQ(r.error().code, Errc::cache);
  }
}

}  // namespace
}  // namespace epload
