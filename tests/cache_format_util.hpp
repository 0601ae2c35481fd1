// cache_format_util.hpp — what the tests of the cache file format share: a
// sample index exercising every field, reads of a file's bytes, and edits
// that keep a file's hashes valid (so the reader's own checks are what is
// tested).
#pragma once

#include <sys/mman.h>  // memfd_create
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "cache_internal.hpp"
#include "cache_test_util.hpp"
#include "index_builder.hpp"
#include "epload/cache.hpp"

namespace epload::test {

/// An index exercising every field and the escaping edge cases.
inline Index sample_index(int extra_dists = 0) {
  IndexBuilder b;
  b.add_search_path("/tmp/site \"quoted\" \\back\\slash\\ \n new\tline", fake_stamp(1));
  b.add_search_path(std::string("/tmp/bad-\xff\xfe-byte"), fake_stamp(2));
  b.add_search_path("", FileStamp{});  // the current directory, absent stamp
  b.add_search_path("relative/dir", fake_stamp(3));
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
    b.add_watched_file(0, n + ".dist-info/entry_points.txt", fake_stamp(100 + i));
  }
  b.add_watched_file(0, "alpha-1.0.dist-info/entry_points.txt", fake_stamp(4));
  b.add_watched_file(1, std::string("x.dist-info/\xff/entry_points.txt"), FileStamp{});
  b.add_watched_file(2, "broken.egg-info/entry_points.txt", fake_stamp(5));
  (void)e;
  b.set_scanned_at(1700000000999999999LL);
  return b.build();
}

/// Replaces the first occurrence of `from` in the file.
inline void edit_file(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = read_file(path);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  write_file(path, text);
}

/// Reads `text` (a file's content) with `expect` from an in-memory file
/// (which keeps the loops below fast), both ways: copied into buffers and
/// through a mapping of the file (ReadExpectations::map_file).  The two
/// must agree, to the index or to the message; the copied read is returned.
/// With an early check, once, the way `expect` says.
inline Result<Index> parse_bytes_with(const std::string& text, detail::ReadExpectations expect) {
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
    EXPECT_TRUE(identical(*copied, *mapped, &why)) << "size " << text.size() << ": " << why;
  } else if (!copied && !mapped) {
    EXPECT_EQ(copied.error().message, mapped.error().message) << "size " << text.size();
  }
  return copied;
}

/// parse_bytes_with() of a complete read.
inline Result<Index> parse_bytes(const std::string& text) { return parse_bytes_with(text, detail::ReadExpectations{}); }

/// Re-seals an edited file with Python, which knows nothing of our reader:
/// recomputes every section's length and hash from the lines that follow the
/// head (positionally), the offsets, and the head's checksum.  `mutate`, a
/// Python statement on `rows` (the head's section rows), runs after the
/// offsets are set, to forge a bad layout.
inline constexpr const char* k_reseal_script = R"PY(
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
inline void reseal(const std::string& path, const std::string& text, const std::string& mutate = "pass") {
  write_file(path, text);
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) + " -c '" + k_reseal_script + "' '" + path + "' '" +
                          mutate + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << mutate;
}

/// Replaces the first occurrence of `from` in line `line` (0: the head) of `text`.
inline std::string edit_line(std::string text, int line, const std::string& from, const std::string& to) {
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
///   0 head, 1 group:g, 2 dists, 3 listings, 4 watched, 5 watch_digest.
inline Index tiny_index() {
  IndexBuilder b;
  const auto sp = b.add_search_path("/s", fake_stamp(1));
  const auto d = b.add_distribution("n", "1", "/s/n.dist-info", sp);
  b.add_entry_point(d, "g", "e", "v");
  b.add_watched_file(sp, "n.dist-info/entry_points.txt", fake_stamp(2));
  return b.build();
}

/// What a partial read of `groups` expects (the other fields: defaults).
inline detail::ReadExpectations groups_only(std::vector<std::string> groups, bool watched = false) {
  detail::ReadExpectations e;
  e.groups = std::move(groups);
  e.watched = watched;
  return e;
}

}  // namespace epload::test
