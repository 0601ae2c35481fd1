// cache_test.cpp — the serialized index, its key, and every way a cache file
// or directory can be bad: each must mean "rebuild" or "work uncached", never a
// crash and never a wrong answer.
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
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"

namespace epload {
namespace {

using test::TempDir;

/// An index exercising every field and the escaping edge cases.
Index sample_index(int extra_dists = 0) {
  IndexBuilder b;
  b.add_search_path("/tmp/site \"quoted\" \\back\\slash\\ \n new\tline", test::fake_stamp(1));
  b.add_search_path(std::string("/tmp/bad-\xff\xfe-byte"), test::fake_stamp(2));
  b.add_search_path("", FileStamp{});  // the current directory, absent stamp
  b.add_search_path("relative/dir", test::fake_stamp(3));
  const std::uint32_t a = b.add_distribution("alpha", "1.0", "/tmp/site \"quoted\"/alpha-1.0.dist-info", 0);
  const std::uint32_t u = b.add_distribution("caf\xc3\xa9-\xe2\x80\xa8", "2.0\x01\x1f\x7f",
                                             std::string("/tmp/bad-\xff\xfe-byte/x.dist-info"), 1);
  const std::uint32_t e = b.add_distribution("broken", "", "broken.egg-info", 2,
                                             "broken.egg-info/entry_points.txt:3: line without '='");
  b.add_entry_point(a, "console_scripts", "alpha", "alpha.cli:main");
  b.add_entry_point(a, "torch.backends", "npu", "alpha_npu:init [extra1, extra2]");
  b.add_entry_point(u, "console_scripts", "caf\xc3\xa9", "x:\"y\"\\z");
  b.add_entry_point(a, "console_scripts", "alpha", "duplicate.kept:main");
  b.add_entry_point(u, "a group", std::string("nul\0inside", 10), "v");
  for (int i = 0; i < extra_dists; ++i) {
    const std::string n = "noise" + std::to_string(i);
    const std::uint32_t d = b.add_distribution(n, "0." + std::to_string(i), "/tmp/site/" + n + ".dist-info", 0);
    b.add_entry_point(d, "console_scripts", n, n + ".main:run");
    b.add_entry_point(d, "group" + std::to_string(i % 7), "ep", n + ":x");
    b.add_watched_file(0, n + ".dist-info/entry_points.txt", test::fake_stamp(100 + i));
  }
  b.add_watched_file(0, "alpha-1.0.dist-info/entry_points.txt", test::fake_stamp(4));
  b.add_watched_file(1, std::string("x.dist-info/\xff/entry_points.txt"), FileStamp{});
  b.add_watched_file(2, "broken.egg-info/entry_points.txt", test::fake_stamp(5));
  (void)e;
  b.set_scanned_at(1700000000999999999LL);
  return b.build();
}

/// Replaces the first occurrence of `from` in the file.
void edit_file(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = test::read_file(path);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  test::write_file(path, text);
}

/// Reads `text` (a file's content) with `expect` from an in-memory file
/// (which keeps the loops below fast), both ways: copied into buffers and
/// through a mapping of the file (ReadExpectations::map_file).  The two
/// must agree, to the index or to the message; the copied read is returned.
/// With an early check, once, the way `expect` says.
Result<Index> parse_bytes_with(const std::string& text, detail::ReadExpectations expect) {
  auto once = [&](bool map) {
    const int fd = ::memfd_create("epload-cache-test", MFD_CLOEXEC);
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::lseek(fd, 0, SEEK_SET) != 0) {
      std::abort();
    }
    expect.map_file = map;
    auto r = detail::read_index_fd(fd, "memfd", expect);
    ::close(fd);
    return r;
  };
  // A check started by the read cannot be started twice: one read, as asked.
  if (expect.early_check != nullptr) return once(expect.map_file);
  auto copied = once(false);
  auto mapped = once(true);
  EXPECT_EQ(static_cast<bool>(copied), static_cast<bool>(mapped)) << "size " << text.size();
  if (copied && mapped) {
    std::string why;
    EXPECT_TRUE(test::identical(*copied, *mapped, &why)) << "size " << text.size() << ": " << why;
  } else if (!copied && !mapped) {
    EXPECT_EQ(copied.error().message, mapped.error().message) << "size " << text.size();
  }
  return copied;
}

/// parse_bytes_with() of a complete read.
Result<Index> parse_bytes(const std::string& text) { return parse_bytes_with(text, detail::ReadExpectations{}); }

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

  // A relative entry makes the current directory part of the key.
  TempDir t1, t2;
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
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(), t / "i.json"));
  edit_file(t / "i.json", "\"version\":3,", "\"version\":4,");
  auto r = read_index(t / "i.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::cache);
  EXPECT_NE(r.error().message.find("format version 4"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(t / "i.json"), std::string::npos) << r.error().message;
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
      {"{\"format\":\"epload-index\",\"version\":3}", "truncated"},
      {"{\"format\":\"epload-index\",\"version\":3}\n", "truncated"},
      {"{\"format\":\"epload-index\",\"version\":2,\"checksum\":\"0123456789abcdef\"}\n", "format version 2"},
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

/// Re-seals an edited file with Python, which knows nothing of our reader:
/// recomputes every section's length and hash from the lines that follow the
/// head (positionally), the offsets, and the head's checksum.  `mutate`, a
/// Python statement on `rows` (the head's section rows), runs after the
/// offsets are set, to forge a bad layout.
constexpr const char* k_reseal_script = R"PY(
import json,sys
p=sys.argv[1]; mutate=sys.argv[2]
b=open(p,"rb").read()
M=(1<<64)-1
def mix(h,w):
  h=((h^w)*0xff51afd7ed558ccd)&M
  return h^(h>>32)
def H(x):
  n=len(x); h=[(0x9e3779b97f4a7c15^n)&M,0xc2b2ae3d27d4eb4f,0x165667b19e3779f9,0x27d4eb2f165667c5]
  word=lambda k: int.from_bytes(x[k:k+8],"little")
  i=0
  while i+32<=n:
    for j in range(4): h[j]=mix(h[j],word(i+8*j))
    i+=32
  j=0
  while i+8<=n:
    h[j]=mix(h[j],word(i)); i+=8; j+=1
  h[j]=mix(h[j],word(i))
  return mix(mix(mix(h[0],h[1]),h[2]),h[3])
nl=b.index(b"\n")
head=json.loads(b[:nl])
body=b[nl+1:]
lines=[l+b"\n" for l in body.split(b"\n")[:-1]]
rows=head["sections"]
for i,r in enumerate(rows):
  if i<len(lines):
    r[2]=len(lines[i]); r[3]="%016x"%H(lines[i])
sealed=json.dumps(rows)
base=0
while True:
  head["sections"]=rows=json.loads(sealed)
  at=base
  for r in rows:
    r[1]=at; at+=r[2]
  exec(mutate)
  text=json.dumps(head,separators=(",",":"),ensure_ascii=False).encode()+b"\n"
  if len(text)==base: break
  base=len(text)
i=text.index(b"\"checksum\":\"")+12
text=text[:i]+b"%016x"%H(text[i+17:])+text[i+16:]
open(p,"wb").write(text+body)
)PY";

/// Writes `text` to `path` and re-seals it (see k_reseal_script).
void reseal(const std::string& path, const std::string& text, const std::string& mutate = "pass") {
  test::write_file(path, text);
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) + " -c '" + k_reseal_script + "' '" + path + "' '" +
                          mutate + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << mutate;
}

/// Replaces the first occurrence of `from` in line `line` (0: the head) of `text`.
std::string edit_line(std::string text, int line, const std::string& from, const std::string& to) {
  std::size_t begin = 0;
  for (int i = 0; i < line; ++i) begin = text.find('\n', begin) + 1;
  const std::size_t end = text.find('\n', begin);
  const std::size_t at = text.find(from, begin);
  if (at == std::string::npos || at + from.size() > end) {
    ADD_FAILURE() << "no '" << from << "' in line " << line;
    return text;
  }
  return text.replace(at, from.size(), to);
}

/// A one-distribution index whose file has the lines
///   0 head, 1 group:g, 2 stamps:g, 3 dists, 4 watched, 5 watch_digest.
Index tiny_index() {
  IndexBuilder b;
  const auto sp = b.add_search_path("/s", test::fake_stamp(1));
  const auto d = b.add_distribution("n", "1", "/s/n.dist-info", sp);
  b.add_entry_point(d, "g", "e", "v");
  b.add_watched_file(sp, "n.dist-info/entry_points.txt", test::fake_stamp(2));
  return b.build();
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
      {3, ",0,\"\"]", ",7,\"\"]"},                           // dist -> nonexistent search path
      {3, ",0,\"\"]", ",0]"},                                // short dist
      {3, ",0,\"\"]", ",0,\"\",1]"},                          // long dist
      {1, "\"entry_points\":[[0,", "\"entry_points\":[[5,"},  // entry point -> nonexistent dist
      {1, "{\"dists\":[[0,", "{\"dists\":[[1,"},              // group dist -> nonexistent dist
      {1, "\"n.dist-info\",0]", "\"n.dist-info\",4]"},         // group dist -> nonexistent path
      {1, "{\"dists\":[[0,", "{\"dists\":[[0,0,"},            // long group dist
      {1, "{\"dists\"", "{\"distz\""},
      {4, "[[0,\"n.dist-info", "[[3,\"n.dist-info"},          // watched -> nonexistent path
      {3, "[[\"n\",", "[[1,"},                                // wrong type
      {3, "[[\"n\",", "[[{\"hex\":\"zz\"},"},                 // bad hex
      {3, "[[\"n\",", "[[{\"hex\":\"6\"},"},                  // odd hex
      {3, "[[\"n\",", "[[{\"hex\":\"6e\",\"x\":1},"},         // extra field
      {3, "[[\"n\",", "[[\"\\ud800\","},                        // lone surrogate
      {3, "[[\"n\",", "[[\"\\q\","},                            // unknown escape
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
      {0, "\"group:g\"", "\"group:h\""},                        // stamps:g no longer follows its group
      {0, "\"dists\"", "\"distz\""},                            // unknown section
      {0, "\"watched\"", "\"dists\""},                          // two dists sections
      {0, ",1],[\"stamps:g\"", ",2],[\"stamps:g\""},            // count disagrees
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
    std::string text = edit_line(good, 3, "[[\"n\",", "[[\"" + escaped + "\",");
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

// ---- partial reads (CacheOptions::groups) --------------------------------------


detail::ReadExpectations groups_only(std::vector<std::string> groups, bool watched = false,
                                     bool group_stamps = false) {
  detail::ReadExpectations e;
  e.groups = std::move(groups);
  e.watched = watched;
  e.group_stamps = group_stamps;
  return e;
}

/// Checks that `partial` holds exactly `groups` of `whole`: the same entry
/// points in the same order, and exactly their distributions, in discovery
/// order, with every field; plus the global provenance and first error.
void expect_same_groups(const Index& whole, const Index& partial, std::vector<std::string_view> groups) {
  EXPECT_TRUE(whole.complete());
  EXPECT_FALSE(partial.complete());
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  ASSERT_EQ(std::vector<std::string_view>(partial.loaded_groups().begin(), partial.loaded_groups().end()), groups);
  std::vector<const Distribution*> dists;
  std::vector<const EntryPoint*> eps;
  for (std::string_view g : groups) {
    EXPECT_TRUE(partial.has_group(g)) << g;
    for (const EntryPoint& ep : whole.group(g)) {
      eps.push_back(&ep);
      dists.push_back(ep.dist);
    }
  }
  std::sort(dists.begin(), dists.end());
  dists.erase(std::unique(dists.begin(), dists.end()), dists.end());
  ASSERT_EQ(partial.distributions().size(), dists.size());
  for (std::size_t i = 0; i < dists.size(); ++i) {
    const Distribution &x = *dists[i], &y = partial.distributions()[i];
    EXPECT_TRUE(x.name == y.name && x.version == y.version && x.metadata_dir == y.metadata_dir &&
                x.search_path == y.search_path && y.error.empty())
        << "distribution " << i << ": " << x.metadata_dir << " vs " << y.metadata_dir;
  }
  ASSERT_EQ(partial.entry_points().size(), eps.size());
  for (std::size_t i = 0; i < eps.size(); ++i) {
    const EntryPoint &x = *eps[i], &y = partial.entry_points()[i];
    EXPECT_TRUE(x.group == y.group && x.name == y.name && x.value == y.value)
        << "entry point " << i << ": " << x.name << " vs " << y.name;
    EXPECT_EQ(std::find(dists.begin(), dists.end(), x.dist) - dists.begin(), y.dist - partial.distributions().data());
  }
  for (std::string_view g : groups) EXPECT_EQ(partial.group(g).size(), whole.group(g).size()) << g;
  ASSERT_EQ(partial.search_paths().size(), whole.search_paths().size());
  for (std::size_t i = 0; i < whole.search_paths().size(); ++i) {
    EXPECT_EQ(partial.search_paths()[i], whole.search_paths()[i]);
    EXPECT_EQ(partial.search_path_stamps()[i], whole.search_path_stamps()[i]);
  }
  EXPECT_EQ(partial.scanned_at_ns(), whole.scanned_at_ns());
  ASSERT_EQ(partial.first_error() != nullptr, whole.first_error() != nullptr);
  if (whole.first_error() != nullptr) {
    const Distribution &x = *whole.first_error(), &y = *partial.first_error();
    EXPECT_TRUE(x.name == y.name && x.version == y.version && x.metadata_dir == y.metadata_dir &&
                x.search_path == y.search_path && x.error == y.error)
        << x.metadata_dir << " vs " << y.metadata_dir;
  }
}

/// Writes sample_index(40) to `t`/i.json and reads it back whole.
Result<Index> written_sample(const TempDir& t) {
  if (!write_index(sample_index(40), t / "i.json")) return Error{Errc::io, "cannot write " + t / "i.json"};
  return read_index(t / "i.json");
}

TEST(CachePartial, GroupReadEqualsThatGroupOfACompleteRead) {
  TempDir t;
  auto whole = written_sample(t);
  ASSERT_TRUE(whole) << whole.error().message;
  const std::vector<std::vector<std::string>> selections = {
      {"console_scripts"},
      {"torch.backends"},
      {"group3"},
      {"a group"},
      {"group3", "console_scripts", "group3"},           // several, repeated, unsorted
      {"group0", "group1", "group2", "group3", "group4", "group5", "group6", "torch.backends"},
      {"no-such-group"},
  };
  for (const auto& sel : selections) {
    auto partial = read_index(t / "i.json", sel);
    ASSERT_TRUE(partial) << partial.error().message;
    SCOPED_TRACE(sel.front());
    expect_same_groups(*whole, *partial, std::vector<std::string_view>(sel.begin(), sel.end()));
    EXPECT_TRUE(partial->watched_files().empty());
    EXPECT_FALSE(partial->watched_complete());
  }
  // A group that was not loaded is not "empty": has_group() tells them apart.
  auto one = read_index(t / "i.json", {"torch.backends"});
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->group("console_scripts").empty());
  EXPECT_FALSE(one->has_group("console_scripts"));
  EXPECT_TRUE(one->has_group("torch.backends"));
  auto none = read_index(t / "i.json", {"no-such-group"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->has_group("no-such-group"));
  EXPECT_TRUE(none->distributions().empty());
  EXPECT_TRUE(whole->has_group("console_scripts"));
  EXPECT_TRUE(whole->watched_complete());
}

// A one-group read keeps its names and values as views into the section's
// buffer, which the Index owns: they outlive the reader, the file and any
// later read, escaped or not (escaped ones are copies).
TEST(CachePartial, GroupReadOwnsItsStringsWhateverHappensToTheFile) {
  TempDir t;
  auto whole = written_sample(t);
  ASSERT_TRUE(whole) << whole.error().message;
  std::vector<Result<Index>> parts;
  for (const char* g : {"console_scripts", "a group", "torch.backends"}) parts.push_back(read_index(t / "i.json", {g}));
  // The file is overwritten with another index, then removed; another read
  // of another file reuses the reader's memory.
  ASSERT_TRUE(write_index(sample_index(7), t / "i.json"));
  ASSERT_TRUE(read_index(t / "i.json", {"console_scripts"}));
  ASSERT_EQ(::unlink((t / "i.json").c_str()), 0);
  std::size_t k = 0;
  for (const char* g : {"console_scripts", "a group", "torch.backends"}) {
    SCOPED_TRACE(g);
    ASSERT_TRUE(parts[k]) << parts[k].error().message;
    expect_same_groups(*whole, *parts[k], {g});
    ++k;
  }
}

TEST(CachePartial, GroupReadReportsTheGlobalFirstError) {
  // importlib raises for the first broken distribution whatever the group
  // asked for, so a one-group read must know it even though that
  // distribution has no entry points in the group (or at all).
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(3), t / "i.json"));
  auto partial = read_index(t / "i.json", {"torch.backends"});
  ASSERT_TRUE(partial) << partial.error().message;
  ASSERT_NE(partial->first_error(), nullptr);
  EXPECT_EQ(partial->first_error()->name, "broken");
  EXPECT_EQ(partial->first_error()->metadata_dir, "broken.egg-info");
  EXPECT_EQ(partial->first_error()->search_path, 2u);
  EXPECT_EQ(partial->first_error()->error, "broken.egg-info/entry_points.txt:3: line without '='");
  for (const Distribution& d : partial->distributions()) EXPECT_NE(d.name, "broken");

  ASSERT_TRUE(write_index(tiny_index(), t / "clean.json"));
  auto no_error = read_index(t / "clean.json", {"g"});
  ASSERT_TRUE(no_error);
  EXPECT_EQ(no_error->first_error(), nullptr);
}

TEST(CachePartial, ReadsTheWatchedFilesOnlyWhenAsked) {
  TempDir t;
  IndexBuilder b;
  b.add_search_path("/tmp/site", test::fake_stamp(1));
  b.add_search_path("/tmp/other", test::fake_stamp(2));
  for (int i = 0; i < 10; ++i) {
    const std::string n = "noise" + std::to_string(i);
    const auto d = b.add_distribution(n, "1", "/tmp/site/" + n + ".dist-info", 0);
    b.add_entry_point(d, "group" + std::to_string(i % 7), "ep", n + ":x");
    b.add_watched_file(0, n + ".dist-info", test::fake_stamp(50 + i));  // the directory: no distribution's
    b.add_watched_file(0, n + ".dist-info/entry_points.txt", test::fake_stamp(100 + i));
    b.add_watched_file(1, n + ".dist-info/entry_points.txt", test::fake_stamp(150 + i));  // another path's
  }
  // Names the reader must decode (escapes, bytes that are not UTF-8) rather
  // than point into its buffer: both kinds must come back exactly.
  b.add_watched_file(0, std::string("odd\"quote\\back\nline-\xff\x01.dist-info/entry_points.txt"), test::fake_stamp(7));
  const Index original = b.build();
  ASSERT_TRUE(write_index(original, t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  auto with_watched = parse_bytes_with(text, groups_only({"group3"}, /*watched=*/true));
  ASSERT_TRUE(with_watched) << with_watched.error().message;
  EXPECT_TRUE(with_watched->watched_complete());
  // For `full` validation: the names (no stamps), and the digest of the stamps.
  EXPECT_TRUE(with_watched->watched_files().empty());
  ASSERT_EQ(with_watched->watched_names().size(), original.watched_files().size());
  ASSERT_NE(with_watched->watched_digest(), nullptr);
  EXPECT_EQ(*with_watched->watched_digest(), detail::digest_of(original.watched_files()));
  for (std::size_t i = 0; i < original.watched_files().size(); ++i) {
    EXPECT_EQ(with_watched->watched_names()[i].search_path, original.watched_files()[i].search_path);
    EXPECT_EQ(with_watched->watched_names()[i].rel_path, original.watched_files()[i].rel_path);
  }
  // Asked for the stamps themselves: every stamp, no digest.
  detail::ReadExpectations stamped = groups_only({"group3"}, /*watched=*/true);
  stamped.watched_stamps = true;
  auto with_stamps = parse_bytes_with(text, stamped);
  ASSERT_TRUE(with_stamps) << with_stamps.error().message;
  EXPECT_EQ(with_stamps->watched_digest(), nullptr);
  ASSERT_EQ(with_stamps->watched_files().size(), original.watched_files().size());
  for (std::size_t i = 0; i < original.watched_files().size(); ++i) {
    EXPECT_EQ(with_stamps->watched_files()[i].rel_path, original.watched_files()[i].rel_path);
    EXPECT_EQ(with_stamps->watched_files()[i].stamp, original.watched_files()[i].stamp);
  }
  // The group's stamps: the watched files inside its distributions only.
  auto stamps = parse_bytes_with(text, groups_only({"group3"}, false, /*group_stamps=*/true));
  ASSERT_TRUE(stamps) << stamps.error().message;
  EXPECT_FALSE(stamps->watched_complete());
  std::vector<std::string> got, want;
  for (const WatchedFile& f : stamps->watched_files()) got.push_back(std::string(f.rel_path));
  for (const Distribution& d : stamps->distributions()) {
    want.push_back(std::string(d.metadata_dir.substr(std::string_view("/tmp/site/").size())) + "/entry_points.txt");
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(stamps->watched_files()[0].stamp, test::fake_stamp(100 + 3));  // noise3 is in group3
  EXPECT_EQ(stamps->watched_files()[0].search_path, 0u);
  EXPECT_EQ(stamps->stamped_files().size(), stamps->watched_files().size());
  // Both (`full` validation and the groups' stamps): the names and digest in
  // watched_names(), the groups' stamps in stamped_files().
  auto both = parse_bytes_with(text, groups_only({"group3"}, /*watched=*/true, /*group_stamps=*/true));
  ASSERT_TRUE(both) << both.error().message;
  ASSERT_NE(both->watched_digest(), nullptr);
  EXPECT_EQ(both->watched_names().size(), original.watched_files().size());
  ASSERT_EQ(both->stamped_files().size(), stamps->watched_files().size());
  for (std::size_t i = 0; i < both->stamped_files().size(); ++i) {
    EXPECT_EQ(both->stamped_files()[i].rel_path, stamps->watched_files()[i].rel_path);
    EXPECT_EQ(both->stamped_files()[i].stamp, stamps->watched_files()[i].stamp);
  }
  EXPECT_EQ(original.stamped_files().size(), original.watched_files().size()) << "a scan has every stamp";
  EXPECT_TRUE(parse_bytes_with(text, groups_only({"group3"}))->watched_files().empty());

  // still_valid() refuses to vouch for `full` without the watched list.
  std::string why;
  EXPECT_FALSE(still_valid(*stamps, Validation::full, &why));
  EXPECT_NE(why.find("without its watched files"), std::string::npos) << why;
}

TEST(Cache, ReadRejectsABadWatchDigest) {
  TempDir t;
  ASSERT_TRUE(write_index(tiny_index(), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  detail::ReadExpectations full;
  full.groups = {"g"};
  full.watched = true;
  // Malformed digests and file lists: every read that parses the section fails.
  const std::pair<std::string, std::string> malformed[] = {
      {"{\"digest\":\"", "{\"digest\":\"zz"},                 // not hex
      {"{\"digest\":\"", "{\"digest\":\"0"},                  // 33 digits
      {"\",\"files\":[[", "\",\"other\":[["},                   // unknown field
      {"\",\"files\":[[0,", "\",\"files\":[[9,"},               // search path out of range
      {"\",\"files\":[[0,", "\",\"files\":[[0],[0,"},           // an empty run
  };
  const std::string expected[] = {"32 hex digits", "32 hex digits", "unexpected field", "out of range",
                                  "empty watched run"};
  for (std::size_t i = 0; i < std::size(malformed); ++i) {
    reseal(t / "bad.json", edit_line(good, 5, malformed[i].first, malformed[i].second));
    const std::string text = test::read_file(t / "bad.json");
    auto partial = parse_bytes_with(text, full);
    ASSERT_FALSE(partial) << malformed[i].second;
    EXPECT_EQ(partial.error().code, Errc::cache);
    EXPECT_NE(partial.error().message.find("section \"watch_digest\""), std::string::npos)
        << partial.error().message;
    EXPECT_NE(partial.error().message.find(expected[i]), std::string::npos) << partial.error().message;
    EXPECT_FALSE(read_index(t / "bad.json")) << "a complete read parses it too";
  }
  // A well-formed digest that is not the stamps': a complete read (which has
  // both) refuses it; a `full` read cannot know, and validation then fails.
  const std::size_t at = good.find("{\"digest\":\"", good.rfind('\n', good.size() - 2)) + 11;
  std::string wrong = good;
  wrong[at] = wrong[at] == '0' ? '1' : '0';
  reseal(t / "bad.json", wrong);
  auto complete = read_index(t / "bad.json");
  ASSERT_FALSE(complete);
  EXPECT_NE(complete.error().message.find("disagrees with the stamps"), std::string::npos)
      << complete.error().message;
  auto partial = parse_bytes_with(test::read_file(t / "bad.json"), full);
  ASSERT_TRUE(partial) << partial.error().message;
  ASSERT_NE(partial->watched_digest(), nullptr);
  std::string why;
  EXPECT_FALSE(still_valid(*partial, Validation::full, &why));
}

/// `count` real dist-info directories under `site`, each with an
/// entry_points.txt holding "[g]\ne = m:f\n".
void write_watched_tree(const std::string& site, int count) {
  for (int i = 0; i < count; ++i) {
    test::write_file(site + "/d" + std::to_string(i) + ".dist-info/entry_points.txt", "[g]\ne = m:f\n");
  }
}

/// An index watching that tree's entry_points.txt files with their current
/// stamps, scanned an hour ahead so that no stamp is racy; with
/// `with_entry_points`, also each distribution and its entry point g/e.
Index watched_tree_index(const std::string& site, int count, bool with_entry_points) {
  IndexBuilder b;
  b.add_search_path(site, detail::stamp_at(AT_FDCWD, site.c_str()));
  for (int i = 0; i < count; ++i) {
    const std::string dir = "d" + std::to_string(i) + ".dist-info";
    if (with_entry_points) {
      const auto d = b.add_distribution("d" + std::to_string(i), "1", site + "/" + dir, 0);
      b.add_entry_point(d, "g", "e", "m:f");
    }
    b.add_watched_file(0, dir + "/entry_points.txt",
                       detail::stamp_at(AT_FDCWD, (site + "/" + dir + "/entry_points.txt").c_str()));
  }
  b.set_scanned_at(detail::coarse_now_ns() + 3600 * 1000000000LL);
  return b.build();
}

/// Reads group g of `text` for `full` validation, the check started in
/// `early`; copied, or through a mapping of the file (`map`).
Result<Index> read_with_early_check(const std::string& text, detail::EarlyFullCheck& early, bool map = false) {
  detail::ReadExpectations e = groups_only({"g"}, /*watched=*/true);
  e.early_check = &early;
  e.map_file = map;
  return parse_bytes_with(text, e);
}

/// True when this process may run on two CPUs (an early check then has a helper).
bool two_cpus_allowed() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  return ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2;
}

/// Reads `text` (k_files names) with an early check, copied or mapped, and
/// expects still_valid() to join it with answer `valid` ("digest" in the
/// reason when not).
void expect_early_check_answer_read(const std::string& text, std::size_t k_files, bool valid, int changed, bool map) {
  SCOPED_TRACE(map ? "mapped" : "copied");
  detail::EarlyFullCheck early;
  auto r = read_with_early_check(text, early, map);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->group("g").size(), k_files);
  EXPECT_EQ(r->watched_names().size(), k_files);
  EXPECT_EQ(early.running(), two_cpus_allowed()) << "started while the rest was read";
  std::string why;
  EXPECT_EQ(detail::still_valid(*r, Validation::full, &why, &early), valid) << changed << ": " << why;
  if (!valid) {
    EXPECT_NE(why.find("digest"), std::string::npos) << why;
  }
  EXPECT_FALSE(early.running());
}

/// expect_early_check_answer_read() both ways.
void expect_early_check_answer(const std::string& text, std::size_t k_files, bool valid, int changed = -1) {
  for (const bool map : {false, true}) expect_early_check_answer_read(text, k_files, valid, changed, map);
}

/// Rewrites file `i` of write_watched_tree()'s tree: a new ctime, a changed stamp.
void change_watched_file(const std::string& site, int i) {
  test::write_file(site + "/d" + std::to_string(i) + ".dist-info/entry_points.txt", "[g]\ne = m:changed\n");
}

TEST(CachePartial, DigestValidationFindsAChangeInEitherThreadsShare) {
  // Above 500 watched files two threads fold the fresh stamps into the
  // digest; a change anywhere must make the digest differ.
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 2000;
  write_watched_tree(site, k_files);
  auto build = [&] { return watched_tree_index(site, k_files, /*with_entry_points=*/false); };
  auto by_digest = [&](const Index& index) -> Index {
    EXPECT_TRUE(write_index(index, t / "i.json"));
    auto r = parse_bytes_with(test::read_file(t / "i.json"), groups_only({"g"}, /*watched=*/true));
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return Index();
    }
    EXPECT_NE(r->watched_digest(), nullptr);
    EXPECT_EQ(r->watched_names().size(), static_cast<std::size_t>(k_files));
    return std::move(r.value());
  };
  std::string why;
  {
    const Index unchanged = by_digest(build());
    EXPECT_TRUE(still_valid(unchanged, Validation::full, &why)) << why;
  }
  for (int changed : {3, 1000, 1999}) {
    const Index before = by_digest(build());
    test::write_file(site + "/d" + std::to_string(changed) + ".dist-info/entry_points.txt", "[g]\ne = m:g\n");
    EXPECT_FALSE(still_valid(before, Validation::full, &why)) << changed;
    EXPECT_NE(why.find("digest"), std::string::npos) << why;
    EXPECT_TRUE(still_valid(before, Validation::paths)) << "paths validation does not look inside";
  }
}

TEST(CachePartial, EarlyCheckStartsWithTheNamesAndStillValidJoinsIt) {
  // The reader starts the `full` check as soon as it has the watched names
  // (ReadExpectations::early_check), before it parses the groups; still_valid
  // joins it.  Its answer must be the same as a check started afterwards, and
  // a read that fails after the start must stop it (sanitizer builds would
  // see a thread left reading the freed names).
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 1500;
  write_watched_tree(site, k_files);
  auto build = [&] { return watched_tree_index(site, k_files, /*with_entry_points=*/true); };
  ASSERT_TRUE(write_index(build(), t / "i.json"));
  std::string text = test::read_file(t / "i.json");
  expect_early_check_answer(text, k_files, /*valid=*/true);
  // A change in the first or the last file: found by the early check too.
  for (int changed : {0, k_files - 1}) {
    change_watched_file(site, changed);
    expect_early_check_answer(text, k_files, /*valid=*/false, changed);
    ASSERT_TRUE(write_index(build(), t / "i.json"));  // the new stamps, for the next round
    text = test::read_file(t / "i.json");
  }
  // A group section that fails its hash after the check started: the read
  // fails and the check is stopped.
  const std::size_t value = text.find("\"m:f\"", text.find("\n"));
  ASSERT_NE(value, std::string::npos);
  text[value + 3] = 'x';
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(text, early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("section \"group:g\": hash mismatch"), std::string::npos) << r.error().message;
    EXPECT_FALSE(early.running());
  }
}

TEST(CachePartial, EarlyCheckWaitsForASlowReader) {
  // The reader may take long to hand names over (a slow file system under
  // it): the prepared helper spins, then yields, then sleeps between looks,
  // and must still check every name published, in chunks with pauses
  // between, with the full check's answer.
  TempDir t;
  const std::string site = t / "site";
  constexpr std::size_t k_files = 1200;
  write_watched_tree(site, static_cast<int>(k_files));
  std::vector<std::string> names;
  WatchedDigest digest;
  for (std::size_t i = 0; i < k_files; ++i) {
    names.push_back("d" + std::to_string(i) + ".dist-info/entry_points.txt");
    detail::digest_add(digest, i, detail::stamp_at(AT_FDCWD, (site + "/" + names.back()).c_str()));
  }
  auto check = [&](bool want_valid) {
    IndexBuilder b;
    const auto sp = b.add_search_path(site, detail::stamp_at(AT_FDCWD, site.c_str()));
    b.set_scanned_at(detail::coarse_now_ns() + 3600 * 1000000000LL);  // no stamp is racy
    b.reserve(0, 0, 0, k_files);
    const Index& so_far = b.in_progress();
    detail::EarlyFullCheck early;
    early.prepare();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past its spinning and yielding
    early.start({so_far.watched_names().data(), k_files}, so_far.search_paths(), so_far.scanned_at_ns(),
                /*ready=*/0);
    EXPECT_EQ(early.running(), two_cpus_allowed());
    for (std::size_t i = 0; i < k_files; ++i) {
      b.add_watched_name(sp, names[i]);
      if ((i + 1) % 100 == 0) {
        early.publish(i + 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    early.publish(k_files);
    b.set_watched_digest(digest);
    b.set_watched_complete(true);
    const Index index = b.build();
    std::string why;
    EXPECT_EQ(detail::still_valid(index, Validation::full, &why, &early), want_valid) << why;
    EXPECT_FALSE(early.running());
  };
  check(/*want_valid=*/true);
  change_watched_file(site, 1150);  // in the last chunk
  check(/*want_valid=*/false);
}

TEST(CachePartial, EarlyCheckPreparedAheadWaitsForTheNamesAndStopsWhenTheirParseFails) {
  // A file big enough (over 128 KB) has the check's helper created before
  // the head is parsed; it then stats each chunk of names as soon as the
  // reader has written it (EarlyFullCheck::publish).  Its answer must be
  // the full check's, and a read that fails while the helper waits for
  // names must stop it (a hang here, or a sanitizer report of a thread
  // reading freed names, is the failure).
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 3000;
  write_watched_tree(site, k_files);
  ASSERT_TRUE(write_index(watched_tree_index(site, k_files, /*with_entry_points=*/true), t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  ASSERT_GT(text.size(), 128u * 1024) << "too small for the helper to be prepared ahead";
  expect_early_check_answer(text, k_files, /*valid=*/true);
  // A change in a file in the middle of the names, then in the last one.
  for (int changed : {k_files / 2, k_files - 1}) {
    change_watched_file(site, changed);
    expect_early_check_answer(text, k_files, /*valid=*/false, changed);
  }
  // The last line is "watch_digest".  A name in its middle that is not a
  // string (re-sealed, so the hashes hold): the parse fails after the helper
  // was started and while it waits for the rest of the names.
  const int digest_line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) - 1;
  const std::string middle = "\"d" + std::to_string(k_files / 2) + ".dist-info/entry_points.txt\"";
  reseal(t / "bad.json", edit_line(text, digest_line, middle, "17"));
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(test::read_file(t / "bad.json"), early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("watched file path"), std::string::npos) << r.error().message;
    EXPECT_FALSE(early.running());
  }
  // More names than the head announces: refused before the one too many is
  // written where the helper reads (the room for the names is exactly the
  // head's count).
  reseal(t / "bad.json", text, "for r in rows:\n  r[4] = r[4] - 1 if r[0] in (\"watched\", \"watch_digest\") else r[4]");
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(test::read_file(t / "bad.json"), early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("more watched files than the head says"), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(early.running());
  }
}

TEST(CachePartial, CorruptSectionIsFoundWhenItIsRead) {
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(10), t / "i.json"));
  const std::string good = test::read_file(t / "i.json");
  // Flip one byte of a value "noiseN:x", which only a groupK section holds.
  std::string bad = good;
  const std::size_t at = good.find(":x\"", good.find('\n'));
  ASSERT_NE(at, std::string::npos);
  bad[at + 1] = 'y';
  // Find the group whose read now fails; every other group still reads.
  int failed = 0;
  for (int k = 0; k < 7; ++k) {
    const std::string g = "group" + std::to_string(k);
    auto r = parse_bytes_with(bad, groups_only({g}));
    if (!r) {
      ++failed;
      EXPECT_EQ(r.error().code, Errc::cache);
      EXPECT_NE(r.error().message.find("section \"group:" + g + "\": hash mismatch"), std::string::npos)
          << r.error().message;
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_TRUE(parse_bytes_with(bad, groups_only({"console_scripts"})));
  EXPECT_FALSE(parse_bytes_with(bad, detail::ReadExpectations{})) << "a complete read reads every section";

  // The same for the watched sections: only reads that need one see it.
  std::string bad_digest = good;
  bad_digest[good.size() - 3] ^= 1;  // inside the last line ("watch_digest")
  EXPECT_TRUE(parse_bytes_with(bad_digest, groups_only({"console_scripts"})));
  auto full = parse_bytes_with(bad_digest, groups_only({"console_scripts"}, /*watched=*/true));
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message.find("section \"watch_digest\""), std::string::npos) << full.error().message;
  const std::size_t last_line = good.rfind('\n', good.size() - 2);
  std::string bad_watched = good;
  bad_watched[last_line - 3] ^= 1;  // inside the line before ("watched", the stamps)
  auto by_digest = parse_bytes_with(bad_watched, groups_only({"console_scripts"}, /*watched=*/true));
  EXPECT_TRUE(by_digest) << "`full` validation reads the digest, not the stamps";
  detail::ReadExpectations stamped = groups_only({"console_scripts"}, /*watched=*/true);
  stamped.watched_stamps = true;
  auto with_stamps = parse_bytes_with(bad_watched, stamped);
  ASSERT_FALSE(with_stamps);
  EXPECT_NE(with_stamps.error().message.find("section \"watched\""), std::string::npos)
      << with_stamps.error().message;
}

TEST(CachePartial, CorruptOrTruncatedHeadIsRejected) {
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(10), t / "i.json"));
  const std::string good = test::read_file(t / "i.json");
  const std::size_t head_end = good.find('\n') + 1;
  for (std::size_t n = 0; n < good.size(); n += (n < head_end + 64 ? 1 : 97)) {
    auto r = parse_bytes_with(good.substr(0, n), groups_only({"torch.backends"}));
    ASSERT_FALSE(r) << "truncated at " << n << " of " << good.size();
    EXPECT_EQ(r.error().code, Errc::cache);
  }
  for (unsigned seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(seed);
    std::string bad = good;
    bad[rng() % head_end] ^= static_cast<char>(1 + rng() % 255);
    auto r = parse_bytes_with(bad, groups_only({"torch.backends"}));
    ASSERT_FALSE(r) << "seed " << seed;
    EXPECT_EQ(r.error().code, Errc::cache);
  }
}

// A mapped read (ReadExpectations::map_file, what the CLI does) parses a
// section in place only when simdjson's padding after it still lies in the
// mapping, whose length is the file's in whole pages; a file that ends less
// than the padding before a page boundary has its last section read into a
// buffer.  Files ending at every byte around a page boundary, read every
// way, give the copied read's answer (parse_bytes_with compares them), and
// the mapped read makes no read() call but for such a tail.
TEST(CachePartial, MappedReadsAgreeWithCopiedOnesWhereverTheFileEnds) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto text_with = [](std::size_t n) {
    IndexBuilder b;
    b.add_search_path("/tmp/site", test::fake_stamp(1));
    const std::uint32_t d = b.add_distribution("alpha", "1.0", "/tmp/site/alpha-1.0.dist-info", 0);
    b.add_entry_point(d, "g", "e", "m:" + std::string(n, 'v'));  // one byte of the file per n
    b.add_entry_point(d, "other", "o", "m:o");
    b.add_watched_file(0, "alpha-1.0.dist-info/entry_points.txt", test::fake_stamp(2));
    b.set_scanned_at(1700000000999999999LL);
    TempDir t;
    if (!write_index(b.build(), t / "i.json")) std::abort();
    return test::read_file(t / "i.json");
  };
  // From ~100 bytes before the second page boundary to past it.
  const std::size_t n0 = 2 * page - 100 - text_with(0).size();
  std::size_t tails = 0, in_place = 0;
  for (std::size_t n = n0; n < n0 + 120; ++n) {
    const std::string text = text_with(n);
    SCOPED_TRACE("file size " + std::to_string(text.size()));
    const std::size_t room = (text.size() + page - 1) / page * page - text.size();  // zeros after the end
    for (const detail::ReadExpectations& e : {detail::ReadExpectations{}, groups_only({"g"}), groups_only({"g"}, true),
                                              groups_only({"other"}, true, true)}) {
      ASSERT_TRUE(parse_bytes_with(text, e));
      profile::enable();
      const std::uint64_t reads = profile::counter(profile::Counter::read);
      detail::ReadExpectations mapped = e;
      mapped.map_file = true;
      const int fd = ::memfd_create("epload-cache-test", MFD_CLOEXEC);
      ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
      ASSERT_TRUE(detail::read_index_fd(fd, "memfd", mapped));
      ::close(fd);
      const std::uint64_t made = profile::counter(profile::Counter::read) - reads;
      profile::reset();
      // The last section (the names) is read by a complete read, and by
      // a read of the names.
      const bool reads_last = e.groups.empty() || e.watched;
      EXPECT_EQ(made != 0, reads_last && room < detail::k_json_padding) << "room " << room;
      (made != 0 ? tails : in_place) += 1;
    }
  }
  EXPECT_GT(tails, 0u);
  EXPECT_GT(in_place, 0u);
}

TEST(CachePartial, LongHeadIsReadWhole) {
  // A head longer than the first read (many groups): read in more chunks.
  IndexBuilder b;
  const auto sp = b.add_search_path("/s", FileStamp{});
  for (int i = 0; i < 3000; ++i) {
    const auto d = b.add_distribution("d" + std::to_string(i), "1", "/s/d" + std::to_string(i) + ".dist-info", sp);
    b.add_entry_point(d, "plugins.of.package" + std::to_string(i), "x", "m:x");
    if (i % 3 == 0) b.add_entry_point(d, "torch.backends", "b" + std::to_string(i), "m:b");
  }
  const Index original = b.build();
  TempDir t;
  ASSERT_TRUE(write_index(original, t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  ASSERT_GT(text.find('\n'), 4 * 32768u) << "the head must exceed several first chunks";
  auto whole = read_index(t / "i.json");
  ASSERT_TRUE(whole) << whole.error().message;
  for (const auto& sel : {std::vector<std::string>{"torch.backends"}, std::vector<std::string>{"plugins.of.package2999"},
                          std::vector<std::string>{"plugins.of.package0", "torch.backends"}}) {
    auto partial = read_index(t / "i.json", sel);
    ASSERT_TRUE(partial) << partial.error().message;
    expect_same_groups(*whole, *partial, std::vector<std::string_view>(sel.begin(), sel.end()));
  }
}

TEST(CachePartial, VersionOneFileIsRejected) {
  // What version 1 wrote (one document over many lines): never trusted,
  // whatever is asked of it.
  const std::string v1 =
      "{\"format\":\"epload-index\",\"version\":1,\"checksum\":\"0123456789abcdef\",\n"
      "\"key\":{\"interpreter\":\"\",\"cwd\":\"\"},\n\"relocatable\":false,\n\"scanned_at_ns\":1,\n"
      "\"search_paths\":[\n{\"path\":\"/s\",\"stamp\":[1,2,3,4,5,16877]}],\n"
      "\"dists\":[\n[\"n\",\"1\",\"n.dist-info\",0,\"\"]],\n\"entry_points\":[\n[0,\"g\",\"e\",\"v\"]],\n"
      "\"watched\":[]}\n";
  for (const auto& expect : {detail::ReadExpectations{}, groups_only({"g"})}) {
    auto r = parse_bytes_with(v1, expect);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("format version 1, this build reads 3"), std::string::npos)
        << r.error().message;
  }
}

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

  edit_file(file, "\"version\":3,", "\"version\":99,");
  CacheReport r = open_checked();
  EXPECT_EQ(r.status, CacheStatus::rebuilt);
  EXPECT_NE(r.reason.find("format version 99"), std::string::npos) << r.reason;

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
  EXPECT_TRUE(partial.watched_files().empty());
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
  EXPECT_TRUE((*full)->watched_complete());
  EXPECT_TRUE(still_valid(**full, Validation::full, &why)) << why;

  // The group's stamps alone, when asked for.
  options.validation = Validation::paths;
  options.group_stamps = true;
  auto stamps = open_index(options, &r);
  ASSERT_TRUE(stamps);
  EXPECT_EQ(r.status, CacheStatus::hit) << r.reason;
  ASSERT_EQ((*stamps)->watched_files().size(), 1u);
  EXPECT_EQ((*stamps)->watched_files()[0].rel_path, "beta-2.0.dist-info/entry_points.txt");
  EXPECT_EQ((*stamps)->watched_files()[0].stamp,
            detail::stamp_at(AT_FDCWD, (site + "/beta-2.0.dist-info/entry_points.txt").c_str()));

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

TEST_F(CacheOpen, FailedWriteServesUncachedAndKeepsTheOldFile) {
  // A disk that fills up while the rebuilt index is written: the answer is
  // still right (served uncached, and said so), the old cache file is
  // untouched and no temporary file is left behind.
  test::next_tick();
  CacheReport first = open_checked();
  ASSERT_EQ(first.status, CacheStatus::rebuilt);
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
  EXPECT_EQ(test::list_dir(options.cache_dir), std::vector<std::string>{first.file.substr(first.file.rfind('/') + 1)});
  // Without the limit, the next query rebuilds and stores.
  EXPECT_EQ(open_checked().status, CacheStatus::rebuilt);
}

TEST_F(CacheOpen, PrunesOldAndExcessFiles) {
  ASSERT_EQ(::mkdir(options.cache_dir.c_str(), 0700), 0);
  const std::int64_t now = detail::coarse_now_ns() / 1000000000;
  auto make_aged = [&](const std::string& name, std::int64_t age_s) {
    const std::string p = options.cache_dir + "/" + name;
    test::write_file(p, "{}");
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(now - age_s);
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  };
  for (int i = 0; i < 5; ++i) make_aged("index-old" + std::to_string(i) + ".json", 31 * 86400);
  for (int i = 0; i < 70; ++i) make_aged("index-f" + std::to_string(100 + i) + ".json", 1000 + i);
  make_aged(".index-x.tmp.abcdef", 2 * 3600);   // stray temp file: removed
  make_aged(".index-y.tmp.abcdef", 60);         // maybe still being written: kept
  make_aged("unrelated.txt", 365 * 86400);       // not ours: kept
  make_aged("learned-old.txt", 31 * 86400);      // learned stores: by last use only
  make_aged("devices-g-h.json", 60);
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
  EXPECT_FALSE(has(".index-x.tmp.abcdef"));
  EXPECT_TRUE(has(".index-y.tmp.abcdef"));
  EXPECT_TRUE(has("unrelated.txt"));
  EXPECT_FALSE(has("learned-old.txt"));
  EXPECT_TRUE(has("devices-g-h.json"));

  auto cleared = clear_cache(options);
  ASSERT_TRUE(cleared);
  EXPECT_EQ(*cleared, 66);  // 64 index files, the young temp file, the devices store
  EXPECT_EQ(test::list_dir(options.cache_dir), std::vector<std::string>{"unrelated.txt"});
  options.cache_dir = t / "never-created";
  auto none = clear_cache(options);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
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
  std::vector<std::string> states;
  for (int s = 0; s < 4; ++s) {
    if (present[0] != bool(s & 1)) toggle(0);
    if (present[1] != bool(s & 2)) toggle(1);
    auto idx = scan(options.search_paths);
    ASSERT_TRUE(idx);
    states.push_back(test::answer_text(*idx));
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
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(10);
      for (int i = 0; i < 40; ++i) {
        CacheReport rep;
        auto idx = open_index(options, &rep);
        if (!idx) ::_exit(11);
        // A scan that races a rename may see a half-moved distribution, as
        // importlib would; but an answer served from the cache must always
        // be a state the tree was really in.
        const bool consistent =
            std::find(states.begin(), states.end(), test::answer_text(**idx)) != states.end();
        if (!consistent && rep.status == CacheStatus::hit) {
          std::fprintf(stderr, "inconsistent cached answer from %s\n", rep.file.c_str());
          ::_exit(12);
        }
      }
      (void)::read(done[0], &c, 1);  // EOF once the parent stops changing the tree
      auto idx = open_index(options);
      auto fresh = scan(options.search_paths);
      if (!idx || !fresh) ::_exit(13);
      ::_exit(test::answer_text(**idx) == test::answer_text(*fresh) ? 0 : 14);
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
