// unicode_test.cpp — the text rules under the metadata parser, each checked
// against the interpreter itself (EPLOAD_TEST_PYTHON): UTF-8 validation, and
// str's whitespace, line boundaries and lower() (with Final_Sigma) for every
// code point.
#include <gtest/gtest.h>

#include <cstdio>  // snprintf
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "epload/metadata.hpp"
#include "python_oracle.hpp"
#include "scan_text.hpp"

namespace epload {
namespace {

// `c` in UTF-8, encoded here rather than by the code under test.
std::string utf8(char32_t c) {
  if (c < 0x80) return {static_cast<char>(c)};
  if (c < 0x800) return {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
  if (c < 0x10000) {
    return {static_cast<char>(0xe0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3f)),
            static_cast<char>(0x80 | (c & 0x3f))};
  }
  return {static_cast<char>(0xf0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3f)),
          static_cast<char>(0x80 | ((c >> 6) & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
}

// ---- UTF-8 -----------------------------------------------------------------

TEST(FindInvalidUtf8, AcceptsEveryValidSequenceLength) {
  EXPECT_EQ(find_invalid_utf8("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"),
            std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8(std::string_view("\0x", 2)), std::string_view::npos);
}

TEST(FindInvalidUtf8, RejectsSurrogatesOverlongsAndBeyondMaximum) {
  EXPECT_EQ(find_invalid_utf8("ab\xed\xa0\x80"), 2u);      // U+D800
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);            // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xe0\x80\xaf"), 0u);        // overlong
  EXPECT_EQ(find_invalid_utf8("\xf0\x80\x80\xaf"), 0u);    // overlong
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);    // U+110000
  EXPECT_EQ(find_invalid_utf8("x\xf5\x80\x80\x80"), 1u);   // F5 never valid
}

TEST(FindInvalidUtf8, ReportsTheStartOfATruncatedOrBrokenSequence) {
  EXPECT_EQ(find_invalid_utf8("abc\xe2\x82"), 3u);
  EXPECT_EQ(find_invalid_utf8("abcdefgh\xe2\x82x"), 8u);
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);
}

TEST(FindInvalidUtf8, MatchesPythonOnRandomBytes) {
  std::mt19937 rng(99);
  std::vector<std::string> samples;
  const unsigned char interesting[] = {0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
                                       0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x90, 0xa0, 0x9f};
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 10);
    for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(interesting[rng() % std::size(interesting)]));
    samples.push_back(s);
  }
  std::string input;
  for (const auto& s : samples) {
    input.push_back(static_cast<char>(s.size()));
    input += s;
  }
  const std::string out = run_python(R"(
import sys
data = open(sys.argv[1], 'rb').read()
i = 0
while i < len(data):
    n = data[i]; s = data[i+1:i+1+n]; i += 1 + n
    try:
        s.decode('utf-8'); print(-1)
    except UnicodeDecodeError as e:
        print(e.start)
)", input);
  std::istringstream lines(out);
  for (const auto& s : samples) {
    long want;
    ASSERT_TRUE(lines >> want);
    const std::size_t got = find_invalid_utf8(s);
    EXPECT_EQ(got == std::string_view::npos ? -1L : static_cast<long>(got), want)
        << ::testing::PrintToString(s);
  }
}

// ---- Unicode rules against the interpreter ----------------------------------

TEST(Text, WhitespaceAndLineBoundariesMatchPythonForEveryCodePoint) {
  const std::string out = run_python(R"(
print(' '.join(str(c) for c in range(0x110000) if chr(c).isspace()))
print(' '.join(str(c) for c in range(0x110000) if len(('a' + chr(c) + 'b').splitlines()) == 2))
)");
  std::istringstream lines(out);
  std::string spaces_line, breaks_line;
  std::getline(lines, spaces_line);
  std::getline(lines, breaks_line);
  auto parse = [](const std::string& l) {
    std::vector<char32_t> v;
    std::istringstream is(l);
    for (unsigned long c; is >> c;) v.push_back(static_cast<char32_t>(c));
    return v;
  };
  const auto spaces = parse(spaces_line), breaks = parse(breaks_line);
  std::vector<char32_t> my_spaces, my_breaks;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xd800 && c < 0xe000) continue;
    const std::string s = utf8(c);
    const char* b = s.data();
    const char* e = b + s.size();
    if (detail::space_len(b, e) == s.size()) {
      my_spaces.push_back(c);
      EXPECT_EQ(detail::space_len_before(b, e), s.size());
    }
    if (detail::line_break_len(b, e) == s.size()) my_breaks.push_back(c);
  }
  EXPECT_EQ(my_spaces, spaces);
  EXPECT_EQ(my_breaks, breaks);
}

TEST(Text, LowerMatchesPythonForEveryCodePoint) {
  // Python prints "c hex-of-lower-utf8" for every code point that changes.
  const std::string out = run_python(R"(
for c in range(0x110000):
    if 0xd800 <= c < 0xe000: continue
    l = chr(c).lower()
    if l != chr(c): print(c, l.encode().hex())
)");
  std::istringstream lines(out);
  std::vector<std::pair<char32_t, std::string>> want;
  for (unsigned long c; lines >> c;) {
    std::string hex;
    lines >> hex;
    std::string bytes;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    want.emplace_back(static_cast<char32_t>(c), bytes);
  }
  ASSERT_GT(want.size(), 1000u);
  std::size_t next = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xd800 && c < 0xe000) continue;
    const std::string s = utf8(c);
    std::string low;
    detail::py_lower(s, low);
    if (next < want.size() && want[next].first == c) {
      EXPECT_EQ(low, want[next].second) << "U+" << std::hex << static_cast<unsigned>(c);
      ++next;
    } else {
      EXPECT_EQ(low, s) << "U+" << std::hex << static_cast<unsigned>(c);
    }
  }
  EXPECT_EQ(next, want.size());
}

TEST(Text, FinalSigmaMatchesPythonAfterEveryCodePoint) {
  // Which code points c make (c + "Σ") and ("A" + c + "Σ") end in final ς:
  // this checks the cased and case-ignorable tables entry by entry, over the
  // code points the interpreter has assigned (the tables follow the newest
  // Unicode supported; an older interpreter's lacks some, the first line).
  const std::string out = run_python(R"(
import unicodedata
S, F = '\u03a3', '\u03c2'
runs = []  # [first, last] of each run of unassigned code points
for c in range(0x110000):
    if unicodedata.category(chr(c)) == 'Cn':
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
print(' '.join(f'{a} {b}' for a, b in runs))
ok = lambda c: not (0xd800 <= c < 0xe000)
print(' '.join(str(c) for c in range(0x110000) if ok(c) and (chr(c) + S).lower()[-1] == F))
print(' '.join(str(c) for c in range(0x110000) if ok(c) and ('A' + chr(c) + S).lower()[-1] == F))
)");
  std::istringstream lines(out);
  std::string runs_line;
  ASSERT_TRUE(std::getline(lines, runs_line));
  std::vector<bool> unassigned(0x110000);
  std::istringstream runs(runs_line);
  for (unsigned long first, last; runs >> first >> last;) {
    for (unsigned long c = first; c <= last && c < 0x110000; ++c) unassigned[c] = true;
  }
  for (const char* prefix : {"", "A"}) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    std::vector<char32_t> want, got;
    std::istringstream is(line);
    for (unsigned long c; is >> c;) want.push_back(static_cast<char32_t>(c));
    for (char32_t c = 0; c < 0x110000; ++c) {
      if ((c >= 0xd800 && c < 0xe000) || unassigned[c]) continue;
      std::string s = prefix, low;
      s += utf8(c);
      s += "\xce\xa3";
      detail::py_lower(s, low);
      if (low.ends_with("\xcf\x82")) got.push_back(c);
    }
    EXPECT_EQ(got, want) << "prefix '" << prefix << "'";
  }
}

TEST(Text, FinalSigmaMatchesPythonInContext) {
  const std::vector<std::string> samples = {
      "\xce\xa3",                        // Σ alone
      "\xce\x91\xce\xa3",                // ΑΣ
      "\xce\x9f\xce\x94\xce\x9f\xce\xa3",  // ΟΔΟΣ
      "\xce\x91\xce\xa3\xce\x91",        // ΑΣΑ
      "\xce\x91\xce\xa3.",               // ΑΣ.
      "\xce\x91\xce\xa3.x",              // '.' is case-ignorable: not final
      "\xce\x91.\xce\xa3",               // Α.Σ
      "\xce\x91\xce\xa3-x",              // '-' is not ignorable: final
      "1\xce\xa3",                       // digit is not cased
      "\xce\x91\xcc\x81\xce\xa3",        // combining mark between
      "a\xce\xa3\xce\xa3",               // aΣΣ
      "\xc4\xb0\xce\xa3",                // İΣ
      "\xce\x91\xce\xa3\xff",            // undecodable byte after (surrogateescape)
  };
  std::string input;
  for (const auto& s : samples) input += s + '\n';
  const std::string out = run_python(R"(
import sys
for line in open(sys.argv[1], 'rb').read().split(b'\n')[:-1]:
    print(line.decode('utf-8', 'surrogateescape').lower().encode('utf-8', 'surrogateescape').hex())
)", input);
  std::istringstream lines(out);
  for (const auto& s : samples) {
    std::string hex, mine, mine_hex;
    ASSERT_TRUE(lines >> hex);
    detail::py_lower(s, mine);
    char buf[3];
    for (unsigned char c : mine) {
      std::snprintf(buf, sizeof buf, "%02x", c);
      mine_hex += buf;
    }
    EXPECT_EQ(mine_hex, hex) << ::testing::PrintToString(s);
  }
}

}  // namespace
}  // namespace epload
