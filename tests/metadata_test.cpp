// metadata_test.cpp — entry_points.txt / METADATA parsing, one test per rule
// of importlib.metadata, plus exhaustive checks of the Unicode rules against
// the interpreter itself (EPLOAD_TEST_PYTHON).
#include "epload/metadata.hpp"

#include <gtest/gtest.h>

#include <unistd.h>  // unlink

#include <cstdio>   // popen
#include <cstdlib>  // mkstemp
#include <cstring>  // strlen
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "scan_text.hpp"

namespace epload {
namespace {

// Runs `code` with the test interpreter; returns its stdout.  `input` is
// written to a temp file whose path is argv[1].
std::string run_python(const std::string& code, const std::string& input = "") {
  char in_path[] = "/tmp/epload-metadata-test-XXXXXX";
  const int fd = ::mkstemp(in_path);
  EXPECT_GE(fd, 0);
  FILE* f = ::fdopen(fd, "wb");
  std::fwrite(input.data(), 1, input.size(), f);
  std::fclose(f);
  char code_path[] = "/tmp/epload-metadata-code-XXXXXX";
  const int cfd = ::mkstemp(code_path);
  FILE* cf = ::fdopen(cfd, "wb");
  std::fwrite(code.data(), 1, code.size(), cf);
  std::fclose(cf);
  const std::string cmd =
      std::string(EPLOAD_TEST_PYTHON) + " -I -S " + code_path + " " + in_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << "python failed: " << cmd;
  ::unlink(in_path);
  ::unlink(code_path);
  return out;
}

struct Triple {
  std::string group, name, value;
  bool operator==(const Triple&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Triple& t) {
  return os << "[" << t.group << "] " << t.name << " = " << t.value;
}

std::vector<Triple> parse_ok(std::string_view text) {
  std::vector<ParsedEntry> out;
  auto r = parse_entry_points(text, "x/entry_points.txt", out);
  EXPECT_TRUE(r.ok()) << r.error().message;
  std::vector<Triple> t;
  for (const auto& e : out) t.push_back({std::string(e.group), std::string(e.name), std::string(e.value)});
  return t;
}

Error parse_err(std::string_view text) {
  std::vector<ParsedEntry> out;
  auto r = parse_entry_points(text, "site/foo-1.0.dist-info/entry_points.txt", out);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(out.empty());
  return r.ok() ? Error{Errc::io, ""} : r.error();
}

// ---- entry_points.txt ------------------------------------------------------

TEST(ParseEntryPoints, ReadsSectionsAndPairsInFileOrder) {
  EXPECT_EQ(parse_ok("[a]\nx = m:x\ny = m:y\n[b]\nz = m:z\n"),
            (std::vector<Triple>{{"a", "x", "m:x"}, {"a", "y", "m:y"}, {"b", "z", "m:z"}}));
}

TEST(ParseEntryPoints, SplitsOnEveryPythonLineBoundary) {
  const char* seps[] = {"\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e",
                        "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"};
  for (const char* sep : seps) {
    const std::string text = std::string("[g]") + sep + "a = 1" + sep + "b = 2";
    EXPECT_EQ(parse_ok(text), (std::vector<Triple>{{"g", "a", "1"}, {"g", "b", "2"}}))
        << "separator bytes of length " << std::strlen(sep);
  }
}

TEST(ParseEntryPoints, CrLfIsOneBoundaryForLineNumbers) {
  const Error e = parse_err("[g]\r\na = 1\r\nbroken\r\n");
  EXPECT_NE(e.message.find("entry_points.txt:3:"), std::string::npos) << e.message;
}

TEST(ParseEntryPoints, StripsEveryPythonWhitespaceCharacter) {
  const char* spaces[] = {"\t", " ", "\x1f", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80",
                          "\xe2\x80\x8a", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* ws : spaces) {
    const std::string w = ws;
    const std::string text = w + "[g]" + w + "\n" + w + "name" + w + "=" + w + "value" + w + "\n";
    EXPECT_EQ(parse_ok(text), (std::vector<Triple>{{"g", "name", "value"}})) << "space " << w;
  }
}

TEST(ParseEntryPoints, ZeroWidthSpaceIsNotWhitespace) {
  EXPECT_EQ(parse_ok("[g]\na = v\xe2\x80\x8b\n"), (std::vector<Triple>{{"g", "a", "v\xe2\x80\x8b"}}));
}

TEST(ParseEntryPoints, UnitSeparatorIsWhitespaceButNotALineBoundary) {
  EXPECT_EQ(parse_ok("[g]\na\x1f=\x1f" "b\n"), (std::vector<Triple>{{"g", "a", "b"}}));
}

TEST(ParseEntryPoints, SkipsEmptyAndWhitespaceOnlyLines) {
  EXPECT_EQ(parse_ok("\n\n[g]\n   \n\t\na = 1\n\n"), (std::vector<Triple>{{"g", "a", "1"}}));
}

TEST(ParseEntryPoints, CommentOnlyWhenHashLeadsTheStrippedLine) {
  EXPECT_EQ(parse_ok("[g]\n# c\n   # indented\n;semi = 1\nv = x # kept\n"),
            (std::vector<Triple>{{"g", ";semi", "1"}, {"g", "v", "x # kept"}}));
}

TEST(ParseEntryPoints, SectionNameStripsEveryOuterBracket) {
  EXPECT_EQ(parse_ok("[[double]]\na = 1\n[a]b]\nb = 2\n"),
            (std::vector<Triple>{{"double", "a", "1"}, {"a]b", "b", "2"}}));
}

TEST(ParseEntryPoints, SectionNameKeepsInnerSpacesAndCase) {
  EXPECT_EQ(parse_ok("  [ My Group ]  \na = 1\n"), (std::vector<Triple>{{" My Group ", "a", "1"}}));
}

TEST(ParseEntryPoints, EmptySectionNameIsAGroup) {
  EXPECT_EQ(parse_ok("[]\na = 1\n[[]]\nb = 2\n"),
            (std::vector<Triple>{{"", "a", "1"}, {"", "b", "2"}}));
}

TEST(ParseEntryPoints, LoneBracketLineIsNotASection) {
  // "[" does not end with ']': a pair line without '=' inside a section.
  const Error e = parse_err("[g]\n[\n");
  EXPECT_EQ(e.code, Errc::parse);
}

TEST(ParseEntryPoints, LinesBeforeFirstSectionAreDroppedUnparsed) {
  EXPECT_EQ(parse_ok("no equals here\nx = y\n[g]\na = 1\n"), (std::vector<Triple>{{"g", "a", "1"}}));
}

TEST(ParseEntryPoints, SplitsOnFirstEqualsAndStripsBothSides) {
  EXPECT_EQ(parse_ok("[g]\na = b = c\n= v\nk =\nx==y\n"),
            (std::vector<Triple>{{"g", "a", "b = c"}, {"g", "", "v"}, {"g", "k", ""}, {"g", "x", "=y"}}));
}

TEST(ParseEntryPoints, KeepsDuplicatesInFileOrder) {
  EXPECT_EQ(parse_ok("[g]\nx = 1\nx = 2\n[h]\ny = 0\n[g]\nx = 3\n"),
            (std::vector<Triple>{{"g", "x", "1"}, {"g", "x", "2"}, {"h", "y", "0"}, {"g", "x", "3"}}));
}

TEST(ParseEntryPoints, MissingEqualsIsAnErrorNamingFileAndLine) {
  const Error e = parse_err("[g]\na = 1\n\nno equals sign\n");
  EXPECT_EQ(e.code, Errc::parse);
  EXPECT_NE(e.message.find("site/foo-1.0.dist-info/entry_points.txt:4:"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("no equals sign"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("'='"), std::string::npos) << e.message;
}

TEST(ParseEntryPoints, LongBadLineIsQuotedWithoutSplittingACharacter) {
  std::string line(79, 'x');
  line += "\xc3\xa9\xc3\xa9 and more text";  // a 2-byte character straddles byte 80
  const Error e = parse_err("[g]\n" + line + "\n");
  EXPECT_EQ(find_invalid_utf8(e.message), std::string_view::npos) << e.message;
  EXPECT_NE(e.message.find("...\""), std::string::npos) << e.message;
}

TEST(ParseEntryPoints, ErrorLeavesExistingOutputUnchanged) {
  std::vector<ParsedEntry> out{{"keep", "me", "x"}};
  auto r = parse_entry_points("[g]\na = 1\nbad\n", "f", out);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].group, "keep");
}

TEST(ParseEntryPoints, InvalidUtf8IsAnErrorNamingFileLineAndOffset) {
  const Error e = parse_err("[g]\na = 1\nb = caf\xe9\n");
  EXPECT_EQ(e.code, Errc::encoding);
  EXPECT_NE(e.message.find("site/foo-1.0.dist-info/entry_points.txt:3:"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("offset 17"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("0xe9"), std::string::npos) << e.message;
}

TEST(ParseEntryPoints, InvalidUtf8BeforeFirstSectionIsStillAnError) {
  // Decoding happens before any line is looked at.
  EXPECT_EQ(parse_err("\xff\n[g]\na = 1\n").code, Errc::encoding);
}

TEST(ParseEntryPoints, ByteOrderMarkIsKeptSoTheSectionIsNotRecognised) {
  EXPECT_EQ(parse_ok("\xef\xbb\xbf[g]\nhidden = 1\n[h]\nseen = 2\n"),
            (std::vector<Triple>{{"h", "seen", "2"}}));
}

TEST(ParseEntryPoints, ResultsAreViewsIntoTheInput) {
  const std::string text = "[g]\nname = value\n";
  std::vector<ParsedEntry> out;
  ASSERT_TRUE(parse_entry_points(text, "f", out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].group.data(), text.data() + 1);
  EXPECT_EQ(out[0].name.data(), text.data() + 4);
  EXPECT_EQ(out[0].value.data(), text.data() + 11);
}

TEST(ParseEntryPoints, MatchesImportlibOnRandomisedInput) {
  // Random texts built from the interesting pieces, parsed by both sides.
  const char* pieces[] = {"[g]", "[ h ]", "[[x]]", "a", "=", " = ", "#", "\n", "\r", "\r\n",
                          "\x0b", "\x1c", "\xc2\x85", "\xe2\x80\xa8", "\xc2\xa0", "\t", " ",
                          "\x1f", "v", "b.c:d", "[", "]", "\xe3\x80\x80", "\xc3\xa9"};
  std::mt19937 rng(12345);
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) {
    std::string t;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) t += pieces[rng() % std::size(pieces)];
    texts.push_back(t);
  }
  // Python: for each text (NUL-separated), one line: ERR or the repr of pairs.
  std::string input;
  for (const auto& t : texts) input += t + '\0';
  const std::string out = run_python(R"(
import sys, importlib.metadata as md
data = open(sys.argv[1], 'rb').read().decode('utf-8').split('\0')[:-1]
for t in data:
    try:
        eps = list(md.EntryPoints._from_text(t))
        print(ascii([(e.group, e.name, e.value) for e in eps]))
    except Exception:
        print('ERR')
)", input);
  std::istringstream lines(out);
  std::string want;
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(lines, want));
    std::vector<ParsedEntry> got;
    auto r = parse_entry_points(t, "f", got);
    std::string mine;
    if (!r.ok()) {
      mine = "ERR";
    } else {
      // Format like Python's ascii() of a list of 3-tuples of str.
      std::ostringstream os;
      auto q = [&](std::string_view s) {
        os << '\'';
        const char* p = s.data();
        const char* end = p + s.size();
        while (p < end) {
          char32_t cp;
          const std::size_t n = detail::decode_utf8(p, end, cp);
          p += n;
          char buf[16];
          if (cp == '\\' || cp == '\'') {
            os << '\\' << static_cast<char>(cp);
          } else if (cp == '\t') {
            os << "\\t";
          } else if (cp == '\n') {
            os << "\\n";
          } else if (cp == '\r') {
            os << "\\r";
          } else if (cp >= 0x20 && cp < 0x7f) {
            os << static_cast<char>(cp);
          } else if (cp < 0x100) {
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
            os << buf;
          } else if (cp < 0x10000) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            os << buf;
          } else {
            std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
            os << buf;
          }
        }
        os << '\'';
      };
      os << '[';
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (i) os << ", ";
        os << '(';
        q(got[i].group);
        os << ", ";
        q(got[i].name);
        os << ", ";
        q(got[i].value);
        os << ')';
      }
      os << ']';
      mine = os.str();
    }
    EXPECT_EQ(mine, want) << "text: " << ::testing::PrintToString(t);
  }
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
    std::string s;
    // encode c
    if (c < 0x80) {
      s.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      s += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
    } else if (c < 0x10000) {
      s += {static_cast<char>(0xe0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3f)),
            static_cast<char>(0x80 | (c & 0x3f))};
    } else {
      s += {static_cast<char>(0xf0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3f)),
            static_cast<char>(0x80 | ((c >> 6) & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
    }
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
    std::string s, low;
    if (c < 0x80) {
      s.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      s += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
    } else if (c < 0x10000) {
      s += {static_cast<char>(0xe0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3f)),
            static_cast<char>(0x80 | (c & 0x3f))};
    } else {
      s += {static_cast<char>(0xf0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3f)),
            static_cast<char>(0x80 | ((c >> 6) & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
    }
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
      if (c < 0x80) {
        s.push_back(static_cast<char>(c));
      } else if (c < 0x800) {
        s += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
      } else if (c < 0x10000) {
        s += {static_cast<char>(0xe0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3f)),
              static_cast<char>(0x80 | (c & 0x3f))};
      } else {
        s += {static_cast<char>(0xf0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3f)),
              static_cast<char>(0x80 | ((c >> 6) & 0x3f)), static_cast<char>(0x80 | (c & 0x3f))};
      }
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

// ---- normalize_name ------------------------------------------------------------

TEST(NormalizeName, CollapsesSeparatorRunsAndLowerCases) {
  std::string out;
  normalize_name("Foo.-_Bar..baz-", out);
  EXPECT_EQ(out, "foo_bar_baz_");
  out = "keep:";
  normalize_name("A", out);
  EXPECT_EQ(out, "keep:a");  // appends
}

TEST(NormalizeName, MatchesPythonOnUnicodeNames) {
  const std::vector<std::string> names = {
      "\xc3\x91" "ame", "\xce\x9f\xce\x94\xce\x9f\xce\xa3", "\xce\x91\xce\xa3.x", "\xce\x91\xce\xa3-x",
      "\xc4\xb0stanbul", "Stra\xc3\x9f" "e", "\xe2\x84\xaa" "elvin", "Mixed-Case_\xc3\x89T\xc3\x89"};
  std::string input;
  for (const auto& s : names) input += s + '\n';
  const std::string out = run_python(R"(
import sys, importlib.metadata as md
for line in open(sys.argv[1], encoding='utf-8').read().split('\n')[:-1]:
    print(md.Prepared.normalize(line).encode().hex())
)", input);
  std::istringstream lines(out);
  for (const auto& s : names) {
    std::string hex, mine, mine_hex;
    ASSERT_TRUE(lines >> hex);
    normalize_name(s, mine);
    char buf[3];
    for (unsigned char c : mine) {
      std::snprintf(buf, sizeof buf, "%02x", c);
      mine_hex += buf;
    }
    EXPECT_EQ(mine_hex, hex) << s;
  }
}

// ---- METADATA headers ------------------------------------------------------------

TEST(MetadataHeaders, NamesAreCaseInsensitiveAndFirstWins) {
  const MetadataHeaders h = parse_metadata_headers("NAME: First\nname: second\nversion: 1.0\nVersion: 2\n");
  EXPECT_TRUE(h.has_name);
  EXPECT_EQ(h.name, "First");
  EXPECT_EQ(h.version, "1.0");
}

TEST(MetadataHeaders, StopsAtTheFirstEmptyLine) {
  const MetadataHeaders h = parse_metadata_headers("Version: 1\n\nName: body\n");
  EXPECT_FALSE(h.has_name);
  EXPECT_EQ(h.version, "1");
}

TEST(MetadataHeaders, StripsLeadingSpacesAndTabsButKeepsTrailingSpaces) {
  const MetadataHeaders h = parse_metadata_headers("Name: \t  spaced  \r\nVersion:1\r\n");
  EXPECT_EQ(h.name, "spaced  ");
  EXPECT_EQ(h.version, "1");
}

TEST(MetadataHeaders, ByteOrderMarkEndsTheHeaderBlock) {
  EXPECT_FALSE(parse_metadata_headers("\xef\xbb\xbfName: x\n").has_name);
}

TEST(MetadataHeaders, AHeaderNameWithASpaceEndsTheBlock) {
  EXPECT_FALSE(parse_metadata_headers("Summary: s\nName : x\n").has_name);
}

TEST(MetadataHeaders, EmptyValueIsStillAName) {
  const MetadataHeaders h = parse_metadata_headers("Name:\nVersion: 3\n");
  EXPECT_TRUE(h.has_name);
  EXPECT_EQ(h.name, "");
}

TEST(MetadataHeaders, MatchesEmailParserOnSamples) {
  const std::vector<std::string> samples = {
      "Metadata-Version: 2.1\nName: plain\nVersion: 1.0\n",
      "name:x\nVERSION:  2 \n",
      "From someone\nName: after-from\n",
      "Summary: a\n  folded\nName: after-fold\nVersion: 1\n",
      ": nameless\n continuation\nName: n\n",
      " leading continuation\nName: n2\n",
      "Name: cr\rVersion: 9\r",
      "Version: 1\n\nName: later\n",
      "X-\xc3\xa9: 1\nName: unicode-header-name\n",
      "Name: last-line-no-newline",
      "",
      "\n",
      "Name: a\nName: b\n",
      "Name:\ttab\n",
  };
  std::string input;
  for (const auto& s : samples) input += s + '\0';
  const std::string out = run_python(R"(
import sys, email
for t in open(sys.argv[1], 'rb').read().decode('utf-8').split('\0')[:-1]:
    m = email.message_from_string(t)
    n, v = m['Name'], m['Version']
    print(ascii(n), ascii(v or ''))
)", input);
  std::istringstream lines(out);
  for (const auto& s : samples) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    const MetadataHeaders h = parse_metadata_headers(s);
    auto rep = [](bool has, std::string_view v) {
      return has ? "'" + std::string(v) + "'" : std::string("None");
    };
    EXPECT_EQ(rep(h.has_name, h.name) + " " + rep(true, h.version), line)
        << ::testing::PrintToString(s);
  }
}

}  // namespace
}  // namespace epload
