// metadata_test.cpp — entry_points.txt / METADATA parsing and name
// normalisation, one test per rule of importlib.metadata, plus randomised
// checks against the interpreter itself (EPLOAD_TEST_PYTHON).  The Unicode
// rules underneath are in unicode_test.cpp.
#include "epload/metadata.hpp"

#include <gtest/gtest.h>

#include <cstdio>   // snprintf
#include <cstring>  // strlen
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "python_oracle.hpp"
#include "scan_text.hpp"

namespace epload {
namespace {

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

// Python's ascii() of a str given as UTF-8.
std::string python_ascii(std::string_view s) {
  std::string out = "'";
  char buf[16];
  for (const char *p = s.data(), *end = p + s.size(); p < end;) {
    char32_t cp;
    p += detail::decode_utf8(p, end, cp);
    if (cp == '\\' || cp == '\'') {
      out += {'\\', static_cast<char>(cp)};
    } else if (cp == '\t' || cp == '\n' || cp == '\r') {
      out += cp == '\t' ? "\\t" : cp == '\n' ? "\\n" : "\\r";
    } else if (cp >= 0x20 && cp < 0x7f) {
      out.push_back(static_cast<char>(cp));
    } else {
      const char* format = cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(cp));
      out += buf;
    }
  }
  return out + "'";
}

// Python's ascii() of a list of (group, name, value) tuples of str.
std::string python_ascii(const std::vector<ParsedEntry>& entries) {
  std::string out = "[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) out += ", ";
    out += "(" + python_ascii(entries[i].group) + ", " + python_ascii(entries[i].name) + ", " +
           python_ascii(entries[i].value) + ")";
  }
  return out + "]";
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
    const std::string mine = r.ok() ? python_ascii(got) : "ERR";
    EXPECT_EQ(mine, want) << "text: " << ::testing::PrintToString(t);
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
